"""``/ui/schedules``: the project's schedules — each one's agent, when it fires, where its runs
go, its state, its next tick and its newest fire (with its run), with *Pause* or *Resume* and
*Run now* — and ``/ui/schedules/{name}``, one schedule's recent fires. Both live: a fire, a
pause or a resume in any process shows at once (``feeds.ScheduleFeed``'s commits), and what
came of a fire's run within a few seconds. Every rule is the ``Scheduler``'s
(docs/schedules.md); a form only calls it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from sse_starlette.sse import EventSourceResponse
from starlette.responses import RedirectResponse, Response

from agentrunner.interfaces.server.dashboard.auth import safe_next
from agentrunner.interfaces.server.dashboard.forms import checked_form
from agentrunner.interfaces.server.dashboard.live import Look, Renderer, live_stream
from agentrunner.interfaces.server.dashboard.templating import page
from agentrunner.interfaces.server.fields import Id
from agentrunner.store.schedules import to_ms
from agentrunner.workspace.feeds import ScheduleFeed
from agentrunner.workspace.project_schedules import ScheduleView
from agentrunner.workspace.workspace import Workspace

__all__ = ["router"]

router = APIRouter()

PAGE = "/ui/schedules"
FIRES_SHOWN = 50  # a schedule's page: its newest fires
# While nothing wakes a page's stream, it reads the schedules again at every this many fallback
# timers (``store/changes``): what became of a fire's run commits no word to the schedules.
QUIET_LOOKS = 2
# What a form did, as the page it returns to says it.
DONE = {
    "paused": "{name} is paused: its ticks pass by, in every process, until it is resumed.",
    "resumed": "{name} is resumed: it fires from its next tick (the ticks that passed while it "
    "was paused do not fire).",
}


@router.get(PAGE)
async def schedules_page(
    request: Request,
    paused: str | None = None,
    resumed: str | None = None,
    fired: str | None = None,
    tick: int | None = None,
) -> Response:
    """Every schedule; ``paused``, ``resumed``, ``fired`` (and ``tick``): what a form sent from
    it came to."""
    ws = _ws(request)
    views = await ws.schedules.overview()
    context = {
        "active": "schedules",
        **_table(views),
        "said": await _said(ws, paused, resumed, fired, tick),
    }
    return page(request, "schedules.html", context)


@router.get(PAGE + "/stream")
async def schedules_stream(request: Request, version: str = "") -> EventSourceResponse:
    """The table as a ``schedules`` event whenever what it shows differs from ``version`` (at
    once if it already does). It never ends."""
    ws = _ws(request)

    async def table() -> tuple[str, dict[str, Any]]:
        return "_schedules.html", _table(await ws.schedules.overview())

    return _follow(request, "schedules", version, table)


@router.get(PAGE + "/{name}")
async def schedule_page(
    request: Request,
    name: Id,
    paused: str | None = None,
    resumed: str | None = None,
    fired: str | None = None,
    tick: int | None = None,
    limit: int = Query(default=FIRES_SHOWN, ge=1, le=500),
) -> Response:
    """One schedule and its newest ``limit`` fires (404 for no such schedule, naming them)."""
    ws = _ws(request)
    context = {
        "active": "schedules",
        **await _schedule(ws, name, limit),
        "said": await _said(ws, paused, resumed, fired, tick),
    }
    return page(request, "schedule.html", context)


@router.get(PAGE + "/{name}/stream")
async def schedule_stream(
    request: Request,
    name: Id,
    version: str = "",
    limit: int = Query(default=FIRES_SHOWN, ge=1, le=500),
) -> EventSourceResponse:
    """The schedule's part of its page as a ``schedule`` event whenever it differs from
    ``version``. It never ends."""
    ws = _ws(request)
    ws.schedules.get(name)  # an unknown schedule: 404, not a stream

    async def part() -> tuple[str, dict[str, Any]]:
        return "_schedule.html", await _schedule(ws, name, limit)

    return _follow(request, "schedule", version, part)


@router.post(PAGE + "/{name}/pause")
async def pause(request: Request, name: Id) -> Response:
    form = await checked_form(request)
    await _ws(request).schedules.pause(name)
    return _back(form.get("back"), {"paused": name})


@router.post(PAGE + "/{name}/resume")
async def resume(request: Request, name: Id) -> Response:
    form = await checked_form(request)
    await _ws(request).schedules.resume(name)
    return _back(form.get("back"), {"resumed": name})


@router.post(PAGE + "/{name}/run")
async def run_now(request: Request, name: Id) -> Response:
    """*Run now*: the page it returns to says what came of the fire (queued, or skipped and
    why)."""
    form = await checked_form(request)
    fire = await _ws(request).schedules.run_now(name)
    return _back(form.get("back"), {"fired": name, "tick": to_ms(fire.tick)})


def _back(back: Any, said: dict[str, str | int]) -> Response:
    """Back to the page a form was sent from (a path of this site), saying what it did."""
    target = safe_next(str(back or PAGE))
    where = "&" if "?" in target else "?"
    return RedirectResponse(f"{target}{where}{urlencode(said)}", status_code=303)


def _follow(
    request: Request,
    event: str,
    version: str,
    part: Callable[[], Awaitable[tuple[str, dict[str, Any]]]],
) -> EventSourceResponse:
    """A page's stream: ``part`` (a template and its context) sent as ``event`` when its
    ``version`` differs from what the page shows; looked at when a commit names the schedules,
    and every ``QUIET_LOOKS`` fallback timers."""
    shown = version
    quiet = 0  # fallback timers passed since the last wake-up

    async def look(woken: bool, render: Renderer) -> Look:
        nonlocal shown, quiet
        quiet = 0 if woken else quiet + 1
        if not woken and quiet % QUIET_LOOKS:
            return Look(None, False)
        template, context = await part()
        if context["version"] == shown:
            return Look(None, False)
        shown = context["version"]
        return Look(render(template, context), False)

    return live_stream(request, ScheduleFeed(_ws(request).app.store), event, look)


def _table(views: list[ScheduleView]) -> dict[str, Any]:
    """The table's context: each schedule as the API gives it, and its version."""
    rows = [view.to_dict() for view in views]
    return {"schedules": rows, "version": _version(rows)}


async def _schedule(ws: Workspace, name: str, limit: int) -> dict[str, Any]:
    """One schedule's part: its view and its newest ``limit`` fires, and their version."""
    fires = [fire.to_dict() for fire in await ws.schedules.fires(name, limit=limit)]
    view = (await ws.schedules.view(name)).to_dict()
    return {"schedule": view, "fires": fires, "limit": limit, "version": _version([view, fires])}


def _version(shown: Any) -> str:
    """What a part shows, in short: it is sent again only when this differs."""
    return hashlib.sha256(json.dumps(shown, sort_keys=True).encode()).hexdigest()[:16]


async def _said(
    ws: Workspace,
    paused: str | None,
    resumed: str | None,
    fired: str | None,
    tick: int | None,
) -> dict[str, Any] | None:
    """What a page says of a form it was sent back with, from the schedules as they are (never
    text from the address): a pause, a resume, or a run-now's fire and what came of it."""
    for done, name, state in (("paused", paused, "paused"), ("resumed", resumed, "active")):
        if name and name in ws.schedules.schedules:  # said while it is so
            is_so = (await ws.schedules.view(name)).state == state
            return {"text": DONE[done].format(name=name)} if is_so else None
    if not fired or fired not in ws.schedules.schedules or tick is None:
        return None
    found = [f for f in await ws.schedules.fires(fired, limit=FIRES_SHOWN) if to_ms(f.tick) == tick]
    return {"fire": found[0].to_dict()} if found else None


def _ws(request: Request) -> Workspace:
    ws: Workspace = request.app.state.workspace
    return ws
