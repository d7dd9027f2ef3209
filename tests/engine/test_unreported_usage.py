"""A response that reports no usage (llama.cpp's server streams none) is charged at an estimate
of what was sent and what came back, marked ``estimated``: never 0 tokens, never free."""

from __future__ import annotations

from typing import Any

import pytest

from agentrunner.engine import Usage, run_turn
from agentrunner.engine.budget import estimate_output_tokens
from agentrunner.testing import MockProvider, MockProviderServer, Reply
from tests.engine.helpers import Recorder, registry, turn

MODELS = ["mockai:gpt-mock", "mockresp:gpt-5-mock", "mockant:claude-mock"]
SHORT = "Hi."
LONG = "Tell me everything about the weather in Paris, " * 12


async def charged(
    server: MockProviderServer, model: str, message: str, *, stream: bool
) -> tuple[Usage, list[dict[str, Any]], int]:
    """The usage of one turn of ``model`` asked ``message`` (answering what the mock has
    queued); its ``cost.updated`` events; its cost."""
    reg = registry(server)
    rec = Recorder()
    try:
        result = await run_turn(turn(reg, model, message=message, stream=stream, emit=rec))
    finally:
        await reg.aclose()
    return result.usage, rec.of("cost.updated"), result.cost_micros


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "unstreamed"])
@pytest.mark.parametrize("model", MODELS)
async def test_a_response_without_usage_is_charged_at_an_estimate(
    mock_server: MockProviderServer, mock: MockProvider, model: str, stream: bool
) -> None:
    short_answer, long_answer = "Sunny.", "It is sunny and warm in Paris today, " * 10
    mock.queue(Reply(text=short_answer, usage=False), Reply(text=long_answer, usage=False))
    small, [small_cost], small_micros = await charged(mock_server, model, SHORT, stream=stream)
    large, [large_cost], large_micros = await charged(mock_server, model, LONG, stream=stream)
    for usage, cost, micros, answer in (
        (small, small_cost, small_micros, short_answer),
        (large, large_cost, large_micros, long_answer),
    ):
        assert usage.estimated and usage.requests == 1
        assert usage.input_tokens > 0 and usage.output_tokens == estimate_output_tokens(answer)
        assert cost["estimated"] is True and cost["outcome"] == "ok"
        assert (cost["input_tokens"], cost["output_tokens"]) == (
            usage.input_tokens,
            usage.output_tokens,
        )
        assert cost["cost_known"] and cost["cost_micros"] == micros > 0  # priced from it
    # what was sent and what came back make the estimate: a longer prompt, a longer answer
    assert large.input_tokens - small.input_tokens >= estimate_output_tokens(LONG) // 2
    assert large.output_tokens > small.output_tokens
    assert large_micros > small_micros


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "unstreamed"])
async def test_tool_calls_and_thinking_count_as_output(
    mock_server: MockProviderServer, mock: MockProvider, stream: bool
) -> None:
    args = {"city": "Paris, the capital of France, on the Seine"}
    mock.queue(
        Reply(
            thinking="I should look it up first.", tool_calls=[("get_weather", args)], usage=False
        ),
        Reply(text="Sunny.", usage=False),
    )
    usage, [call_cost, answer_cost], _ = await charged(
        mock_server, "mockant:claude-mock", SHORT, stream=stream
    )
    assert call_cost["estimated"] and answer_cost["estimated"] and usage.requests == 2
    # the call's arguments and the thinking were written by the model: billed as output
    assert call_cost["output_tokens"] > estimate_output_tokens("I should look it up first.")
    assert call_cost["output_tokens"] > answer_cost["output_tokens"] > 0


async def test_a_response_with_usage_is_charged_as_reported(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    mock.queue(Reply(text="Sunny.", input_tokens=33, output_tokens=7))
    usage, [cost], _ = await charged(mock_server, "mockai:gpt-mock", SHORT, stream=True)
    assert (usage.input_tokens, usage.output_tokens, usage.estimated) == (33, 7, False)
    assert cost["estimated"] is False
