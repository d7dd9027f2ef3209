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
one skipped fire (and the on-time tick runs), ``"once"`` queues one run for them all (the
on-time tick's, when there is one). A fire is skipped, with its reason,
when its agent is disabled, when a daily budget cannot pay for the agent's smallest request,
and under ``overlap = "skip"`` while the previous fire's run has not ended. A clock set back
finds no tick past the cursor, so nothing fires twice; a schedule paused passes its ticks by.

Scheduled runs are ``background`` (seed 000): the prompt says nobody is watching, and what they
have for people goes where the schedule posts, or to the person's DM with the agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from agentrunner.agents.templating import Template
from agentrunner.config.schedules import Schedule
from agentrunner.core.ids import new_id
from agentrunner.core.ticks import zone
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.run.spend import preflight
from agentrunner.store.channels import ChannelMessage
from agentrunner.store.drivers import GuardRefused, Op
from agentrunner.store.mailbox import NewRun
from agentrunner.store.schedules import Fire, ScheduleState, to_ms
from agentrunner.workspace.project_schedules import (
    ScheduleView,
    project_schedules,
    schedule_problems,
    schedule_views,
)
from agentrunner.workspace.queueing import queue_runs

if TYPE_CHECKING:
    from agentrunner.run.runner import AgentRunner
    from agentrunner.workspace.channels import ChannelService

__all__ = ["Scheduler"]

log = logging.getLogger("agentrunner.schedules")

LATE_S = 60.0  # a tick older than this (or than its period) when first looked at was missed


@dataclass(slots=True)
class _Decision:
    """What one pass decided for one schedule at ``now`` (its clock): the operations and runs
    of one transaction."""

    now: float
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
        self.schedules = project_schedules(self.app.config, self.app.agents)
        self.problems = schedule_problems(self.app.config, self.app.agents, self.schedules)
        self._started: set[str] = set()

    # -- firing ----------------------------------------------------------------------------

    async def serve(self, stopping: asyncio.Event) -> None:
        """Fire ticks as they come until ``stopping`` is set: a worker's and a server's. A pass
        that fails (the database gone a while) is logged and tried again."""
        active = list(self._active().values())
        if not active:
            return
        failing = False
        while not stopping.is_set():
            try:
                await self.fire_due()
                failing = False
            except Exception as exc:  # said once until it works again: an outage is long
                if not failing:
                    log.warning("firing schedules failed (%s); trying again", exc)
                failing = True
            now = self.clock()
            upcoming = [t for s in active if (t := s.ticks.after(now)) is not None]
            wait = min([*(t - now for t in upcoming), self.poll_s])
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), max(wait, 0.01))

    def fired(self) -> list[str]:
        """The names of the schedules this process fires."""
        return list(self._active())

    def _active(self) -> dict[str, Schedule]:
        """The schedules this process fires: enabled, and none that cannot fire."""
        return {n: s for n, s in self.schedules.items() if s.enabled and n not in self.problems}

    async def fire_due(self) -> list[Fire]:
        """One look at every schedule: the ticks due decided, each once across processes.
        Returns the fires this process wrote."""
        active = self._active()
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
        advance = self.store.schedules.advance_op(schedule.name, state.cursor, latest)
        decision = _Decision(now, [advance])
        live = await self.store.schedules.live_run(schedule.name)
        if missed > 0 and schedule.missed == "skip":  # recorded, at the newest of them
            newest_missed = latest if not on_time else schedule.ticks.at_or_before(latest - 0.001)
            why = f'missed: {_ticks(missed)} passed while nothing ran (missed = "skip")'
            self._skip(decision, schedule, newest_missed or latest, why, missed)
        elif missed > 0:  # "once": one run for them all, the on-time tick's if there is one
            why = f'catching up {_ticks(missed)} that passed while nothing ran (missed = "once")'
            await self._fire(decision, schedule, latest, live, why, missed)
            return await self._commit(schedule, decision, now)
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
        try:
            run = await self._run(decision, schedule, tick)
        except AgentRunnerError as exc:  # its channel or thread is not there to take it
            self._skip(decision, schedule, tick, f"{exc.code}: {exc.message}", missed)
            return live
        decision.ops.append(
            self.store.schedules.fire_op(
                schedule.name,
                tick,
                "queued",
                reason=why,
                run_id=run.id,
                missed=missed,
                now=decision.now,
            )
        )
        decision.runs.append(run)
        decision.fires.append((tick, "queued", why, missed))
        return run.id

    def _skip(
        self, decision: _Decision, schedule: Schedule, tick: float, why: str, missed: int
    ) -> None:
        decision.ops.append(
            self.store.schedules.fire_op(
                schedule.name, tick, "skipped", reason=why, missed=missed, now=decision.now
            )
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
        thread = await self.store.threads.get(thread_id)
        if thread is not None and thread.agent_id != schedule.agent:
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"thread '{thread_id}' belongs to agent '{thread.agent_id}'",
                hint='Name a thread of its own, or thread = "new".',
            )
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
        ``enqueue`` span (telemetry on); nothing, when another process decided first (or, for
        a run-now, took its instant)."""
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
            except GuardRefused:  # another process decided these ticks (wrote these fires) first
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
            near = difflib.get_close_matches(name, list(self.schedules), n=1, cutoff=0.6)
            names = ", ".join(sorted(self.schedules)) or "none yet"
            raise AgentRunnerError(
                ErrorCode.NOT_FOUND,
                f"no schedule '{name}'" + (f" (did you mean '{near[0]}'?)" if near else ""),
                hint=f"The project's schedules: {names} (`agentrunner schedules`).",
                details={"not_found": "schedule"},
            )
        return found

    async def overview(self) -> list[ScheduleView]:
        """Every schedule, with its state, next tick, newest fire and counts."""
        return await schedule_views(self.store, self.schedules, self.clock(), self.problems)

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
        ``overlap``, which only ticks follow). ``invalid_specification`` for a schedule that
        cannot fire (its agent unknown, its message naming what it lacks)."""
        schedule = self.get(name)
        if name in self.problems:
            raise AgentRunnerError(
                ErrorCode.INVALID_SPECIFICATION,
                f"schedule '{name}' cannot fire: {self.problems[name]}",
                file=schedule.source,
                hint="See every problem with `agentrunner agents validate`.",
            )
        now = self.clock()
        at = to_ms(now)
        while True:  # each refusal is an instant taken by another fire: the next one is free
            at = _off_tick(schedule, at)
            decision = _Decision(now)
            await self._fire(decision, schedule, at / 1000, None, "run now, by request", 0)
            fires = await self._commit(schedule, decision, now)
            if fires:
                return fires[0]
            at += 1


def _off_tick(schedule: Schedule, at_ms: int) -> int:
    """``at_ms``, or the millisecond after it when a tick falls on it: fires are kept by their
    instant to the millisecond, so a run-now never takes the one its tick's fire will have."""
    tick = schedule.ticks.after(at_ms / 1000 - 0.001)
    return at_ms + 1 if tick is not None and to_ms(tick) == at_ms else at_ms


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
