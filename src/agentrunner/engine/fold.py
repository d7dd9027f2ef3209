"""One fold for a model response, streamed or not.

A wire adapter translates what a provider sends into part events — text, thinking (with its
signature), a redacted thinking block, a tool call (its id, name and argument fragments), a
refusal — each keyed by the id the provider gives the part (a content block's index, a tool
call's index, a fixed name for a part a wire has only one of), plus the response's model and
id, its finish reason, its usage, and the ids of the provider's items that carried the parts
where it wants them back (the Responses API's). ``ResponseFold`` folds them into a
``ModelResponse``. An unstreamed response is translated into the same events (a whole body is
one big delta), so streamed and unstreamed responses are processed alike and end alike:
pydantic-ai's rule, with its parts manager (``ModelResponsePartsManager``) as the model.

The rules that hold whatever the wire: text parts are joined; a refusal replaces the text and
ends the response as ``content_filter``; tool-call arguments are the joined fragments parsed as
a JSON object (kept raw when they are not one); usage counts one request even when the provider
reported none. Text and thinking go to the ``DeltaSink`` as they arrive.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, assert_never

from agentrunner.engine.failures import FailureKind, ProviderError
from agentrunner.engine.messages import (
    AssistantMessage,
    FinishReason,
    ModelResponse,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolCall,
    Usage,
)

__all__ = ["Delta", "DeltaSink", "PartId", "ResponseFold"]

Delta = TextDelta | ThinkingDelta
DeltaSink = Callable[[Delta], None]
PartId = Hashable
"""The provider's name for a part of its response: a content block's or tool call's index, or a
fixed name for a part its wire has only one of."""


@dataclass(slots=True)
class _Text:
    chunks: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Refusal:
    chunks: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Thinking:
    chunks: list[str] = field(default_factory=list)
    signature: list[str] = field(default_factory=list)
    redacted: str | None = None
    item_id: str | None = None  # the Responses API's reasoning item it is a part of


@dataclass(slots=True)
class _ToolCall:
    call_id: str = ""
    name: str = ""
    fragments: list[str] = field(default_factory=list)
    whole: Mapping[str, Any] | None = None  # arguments that came parsed (an unstreamed block)
    item_id: str | None = None  # the Responses API's function_call item that carried it


_Part = _Text | _Refusal | _Thinking | _ToolCall
_P = TypeVar("_P", _Text, _Refusal, _Thinking, _ToolCall)
_NAMES: dict[type[_Part], str] = {
    _Text: "text",
    _Refusal: "a refusal",
    _Thinking: "thinking",
    _ToolCall: "a tool call",
}


class ResponseFold:
    """Part events of one response, streamed or not, folded into a ``ModelResponse``."""

    __slots__ = (
        "_by_id",
        "_cache_read",
        "_cache_write",
        "_input",
        "_output",
        "_parts",
        "_phase",
        "_reasoning",
        "_sink",
        "_text_id",
        "_uncached_input",
        "complete",
        "finish_reason",
        "model",
        "provider",
    )

    def __init__(self, provider: str, on_delta: DeltaSink | None = None) -> None:
        self.provider = provider
        self._sink = on_delta
        self._parts: list[_Part] = []
        self._by_id: dict[PartId, _Part] = {}
        self.model = ""
        self.finish_reason: FinishReason = "stop"
        self.complete = False  # the wire's end marker was seen
        self._input: int | None = None
        self._uncached_input: int | None = None
        self._output = self._cache_read = self._cache_write = self._reasoning = 0
        self._text_id: str | None = None
        self._phase: str | None = None

    # -- part events -----------------------------------------------------------------------

    # Text and thinking look their part up inline: they are the hot path of a stream.

    def text(self, part_id: PartId, text: str) -> None:
        part = self._by_id.get(part_id)
        if type(part) is not _Text:
            part = self._new(part_id, _Text)
        if text:
            part.chunks.append(text)
            if self._sink is not None:
                self._sink(TextDelta(text))

    def refusal(self, part_id: PartId, text: str) -> None:
        """The model declining: it reaches the sink as text, since it becomes the answer."""
        chunks = self._get(part_id, _Refusal).chunks
        if text:
            chunks.append(text)
            if self._sink is not None:
                self._sink(TextDelta(text))

    def thinking(self, part_id: PartId, text: str = "", signature: str = "") -> None:
        part = self._by_id.get(part_id)
        if type(part) is not _Thinking:
            part = self._new(part_id, _Thinking)
        if signature:
            part.signature.append(signature)
        if text:
            part.chunks.append(text)
            if self._sink is not None:
                self._sink(ThinkingDelta(text))

    def redacted_thinking(self, part_id: PartId, data: str) -> None:
        self._get(part_id, _Thinking).redacted = data

    def thinking_item(self, part_id: PartId, item_id: str) -> None:
        """The thinking part ``part_id`` is (part of) the provider's item ``item_id``."""
        self._get(part_id, _Thinking).item_id = item_id

    def text_item(self, item_id: str, phase: str | None = None) -> None:
        """The text so far came in the provider's item ``item_id`` (the first one named is
        kept: a response has one text), which says it is ``phase`` where it says so."""
        if self._text_id is None:
            self._text_id = item_id
        if phase and item_id == self._text_id:
            self._phase = phase

    def tool_call(
        self,
        part_id: PartId,
        *,
        call_id: str = "",
        name: str = "",
        arguments: str | Mapping[str, Any] = "",
        item_id: str = "",
    ) -> None:
        """A tool call or a piece of one: ``arguments`` a fragment of its JSON text, or (from a
        body that carries them parsed) the whole arguments; ``item_id`` the provider's id of
        the item that carries it, where that is not the call's own id."""
        part = self._get(part_id, _ToolCall)
        if call_id:
            part.call_id = call_id
        if name:
            part.name = name
        if item_id:
            part.item_id = item_id
        if isinstance(arguments, str):
            if arguments:
                part.fragments.append(arguments)
        else:
            part.whole = arguments

    # -- the response's own fields ---------------------------------------------------------

    def identify(self, model: str | None) -> None:
        self.model = model or ""

    def finish(self, reason: FinishReason) -> None:
        self.finish_reason = reason

    def usage(
        self,
        *,
        input_tokens: int | None = None,
        uncached_input_tokens: int | None = None,
        output_tokens: int | None = None,
        cache_read_tokens: int | None = None,
        cache_write_tokens: int | None = None,
        reasoning_tokens: int | None = None,
    ) -> None:
        """Token counts as reported; each one given replaces the one before. Providers count
        input two ways: with cache reads and writes (``input_tokens``: OpenAI) or without
        (``uncached_input_tokens``: Anthropic); ``Usage.input_tokens`` always includes them.
        ``reasoning_tokens`` are part of ``output_tokens``."""
        if input_tokens is not None:
            self._input = int(input_tokens)
        if uncached_input_tokens is not None:
            self._uncached_input = int(uncached_input_tokens)
        if output_tokens is not None:
            self._output = int(output_tokens)
        if cache_read_tokens is not None:
            self._cache_read = int(cache_read_tokens)
        if cache_write_tokens is not None:
            self._cache_write = int(cache_write_tokens)
        if reasoning_tokens is not None:
            self._reasoning = int(reasoning_tokens)

    def end(self) -> None:
        self.complete = True

    # -- the result ------------------------------------------------------------------------

    def result(self) -> ModelResponse:
        text: list[str] = []
        refusal: list[str] = []
        thinking: list[Thinking] = []
        calls: list[ToolCall] = []
        for part in self._parts:
            match part:
                case _Text():
                    text += part.chunks
                case _Refusal():
                    refusal += part.chunks
                case _Thinking():
                    thinking.append(self._thought(part))
                case _ToolCall():
                    calls.append(_call(part))
                case _:
                    assert_never(part)
        finish = self.finish_reason
        if refusal:
            text, finish = refusal, "content_filter"
        message = AssistantMessage(
            "".join(text), calls, thinking, self.model or None, self.provider
        )
        if self._text_id is not None and text and not refusal:
            message.text_id, message.phase = self._text_id, self._phase
        return ModelResponse(message, self._usage(), finish, self.model)

    def _get(self, part_id: PartId, kind: type[_P]) -> _P:
        part = self._by_id.get(part_id)
        return part if isinstance(part, kind) else self._new(part_id, kind)

    def _new(self, part_id: PartId, kind: type[_P]) -> _P:
        """A new part under ``part_id``; a provider that sends a piece of one kind for a part
        that began as another has sent a response that cannot be read."""
        existing = self._by_id.get(part_id)
        if existing is not None:
            raise ProviderError(
                FailureKind.UNKNOWN,
                f"{self.provider} sent {_NAMES[kind]} for part {part_id!r}, "
                f"which began as {_NAMES[type(existing)]}",
                provider=self.provider,
            )
        part = kind()
        self._by_id[part_id] = part
        self._parts.append(part)
        return part

    def _thought(self, part: _Thinking) -> Thinking:
        if part.redacted is not None:
            return Thinking("", self.provider, redacted=part.redacted)
        signature = "".join(part.signature) or None
        return Thinking("".join(part.chunks), self.provider, signature, id=part.item_id)

    def _usage(self) -> Usage:
        cached = self._cache_read + self._cache_write
        if self._input is not None:
            input_tokens = self._input
        else:
            input_tokens = (self._uncached_input or 0) + cached
        return Usage(
            input_tokens,
            self._output,
            self._cache_read,
            self._cache_write,
            requests=1,
            reasoning_tokens=self._reasoning,
        )


def _call(part: _ToolCall) -> ToolCall:
    item = part.item_id
    if not part.fragments:
        return ToolCall(part.call_id, part.name, dict(part.whole or {}), item_id=item)
    raw = "".join(part.fragments)
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        return ToolCall(part.call_id, part.name, {}, raw_arguments=raw, item_id=item)
    if not isinstance(parsed, dict):
        return ToolCall(part.call_id, part.name, {}, raw_arguments=raw, item_id=item)
    return ToolCall(part.call_id, part.name, parsed, item_id=item)
