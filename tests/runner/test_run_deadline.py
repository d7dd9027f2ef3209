"""A run's waits are bounded through AgentRunner: the deadline of the agent file
(``limits.timeout_s``) and a provider's over-long ``retry-after``, recorded as failed runs with
what they spent. On SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from agentrunner import AgentRunner
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.testing import Fault, MockProvider, Reply
from tests.runner.conftest import Agent


async def test_a_run_past_its_deadline_fails_with_what_it_spent(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("slow", "limits:\n  timeout_s: 0.5")
    mock.queue(Reply(text="too late", fault=Fault.stall(5)))
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as info:
        await runner.run_agent("slow", "t", "take your time")
    assert info.value.code is ErrorCode.RUN_TIMEOUT
    assert "limits.timeout_s (0.5 s)" in info.value.message
    [run] = await runner.store.runs.list(thread_id="t")
    assert (run.status, run.stop_reason, run.error_code) == ("failed", "timeout", "run_timeout")
    assert run.error_message == info.value.message
    assert run.cost_micros > 0  # the request the deadline cut off is charged, by estimate
    events = await runner.store.events.list(run.id)
    [cost] = [e.payload for e in events if e.type == "cost.updated"]
    assert cost["outcome"] == "cancelled" and cost["estimated"]
    # The same agent with time to spare answers on the same thread.
    agent("slow", "limits:\n  timeout_s: 30")
    runner = await open_runner()
    assert (await runner.run_agent("slow", "t", "again")).text == "Echo: again"


async def test_a_long_retry_after_fails_the_run_at_once_and_the_next_run_is_served(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("limited", "retry:\n  max: 3\n  max_delay_s: 2")
    mock.queue(Reply(fault=Fault.http(429, retry_after=3600)))
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as info:
        await runner.run_agent("limited", "t1", "first")
    assert info.value.code is ErrorCode.PROVIDER_RATE_LIMIT
    assert "asked to wait 3600 s" in info.value.message
    [run] = await runner.store.runs.list(thread_id="t1")
    assert (run.status, run.error_code) == ("failed", "provider_rate_limit")
    assert len(mock.requests) == 1
    # The provider cooled down (a new runner, a new chain): the agent's next run is served.
    runner = await open_runner()
    assert (await runner.run_agent("limited", "t2", "second")).text == "Echo: second"


async def test_the_deadline_covers_a_run_asked_of_another_agent(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    """The boss's deadline passes while its worker's run waits on a stalled provider: the boss
    fails with run_timeout, the worker's run is settled as cancelled, nothing is left running."""
    agent("boss", "capabilities: [agents]\nlimits:\n  timeout_s: 0.5")
    agent("worker")  # its own deadline: the default 600 s
    mock.queue(
        Reply(tool_calls=[("ask_agent", {"agent": "worker", "message": "hi"})]),
        Reply(text="too late", fault=Fault.stall(5)),
    )
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as info:
        await runner.run_agent("boss", "t", "delegate")
    assert info.value.code is ErrorCode.RUN_TIMEOUT
    runs = {r.agent_id: r for r in await runner.store.runs.list(limit=10)}
    assert (runs["boss"].status, runs["boss"].error_code) == ("failed", "run_timeout")
    assert runs["worker"].status == "cancelled"
    assert runs["worker"].parent_run_id == runs["boss"].id
    assert len(mock.requests) == 2
