"""Agents that run on their own (docs/schedules.md): each tick of a schedule becomes one queued
run, however many workers and servers look at once (DESIGN decision 14).

Every process that serves mailboxes (``worker``, ``serve``) looks at the project's schedules as
their ticks come (``Scheduler.fire_due``). For a schedule whose newest tick is past its cursor,
the process decides that tick and those it missed, and writes what it decided — the fires,
their runs queued (a post in the channel first, for a schedule that posts) and the cursor moved
from where it found it — in one transaction; the cursor's move is guarded, so a process that
decided the same ticks from the same cursor has its whole batch refused and queues nothing. A
process that dies before its commit leaves the ticks undecided for the next one to look.

A tick is on time while it is the newest and no older than its schedule's period (a minute at
most); older ticks passed while nothing ran and follow ``missed``: ``"skip"`` records them as
one skipped fire, ``"once"`` queues one run for them all. A fire is skipped, with its reason,
when its agent is disabled, when a daily budget cannot pay for the agent's smallest request,
and under ``overlap = "skip"`` while the previous fire's run has not ended. A clock set back
finds no tick past the cursor, so nothing fires twice; a schedule paused passes its ticks by.

Scheduled runs are ``background`` (seed 000): the prompt says nobody is watching, and what they
have for people goes where the schedule posts, or to the person's DM with the agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentrunner.agents.templating import Template
from agentrunner.config.schedules import Schedule
from agentrunner.core.ids import new_id
from agentrunner.core.ticks import zone
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.store.channels import ChannelMessage
from agentrunner.store.drivers import GuardRefused, Op
from agentrunner.store.mailbox import NewRun
from agentrunner.store.schedules import Fire, ScheduleState
from agentrunner.workspace.queueing import queue_runs

if TYPE_CHECKING:
    from agentrunner.run.app import App
    from agentrunner.run.runner import AgentRunner
    from agentrunner.workspace.channels import ChannelService

__all__ = ["FIRE_INPUTS", "ScheduleView", "Scheduler", "project_schedules"]

log = logging.getLogger("agentrunner.schedules")

LATE_S = 60.0  # a tick older than this (or than its period) when first looked at was missed
FIRE_INPUTS = ("schedule", "fire_time", "fire_date")  # what a message may name besides input


def project_schedules(app: App) -> dict[str, Schedule]:
    """The project's schedules by name: ``[schedules.NAME]`` and each agent file's own
    ``schedule:`` (named after its agent). A name written in both is refused at its line."""
    found = dict(app.config.schedules)
    for agent_id in app.agents.ids():
        own = app.agents.get(agent_id).schedule
        if own is None:
            continue
        if own.name in found:
            raise AgentRunnerError(
                ErrorCode.INVALID_SPECIFICATION,
                f"schedule '{own.name}' is written twice: in agentrunner.toml and as "
                f"{agent_id}'s own schedule:",
                file=own.source,
                hint="Rename [schedules." + own.name + "] or remove one of them.",
            )
        found[own.name] = own
    return found


def check_schedule(app: App, schedule: Schedule) -> list[str]:
    """What is wrong with ``schedule`` in this project, in words: an unknown agent, a channel
    not declared, a message naming an input it does not have."""
    problems = []
    if schedule.agent not in app.agents:
        problems.append(f"its agent '{schedule.agent}' has no file in agents/")
    for channel in (schedule.channel, schedule.notify):
        if channel is not None and channel not in app.config.channels:
            problems.append(f"#{channel} is not declared: add [channels.{channel}] members = […]")
    try:
        template = Template.parse(schedule.message, file=schedule.source)
    except AgentRunnerError as exc:
        return [*problems, exc.message]
    for placeholder in template.placeholders:
        key = placeholder.path[0] if placeholder.path else ""
        if not placeholder.optional and key not in schedule.input and key not in FIRE_INPUTS:
            problems.append(
                f"its message names {{{{{placeholder.dotted}}}}}, which neither its input nor "
                f"the fire ({', '.join(FIRE_INPUTS)}) gives"
            )
    return problems


@dataclass(frozen=True, slots=True)
class ScheduleView:
    """A schedule as ``schedules`` lists it: itself, whether it is paused, its next tick, its
    newest fire and how many it has queued and skipped."""

    schedule: Schedule
    paused: bool
    next_tick: float | None
    last: Fire | None
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def state(self) -> str:
        if not self.schedule.enabled:
            return "disabled"
        return "paused" if self.paused else "active"

    def to_dict(self) -> dict[str, Any]:
        s = self.schedule
        return {
            "name": s.name,
            "agent": s.agent,
            "when": s.ticks.describe(),
            "cron": s.ticks.cron,
            "every_s": s.ticks.every_s,
            "timezone": s.ticks.timezone,
            "target": s.target,
            "channel": s.channel,
            "thread": None if s.channel else s.thread,
            "missed": s.missed,
            "overlap": s.overlap,
            "state": self.state,
            "next_fire": self.next_tick if self.state == "active" else None,
            "last_fire": None if self.last is None else self.last.to_dict(),
            "fires": {
                "queued": self.counts.get("queued", 0),
                "skipped": self.counts.get("skipped", 0),
            },
        }


@dataclass(slots=True)
class _Decision:
    """What one pass decided for one schedule: the operations and runs of one transaction."""

    ops: list[Op] = field(default_factory=list)
    runs: list[NewRun] = field(default_factory=list)
    # each fire: its tick, outcome, reason and the missed ticks it stands for
    fires: list[tuple[float, str, str | None, int]] = field(default_factory=list)


class Scheduler:
    """The project's schedules fired from this process; ``clock`` says what the time is (a
    test's fake one; every process of a test reads the same)."""

    def __init__(
        self,
        runner: AgentRunner,
        channels: ChannelService,
        *,
        clock: Callable[[], float] = time.time,
        poll_s: float = 1.0,
    ) -> None:
        self.runner = runner
        self.app = runner.app
        self.store = runner.app.store
        self.channels = channels
        self.clock = clock
        self.poll_s = poll_s
        self.schedules = project_schedules(self.app)
        self._started: set[str] = set()

    # -- firing ----------------------------------------------------------------------------

    async def serve(self, stopping: asyncio.Event) -> None:
        """Fire ticks as they come until ``stopping`` is set: a worker's and a server's. A pass
        that fails (the database gone a while) is logged and tried again."""
        active = [s for s in self.schedules.values() if s.enabled]
        if not active:
            return
        while not stopping.is_set():
            try:
                await self.fire_due()
            except Exception as exc:
                log.warning("firing schedules failed (%s); trying again", exc)
            now = self.clock()
            upcoming = [t for s in active if (t := s.ticks.after(now)) is not None]
            wait = min([*(t - now for t in upcoming), self.poll_s])
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), max(wait, 0.01))

    async def fire_due(self) -> list[Fire]:
        """One look at every schedule: the ticks due decided, each once across processes.
        Returns the fires this process wrote."""
        active = {n: s for n, s in self.schedules.items() if s.enabled}
        if not active:
            return []
        now = self.clock()
        states = await self._states(active, now)
        written: list[Fire] = []
        for name, schedule in active.items():
            state = states.get(name)
            if state is None or state.paused:
                continue
            latest = schedule.ticks.at_or_before(now)
            if latest is None or latest <= state.cursor:
                continue  # nothing new (or the clock went back: nothing fires twice)
            written.extend(await self._decide(schedule, state, latest, now))
        return written

    async def _states(self, active: Mapping[str, Schedule], now: float) -> dict[str, ScheduleState]:
        states = await self.store.schedules.states()
        new = [(n, s.ticks.at_or_before(now) or now) for n, s in active.items() if n not in states]
        if new:  # seen for the first time: from now on
            await self.store.schedules.start(new)
            states = await self.store.schedules.states()
        return states

    async def _decide(
        self, schedule: Schedule, state: ScheduleState, latest: float, now: float
    ) -> list[Fire]:
        late = min(LATE_S, schedule.period_s or LATE_S)
        on_time = now - latest <= late
        count = schedule.ticks.count_between(state.cursor, latest)
        missed = count - (1 if on_time else 0)
        decision = _Decision([self.store.schedules.advance_op(schedule.name, state.cursor, latest)])
        live = await self.store.schedules.live_run(schedule.name)
        if missed > 0:
            newest_missed = latest if not on_time else schedule.ticks.at_or_before(latest - 0.001)
            tick = newest_missed if newest_missed is not None else latest
            if schedule.missed == "skip":
                why = f'missed: {_ticks(missed)} passed while nothing ran (missed = "skip")'
                self._skip(decision, schedule, tick, why, missed)
            else:
                why = (
                    f'catching up {_ticks(missed)} that passed while nothing ran (missed = "once")'
                )
                live = await self._fire(decision, schedule, tick, live, why, missed)
        if on_time:
            await self._fire(decision, schedule, latest, live, None, 0)
        return await self._commit(schedule, decision, now)

    async def _fire(
        self,
        decision: _Decision,
        schedule: Schedule,
        tick: float,
        live: str | None,
        why: str | None,
        missed: int,
    ) -> str | None:
        """A tick's run queued in ``decision``, or the tick skipped with its reason. Returns
        the run the next tick overlaps (``live``, or the one queued now)."""
        reason = await self._refusal(schedule, live)
        if reason is not None:
            self._skip(decision, schedule, tick, reason, missed)
            return live
        run = await self._run(decision, schedule, tick)
        decision.ops.append(
            self.store.schedules.fire_op(
                schedule.name, tick, "queued", reason=why, run_id=run.id, missed=missed
            )
        )
        decision.runs.append(run)
        decision.fires.append((tick, "queued", why, missed))
        return run.id

    def _skip(
        self, decision: _Decision, schedule: Schedule, tick: float, why: str, missed: int
    ) -> None:
        decision.ops.append(
            self.store.schedules.fire_op(schedule.name, tick, "skipped", reason=why, missed=missed)
        )
        decision.fires.append((tick, "skipped", why, missed))

    async def _refusal(self, schedule: Schedule, live: str | None) -> str | None:
        """Why this fire may not queue a run now, in words (``None``: it may)."""
        agent_id = schedule.agent
        if agent_id not in self.app.agents:
            return f"agent_not_found: no agent '{agent_id}'"
        if not self.app.agents.get(agent_id).enabled:
            return f"agent_disabled: agent '{agent_id}' is disabled (enabled: false)"
        if live is not None and schedule.overlap == "skip":
            return f'overlap: the previous fire\'s run {live} has not ended (overlap = "skip")'
        if self.app.config.budgets.daily:
            from agentrunner.run.spend import preflight

            try:
                await preflight(
                    self.store,
                    self.app.config.budgets,
                    agent_id,
                    floors=await self.runner.smallest_requests([agent_id]),
                )
            except AgentRunnerError as exc:
                if exc.code is not ErrorCode.BUDGET_EXCEEDED:
                    raise
                return f"budget_exceeded: {exc.message}"
        return None

    async def _run(self, decision: _Decision, schedule: Schedule, tick: float) -> NewRun:
        """The run a fire queues, and what it needs written with it: its thread, or its post."""
        message = _message(schedule, tick)
        run_id = new_id("run_")
        if schedule.channel is not None:
            channel = await self.channels.channel(schedule.channel)
            post = ChannelMessage(
                channel.id,
                new_id("m_"),
                None,
                f"schedule:{schedule.name}",
                "schedule",
                message,
                0,
                None,
                tick,
            )
            decision.ops.extend(self.store.channels.message_ops(post))
            return NewRun(
                run_id,
                schedule.agent,
                f"{schedule.agent}@{channel.name}",
                {
                    "kind": "channel",
                    "channel": channel.name,
                    "message_id": post.id,
                    "background": True,
                    "schedule": schedule.name,
                },
                trigger_message_id=post.id,
                channel_id=channel.id,
            )
        thread_id = new_id(f"{schedule.agent}-") if schedule.thread == "new" else schedule.thread
        decision.ops.append(self.store.threads.create_op(thread_id, schedule.agent))
        notify = await self._notify_channel(schedule)
        request = {
            "kind": "direct",
            "message": message,
            "input": dict(schedule.input),
            "background": True,
            "schedule": schedule.name,
            "notify_channel": notify,
        }
        return NewRun(run_id, schedule.agent, thread_id, request)

    async def _notify_channel(self, schedule: Schedule) -> str | None:
        """Where a run on a thread tells people what it has for them: the schedule's
        ``notify`` channel, else the person's DM with the agent."""
        if schedule.notify is not None:
            return (await self.channels.channel(schedule.notify)).id
        return (await self.channels.dm_channel(schedule.agent)).id

    async def _commit(self, schedule: Schedule, decision: _Decision, now: float) -> list[Fire]:
        """The decision written in one transaction, its runs queued in the trace of an
        ``enqueue`` span (telemetry on); nothing, when another process decided first."""
        tracing = self.app.engine.tracing
        run_ids = [run.id for run in decision.runs]
        decision.ops.append(self.store.schedules.changed())
        with tracing.enqueue(f"schedule {schedule.name}") as (span, carrier):
            try:
                if decision.runs:
                    await queue_runs(
                        self.store,
                        decision.runs,
                        result={},
                        with_ops=decision.ops,
                        trace_context=carrier,
                    )
                else:
                    await self.store.driver.batch(decision.ops)
            except GuardRefused:  # another process decided these ticks first
                tracing.enqueued(span, [schedule.agent], [], repeated=True)
                return []
            tracing.enqueued(span, [schedule.agent] * len(run_ids), run_ids, repeated=False)
            threads = {run.id: run.thread_id for run in decision.runs}
            fires = [  # as the store now says them: a queued fire's run waits for a worker
                Fire(
                    schedule.name,
                    tick,
                    outcome,
                    why,
                    run_id,
                    missed,
                    now,
                    run_status="created" if run_id else None,
                    thread_id=threads.get(run_id) if run_id else None,
                )
                for (tick, outcome, why, missed), run_id in zip(
                    decision.fires, _runs_of(decision), strict=True
                )
            ]
            for fire in fires:
                tracing.schedule_fired(
                    schedule=schedule.name,
                    agent_id=schedule.agent,
                    tick=fire.tick,
                    outcome=fire.outcome,
                    reason=fire.reason,
                    run_id=fire.run_id,
                    missed=fire.missed,
                )
                if fire.outcome == "skipped":
                    log.info("schedule %s skipped a tick: %s", schedule.name, fire.reason)
        return fires

    # -- managing ---------------------------------------------------------------------------

    def get(self, name: str) -> Schedule:
        """The schedule ``name``; ``not_found`` naming the project's schedules otherwise."""
        found = self.schedules.get(name)
        if found is None:
            names = ", ".join(sorted(self.schedules)) or "none yet"
            raise AgentRunnerError(
                ErrorCode.NOT_FOUND,
                f"no schedule '{name}'",
                hint=f"The project's schedules: {names} (`agentrunner schedules`).",
                details={"not_found": "schedule"},
            )
        return found

    async def overview(self) -> list[ScheduleView]:
        """Every schedule, with its state, next tick, newest fire and counts."""
        states = await self.store.schedules.states()
        last = await self.store.schedules.last()
        counts = await self.store.schedules.counts()
        now = self.clock()
        views = []
        for name, schedule in sorted(self.schedules.items()):
            state = states.get(name)
            views.append(
                ScheduleView(
                    schedule,
                    bool(state and state.paused),
                    schedule.ticks.after(now),
                    last.get(name),
                    counts.get(name, {}),
                )
            )
        return views

    async def view(self, name: str) -> ScheduleView:
        """One schedule as ``overview`` gives it (``not_found``, as ``get``, for none)."""
        self.get(name)
        return next(view for view in await self.overview() if view.schedule.name == name)

    async def fires(self, name: str, limit: int = 20) -> list[Fire]:
        self.get(name)
        return await self.store.schedules.recent(name, limit=limit)

    async def pause(self, name: str) -> None:
        schedule = self.get(name)
        await self.store.schedules.pause(name, schedule.ticks.at_or_before(self.clock()) or 0)

    async def resume(self, name: str) -> None:
        """From now on: the ticks that passed while it was paused are not run."""
        schedule = self.get(name)
        now = self.clock()
        await self.store.schedules.resume(name, schedule.ticks.at_or_before(now) or now)

    async def run_now(self, name: str) -> Fire:
        """Fire ``name`` once, now, whatever its ticks (a person's ``run-now``): its run
        queued, or the fire skipped for its reason (a disabled agent, a spent budget; never
        ``overlap``, which only ticks follow)."""
        schedule = self.get(name)
        now = self.clock()
        decision = _Decision()
        await self._fire(decision, schedule, now, None, "run now, by request", 0)
        fires = await self._commit(schedule, decision, now)
        return fires[0]


def _runs_of(decision: _Decision) -> list[str | None]:
    runs = iter(decision.runs)
    return [next(runs).id if fire[1] == "queued" else None for fire in decision.fires]


def _message(schedule: Schedule, tick: float) -> str:
    """The fire's message: the schedule's template over its input and the fire's time."""
    when = datetime.fromtimestamp(tick, zone(schedule.ticks.timezone))
    values = {
        **schedule.input,
        "schedule": schedule.name,
        "fire_time": when.isoformat(timespec="seconds"),
        "fire_date": when.date().isoformat(),
    }
    return Template.parse(schedule.message, file=schedule.source).render(values)


def _ticks(n: int) -> str:
    return f"{n} tick" if n == 1 else f"{n} ticks"
