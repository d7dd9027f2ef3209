"""A turn's deadline (``TurnLimits.timeout_s``) covers model requests, retries, backoff waits
and tool calls, and ends the turn as ``run_timeout`` with what it spent. No timed assertions,
and nothing that depends on how fast a loaded machine answers: each deadline is long (30 s), and
the test moves the event loop's clock past it by hand at the moment it means the deadline to
pass (a backoff begun, a tool running, a request in flight)."""

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

DEADLINE = 30.0


class LoopClock:
    """The running event loop's clock, which ``asyncio.timeout`` (the deadline) reads, moved on
    by hand: time the test skips passes for the loop at once, whatever the machine's speed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        loop = asyncio.get_running_loop()
        real = loop.time
        self.skipped = 0.0
        monkeypatch.setattr(loop, "time", lambda: real() + self.skipped)

    def skip(self, seconds: float) -> None:
        self.skipped += seconds

    async def pass_deadline(self) -> None:
        """The deadline's whole length skipped, then a real second waited: the deadline, due
        at once, ends that wait unless it no longer covers where the test is waiting."""
        self.skip(DEADLINE)
        await asyncio.sleep(1)


def hanging_tool(started: asyncio.Event, clock: LoopClock | None) -> Tool:
    @tool
    async def lookup(city: str) -> str:
        """Look a city up."""
        started.set()
        if clock is not None:
            await clock.pass_deadline()  # the call runs past the deadline
        return f"found {city}"

    return lookup


@pytest.mark.parametrize("hangs", [False, True])
async def test_the_deadline_covers_tool_calls(
    mock_server: MockProviderServer,
    mock: MockProvider,
    monkeypatch: pytest.MonkeyPatch,
    hangs: bool,
) -> None:
    mock.queue(Reply(tool_calls=[("lookup", {"city": "Oslo"})]), Reply(text="Oslo found."))
    started = asyncio.Event()
    reg = registry(mock_server)
    rec = Recorder()
    t = turn(
        reg,
        "mockai:gpt-mock",
        tools=(hanging_tool(started, LoopClock(monkeypatch) if hangs else None),),
        limits=TurnLimits(timeout_s=DEADLINE),
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
    assert "limits.timeout_s" in error.message and "30 s" in error.message
    assert error.hint is not None and "timeout_s" in error.hint
    # The history stays sendable: the call that never finished has an answer.
    new = error.result.new_messages
    assert isinstance(new[0], AssistantMessage) and new[0].tool_calls
    assert isinstance(new[1], ToolResult) and new[1].is_error
    assert [a.outcome for a in error.result.attempts] == ["ok"]
    assert len(mock.requests) == 1
    assert "agent.tool_result" not in rec.kinds()  # nothing is emitted after the deadline


@pytest.mark.parametrize("answer_after", [0.0, 1.0])
async def test_the_deadline_covers_backoff_waits(
    mock_server: MockProviderServer,
    mock: MockProvider,
    monkeypatch: pytest.MonkeyPatch,
    answer_after: float,
) -> None:
    """A backoff of 50 s inside a deadline of 30 s: the run ends at the deadline with the
    failed attempt recorded, not after the backoff. The backoff's time passes at once on the
    loop's clock, as if slept; the first request has the whole deadline to be answered, so a
    provider (or a loaded machine) slow to answer it changes nothing."""
    mock.queue(Reply(fault=Fault.http(503), delay_s=answer_after), Reply(text="must not be asked"))
    clock = LoopClock(monkeypatch)
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock.skip(seconds)
        await asyncio.sleep(1)  # the deadline, passed during the wait, ends it first

    reg = registry(mock_server)
    t = turn(
        reg,
        "mockai:gpt-mock",
        tools=(),
        retry=RetryPolicy(max=3, backoff="linear", initial_delay_s=50, max_delay_s=60),
        limits=TurnLimits(timeout_s=DEADLINE),
    )
    t.chain.sleep = sleep
    with pytest.raises(TurnError) as info:
        await run_turn(t)
    await reg.aclose()
    assert (info.value.code, info.value.stop_reason) == (ErrorCode.RUN_TIMEOUT, "timeout")
    assert waits == [50]
    assert [(a.outcome, a.status) for a in info.value.result.attempts] == [("error", 503)]
    assert len(mock.requests) == 1


async def test_the_deadline_covers_a_stalled_request_and_charges_it(
    mock_server: MockProviderServer, mock: MockProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider that answers nothing within the deadline (its own read timeout is far
    longer): the run ends at the deadline and the request it cut off is charged by estimate.
    The deadline passes once the provider holds the request."""
    mock.queue(Reply(text="late", fault=Fault.stall(60)))
    clock = LoopClock(monkeypatch)

    async def once_asked() -> None:
        while not mock.requests:
            await asyncio.sleep(0.01)
        clock.skip(DEADLINE)

    reg = registry(mock_server, timeout_s=120)
    rec = Recorder()
    t = turn(reg, "mockai:gpt-mock", tools=(), limits=TurnLimits(timeout_s=DEADLINE), emit=rec)
    watcher = asyncio.ensure_future(once_asked())
    with pytest.raises(TurnError) as info:
        await run_turn(t)
    await watcher
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
