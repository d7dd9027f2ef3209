"""Structured output (seed 001): a turn given an ``output_schema`` ends with a JSON value that
matches it. Providers that take a schema natively get it with the request; the others get it
in the system prompt, and a reply that does not match goes back to the model with what is wrong,
up to ``limits.max_output_retries`` times."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agentrunner.config import OPENAI_KINDS
from agentrunner.engine.fallback import ChainEntry
from agentrunner.engine.tools import schema_problem

__all__ = ["correction", "parse_output", "schema_instructions", "takes_schema_natively"]


def takes_schema_natively(entry: ChainEntry) -> bool:
    provider = entry.model.provider
    return (
        provider.kind == "anthropic"
        or (provider.kind in OPENAI_KINDS and provider.structured_output == "native")
        or provider.kind in ("test", "local")  # local: generated under the schema's grammar
    )


def schema_instructions(schema: Mapping[str, Any] | None) -> str:
    """What a provider without native structured output is told, after the system prompt."""
    return (
        "\n\nReply with only a JSON value — no prose, no code fences — that matches this JSON "
        "Schema:\n" + json.dumps(schema, ensure_ascii=False)
    )


def parse_output(text: str, schema: Mapping[str, Any]) -> tuple[Any, str | None]:
    """The reply's JSON value and None, or None and what is wrong with it."""
    try:
        value = json.loads(_strip_fences(text))
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
    problem = schema_problem(schema, value)
    return (value, None) if problem is None else (None, problem)


def correction(problem: str) -> str:
    """The user message that sends a non-matching reply back."""
    return (
        f"Your reply does not match the required JSON Schema: {problem}. "
        "Reply again with only the corrected JSON value."
    )


def _strip_fences(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        if stripped.rstrip().endswith("```"):
            stripped = stripped.rstrip()[:-3]
    return stripped
