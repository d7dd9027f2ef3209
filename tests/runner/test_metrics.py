"""Metrics of runs (issue 26): with ``[telemetry] enabled``, runs, model requests, tokens,
cost, tool calls and mailboxes are counted and timed with the OpenTelemetry metrics API, read
here from the SDK's in-memory reader (tests/runner/conftest.py sets the process's provider)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentrunner import AgentRunner, AgentRunnerCallbacks
from agentrunner.engine.abort import AbortSignal
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.runtime.compose import open_workspace
from agentrunner.telemetry import NO_TRACING
from agentrunner.testing import Fault, MockProvider, Reply
from tests.runner.conftest import Agent
from tests.runner.test_delegation import org
from tests.runner.test_telemetry import telemetry

Point = NumberDataPoint | HistogramDataPoint


class Measured:
    """What agentrunner recorded since the last collection, by instrument."""

    def __init__(self, reader: InMemoryMetricReader) -> None:
        self.reader = reader
        self.points: dict[str, list[tuple[dict[str, Any], Point]]] = {}

    def collect(self) -> Measured:
        """What was recorded since the last collection (a gauge: what it reads now)."""
        got = Measured(self.reader)
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                if scope.scope.name != "agentrunner":
                    continue
                for metric in scope.metrics:
                    got.points[metric.name] = [
                        (dict(p.attributes or {}), p)  # type: ignore[misc]
                        for p in metric.data.data_points
                    ]
        return got

    @property
    def recorded(self) -> set[str]:
        """The instruments something was recorded on (not the queue depth gauge, which reads
        what a worker of an earlier test last counted)."""
        return {name for name in self.points if name != "agentrunner.queue.depth"}

    def select(self, name: str, **where: Any) -> list[tuple[dict[str, Any], Point]]:
        """The points of ``name`` whose attributes include ``where`` (dots as ``__``)."""
        wanted = {k.replace("__", "."): v for k, v in where.items()}
        return [
            (attributes, point)
            for attributes, point in self.points.get(name, [])
            if all(attributes.get(k) == v for k, v in wanted.items())
        ]

    def total(self, name: str, **where: Any) -> float:
        """A counter's sum, or a histogram's count, over the points that match."""
        return sum(
            p.count if isinstance(p, HistogramDataPoint) else p.value
            for _, p in self.select(name, **where)
        )

    def sum(self, name: str, **where: Any) -> float:
        """A histogram's sum over the points that match."""
        return sum(
            p.sum for _, p in self.select(name, **where) if isinstance(p, HistogramDataPoint)
        )

    def attributes(self, name: str, **where: Any) -> list[dict[str, Any]]:
        return ordered(a for a, _ in self.select(name, **where))


def ordered(attributes: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Points' attributes in an order that does not depend on the order they were made."""
    return sorted(attributes, key=lambda a: sorted(a.items()))


@pytest.fixture
def measured(
    exporter: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> Iterator[Measured]:
    metric_reader.get_metrics_data()  # what earlier tests recorded is collected, and dropped
    exporter.clear()
    yield Measured(metric_reader)
    exporter.clear()


AGENT = "gen_ai__agent__id"


async def test_runs_requests_tools_and_tokens_are_counted_by_agent_model_and_outcome(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    project: Path,
    measured: Measured,
    exporter: InMemorySpanExporter,
) -> None:
    telemetry(project, "enabled = true")
    agent(
        "clerk",
        "name: Clerk\nmodel: mockai:gpt-down\nfallback: [mockant:claude-mock]\nretry: {max: 1}\n"
        "capabilities: [notify]",
    )
    agent("scribe", "name: Scribe\nmodel: mockai:gpt-mock")
    # clerk: its primary is down (a 503), the fallback calls a tool, then answers (asked first
    # at the second step: the primary failed)
    mock.queue(Reply(fault=Fault.http(503)), model="gpt-down")
    mock.queue(
        Reply(tool_calls=[("notify_user", {"message": "filed"})], input_tokens=30, output_tokens=7),
        Reply(text="Filed.", input_tokens=45, output_tokens=3),
        model="claude-mock",
    )
    # scribe: answers once, then its key is refused
    mock.queue(
        Reply(text="Noted.", input_tokens=11, output_tokens=2),
        Reply(fault=Fault.http(401)),
        model="gpt-mock",
    )
    runner: AgentRunner = await open_runner()
    filed = await runner.run_agent("clerk", "desk", "File the report")
    noted = await runner.run_agent("scribe", "notes", "Take a note")
    with pytest.raises(AgentRunnerError) as refused:
        await runner.run_agent("scribe", "notes", "Another")
    assert refused.value.code is ErrorCode.PROVIDER_AUTH
    await runner.effects.drain()  # the threads' titles
    got = measured.collect()

    # runs: those that ended are the count of their duration, a failure by its code;
    # started = completed + failed, per agent
    runs = "gen_ai.invoke_agent.duration"
    for agent_id, started, completed in (("clerk", 1, 1), ("scribe", 2, 1)):
        assert got.total("agentrunner.runs.started", **{AGENT: agent_id}) == started
        ended = got.total(runs, **{AGENT: agent_id})
        failed = ended - got.total(runs, **{AGENT: agent_id}, error__type=None)
        assert (ended, ended - failed) == (started, completed)
    assert got.attributes(runs) == ordered(
        [
            {"gen_ai.agent.id": "clerk", "gen_ai.agent.name": "Clerk"},
            {"gen_ai.agent.id": "scribe", "gen_ai.agent.name": "Scribe"},
            {
                "gen_ai.agent.id": "scribe",
                "gen_ai.agent.name": "Scribe",
                "error.type": "provider_auth",
            },
        ]
    )

    # a run's measurement leads to its trace (the SDK keeps exemplars of sampled spans)
    (clerk_run,) = [p for _, p in got.select(runs, **{AGENT: "clerk"})]
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent clerk"]
    assert {e.trace_id for e in clerk_run.exemplars} == {span.context.trace_id}

    # model requests: each attempt sent, by provider, model and status (the titles' too)
    requested = "gen_ai.client.operation.duration"
    requests = {
        (a["gen_ai.provider.name"], a["gen_ai.request.model"], a.get("error.type")): p.count  # type: ignore[union-attr]
        for a, p in got.select(requested)
    }
    assert requests == {
        ("mockai", "gpt-down", "provider_unavailable"): 1,
        ("mockant", "claude-mock", None): 2,
        ("mockai", "gpt-mock", None): 1,
        ("mockai", "gpt-mock", "provider_auth"): 1,
        ("test", "test", None): 2,  # two new threads' titles
    }
    assert got.attributes(requested, gen_ai__request__model="gpt-mock") == ordered(
        [
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "mockai",
                "gen_ai.request.model": "gpt-mock",
                "error.type": "provider_auth",
            },
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "mockai",
                "gen_ai.request.model": "gpt-mock",
                "gen_ai.response.model": "gpt-mock",
            },
        ]
    )

    # tokens and cost per agent and model: what the store's cost rows say, attempt by attempt
    usage = "gen_ai.client.token.usage"
    rows = await runner.store.costs.summary(since=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"))
    assert {(r["agent_id"], r["model"]) for r in rows} == {
        ("clerk", "mockai:gpt-down"),
        ("clerk", "mockant:claude-mock"),
        ("scribe", "mockai:gpt-mock"),
        ("clerk", "test:test"),  # each new thread's title, charged to the run that opened it
        ("scribe", "test:test"),
    }
    for row in rows:
        provider, model = row["model"].split(":")
        model_ = {"gen_ai__provider__name": provider, "gen_ai__request__model": model}
        mine = {AGENT: row["agent_id"], **model_}
        assert got.total("agentrunner.cost", **mine) == pytest.approx(row["cost_micros"] / 1e6)
        for kind in ("input", "output"):
            assert got.sum(usage, gen_ai__token__type=kind, **mine) == row[f"{kind}_tokens"]
    for ref in {row["model"] for row in rows}:  # each attempt is a cost row, and a request
        provider, model = ref.split(":")
        model_ = {"gen_ai__provider__name": provider, "gen_ai__request__model": model}
        assert got.total(requested, **model_) == sum(
            r["requests"] for r in rows if r["model"] == ref
        )
    assert got.sum(usage, gen_ai__request__model="claude-mock", gen_ai__token__type="input") == 75
    assert got.sum(usage, gen_ai__request__model="claude-mock", gen_ai__token__type="output") == 10
    assert got.sum(usage, gen_ai__request__model="gpt-mock", gen_ai__token__type="input") == 11
    assert got.total(usage, gen_ai__request__model="gpt-down") == 0  # never answered: no tokens
    assert got.total("agentrunner.cost", **{AGENT: "clerk"}) == pytest.approx(filed.cost_usd)
    assert got.total("agentrunner.cost", **{AGENT: "scribe"}) == pytest.approx(noted.cost_usd)
    # the titles' tokens count to the agent whose run opened the thread, as their cost rows do
    titles = got.attributes(usage, gen_ai__request__model="test", gen_ai__token__type="input")
    assert titles == ordered(
        [
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "test",
                "gen_ai.request.model": "test",
                "gen_ai.token.type": "input",
                "gen_ai.agent.id": agent_id,
            }
            for agent_id in ("clerk", "scribe")
        ]
    )

    # tool calls, by tool, agent and outcome
    assert got.attributes("gen_ai.execute_tool.duration") == ordered(
        [
            {
                "gen_ai.tool.name": "notify_user",
                "gen_ai.tool.type": "function",
                "gen_ai.agent.id": "clerk",
                "gen_ai.agent.name": "Clerk",
            }
        ]
    )
    # the first streamed text of each reply that had one: clerk's answer, scribe's first
    first = "gen_ai.client.operation.time_to_first_chunk"
    assert got.total(first, gen_ai__request__model="claude-mock") == 1
    assert got.total(first, gen_ai__request__model="gpt-mock") == 1
    assert got.total(first, gen_ai__request__model="gpt-down") == 0


async def test_tool_calls_and_cancelled_runs_are_counted_by_outcome(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, measured: Measured
) -> None:
    telemetry(project, "enabled = true")
    agent("clerk", "capabilities: [notes]")
    agent("talker")
    mock.queue(
        Reply(
            tool_calls=[
                ("note_read", {"slug": "nothing-here"}),  # an error the model is told of
                ("note_create", {"title": "Plan", "body": "two"}),
            ]
        ),
        Reply(tool_calls=[("note_read", {"slug": "plan"})]),
        Reply(text="Read it."),
        Reply(text="word " * 200, chunk_delay_s=0.01),  # talker's, stopped mid-way
    )
    runner: AgentRunner = await open_runner()
    await runner.run_agent("clerk", "desk", "plan")
    abort = AbortSignal()

    def on_event(kind: str, data: Any) -> None:
        if kind == "agent.token":
            abort.abort()

    stopped = await runner.run_agent(
        "talker", "t", "a story", AgentRunnerCallbacks(on_event=on_event), abort=abort
    )
    assert stopped.stop_reason == "cancelled"
    await runner.effects.drain()
    got = measured.collect()

    calls = {
        (a["gen_ai.tool.name"], a.get("error.type")): p.count  # type: ignore[union-attr]
        for a, p in got.select("gen_ai.execute_tool.duration")
    }
    assert calls == {
        ("note_read", "tool_failed"): 1,  # the model was told, and went on
        ("note_read", None): 1,
        ("note_create", None): 1,
    }
    # a cancelled run is a failed one, its code cancelled (as its span says)
    runs = "gen_ai.invoke_agent.duration"
    assert got.attributes(runs, error__type="cancelled") == ordered(
        [{"gen_ai.agent.id": "talker", "gen_ai.agent.name": "talker", "error.type": "cancelled"}]
    )
    assert got.total(runs, **{AGENT: "talker"}, error__type=None) == 0
    assert got.total(runs, **{AGENT: "clerk"}, error__type=None) == 1
    assert got.attributes("gen_ai.client.operation.duration", error__type="cancelled") == ordered(
        [
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "mockai",
                "gen_ai.request.model": "gpt-mock",
                "error.type": "cancelled",
            }
        ]
    )


async def test_a_delegated_runs_work_counts_to_its_own_agent(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, measured: Measured
) -> None:
    telemetry(project, "enabled = true")
    org(agent)
    mock.queue(
        Reply(tool_calls=[("delegate", {"agent": "cto", "task": "Pick a database"})]),
        Reply(tool_calls=[("delegate", {"agent": "engineer", "task": "Benchmark two"})]),
        Reply(text="Postgres is 2x faster here.", input_tokens=7, output_tokens=5),
        Reply(text="We use Postgres.", input_tokens=50, output_tokens=4),
        Reply(text="Decision: Postgres.", input_tokens=90, output_tokens=3),
    )
    runner: AgentRunner = await open_runner()
    await runner.run_agent("ceo", "board", "Choose our stack")
    await runner.effects.drain()
    got = measured.collect()

    team = ("ceo", "cto", "engineer")
    runs = "gen_ai.invoke_agent.duration"
    assert [got.total(runs, **{AGENT: a}, error__type=None) for a in team] == [1, 1, 1]
    delegated = {a: got.total("gen_ai.execute_tool.duration", **{AGENT: a}) for a in team}
    assert delegated == {"ceo": 1, "cto": 1, "engineer": 0}
    rows = await runner.store.costs.summary(since=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"))
    by_agent = {
        a: (
            sum(r["input_tokens"] for r in rows if r["agent_id"] == a),
            sum(r["output_tokens"] for r in rows if r["agent_id"] == a),
        )
        for a in team
    }
    usage = "gen_ai.client.token.usage"
    counted = {
        a: (
            got.sum(usage, gen_ai__token__type="input", **{AGENT: a}),
            got.sum(usage, gen_ai__token__type="output", **{AGENT: a}),
        )
        for a in team
    }
    assert counted == by_agent
    own = {
        (r["agent_id"], r["model"]): (r["input_tokens"], r["output_tokens"])
        for r in rows
        if r["model"] == "mockai:gpt-mock"
    }
    assert own[("engineer", "mockai:gpt-mock")] == (7, 5)  # its own request, not its callers'


async def test_a_worker_counts_each_agents_queue_and_how_long_its_runs_waited(
    agent: Agent, mock: MockProvider, project: Path, measured: Measured
) -> None:
    telemetry(project, "enabled = true")
    agent("clerk")
    agent("scribe")
    mock.queue(Reply(text="first", delay_s=0.3), Reply(text="second"), Reply(text="third"))
    workspace = await open_workspace(project)
    try:
        for agent_id, thread in (("clerk", "a"), ("clerk", "b"), ("scribe", "c")):
            await workspace.runner.store.threads.open(thread, agent_id)
            await workspace.runs.queue(agent_id, thread, "hi")
        serving = asyncio.ensure_future(workspace.worker(concurrency=1).run(until_idle=True))
        while not mock.requests:  # the first run's request is in flight
            await asyncio.sleep(0.01)
        busy = measured.collect()
        assert await serving == 3
        await workspace.runner.effects.drain()
        done = measured.collect()
    finally:
        await workspace.close()

    depth = "agentrunner.queue.depth"
    # as the worker started: clerk's two and scribe's one; as it stopped, none
    assert busy.total(depth, **{AGENT: "clerk"}) == 2
    assert busy.total(depth, **{AGENT: "scribe"}) == 1
    assert done.total(depth, **{AGENT: "clerk"}) == done.total(depth, **{AGENT: "scribe"}) == 0
    # each claim's wait, per agent; clerk's second could be claimed only once its first ended
    waited = "agentrunner.queue.wait.duration"
    claims = busy.total(waited) + done.total(waited)
    assert claims == 3
    assert busy.total(waited, **{AGENT: "clerk"}) + done.total(waited, **{AGENT: "clerk"}) == 2
    (clerk,) = [p for _, p in done.select(waited, **{AGENT: "clerk"})]
    assert isinstance(clerk, HistogramDataPoint) and clerk.max >= 0.3
    # the queued runs were runs like any other
    ran = "gen_ai.invoke_agent.duration"
    assert done.total(ran, error__type=None) + busy.total(ran, error__type=None) == 3


async def test_metrics_can_be_left_off_while_spans_are_sent(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    project: Path,
    measured: Measured,
    exporter: InMemorySpanExporter,
) -> None:
    telemetry(project, "enabled = true", "metrics = false")  # a receiver of traces only
    agent("clerk")
    mock.queue(Reply(text="one"))
    runner: AgentRunner = await open_runner()
    await runner.run_agent("clerk", "desk", "hi")
    await runner.effects.drain()
    assert "invoke_agent clerk" in [s.name for s in exporter.get_finished_spans()]
    assert measured.collect().recorded == set()


async def test_telemetry_off_records_no_metrics(
    agent: Agent, open_runner: Any, mock: MockProvider, measured: Measured
) -> None:
    agent("clerk", "capabilities: [notify]")
    mock.queue(Reply(tool_calls=[("notify_user", {"message": "x"})]), Reply(text="ok"))
    runner: AgentRunner = await open_runner()
    assert runner.engine.tracing is NO_TRACING
    await runner.run_agent("clerk", "desk", "hi")
    await runner.effects.drain()
    assert measured.collect().recorded == set()


async def test_each_wait_for_a_person_is_a_span_and_measured_by_decision(
    agent: Agent, mock: MockProvider, project: Path, measured: Measured, exporter: Any
) -> None:
    telemetry(project, "enabled = true")
    agent("clerk", "model: mockai:gpt-mock\ncapabilities: [notes]\napproval:\n  tools: [note_*]")
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "a", "body": "x"}), ("note_list", {})]),
        Reply(text="done"),
    )
    workspace = await open_workspace(project)
    try:
        waits = workspace.runner.waits
        result = await workspace.runner.run_agent("clerk", "t", "write")
        first, second = result.approvals
        await asyncio.sleep(0.05)  # a wait long enough to be told from none
        await waits.decide(first["approval_id"], approve=True, by="ana")
        await waits.decide(second["approval_id"], approve=False, by="bo", reason="no")
        await workspace.worker(concurrency=1).run(until_idle=True)
        done = measured.collect()
    finally:
        await workspace.close()
    waited = "agentrunner.approval.wait.duration"
    assert done.total(waited, **{AGENT: "clerk", "agentrunner.approval.decision": "approved"}) == 1
    assert done.total(waited, **{AGENT: "clerk", "agentrunner.approval.decision": "denied"}) == 1
    assert done.sum(waited) >= 0.05
    spans = {s.name: s for s in exporter.get_finished_spans() if s.name.startswith("approval ")}
    assert set(spans) == {"approval note_create", "approval note_list"}
    span = spans["approval note_create"]
    assert span.attributes["agentrunner.approval.by"] == "ana"
    assert span.end_time - span.start_time >= 50_000_000


async def test_each_fire_of_a_schedule_is_a_span_and_counted_by_outcome(
    agent: Agent,
    mock: MockProvider,
    project: Path,
    measured: Measured,
    exporter: InMemorySpanExporter,
) -> None:
    """A fire is a `fire NAME` span with its tick and outcome, under the enqueue span whose
    trace its run continues; fires are counted per schedule and outcome."""
    from agentrunner.workspace.schedules import Scheduler

    telemetry(project, "enabled = true")
    agent("clerk")
    agent("sleepy", "name: sleepy\nenabled: false")
    with (project / "agentrunner.toml").open("a") as config:
        config.write(
            '\n[schedules.tick]\nagent = "clerk"\nevery = "10s"\nmessage = "tick"\n'
            '[schedules.idle]\nagent = "sleepy"\nevery = "10s"\nmessage = "idle"\n'
        )
    now = [1_800_000_000.0]
    workspace = await open_workspace(project)
    try:
        scheduler = Scheduler(workspace.runner, workspace.channels, clock=lambda: now[0])
        await scheduler.fire_due()
        now[0] += 10
        fired = {f.schedule: f for f in await scheduler.fire_due()}
        await workspace.worker().run(until_idle=True)
        await workspace.runner.effects.drain()
        done = measured.collect()
    finally:
        await workspace.close()
    fires = "agentrunner.schedule.fires"
    queued, skipped = "queued", "skipped"
    key = "agentrunner__schedule__"
    assert done.total(fires, **{f"{key}name": "tick", f"{key}outcome": queued}) == 1
    assert done.total(fires, **{f"{key}name": "idle", f"{key}outcome": skipped}) == 1
    assert done.total(fires) == 2
    finished = list(exporter.get_finished_spans())
    spans = {s.name: s for s in finished}
    tick = spans["fire tick"].attributes or {}
    assert tick["agentrunner.schedule.outcome"] == queued
    assert tick["agentrunner.run.id"] == fired["tick"].run_id
    assert tick["agentrunner.schedule.tick"] == 1_800_000_010.0
    idle = spans["fire idle"].attributes or {}
    assert str(idle["agentrunner.schedule.reason"]).startswith("agent_disabled")
    # the run it queued continued the trace of the enqueue that queued it
    enqueue = spans["enqueue schedule tick"]
    run = next(s for s in finished if s.name.startswith("invoke_agent clerk"))
    assert run.context is not None and enqueue.context is not None
    assert run.context.trace_id == enqueue.context.trace_id
