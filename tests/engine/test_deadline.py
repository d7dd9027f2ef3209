"""A turn's deadline (``TurnLimits.timeout_s``) covers model requests, retries, backoff waits
and tool calls, and ends the turn as ``run_timeout`` with what it spent. No timed assertions:
the deadlines are short and the things they cut off far longer."""

from __future__ import annotations

import asyncio

import pytest

from agentrunner.agents.spec import RetryPolicy
from agentrunner.engine import (
    AbortSignal,
    AssistantMessage,
    Tool,
    ToolResult,
    TurnError,
    TurnLimits,
    run_turn,
    tool,
)
from agentrunner.errors import ErrorCode
from agentrunner.testing import Fault, MockProvider, MockProviderServer, Reply
from tests.engine.helpers import Recorder, registry, turn


def hanging_tool(started: asyncio.Event, release: asyncio.Event) -> Tool:
    @tool
    async def lookup(city: str) -> str:
        """Look a city up."""
        started.set()
        await release.wait()
        return f"found {city}"

    return lookup


@pytest.mark.parametrize("hangs", [False, True])
async def test_the_deadline_covers_tool_calls(
    mock_server: MockProviderServer, mock: MockProvider, hangs: bool
) -> None:
    mock.queue(Reply(tool_calls=[("lookup", {"city": "Oslo"})]), Reply(text="Oslo found."))
    started, release = asyncio.Event(), asyncio.Event()
    if not hangs:
        release.set()
    reg = registry(mock_server)
    rec = Recorder()
    t = turn(
        reg,
        "mockai:gpt-mock",
        tools=(hanging_tool(started, release),),
        limits=TurnLimits(timeout_s=0.3 if hangs else 30),
        emit=rec,
    )
    if not hangs:
        result = await run_turn(t)
        await reg.aclose()
        assert result.text == "Oslo found." and result.stop_reason == "end_turn"
        return
    with pytest.raises(TurnError) as info:
        await run_turn(t)
    await reg.aclose()
    error = info.value
    assert started.is_set()
    assert (error.code, error.stop_reason) == (ErrorCode.RUN_TIMEOUT, "timeout")
    assert "limits.timeout_s" in error.message and "0.3 s" in error.message
    assert error.hint is not None and "timeout_s" in error.hint
    # The history stays sendable: the call that never finished has an answer.
    new = error.result.new_messages
    assert isinstance(new[0], AssistantMessage) and new[0].tool_calls
    assert isinstance(new[1], ToolResult) and new[1].is_error
    assert [a.outcome for a in error.result.attempts] == ["ok"]
    assert len(mock.requests) == 1
    assert "agent.tool_result" not in rec.kinds()  # nothing is emitted after the deadline


async def test_the_deadline_covers_backoff_waits(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    """A backoff of 50 s (real sleep) inside a deadline of 0.3 s: the run ends at the deadline
    with the failed attempt recorded, not after the backoff."""
    mock.queue(Reply(fault=Fault.http(503)), Reply(text="must not be asked"))
    reg = registry(mock_server)
    t = turn(
        reg,
        "mockai:gpt-mock",
        tools=(),
        retry=RetryPolicy(max=3, backoff="linear", initial_delay_s=50, max_delay_s=60),
        limits=TurnLimits(timeout_s=0.3),
    )
    with pytest.raises(TurnError) as info:
        await run_turn(t)
    await reg.aclose()
    assert (info.value.code, info.value.stop_reason) == (ErrorCode.RUN_TIMEOUT, "timeout")
    assert [(a.outcome, a.status) for a in info.value.result.attempts] == [("error", 503)]
    assert len(mock.requests) == 1


async def test_the_deadline_covers_a_stalled_request_and_charges_it(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    """A provider that answers nothing within the deadline (its own read timeout is far
    longer): the run ends at the deadline and the request it cut off is charged by estimate."""
    mock.queue(Reply(text="late", fault=Fault.stall(5)))
    reg = registry(mock_server, timeout_s=60)
    rec = Recorder()
    t = turn(reg, "mockai:gpt-mock", tools=(), limits=TurnLimits(timeout_s=0.3), emit=rec)
    with pytest.raises(TurnError) as info:
        await run_turn(t)
    await reg.aclose()
    error = info.value
    assert (error.code, error.stop_reason) == (ErrorCode.RUN_TIMEOUT, "timeout")
    [cost] = rec.of("cost.updated")
    assert cost["outcome"] == "cancelled" and cost["estimated"] and cost["input_tokens"] > 0
    assert error.result.usage.requests == 1 and error.result.cost_micros > 0


async def test_abort_wins_over_the_deadline(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    mock.queue(Reply(text="late", fault=Fault.stall(5)))
    reg = registry(mock_server, timeout_s=60)
    abort = AbortSignal()
    t = turn(reg, "mockai:gpt-mock", tools=(), limits=TurnLimits(timeout_s=30), abort=abort)
    asyncio.get_running_loop().call_later(0.2, abort.abort, "stop")
    with pytest.raises(TurnError) as info:
        await run_turn(t)
    await reg.aclose()
    assert (info.value.code, info.value.stop_reason) == (ErrorCode.CANCELLED, "cancelled")
