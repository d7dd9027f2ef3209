"""What a test scripts the mock provider to answer: a ``Reply`` (text, tool calls, thinking, a
refusal, usage, delays), and the ``Fault`` it may carry instead of or in the middle of its
answer (an HTTP error, a stall, a connection dropped or an error event mid-stream).

The server (``mock_provider``) queues and bills replies; ``mock_responses`` renders them in each
API's JSON and SSE. Both import them from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Fault", "FaultKind", "Reply"]

FaultKind = Literal["status", "stall", "drop_mid_stream", "error_mid_stream"]


@dataclass(frozen=True, slots=True)
class Fault:
    kind: FaultKind
    status: int = 500
    retry_after: float | None = None
    error_type: str | None = None
    seconds: float = 0.0
    text_body: str | None = None

    @classmethod
    def http(
        cls,
        status: int,
        *,
        retry_after: float | None = None,
        error_type: str | None = None,
        text_body: str | None = None,
    ) -> Fault:
        return cls(
            "status",
            status=status,
            retry_after=retry_after,
            error_type=error_type,
            text_body=text_body,
        )

    @classmethod
    def stall(cls, seconds: float) -> Fault:
        return cls("stall", seconds=seconds)

    @classmethod
    def drop_mid_stream(cls) -> Fault:
        return cls("drop_mid_stream")

    @classmethod
    def error_mid_stream(cls, error_type: str = "overloaded_error") -> Fault:
        return cls("error_mid_stream", error_type=error_type)


@dataclass(slots=True)
class Reply:
    """One scripted answer. ``tool_calls`` entries are (name, arguments dict or raw JSON text).
    ``refusal``: the model declines, as each API says so (OpenAI: the message's ``refusal``,
    streamed as ``delta.refusal``, finish ``stop``; Anthropic: the text, stop reason
    ``refusal``). ``usage=False``: the response reports no usage at all, streamed or not, as
    llama.cpp's server streams (``stream_options.include_usage`` notwithstanding)."""

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)
    thinking: str | None = None
    refusal: str | None = None
    finish: str | None = None
    input_tokens: int | None = 20  # None: about a token per 4 bytes of the request, as billed
    output_tokens: int | None = None
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    usage: bool = True
    fault: Fault | None = None
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0

    @classmethod
    def malformed_tool_call(cls, name: str) -> Reply:
        return cls(tool_calls=[(name, '{"city": "Par')])
