"""Schedules fired in one process with a fake clock: each tick once, the missed-tick and overlap
rules, the skips with their reasons, background runs and where what they say goes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.runtime.compose import open_workspace
from agentrunner.testing import Fault, MockProvider, Reply
from agentrunner.workspace.schedules import Scheduler
from agentrunner.workspace.workspace import Workspace
from tests.runner.conftest import Agent

T0 = 1_800_000_000.0  # a tick of every period used here (a multiple of 10 s)


@dataclass
class Clock:
    now: float = T0

    def __call__(self) -> float:
        return self.now


def schedules(project: Path, text: str) -> None:
    with (project / "agentrunner.toml").open("a") as config:
        config.write("\n" + text)


@pytest.fixture
async def opened(project: Path, agent: Agent) -> AsyncIterator[Any]:
    agent("bot")
    agent("other")
    workspaces: list[Workspace] = []

    async def make(clock: Clock) -> tuple[Workspace, Scheduler]:
        ws = await open_workspace(project)
        workspaces.append(ws)
        return ws, Scheduler(ws.runner, ws.channels, clock=clock)

    yield make
    for ws in workspaces:
        await ws.close()


async def runs_of(ws: Workspace, agent_id: str) -> list[dict[str, Any]]:
    """The agent's runs, oldest first."""
    runs = await ws.app.store.runs.list(agent_id=agent_id, limit=1000)
    return [
        {"id": r.id, "thread_id": r.thread_id, "request": r.request or {}, "status": r.status}
        for r in reversed(runs)
    ]


async def test_each_tick_fires_once_with_its_own_message(project: Path, opened: Any) -> None:
    schedules(
        project,
        '[schedules.ping]\nagent = "bot"\nevery = "10s"\n'
        'message = "Ping {{input.who}} at {{input.fire_time}}"\ninput = { who = "ops" }\n'
        'overlap = "queue"\n'
        '[schedules.pong]\nagent = "other"\nevery = "20s"\nmessage = "Pong {{input.fire_date}}"\n',
    )
    clock = Clock()
    ws, scheduler = await opened(clock)
    assert await scheduler.fire_due() == []  # seen for the first time: from now on
    clock.now = T0 + 10
    fired = await scheduler.fire_due()
    assert [(f.schedule, f.tick, f.outcome) for f in fired] == [("ping", T0 + 10, "queued")]
    assert await scheduler.fire_due() == []  # the same tick again: nothing
    clock.now = T0 + 25  # ping's T0+20 (5 s late: on time) and pong's T0+20
    fired = await scheduler.fire_due()
    assert sorted((f.schedule, f.tick) for f in fired) == [("ping", T0 + 20), ("pong", T0 + 20)]
    bot, other = await runs_of(ws, "bot"), await runs_of(ws, "other")
    assert len(bot) == 2 and len(other) == 1
    first, second = (r["request"]["message"] for r in bot)
    assert first.startswith("Ping ops at 2027-01-15T08:00:10") and first != second
    assert other[0]["request"]["message"] == "Pong 2027-01-15"
    assert all(r["request"]["background"] for r in bot + other)
    assert len({r["thread_id"] for r in bot}) == 2  # thread = "new": a thread each time


async def test_a_refused_decision_queues_nothing_and_the_next_look_fires(
    project: Path, opened: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that dies (or fails) before its commit leaves the tick to the next look."""
    schedules(project, '[schedules.ping]\nagent = "bot"\nevery = "10s"\nmessage = "ping"\n')
    clock = Clock()
    ws, scheduler = await opened(clock)
    await scheduler.fire_due()
    clock.now = T0 + 10
    calls = 0
    real = ws.app.store.mailbox.enqueue

    async def crash(*args: Any, **kwargs: Any) -> None:
        nonlocal calls
        calls += 1
        raise ConnectionError("the process died mid-tick")

    monkeypatch.setattr(ws.app.store.mailbox, "enqueue", crash)
    with pytest.raises(ConnectionError):
        await scheduler.fire_due()
    assert await runs_of(ws, "bot") == []
    monkeypatch.setattr(ws.app.store.mailbox, "enqueue", real)
    fired = await scheduler.fire_due()
    assert [(f.tick, f.outcome) for f in fired] == [(T0 + 10, "queued")]
    assert len(await runs_of(ws, "bot")) == 1


async def test_two_processes_on_one_tick_queue_one_run(project: Path, opened: Any) -> None:
    schedules(project, '[schedules.ping]\nagent = "bot"\nevery = "10s"\nmessage = "ping"\n')
    clock = Clock()
    ws, one = await opened(clock)
    _, two = await opened(clock)
    await one.fire_due()
    clock.now = T0 + 10
    state = (await ws.app.store.schedules.states())["ping"]
    decided = await one.fire_due()
    # the other looked at the same cursor: its decision is refused whole
    assert await two._decide(two.schedules["ping"], state, T0 + 10, clock.now) == []
    assert len(decided) == 1 and len(await runs_of(ws, "bot")) == 1


@pytest.mark.parametrize("missed", ["skip", "once"])
async def test_ticks_missed_while_nothing_ran(project: Path, opened: Any, missed: str) -> None:
    schedules(
        project,
        f'[schedules.ping]\nagent = "bot"\nevery = "10s"\nmessage = "ping"\nmissed = "{missed}"\n'
        'overlap = "queue"\n',
    )
    clock = Clock()
    ws, scheduler = await opened(clock)
    await scheduler.fire_due()
    clock.now = T0 + 10
    await scheduler.fire_due()
    clock.now = T0 + 110 + 3  # ticks T0+20 … T0+100 passed with no process: 9, then T0+110
    fired = await scheduler.fire_due()
    outcomes = [(f.tick, f.outcome, f.missed) for f in fired]
    if missed == "skip":
        assert outcomes == [(T0 + 100, "skipped", 9), (T0 + 110, "queued", 0)]
        assert "missed: 9 ticks" in (fired[0].reason or "")
    else:  # one run for them all: the on-time tick's
        assert outcomes == [(T0 + 110, "queued", 9)]
        assert "catching up 9 ticks" in (fired[0].reason or "")
    assert len(await runs_of(ws, "bot")) == 2
    clock.now = T0 + 120  # back to normal
    assert [(f.tick, f.outcome) for f in await scheduler.fire_due()] == [(T0 + 120, "queued")]


@pytest.mark.parametrize("missed", ["skip", "once"])
async def test_a_restart_past_a_long_periods_tick_runs_it_once_or_not(
    project: Path, opened: Any, missed: str
) -> None:
    """A daily digest whose 9:00 passed while the server was down: with "once" it runs at the
    restart, once for all the ticks it missed; with "skip" it waits for the next tick."""
    schedules(
        project,
        f'[schedules.hourly]\nagent = "bot"\nevery = "1h"\nmessage = "hi"\nmissed = "{missed}"\n'
        'overlap = "queue"\n',
    )
    clock = Clock()
    ws, scheduler = await opened(clock)
    await scheduler.fire_due()
    clock.now = T0 + 3 * 3600 + 300  # three ticks passed; the newest five minutes ago: late
    fired = [(f.tick, f.outcome, f.missed) for f in await scheduler.fire_due()]
    outcome = "skipped" if missed == "skip" else "queued"
    assert fired == [(T0 + 3 * 3600, outcome, 3)]
    assert len(await runs_of(ws, "bot")) == (0 if missed == "skip" else 1)
    clock.now = T0 + 4 * 3600 + 1  # the next tick, on time, either way
    assert [(f.tick, f.outcome) for f in await scheduler.fire_due()] == [(T0 + 4 * 3600, "queued")]


async def test_a_clock_set_back_fires_nothing_twice(project: Path, opened: Any) -> None:
    schedules(
        project,
        '[schedules.ping]\nagent = "bot"\nevery = "10s"\nmessage = "ping"\noverlap = "queue"\n',
    )
    clock = Clock()
    ws, scheduler = await opened(clock)
    await scheduler.fire_due()
    for now in (T0 + 10, T0 + 20, T0 + 30):
        clock.now = now
        await scheduler.fire_due()
    clock.now = T0 + 5  # set back by 25 s, then forward again
    assert await scheduler.fire_due() == []
    clock.now = T0 + 30
    assert await scheduler.fire_due() == []
    clock.now = T0 + 40
    assert [f.tick for f in await scheduler.fire_due()] == [T0 + 40]
    assert len(await runs_of(ws, "bot")) == 4
    # a restart (a new process) starts from the cursor kept in the store
    _, restarted = await opened(clock)
    assert await restarted.fire_due() == []


@pytest.mark.parametrize("overlap", ["skip", "queue"])
async def test_overlap_while_the_last_fire_runs(project: Path, opened: Any, overlap: str) -> None:
    schedules(
        project,
        '[schedules.ping]\nagent = "bot"\nevery = "10s"\nmessage = "ping"\n'
        f'overlap = "{overlap}"\n',
    )
    clock = Clock()
    ws, scheduler = await opened(clock)
    await scheduler.fire_due()
    clock.now = T0 + 10
    first = (await scheduler.fire_due())[0]
    clock.now = T0 + 20  # the first fire's run is still queued: no worker yet
    second = (await scheduler.fire_due())[0]
    if overlap == "skip":
        assert second.outcome == "skipped"
        assert second.reason is not None and first.run_id in second.reason
        assert "overlap" in second.reason
    else:
        assert second.outcome == "queued" and second.run_id != first.run_id
    served = await ws.worker().run(until_idle=True)
    assert served == (1 if overlap == "skip" else 2)
    clock.now = T0 + 30  # the run ended: the next tick fires whatever the rule
    assert (await scheduler.fire_due())[0].outcome == "queued"


async def test_a_disabled_agent_and_a_spent_budget_are_skipped_with_their_reasons(
    project: Path, agent: Agent, opened: Any, mock: MockProvider
) -> None:
    schedules(
        project,
        "[budgets]\nglobal_daily_usd = 0.01\n"
        '[schedules.ping]\nagent = "bot"\nevery = "10s"\nmessage = "ping"\n'
        '[schedules.off]\nagent = "sleepy"\nevery = "10s"\nmessage = "wake"\n',
    )
    agent("sleepy", "name: Sleepy\nenabled: false")
    clock = Clock()
    ws, scheduler = await opened(clock)
    await scheduler.fire_due()
    clock.now = T0 + 10
    fired = {f.schedule: f for f in await scheduler.fire_due()}
    assert fired["off"].outcome == "skipped"
    assert (fired["off"].reason or "").startswith("agent_disabled")
    assert fired["ping"].outcome == "queued"
    mock.queue(Reply(text="spent it", input_tokens=20_000, output_tokens=10))
    await ws.worker().run(until_idle=True)  # spends past the day's limit
    clock.now = T0 + 20
    fired = {f.schedule: f for f in await scheduler.fire_due()}
    assert fired["ping"].outcome == "skipped"
    assert (fired["ping"].reason or "").startswith("budget_exceeded")
    shown = await scheduler.fires("ping")
    assert [f.result for f in shown] == ["skipped", "completed"]


async def test_a_scheduled_run_is_a_background_run(
    project: Path, opened: Any, mock: MockProvider
) -> None:
    """Its prompt says nobody watches (on the request the model received); what it has for
    people goes to the person's DM with its agent, and its failure too."""
    schedules(project, '[schedules.ping]\nagent = "bot"\nevery = "10s"\nmessage = "ping"\n')
    clock = Clock()
    ws, scheduler = await opened(clock)
    await scheduler.fire_due()
    clock.now = T0 + 10
    await scheduler.fire_due()
    await ws.worker().run(until_idle=True)
    system = mock.requests[-1].body["messages"][0]["content"]
    assert "## Background run" in system
    # a run of the same agent that is not scheduled has no such note
    await ws.runner.run_agent("bot", "bot-direct", "hello")
    assert "## Background run" not in mock.requests[-1].body["messages"][0]["content"]


async def notices(ws: Workspace, channel_name: str) -> list[str]:
    channel = await ws.app.store.channels.by_name(channel_name)
    assert channel is not None, channel_name
    messages = await ws.app.store.channels.after(channel.id, "", 1000)
    return [m.content for m in messages if m.sender_kind == "notice"]


async def test_what_a_background_run_has_for_people_reaches_them(
    project: Path, agent: Agent, opened: Any, mock: MockProvider
) -> None:
    """A run on a thread: its notify_user and its failure go to the person's DM with the agent;
    a run posting in a channel: to the channel — never only to a live caller there is not."""
    agent("bot", "name: bot\ncapabilities: [notify]")
    schedules(
        project,
        '[channels.ops]\nmembers = ["bot", "you"]\n'
        '[schedules.check]\nagent = "bot"\nevery = "10s"\nmessage = "check"\n'
        '[schedules.post]\nagent = "bot"\nevery = "10s"\nmessage = "post"\nchannel = "ops"\n'
        'overlap = "queue"\n',
    )
    clock = Clock()
    ws, scheduler = await opened(clock)
    await scheduler.fire_due()
    clock.now = T0 + 10
    mock.queue(
        Reply(tool_calls=[("notify_user", {"message": "the disk is 91% full"})]),
        Reply(text="checked"),
        Reply(tool_calls=[("notify_user", {"message": "posted the numbers"})]),
        Reply(text="numbers: 4, 2"),
    )
    fired = await scheduler.fire_due()
    assert sorted(f.schedule for f in fired) == ["check", "post"]
    await ws.worker(concurrency=1).run(until_idle=True)  # in order: the replies are one queue
    assert await notices(ws, "dm:bot:you") == ["bot notifies: the disk is 91% full"]
    assert await notices(ws, "ops") == ["bot notifies: posted the numbers"]

    clock.now = T0 + 20  # the next fire of the thread schedule fails
    mock.queue(Reply(fault=Fault.http(401)), Reply(text="numbers: 5"))
    await scheduler.fire_due()
    await ws.worker(concurrency=1).run(until_idle=True)  # in order: the replies are one queue
    failed = (await notices(ws, "dm:bot:you"))[-1]
    assert failed.startswith("bot failed (provider_auth)")
    shown = {v.schedule.name: v.last for v in await scheduler.overview() if v.last is not None}
    assert shown["check"].result == "failed" and shown["check"].error_code == "provider_auth"
    assert shown["post"].result == "completed"


async def test_a_schedule_that_cannot_fire_is_listed_invalid_and_never_fired(
    project: Path, opened: Any
) -> None:
    """An unknown agent, a placeholder the fire does not give: said once, as the schedule's
    state, never fired (each tick would only be skipped for it); run-now refuses it."""
    schedules(
        project,
        '[schedules.ghost]\nagent = "asistant"\nevery = "10s"\nmessage = "hi"\n'
        '[schedules.holes]\nagent = "bot"\nevery = "10s"\nmessage = "{{input.nothing}}"\n'
        '[schedules.ping]\nagent = "bot"\nevery = "10s"\nmessage = "ping"\n',
    )
    clock = Clock()
    _, scheduler = await opened(clock)
    assert scheduler.fired() == ["ping"]
    await scheduler.fire_due()
    clock.now = T0 + 10
    assert [f.schedule for f in await scheduler.fire_due()] == ["ping"]
    views = {v.schedule.name: v for v in await scheduler.overview()}
    assert views["ghost"].state == "invalid" and "no agent 'asistant'" in (
        views["ghost"].problem or ""
    )
    assert views["holes"].state == "invalid" and "input.nothing" in (views["holes"].problem or "")
    assert views["ping"].state == "active" and views["ping"].problem is None
    with pytest.raises(AgentRunnerError) as refused:
        await scheduler.run_now("ghost")
    assert refused.value.code is ErrorCode.INVALID_SPECIFICATION
    assert "cannot fire: no agent 'asistant'" in refused.value.message
