"""``/schedules``: the project's schedules, their fires, pause, resume and run-now, and the fires
as a stream (docs/schedules.md, docs/http-api.md#schedules). Every rule is the ``Scheduler``'s
(``workspace/schedules``); the stream follows ``feeds.ScheduleFeed``."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any, Literal

from fastapi import APIRouter, Depends, Header, Query
from pydantic import BaseModel, Field
from sse_starlette.sse import EventSourceResponse

from agentrunner.interfaces.server.fields import Id
from agentrunner.interfaces.server.responses import event_source, event_stream, operation
from agentrunner.interfaces.server.routes import workspace
from agentrunner.workspace.feeds import ScheduleFeed
from agentrunner.workspace.workspace import Workspace

__all__ = ["FIRE_EVENT", "router"]

router = APIRouter()

FIRE_EVENT = "schedule.fire"  # the stream's one event type: a fire, as it is written


class Fire(BaseModel):
    """A tick decided: its run queued, or skipped with the reason."""

    schedule: str
    tick: float = Field(description="the tick it decided (a run-now's: when it was asked)")
    outcome: str = Field(
        description="`skipped`, or what became of its run: `queued` (waiting for a worker), "
        "`running`, `waiting`, `completed`, `failed`, `cancelled` (`deleted`: its run is gone)"
    )
    reason: str | None = Field(
        description="why it was skipped (led by a code: `agent_disabled`, `budget_exceeded`, "
        "`overlap`, `missed`…), or why a queued one is not a plain tick (a catch-up, a run-now)"
    )
    run_id: str | None = Field(description="the run it queued; null when skipped")
    missed: int = Field(description="ticks it stands for that passed while nothing ran")
    fired_at: float
    error_code: str | None = Field(description="its run's error code, once it failed")
    thread_id: str | None = Field(description="the thread its run is on")


class FireCounts(BaseModel):
    queued: int
    skipped: int


class Schedule(BaseModel):
    """A schedule as the project declares it, its state, its next tick and its newest fire."""

    name: str
    agent: str
    when: str = Field(description='in words: "every 30 s", "At 09:00 (Europe/Paris)"')
    cron: str | None
    every_s: float | None
    timezone: str
    target: str = Field(description="where its runs go: `#general`, `a new thread`, `thread X`")
    channel: str | None
    thread: str | None = Field(description='"new" or a thread\'s name; null when it posts')
    missed: Literal["skip", "once"]
    overlap: Literal["skip", "queue"]
    state: Literal["active", "paused", "disabled", "invalid"] = Field(
        description="`disabled`: `enabled = false` in the project; `invalid`: it cannot fire "
        "(its `problem`)"
    )
    problem: str | None = Field(
        description="what keeps it from firing (an unknown agent, a message naming what it "
        "lacks): `agentrunner agents validate` says where"
    )
    next_fire: float | None = Field(description="its next tick; null unless active")
    last_fire: Fire | None
    fires: FireCounts


class ScheduleList(BaseModel):
    schedules: list[Schedule]


class ScheduleDetail(Schedule):
    recent: list[Fire] = Field(description="its newest fires first (`limit` of them)")


@router.get(
    "/schedules/events",
    **event_stream(
        "stream_schedule_fires",
        f"every schedule's fires as `{FIRE_EVENT}` events, as they are written; never ends",
    ),
)
async def schedule_events(
    last_event_id: str | None = Header(default=None), ws: Workspace = Depends(workspace)
) -> EventSourceResponse:
    """Opened without `Last-Event-ID`, the stream gives the fires written from then on; with
    it, every fire after that one."""
    feed = ScheduleFeed(ws.app.store, last_event_id, field="Last-Event-ID")
    await feed.start()  # where it starts, settled before the client is answered
    return event_source(_tail(feed))


@router.get("/schedules", **operation("list_schedules", ScheduleList, tag="schedules"))
async def list_schedules(ws: Workspace = Depends(workspace)) -> dict[str, Any]:
    return {"schedules": [view.to_dict() for view in await ws.schedules.overview()]}


@router.get("/schedules/{name}", **operation("get_schedule", ScheduleDetail, tag="schedules"))
async def get_schedule(
    name: Id,
    limit: int = Query(default=20, ge=1, le=500, description="how many recent fires"),
    ws: Workspace = Depends(workspace),
) -> dict[str, Any]:
    fires = await ws.schedules.fires(name, limit=limit)
    view = await ws.schedules.view(name)
    return {**view.to_dict(), "recent": [fire.to_dict() for fire in fires]}


@router.post("/schedules/{name}/pause", **operation("pause_schedule", Schedule, tag="schedules"))
async def pause_schedule(name: Id, ws: Workspace = Depends(workspace)) -> dict[str, Any]:
    """Its ticks pass by without firing until it is resumed, in every process."""
    await ws.schedules.pause(name)
    return (await ws.schedules.view(name)).to_dict()


@router.post("/schedules/{name}/resume", **operation("resume_schedule", Schedule, tag="schedules"))
async def resume_schedule(name: Id, ws: Workspace = Depends(workspace)) -> dict[str, Any]:
    """It fires again from its next tick; the ticks that passed while it was paused do not."""
    await ws.schedules.resume(name)
    return (await ws.schedules.view(name)).to_dict()


@router.post(
    "/schedules/{name}/run",
    status_code=202,
    **operation("run_schedule_now", Fire, tag="schedules"),
)
async def run_schedule_now(name: Id, ws: Workspace = Depends(workspace)) -> dict[str, Any]:
    """Fire it once, now, whatever its ticks: the fire, its run queued (follow it on
    `/runs/{run_id}/events`) or, `outcome` `skipped`, nothing queued and the reason (its agent
    disabled, a daily budget spent). 202 either way: the fire is written, as a tick's is."""
    return (await ws.schedules.run_now(name)).to_dict()


async def _tail(feed: ScheduleFeed) -> AsyncGenerator[dict[str, Any], None]:
    async for position, fire in feed.follow():
        yield {"id": position, "event": FIRE_EVENT, "data": json.dumps(fire.to_dict())}
