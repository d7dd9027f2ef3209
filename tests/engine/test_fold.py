"""One fold for a model response, streamed or not (engine.fold): the same content ends the same
way whichever way it came, through the real HTTP client against the mock provider."""

from __future__ import annotations

import json
from typing import Any

import pytest
from dirty_equals import IsFloat
from inline_snapshot import snapshot

from agentrunner.engine import (
    AssistantMessage,
    Attempt,
    ModelResponse,
    TurnError,
    Usage,
    run_turn,
)
from agentrunner.errors import ErrorCode
from agentrunner.testing import MockProvider, MockProviderServer, Reply
from tests.engine.helpers import registry, turn
from tests.engine.wire_replay import as_stream, pieces, replay

BOTH = ["mockai:gpt-mock", "mockant:claude-mock"]


async def refused(server: MockProviderServer, model: str, *, stream: bool) -> dict[str, Any]:
    """How a turn whose model refuses ends: its error, and the conversation it leaves."""
    reg = registry(server)
    refusing = turn(reg, model, stream=stream)
    try:
        with pytest.raises(TurnError) as info:
            await run_turn(refusing)
    finally:
        await reg.aclose()
    error = info.value
    return {
        "error": (error.code, error.stop_reason, error.message),
        "answer": refusing.messages[-1],
        "usage": error.result.usage,
        "attempts": error.result.attempts,
    }


@pytest.mark.parametrize("model", BOTH)
@pytest.mark.parametrize("refusal", ["I can't help with that.", "No: that would be unsafe."])
async def test_a_refusal_ends_the_turn_alike_streamed_or_not(
    mock_server: MockProviderServer, mock: MockProvider, model: str, refusal: str
) -> None:
    provider, name = model.split(":")
    expected = {
        "error": (ErrorCode.CONTENT_FILTER, "error", f"{model} refused to answer: {refusal}"),
        "answer": AssistantMessage(refusal, model=name, provider=provider),
        "usage": Usage(20, 1, requests=1),
        "attempts": [Attempt(1, model, provider, "ok", duration_ms=IsFloat(ge=0))],
    }
    for stream in (True, False):
        mock.queue(Reply(refusal=refusal))
        assert await refused(mock_server, model, stream=stream) == expected, stream


# -- the same answer, both ways, through the HTTP client -------------------------------------


def openai_refusal(refusal: str) -> dict[str, Any]:
    """A Chat Completions answer declining, as the API sends it (structured outputs' refusal)."""
    message = {"role": "assistant", "content": None, "refusal": refusal}
    return {
        "id": "chatcmpl-refused",
        "object": "chat.completion",
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 9},
    }


@pytest.mark.parametrize("refusal", ["I can't help with that.", "No."])
async def test_an_openai_refusal_folds_alike_streamed_or_not(refusal: str) -> None:
    body = openai_refusal(refusal)
    unstreamed = await replay("openai", stream=False, body=body)
    streamed = await replay("openai", stream=True, body=as_stream("openai", body))
    assert '"refusal"' in as_stream("openai", body)  # delta.refusal, as streamed
    assert streamed.response == unstreamed.response
    assert streamed.text == pieces(refusal)  # to the sink as it came, like text
    assert streamed.response == ModelResponse(
        AssistantMessage(refusal, model="gpt-4o-2024-08-06", provider="openai"),
        Usage(12, 9, requests=1),
        "content_filter",
        "gpt-4o-2024-08-06",
    )


@pytest.mark.parametrize("with_usage", [True, False], ids=["usage", "no-usage"])
async def test_a_response_counts_one_request_streamed_or_not(with_usage: bool) -> None:
    """A server that reports no usage (stream_options ignored) still answered one request."""
    body = openai_refusal("x") | {"usage": {"prompt_tokens": 5} if with_usage else None}
    unstreamed = await replay("openai", stream=False, body=body)
    streamed = await replay("openai", stream=True, body=as_stream("openai", body))
    assert streamed.response.usage == unstreamed.response.usage
    assert unstreamed.response.usage == Usage(5 if with_usage else 0, requests=1)


async def test_a_part_that_changes_kind_is_an_unreadable_response() -> None:
    """A text piece for what began as a tool call: no answer can be made of it."""
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
    body = {
        "id": "msg_1",
        "model": "claude-mock",
        "content": [tool_use],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }
    stream = as_stream("anthropic", body)
    good = await replay("anthropic", stream=True, body=stream)
    assert [c.name for c in good.response.message.tool_calls] == ["get_weather"]
    text_delta = {"type": "text_delta", "text": "Paris"}
    mixed = stream.replace(
        "event: content_block_stop",
        "event: content_block_delta\ndata: "
        + json.dumps({"type": "content_block_delta", "index": 0, "delta": text_delta})
        + "\n\nevent: content_block_stop",
        1,
    )
    bad = await replay("anthropic", stream=True, body=mixed)
    assert bad.error == snapshot(
        {
            "kind": "unknown",
            "code": "internal",
            "retryable": False,
            "failover": False,
            "status": None,
            "retry_after": None,
            "request_id": None,
            "message": "anthropic sent text for part 0, which began as a tool call",
        }
    )


@pytest.mark.parametrize("number", [2**64, -(10**25)])
async def test_an_anthropic_tool_call_keeps_an_integer_past_64_bits_streamed_or_not(
    number: int,
) -> None:
    """JSON takes any integer: the tool gets the one the model wrote, not a float near it."""
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "count", "input": {"n": number}}
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-mock",
        "content": [tool_use],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }
    unstreamed = await replay("anthropic", stream=False, body=body)
    streamed = await replay("anthropic", stream=True, body=as_stream("anthropic", body))
    for replayed in (unstreamed, streamed):
        [call] = replayed.response.message.tool_calls
        assert call.arguments == {"n": number} and isinstance(call.arguments["n"], int)
