"""What kinds of input a model takes: text, images, PDFs (docs/attachments.md).

``[models."provider:model"] input`` says it for one model; otherwise the family its name
belongs to, by the table below (the families' own documentation), and a model of no family
known here takes text only — an image is never sent to a model that was not said to take it.
"""

from __future__ import annotations

import re

from agentrunner.engine.messages import InputKind

__all__ = ["ALL_INPUTS", "INPUT_KINDS", "TEXT_ONLY", "default_inputs"]

INPUT_KINDS: tuple[InputKind, ...] = ("text", "image", "pdf")
ALL_INPUTS: frozenset[str] = frozenset(INPUT_KINDS)
TEXT_ONLY: frozenset[str] = frozenset({"text"})
_IMAGES: frozenset[str] = frozenset({"text", "image"})

# (provider kind or None for any, pattern on the model's name, what it takes); first match wins.
_FAMILIES: tuple[tuple[str | None, re.Pattern[str], frozenset[str]], ...] = (
    ("test", re.compile(r".*"), ALL_INPUTS),  # the built-in test model reads what it is given
    ("local", re.compile(r".*"), TEXT_ONLY),  # llama.cpp in-process: text (engine/local_model)
    (None, re.compile(r"^(gpt-3\.5|o1-mini|o3-mini|text-)"), TEXT_ONLY),
    (None, re.compile(r"^(gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|o1|o3|o4)"), ALL_INPUTS),
    (None, re.compile(r"^claude-"), ALL_INPUTS),
    (None, re.compile(r"^(models/)?gemini-"), ALL_INPUTS),
    (None, re.compile(r"(llava|vision|-vl\b|-vl-|pixtral|gemma-?3|moondream)"), _IMAGES),
)


def default_inputs(provider_kind: str, name: str) -> frozenset[str]:
    """What a model takes when no ``[models]`` entry says: its family's, else text only."""
    lowered = name.lower()
    for kind, pattern, inputs in _FAMILIES:
        if (kind is None or kind == provider_kind) and pattern.search(lowered):
            return inputs
    return TEXT_ONLY
