"""Turns over OpenAI's Responses API against the mock provider (real HTTP): the tool loop with
a reasoning model, its reasoning sent back as it came; the mock refusing what the real API
refuses; the output cap, a refusal and the prompt cache on this wire."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from agentrunner.engine import AssistantMessage, TurnError, TurnLimits, run_turn
from agentrunner.errors import ErrorCode
from agentrunner.testing import MockProvider, MockProviderServer, PromptCacheModel, Reply
from agentrunner.testing.mock_responses import encrypted_reasoning
from tests.engine.helpers import Recorder, registry, turn

MODEL = "mockresp:gpt-5-mock"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openai-responses"


def kinds(body: dict[str, Any]) -> list[str]:
    return [item.get("type", "message") for item in body["input"]]


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "unstreamed"])
async def test_a_tool_loop_sends_the_reasoning_of_each_step_back_in_the_next(
    mock_server: MockProviderServer, mock: MockProvider, stream: bool
) -> None:
    mock.queue(
        Reply(thinking="The user wants Paris.", tool_calls=[("get_weather", {"city": "Paris"})]),
        Reply(thinking="Sunny: say so.", text="It is sunny in Paris."),
    )
    reg = registry(mock_server)
    rec = Recorder()
    try:
        result = await run_turn(turn(reg, MODEL, emit=rec, stream=stream))
    finally:
        await reg.aclose()
    assert result.text == "It is sunny in Paris." and result.stop_reason == "end_turn"
    first, second = (r.body for r in mock.requests)
    assert [r.path for r in mock.requests] == ["/v1/responses", "/v1/responses"]
    for body in (first, second):
        assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
    assert kinds(first) == ["message"]
    assert kinds(second) == ["message", "reasoning", "function_call", "function_call_output"]
    reasoning, call, output = second["input"][1:]
    said = result.new_messages[0]
    assert isinstance(said, AssistantMessage)
    [thought], [asked] = said.thinking, said.tool_calls
    # Sent back as the mock sent it: its id, its summary, its encrypted content (which the mock
    # checks is its own), and followed by the call it came with, by that call's item id.
    assert thought.id is not None and thought.id.startswith("rs_mock_")
    assert reasoning == {
        "type": "reasoning",
        "id": thought.id,
        "summary": [{"type": "summary_text", "text": "The user wants Paris."}],
        "encrypted_content": encrypted_reasoning(thought.id),
    }
    assert asked.item_id is not None and asked.item_id.startswith("fc_mock_")
    assert (call["id"], call["call_id"]) == (asked.item_id, asked.id)
    assert output == {
        "type": "function_call_output",
        "call_id": asked.id,
        "output": "Sunny, 22C in Paris",
    }
    thoughts = [e["text"] for e in rec.of("agent.thinking")]
    assert "".join(thoughts) == "The user wants Paris.Sunny: say so."
    assert result.usage.reasoning_tokens == 5 + 3  # a token per 4 characters, at least one


async def test_a_model_that_does_not_reason_is_not_asked_for_its_reasoning(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    mock.queue(Reply(text="hi"))
    reg = registry(mock_server)
    try:
        await run_turn(turn(reg, "mockresp:gpt-4.1-mock", tools=()))
    finally:
        await reg.aclose()
    [request] = mock.requests
    assert "include" not in request.body and request.body["store"] is False


# -- what the mock refuses, as the API does ---------------------------------------------------


async def post(server: MockProviderServer, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with httpx2.AsyncClient(base_url=server.openai_url) as client:
        answer = await client.post("/responses", json={"model": "gpt-5", **body})
    return answer.status_code, answer.json()["error"]


REASONING = {"type": "reasoning", "id": "rs_9", "summary": []}
CALL = {
    "type": "function_call",
    "id": "fc_9",
    "call_id": "call_9",
    "name": "get_weather",
    "arguments": "{}",
}
OUTPUT = {"type": "function_call_output", "call_id": "call_9", "output": "sunny"}
USER = {"role": "user", "content": "Weather?"}


@pytest.mark.parametrize(
    ("case", "body", "status", "message"),
    [
        (
            "an output with no call",
            {"input": [USER, OUTPUT]},
            400,
            "No tool call found for function call output with call_id call_9.",
        ),
        (
            "a call with no output",
            {"input": [USER, CALL, USER]},
            400,
            "No tool output found for function call call_9.",
        ),
        (
            "reasoning without its encrypted content, store false",
            {"input": [USER, REASONING, CALL, OUTPUT], "store": False},
            404,
            "Item with id 'rs_9' not found. Items are not persisted when `store` is set to false."
            " Try again with `store` set to true, or remove this item from your input.",
        ),
        (
            "reasoning whose encrypted content the provider did not write",
            {"input": [USER, {**REASONING, "encrypted_content": "gAAAAB-forged"}, CALL, OUTPUT]},
            400,
            "The encrypted content for item rs_9 could not be verified.",
        ),
        (
            "reasoning without the item it came with",
            {"input": [USER, {**REASONING, "encrypted_content": "x"}, {**CALL, "id": None}]},
            400,
            "Item 'rs_9' of type 'reasoning' was provided without its required following item.",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and " " in v else "",
)
async def test_the_mock_refuses_an_input_the_api_refuses(
    mock_server: MockProviderServer,
    mock: MockProvider,
    case: str,
    body: dict[str, Any],
    status: int,
    message: str,
) -> None:
    assert await post(mock_server, body) == (
        status,
        {"message": message, "type": "invalid_request_error", "param": "input", "code": None},
    )


async def test_the_mock_refuses_the_recorded_request_the_api_refused(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    recorded = json.loads(
        (FIXTURES / "error_400_reasoning_item_without_following_item.json").read_text()
    )
    status, error = await post(mock_server, recorded["request"]["body"])
    assert (status, error["message"]) == (
        recorded["response"]["status"],
        recorded["response"]["body_json"]["error"]["message"],
    )


async def test_the_mock_takes_what_the_adapter_sends_back(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    """The refusals above are what the adapter avoids: its own request, with the mock's
    reasoning item and the call it came with, is answered."""
    fine = {**REASONING, "encrypted_content": encrypted_reasoning("rs_9")}
    async with httpx2.AsyncClient(base_url=mock_server.openai_url) as client:
        answer = await client.post(
            "/responses",
            json={"model": "gpt-5", "store": False, "input": [USER, fine, CALL, OUTPUT]},
        )
    assert answer.status_code == 200 and answer.json()["status"] == "completed"


# -- the output cap, a refusal, errors mid-stream, the prompt cache -----------------------------


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "unstreamed"])
async def test_the_output_cap_ends_the_turn_as_max_tokens_exceeded(
    mock_server: MockProviderServer, mock: MockProvider, stream: bool
) -> None:
    mock.queue(Reply(text="word " * 100))
    reg = registry(mock_server)
    try:
        result = await run_turn(
            turn(reg, MODEL, tools=(), stream=stream, limits=TurnLimits(max_output_tokens=10))
        )
    finally:
        await reg.aclose()
    assert mock.requests[0].body["max_output_tokens"] == 10
    assert result.stop_reason == "max_tokens_exceeded"
    assert result.text == ("word " * 100)[:40] and result.usage.output_tokens == 10


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "unstreamed"])
async def test_a_refusal_is_content_filter(
    mock_server: MockProviderServer, mock: MockProvider, stream: bool
) -> None:
    mock.queue(Reply(refusal="I can't help with that."))
    reg = registry(mock_server)
    try:
        with pytest.raises(TurnError) as info:
            await run_turn(turn(reg, MODEL, tools=(), stream=stream))
    finally:
        await reg.aclose()
    assert info.value.code is ErrorCode.CONTENT_FILTER
    assert "I can't help with that." in info.value.message


async def test_a_thread_resent_reads_its_prefix_from_the_prompt_cache(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    mock.prompt_cache = PromptCacheModel(openai_min_tokens=128, openai_step=16)
    mock.queue(Reply(tool_calls=[("get_weather", {"city": "Paris"})]), Reply(text="Sunny."))
    reg = registry(mock_server)
    try:
        result = await run_turn(turn(reg, MODEL, message="Weather in Paris? " * 40))
    finally:
        await reg.aclose()
    assert result.usage.cache_read_tokens > 0  # the second request read the first's prefix
