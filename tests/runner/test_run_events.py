"""What representative runs record, compared whole: the events they store and forward, and the
transactions their rows are written in (which rows, together, in how many round trips).

Snapshots are inline-snapshot's (``pytest --inline-snapshot=review`` to update them on purpose;
a mismatch fails, in CI too); ids and timings are matched by dirty-equals."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from dirty_equals import IsFloat, IsStr
from inline_snapshot import snapshot

from agentrunner import AgentRunner, AgentRunnerCallbacks, RunAgentOverrides
from agentrunner.engine import AbortSignal, tool
from agentrunner.errors import AgentRunnerError
from agentrunner.store import Store, run_log
from agentrunner.testing import Fault, MockProvider, Reply
from tests.runner.conftest import Agent

CALL_ID = IsStr(regex=r"call_\d+_\d+")
RUN_ID = IsStr(regex=r"run_[0-9a-f]{22}")

# What each transaction says about a row, besides the query that writes it.
_TELLS = {
    "event_insert": "type",
    "run_message_insert": "message_type",
    "step_insert": "status",
    "step_finish": "status",
    "cost_insert": "model",
    "run_finish": "status",
}


class Transactions:
    """The store's writes, one list per transaction: each row as its query's name (and what
    tells it apart)."""

    def __init__(self, store: Store) -> None:
        self.written: list[list[str]] = []
        batch, submit = store.batch, store.submit

        async def batch_(ops: Sequence[Any]) -> None:
            self.written.append(self.describe(ops))
            await batch(ops)

        def submit_(ops: Sequence[Any]) -> asyncio.Future[None]:
            self.written.append(self.describe(ops))
            return submit(ops)

        store.batch, store.submit = batch_, submit_  # type: ignore[method-assign]

    def describe(self, ops: Sequence[Any]) -> list[str]:
        rows = []
        for name, _sql, params in ops:  # an op carries its query's name
            if name.startswith("lock_"):  # the thread lock's rows: PostgreSQL's alone
                continue
            told = _TELLS.get(name)
            rows.append(f"{name} {params[told]}" if told else name)
        return rows


@pytest.fixture(autouse=True)
def only_durable_points_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """So which rows share a transaction does not depend on timing."""
    monkeypatch.setattr(run_log, "FLUSH_DELAY_S", 3600.0)


async def stored(runner: AgentRunner, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e.type, e.payload) for e in await runner.store.events.list(run_id)]


async def test_a_run_with_a_tool_call(agent: Agent, open_runner: Any, mock: MockProvider) -> None:
    agent("helper", "capabilities: [notes]")
    mock.queue(
        Reply(
            text="Let me write it down.",
            tool_calls=[("note_create", {"title": "Launch plan", "body": "Ship in Q3"})],
            input_tokens=100,
            output_tokens=10,
        ),
        Reply(text="Noted the plan.", input_tokens=150, output_tokens=5),
    )
    runner: AgentRunner = await open_runner()
    writes = Transactions(runner.store)
    result = await runner.run_agent("helper", "t1", "Write down the launch plan")
    assert await stored(runner, result.run_id) == snapshot(
        [
            (
                "agent.working",
                {"agent_id": "helper", "run_id": RUN_ID, "thread_id": "t1"},
            ),
            ("step.started", {"step": 1, "model": "mockai:gpt-mock"}),
            ("agent.token", {"token": "Let me write it down.", "model": "mockai:gpt-mock"}),
            (
                "cost.updated",
                {
                    "model": "mockai:gpt-mock",
                    "attempt": 1,
                    "outcome": "ok",
                    "input_tokens": 100,
                    "output_tokens": 10,
                    "cache_read_tokens": 0,
                    "cache_write_tokens": 0,
                    "cost_micros": 120,
                    "cost_known": True,
                    "estimated": False,
                    "cumulative_cost_micros": 120,
                },
            ),
            (
                "agent.tool_call",
                {
                    "call_id": CALL_ID,
                    "name": "note_create",
                    "input": {"title": "Launch plan", "body": "Ship in Q3"},
                    "model": "mockai:gpt-mock",
                },
            ),
            (
                "agent.tool_result",
                {
                    "call_id": CALL_ID,
                    "name": "note_create",
                    "success": True,
                    "is_error": False,
                    "output_summary": "launch-plan",
                    "output": "launch-plan",
                },
            ),
            ("step.started", {"step": 2, "model": "mockai:gpt-mock"}),
            ("agent.token", {"token": "Noted the plan.", "model": "mockai:gpt-mock"}),
            (
                "cost.updated",
                {
                    "model": "mockai:gpt-mock",
                    "attempt": 2,
                    "outcome": "ok",
                    "input_tokens": 150,
                    "output_tokens": 5,
                    "cache_read_tokens": 0,
                    "cache_write_tokens": 0,
                    "cost_micros": 160,
                    "cost_known": True,
                    "estimated": False,
                    "cumulative_cost_micros": 280,
                },
            ),
            ("agent.message", {"text": "Noted the plan.", "model": "mockai:gpt-mock"}),
            (
                "agent.idle",
                {
                    "agent_id": "helper",
                    "run_id": RUN_ID,
                    "thread_id": "t1",
                    "outcome": "completed",
                },
            ),
        ]
    )
    await runner.effects.drain()
    assert writes.written == snapshot(
        [
            [
                "run_insert",
                "message_insert",
                "event_insert agent.working",
                "run_message_insert system_message",
                "run_message_insert user_message",
                "event_insert step.started",
                "step_insert completed",
                "event_insert agent.token",
                "event_insert cost.updated",
                "cost_insert mockai:gpt-mock",
                "cost_total_add",
                "event_insert agent.tool_call",
                "run_message_insert tool_call_message",
                "changes_notify",
                "message_insert",
            ],
            [
                "event_insert agent.tool_result",
                "run_message_insert tool_return_message",
                "event_insert step.started",
                "step_insert completed",
                "event_insert agent.token",
                "event_insert cost.updated",
                "cost_insert mockai:gpt-mock",
                "cost_total_add",
                "event_insert agent.message",
                "run_message_insert assistant_message",
                "event_insert agent.idle",
                "changes_notify",
                "message_insert",
                "message_insert",
                "thread_manifest",
                "run_finish completed",
            ],
            [
                "cost_insert test:test",
                "cost_total_add",
            ],  # the new thread's title, charged to the run
        ]
    )


async def test_a_failed_run(agent: Agent, open_runner: Any, mock: MockProvider) -> None:
    agent("talker")
    mock.queue(Reply(fault=Fault.http(400)))
    runner: AgentRunner = await open_runner()
    writes = Transactions(runner.store)
    with pytest.raises(AgentRunnerError):
        await runner.run_agent("talker", "t", "break")
    [run] = await runner.store.runs.list(thread_id="t")
    assert await stored(runner, run.id) == snapshot(
        [
            (
                "agent.working",
                {"agent_id": "talker", "run_id": RUN_ID, "thread_id": "t"},
            ),
            ("step.started", {"step": 1, "model": "mockai:gpt-mock"}),
            (
                "cost.updated",
                {
                    "model": "mockai:gpt-mock",
                    "attempt": 1,
                    "outcome": "error",
                    "input_tokens": 0,
                    "output_tokens": 0,
                    "cache_read_tokens": 0,
                    "cache_write_tokens": 0,
                    "cost_micros": 0,
                    "cost_known": True,
                    "estimated": False,
                    "cumulative_cost_micros": 0,
                },
            ),
            (
                "model.attempt_failed",
                {
                    "model": "mockai:gpt-mock",
                    "attempt": 1,
                    "error_code": "validation",
                    "status": 400,
                    "duration_ms": IsFloat(ge=0),
                    "message": "mockai answered 400 (invalid_request_error): mock fault: HTTP 400",
                    "failover": False,
                },
            ),
            (
                "agent.failed",
                {
                    "agent_id": "talker",
                    "run_id": RUN_ID,
                    "thread_id": "t",
                    "error_code": "validation",
                    "message": "mockai answered 400 (invalid_request_error): mock fault: HTTP 400",
                },
            ),
            (
                "agent.idle",
                {
                    "agent_id": "talker",
                    "run_id": RUN_ID,
                    "thread_id": "t",
                    "outcome": "failed",
                },
            ),
        ]
    )
    assert writes.written == snapshot(
        [
            [
                "run_insert",
                "message_insert",
                "event_insert agent.working",
                "run_message_insert system_message",
                "run_message_insert user_message",
                "event_insert step.started",
                "step_insert failed",
                "event_insert cost.updated",
                "cost_insert mockai:gpt-mock",
                "cost_total_add",
                "event_insert model.attempt_failed",
                "event_insert agent.failed",
                "event_insert agent.idle",
                "changes_notify",
                "message_insert",
                "thread_manifest",
                "run_finish failed",
            ]
        ]
    )


async def test_a_cancelled_run(agent: Agent, open_runner: Any, mock: MockProvider) -> None:
    abort = AbortSignal()

    @tool
    async def stop_everything() -> str:
        """Stops the run."""
        abort.abort("stopped by the tool")
        await asyncio.sleep(60)
        return "unreached"

    agent("quitter")
    mock.queue(Reply(tool_calls=[("stop_everything", {})]), Reply(text="unreached"))
    runner: AgentRunner = await open_runner()
    writes = Transactions(runner.store)
    result = await runner.run_agent(
        "quitter", "t", "go", overrides=RunAgentOverrides(tools=(stop_everything,)), abort=abort
    )
    assert result.stop_reason == "cancelled"
    assert await stored(runner, result.run_id) == snapshot(
        [
            (
                "agent.working",
                {"agent_id": "quitter", "run_id": RUN_ID, "thread_id": "t"},
            ),
            ("step.started", {"step": 1, "model": "mockai:gpt-mock"}),
            (
                "cost.updated",
                {
                    "model": "mockai:gpt-mock",
                    "attempt": 1,
                    "outcome": "ok",
                    "input_tokens": 20,
                    "output_tokens": 8,
                    "cache_read_tokens": 0,
                    "cache_write_tokens": 0,
                    "cost_micros": 36,
                    "cost_known": True,
                    "estimated": False,
                    "cumulative_cost_micros": 36,
                },
            ),
            (
                "agent.tool_call",
                {
                    "call_id": CALL_ID,
                    "name": "stop_everything",
                    "input": {},
                    "model": "mockai:gpt-mock",
                },
            ),
            (
                "agent.idle",
                {
                    "agent_id": "quitter",
                    "run_id": RUN_ID,
                    "thread_id": "t",
                    "outcome": "cancelled",
                },
            ),
        ]
    )
    assert writes.written == snapshot(
        [
            [
                "run_insert",
                "message_insert",
                "event_insert agent.working",
                "run_message_insert system_message",
                "run_message_insert user_message",
                "event_insert step.started",
                "step_insert completed",
                "event_insert cost.updated",
                "cost_insert mockai:gpt-mock",
                "cost_total_add",
                "event_insert agent.tool_call",
                "run_message_insert tool_call_message",
                "changes_notify",
                "message_insert",
            ],
            [
                "step_finish failed",
                "event_insert agent.idle",
                "changes_notify",
                "message_insert",
                "message_insert",
                "thread_manifest",
                "run_finish cancelled",
            ],
        ]
    )


async def test_a_delegation(agent: Agent, open_runner: Any, mock: MockProvider) -> None:
    agent("boss", "capabilities: [agents]")
    agent("worker")
    mock.queue(
        Reply(tool_calls=[("ask_agent", {"agent": "worker", "message": "hi"})]),
        Reply(text="worker says hi"),
        Reply(text="boss done"),
    )
    runner: AgentRunner = await open_runner()
    forwarded: list[tuple[str, dict[str, Any]]] = []
    callbacks = AgentRunnerCallbacks(on_event=lambda kind, data: forwarded.append((kind, data)))
    result = await runner.run_agent("boss", "t", "delegate", callbacks)
    [child] = [r for r in await runner.store.runs.list(limit=10) if r.depth == 1]
    assert await stored(runner, result.run_id) == snapshot(
        [
            (
                "agent.working",
                {"agent_id": "boss", "run_id": RUN_ID, "thread_id": "t"},
            ),
            ("step.started", {"step": 1, "model": "mockai:gpt-mock"}),
            (
                "cost.updated",
                {
                    "model": "mockai:gpt-mock",
                    "attempt": 1,
                    "outcome": "ok",
                    "input_tokens": 20,
                    "output_tokens": 8,
                    "cache_read_tokens": 0,
                    "cache_write_tokens": 0,
                    "cost_micros": 36,
                    "cost_known": True,
                    "estimated": False,
                    "cumulative_cost_micros": 36,
                },
            ),
            (
                "agent.tool_call",
                {
                    "call_id": CALL_ID,
                    "name": "ask_agent",
                    "input": {"agent": "worker", "message": "hi"},
                    "model": "mockai:gpt-mock",
                },
            ),
            (
                "agent.tool_result",
                {
                    "call_id": CALL_ID,
                    "name": "ask_agent",
                    "success": True,
                    "is_error": False,
                    "output_summary": "worker says hi",
                    "output": "worker says hi",
                },
            ),
            ("step.started", {"step": 2, "model": "mockai:gpt-mock"}),
            ("agent.token", {"token": "boss done", "model": "mockai:gpt-mock"}),
            (
                "cost.updated",
                {
                    "model": "mockai:gpt-mock",
                    "attempt": 2,
                    "outcome": "ok",
                    "input_tokens": 20,
                    "output_tokens": 2,
                    "cache_read_tokens": 0,
                    "cache_write_tokens": 0,
                    "cost_micros": 24,
                    "cost_known": True,
                    "estimated": False,
                    "cumulative_cost_micros": 86,
                },
            ),
            ("agent.message", {"text": "boss done", "model": "mockai:gpt-mock"}),
            (
                "agent.idle",
                {
                    "agent_id": "boss",
                    "run_id": RUN_ID,
                    "thread_id": "t",
                    "outcome": "completed",
                },
            ),
        ]
    )
    assert await stored(runner, child.id) == snapshot(
        [
            (
                "agent.working",
                {
                    "agent_id": "worker",
                    "run_id": RUN_ID,
                    "thread_id": "t.worker",
                },
            ),
            ("step.started", {"step": 1, "model": "mockai:gpt-mock"}),
            ("agent.token", {"token": "worker says hi", "model": "mockai:gpt-mock"}),
            (
                "cost.updated",
                {
                    "model": "mockai:gpt-mock",
                    "attempt": 1,
                    "outcome": "ok",
                    "input_tokens": 20,
                    "output_tokens": 3,
                    "cache_read_tokens": 0,
                    "cache_write_tokens": 0,
                    "cost_micros": 26,
                    "cost_known": True,
                    "estimated": False,
                    "cumulative_cost_micros": 62,
                },
            ),
            ("agent.message", {"text": "worker says hi", "model": "mockai:gpt-mock"}),
            (
                "agent.idle",
                {
                    "agent_id": "worker",
                    "run_id": RUN_ID,
                    "thread_id": "t.worker",
                    "outcome": "completed",
                },
            ),
        ]
    )  # stored without the child's marks
    assert forwarded == snapshot(
        [
            (
                "agent.working",
                {"agent_id": "boss", "run_id": RUN_ID, "thread_id": "t"},
            ),
            ("step.started", {"step": 1, "model": "mockai:gpt-mock"}),
            (
                "cost.updated",
                {
                    "model": "mockai:gpt-mock",
                    "attempt": 1,
                    "outcome": "ok",
                    "input_tokens": 20,
                    "output_tokens": 8,
                    "cache_read_tokens": 0,
                    "cache_write_tokens": 0,
                    "cost_micros": 36,
                    "cost_known": True,
                    "estimated": False,
                    "cumulative_cost_micros": 36,
                },
            ),
            (
                "agent.tool_call",
                {
                    "call_id": CALL_ID,
                    "name": "ask_agent",
                    "input": {"agent": "worker", "message": "hi"},
                    "model": "mockai:gpt-mock",
                },
            ),
            (
                "agent.working",
                {
                    "agent_id": "worker",
                    "run_id": RUN_ID,
                    "thread_id": "t.worker",
                    "from_agent": "worker",
                    "depth": 1,
                },
            ),
            (
                "step.started",
                {"step": 1, "model": "mockai:gpt-mock", "from_agent": "worker", "depth": 1},
            ),
            (
                "agent.token",
                {"token": "work", "model": "mockai:gpt-mock", "from_agent": "worker", "depth": 1},
            ),
            (
                "agent.token",
                # the "s" that ended this delta waits for the next: "sk-mock-key" (MOCK_KEY's
                # value, a secret) begins with it, and it is not passed on in parts
                {"token": "er ", "model": "mockai:gpt-mock", "from_agent": "worker", "depth": 1},
            ),
            (
                "agent.token",
                {"token": "says ", "model": "mockai:gpt-mock", "from_agent": "worker", "depth": 1},
            ),
            (
                "agent.token",
                {"token": "hi", "model": "mockai:gpt-mock", "from_agent": "worker", "depth": 1},
            ),
            (
                "cost.updated",
                {
                    "model": "mockai:gpt-mock",
                    "attempt": 1,
                    "outcome": "ok",
                    "input_tokens": 20,
                    "output_tokens": 3,
                    "cache_read_tokens": 0,
                    "cache_write_tokens": 0,
                    "cost_micros": 26,
                    "cost_known": True,
                    "estimated": False,
                    "cumulative_cost_micros": 62,
                    "from_agent": "worker",
                    "depth": 1,
                },
            ),
            (
                "agent.message",
                {
                    "text": "worker says hi",
                    "model": "mockai:gpt-mock",
                    "from_agent": "worker",
                    "depth": 1,
                },
            ),
            (
                "agent.idle",
                {
                    "agent_id": "worker",
                    "run_id": RUN_ID,
                    "thread_id": "t.worker",
                    "outcome": "completed",
                    "from_agent": "worker",
                    "depth": 1,
                },
            ),
            (
                "agent.tool_result",
                {
                    "call_id": CALL_ID,
                    "name": "ask_agent",
                    "success": True,
                    "is_error": False,
                    "output_summary": "worker says hi",
                    "output": "worker says hi",
                },
            ),
            ("step.started", {"step": 2, "model": "mockai:gpt-mock"}),
            ("agent.token", {"token": "bo", "model": "mockai:gpt-mock"}),  # "s": as above
            ("agent.token", {"token": "ss d", "model": "mockai:gpt-mock"}),
            ("agent.token", {"token": "one", "model": "mockai:gpt-mock"}),
            (
                "cost.updated",
                {
                    "model": "mockai:gpt-mock",
                    "attempt": 2,
                    "outcome": "ok",
                    "input_tokens": 20,
                    "output_tokens": 2,
                    "cache_read_tokens": 0,
                    "cache_write_tokens": 0,
                    "cost_micros": 24,
                    "cost_known": True,
                    "estimated": False,
                    "cumulative_cost_micros": 86,
                },
            ),
            ("agent.message", {"text": "boss done", "model": "mockai:gpt-mock"}),
            (
                "agent.idle",
                {
                    "agent_id": "boss",
                    "run_id": RUN_ID,
                    "thread_id": "t",
                    "outcome": "completed",
                },
            ),
        ]
    )  # the caller sees the child's events, marked
