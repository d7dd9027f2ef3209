"""The mock provider's model of each provider's prompt cache, for tests and ``bench/tokens.py``.

Off unless asked for (``MockProvider(prompt_cache=PromptCacheModel())``, or ``--prompt-cache``
for the standalone server); then every reply's input is billed from the request by it, scripted
figures replaced.

**The token estimate.** A request is read as parts in the order the provider caches them —
OpenAI: each tool, the response format, then each message; Anthropic: each tool, the output
format, each system block, then each content block of each message with its role — and counts
a token per 4 bytes of each part's compact JSON (UTF-8), ``cache_control`` left out (it is
not part of the prompt), an image or a PDF counted by its pixels or pages rather than its base64
(``mock_attachments.weighed``). English text and JSON run at about 3.5 to 4.5 bytes a token in real
tokenizers, so a figure can be 10-15 % off the provider's count either way, the same way for
every assembly of the same conversation: it is for comparing them, not for predicting a bill.

**OpenAI** caches by itself, on both of its APIs (a Responses API request is read as its
tools, output format, instructions, then each input item). A request reads the longest prefix,
in 128-token steps from 1,024 tokens, that an earlier live request of the same model left
(``cached_tokens`` in the usage, counted in the input tokens), and leaves each of its own
prefixes at those steps. ``prompt_cache_key`` is not needed for a hit here: OpenAI uses it to
route a conversation's requests to a machine holding their prefix, and the mock is one machine.

**Anthropic** caches only at breakpoints, the blocks marked ``cache_control``. Each
breakpoint's prefix is looked up at its own block and at up to 20 blocks before it; the longest
found is read (``cache_read_input_tokens``). The prefix up to the last breakpoint, past what was
read, is written (``cache_creation_input_tokens``) if it has the model's minimum (1,024 tokens,
as for Sonnet and Opus); ``input_tokens`` is the rest. More than four breakpoints is the API's
400 (the mock checks that on every request, cache model or not: ``too_many_breakpoints``).

Entries live 5 minutes (``ttl_s``), each read renewing its entry, as Anthropic's do; OpenAI
keeps prefixes 5 to 10 minutes after their last use, so the same lifetime serves both.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from agentrunner.testing.mock_attachments import weighed

__all__ = ["MAX_BREAKPOINTS", "CacheBill", "PromptCacheModel", "too_many_breakpoints"]

MAX_BREAKPOINTS = 4
BYTES_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class CacheBill:
    """One request's input: ``tokens`` in all, ``read`` of them from the cache, ``written`` to
    it (Anthropic only). Not read or written: ``tokens - read - written``."""

    tokens: int
    read: int = 0
    written: int = 0


class PromptCacheModel:
    """The cache of one mock server, across the requests it serves (guarded by the mock's
    lock). ``clock`` gives seconds; a test passes its own to see entries expire."""

    def __init__(
        self,
        *,
        ttl_s: float = 300.0,
        openai_min_tokens: int = 1024,
        openai_step: int = 128,
        anthropic_min_tokens: int = 1024,
        lookback_blocks: int = 20,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s = ttl_s
        self.openai_min_tokens = openai_min_tokens
        self.openai_step = openai_step
        self.anthropic_min_tokens = anthropic_min_tokens
        self.lookback_blocks = lookback_blocks
        self.clock = clock
        self._expiry: dict[bytes, float] = {}  # a prefix's digest → when it is dropped
        self._bills = 0

    def bill(self, flavor: str, body: Mapping[str, Any]) -> CacheBill:
        """What ``body`` (a request as the provider received it) reads and writes; the cache
        is updated as the provider's would be."""
        now = self.clock()
        self._bills += 1
        if self._bills % 256 == 0:  # now and then, forget what has expired
            self._expiry = {k: t for k, t in self._expiry.items() if t > now}
        model = str(body.get("model", "")).encode()
        if flavor == "openai":
            return self._openai(model, list(_openai_parts(body)), now)
        return self._anthropic(model, list(_anthropic_parts(body)), now)

    def _alive(self, digest: bytes, now: float) -> bool:
        return self._expiry.get(digest, 0.0) > now

    def _openai(self, model: bytes, parts: list[tuple[bytes, bool]], now: float) -> CacheBill:
        prompt = b"".join(data for data, _ in parts)
        tokens = len(prompt) // BYTES_PER_TOKEN
        digest = hashlib.sha256(model)
        done = 0
        read = 0
        for step in range(self.openai_min_tokens, tokens + 1, self.openai_step):
            end = step * BYTES_PER_TOKEN
            digest.update(prompt[done:end])
            done = end
            key = digest.copy().digest()
            if self._alive(key, now):
                read = step
            self._expiry[key] = now + self.ttl_s  # left by this request, or renewed
        return CacheBill(tokens, read=read)

    def _anthropic(self, model: bytes, parts: list[tuple[bytes, bool]], now: float) -> CacheBill:
        digest = hashlib.sha256(model)
        keys: list[bytes] = []
        ends: list[int] = []  # tokens up to and including each block
        size = 0
        for data, _ in parts:
            digest.update(data)
            keys.append(digest.copy().digest())
            size += len(data)
            ends.append(size // BYTES_PER_TOKEN)
        tokens = size // BYTES_PER_TOKEN
        breakpoints = [i for i, (_, marked) in enumerate(parts) if marked]
        if not breakpoints:
            return CacheBill(tokens)
        read, hit = 0, None
        for point in breakpoints:
            for block in range(point, max(-1, point - self.lookback_blocks - 1), -1):
                if self._alive(keys[block], now):
                    if ends[block] > read:
                        read, hit = ends[block], block
                    break
        if hit is not None:
            self._expiry[keys[hit]] = now + self.ttl_s
        written = 0
        for point in breakpoints:
            if ends[point] >= self.anthropic_min_tokens:
                self._expiry[keys[point]] = now + self.ttl_s
                written = max(written, ends[point] - read)
        return CacheBill(tokens, read=read, written=written)


def too_many_breakpoints(body: Mapping[str, Any]) -> str | None:
    """The Anthropic API's refusal of more than four ``cache_control`` blocks, or None."""
    found = sum(marked for _, marked in _anthropic_parts(body))
    if found <= MAX_BREAKPOINTS:
        return None
    return (
        f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {found}."
    )


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _openai_parts(body: Mapping[str, Any]) -> Iterator[tuple[bytes, bool]]:
    """Chat Completions' request, or the Responses API's (its output format, instructions and
    input items in the places of the response format and the messages)."""
    for tool in body.get("tools") or ():
        yield _json(tool), False
    if body.get("response_format"):
        yield _json(body["response_format"]), False
    if (body.get("text") or {}).get("format"):
        yield _json(body["text"]["format"]), False
    if body.get("instructions"):
        yield _json(body["instructions"]), False
    given = body.get("input") or ()
    for message in body.get("messages") or ([given] if isinstance(given, str) else given):
        yield _json(weighed(message)), False


def _anthropic_parts(body: Mapping[str, Any]) -> Iterator[tuple[bytes, bool]]:
    """(the block's JSON without its marker, whether it had one)."""
    for tool in body.get("tools") or ():
        yield _json(_unmarked(tool)), "cache_control" in tool
    if body.get("output_config"):
        yield _json(body["output_config"]), False
    system = body.get("system")
    for block in [{"type": "text", "text": system}] if isinstance(system, str) else system or ():
        yield _json(_unmarked(block)), "cache_control" in block
    for message in body.get("messages") or ():
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks or ():
            yield _json([message.get("role"), weighed(_unmarked(block))]), "cache_control" in block


def _unmarked(block: Mapping[str, Any]) -> Mapping[str, Any]:
    if "cache_control" not in block:
        return block
    return {k: v for k, v in block.items() if k != "cache_control"}
