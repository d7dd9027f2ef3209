"""A schedule's fire is written once, with its run, or not at all: the fires stored and the runs
queued are the same, whatever a person does between ticks (a resume after the clock went back,
a run-now at a tick's very instant)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentrunner.workspace.schedules import Scheduler
from agentrunner.workspace.workspace import Workspace
from tests.workspace.test_schedules import T0, Clock, opened, runs_of, schedules

__all__ = ["opened"]

PING = '[schedules.ping]\nagent = "bot"\nevery = "10s"\nmessage = "ping"\noverlap = "queue"\n'
RUN_NOW = "run now, by request"


async def stored_as_queued(ws: Workspace, scheduler: Scheduler) -> list[tuple[float, str | None]]:
    """Each fire stored (its tick and reason), after checking that the runs queued are exactly
    the stored fires' runs."""
    fires = await scheduler.fires("ping", limit=100)
    runs = await runs_of(ws, "bot")
    assert sorted(r["id"] for r in runs) == sorted(f.run_id or "" for f in fires)
    return sorted((f.tick, f.reason) for f in fires)


async def test_a_resume_after_the_clock_went_back_fires_nothing_twice(
    project: Path, opened: Any
) -> None:
    schedules(project, PING)
    clock = Clock()
    ws, scheduler = await opened(clock)
    await scheduler.fire_due()
    for n in (10, 20, 30):
        clock.now = T0 + n
        await scheduler.fire_due()
    clock.now = T0 + 5  # set back by 25 s, while a person pauses and resumes the schedule
    await scheduler.pause("ping")
    await scheduler.resume("ping")
    clock.now = T0 + 30  # forward again: ticks 10, 20 and 30 were decided before
    assert await scheduler.fire_due() == []
    clock.now = T0 + 40
    assert [f.tick for f in await scheduler.fire_due()] == [T0 + 40]
    assert [t for t, _ in await stored_as_queued(ws, scheduler)] == [
        T0 + n for n in (10, 20, 30, 40)
    ]
    # a resume with the clock ahead moves it on: the ticks that passed while paused are not run
    await scheduler.pause("ping")
    clock.now = T0 + 75
    await scheduler.resume("ping")
    assert await scheduler.fire_due() == []
    clock.now = T0 + 80
    assert [f.tick for f in await scheduler.fire_due()] == [T0 + 80]
    assert len(await stored_as_queued(ws, scheduler)) == 5


@pytest.mark.parametrize("tick_first", [True, False])
async def test_a_run_now_at_a_ticks_instant_is_a_fire_of_its_own(
    project: Path, opened: Any, tick_first: bool
) -> None:
    """Fires are kept by their instant to the millisecond: a run-now at a tick's instant (a
    fake clock's, or a real one's by chance), and a second one at the same instant, each take
    an instant of their own, and the tick still fires, before them or after."""
    schedules(project, PING)
    clock = Clock()
    ws, scheduler = await opened(clock)
    await scheduler.fire_due()
    clock.now = T0 + 10
    ticked = await scheduler.fire_due() if tick_first else []
    first = await scheduler.run_now("ping")
    second = await scheduler.run_now("ping")
    if not tick_first:
        ticked = await scheduler.fire_due()
    assert [(f.tick, f.reason) for f in ticked] == [(T0 + 10, None)]
    stored = await stored_as_queued(ws, scheduler)
    assert len(stored) == 3 and stored[0] == (T0 + 10, None)
    assert [reason for _, reason in stored[1:]] == [RUN_NOW, RUN_NOW]
    assert sorted(t for t, _ in stored[1:]) == sorted([first.tick, second.tick])
    assert T0 + 10 < first.tick < second.tick < T0 + 10.01  # the next free milliseconds
