"""``/ui/jobs``: the company's jobs (start, briefs, background briefs — runs on the session
threads), and ``/ui/jobs/{id}``: one job's log, live while it runs, with a form to stop it.
What ``agentrunner jobs``, ``logs`` and ``kill`` show and do (``company.jobs``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from sse_starlette.sse import EventSourceResponse
from starlette.responses import RedirectResponse, Response

from agentrunner.interfaces.server.dashboard.forms import checked_form
from agentrunner.interfaces.server.dashboard.job_log import LogLines
from agentrunner.interfaces.server.dashboard.live import Look, Renderer, live_stream
from agentrunner.interfaces.server.dashboard.money import money
from agentrunner.interfaces.server.dashboard.templating import page
from agentrunner.interfaces.server.fields import Id
from agentrunner.run.spend import run_spend
from agentrunner.store.records import EventRecord, RunRecord
from agentrunner.store.store import Store
from agentrunner.workspace.company.jobs import (
    Job,
    find_job,
    heal,
    kill,
    list_jobs,
    replay,
)
from agentrunner.workspace.company.session import active
from agentrunner.workspace.feeds import RunFeed, in_order
from agentrunner.workspace.workspace import Workspace

__all__ = ["router"]

router = APIRouter()

# While nothing wakes a job's stream, it reads the job again at every this many fallback
# timers (``store/changes``), unless a job was found dead sooner.
QUIET_LOOKS = 5

# What a stop did (``Killed.outcome``), as the job's page then says it.
STOP_OUTCOMES = {
    "cancelled": "Stopped: the job was cancelled before it started.",
    "requested": "Stopped: its process was asked to stop it, and its delegations.",
    "settled": "This job had already ended; it was left as it was.",
}


@router.get("/ui/jobs")
async def jobs_page(request: Request, limit: int = Query(default=50, ge=1, le=500)) -> Response:
    store = _store(request)
    listed = await list_jobs(store, limit=limit)  # stale ones healed first
    return page(
        request,
        "jobs.html",
        {
            "active": "jobs",
            "jobs": listed,
            "session": await active(store),
            "limit": limit,
            "money": money,
        },
    )


@router.get("/ui/jobs/{job_id}")
async def job_page(request: Request, job_id: Id, stopped: str | None = None) -> Response:
    store = _store(request)
    await heal(store)
    lines = LogLines()
    # The run as it was when its last event was read: a status read before the events, so
    # that a job seen ended has every event shown.
    run = await replay(store, (await find_job(store, job_id)).id, lines)
    context = await _job(store, run, lines)
    said = STOP_OUTCOMES.get(stopped or "")
    return page(request, "job.html", {"active": "jobs", "stop_said": said, **context})


@router.get("/ui/jobs/{job_id}/stream")
async def job_stream(request: Request, job_id: Id, version: str = "") -> EventSourceResponse:
    """The part of the page that changes while the job goes on, as a ``job`` event whenever
    what it shows differs from ``version`` (at once if it already does), until the job ends
    (``end``): the events of its runs and their ends wake it, in whichever process they are
    committed. Each event is read once (the job's ``RunFeed``); the log is the page's, from
    every event read so far, in the order they happened."""
    store = _store(request)
    job_id = (await find_job(store, job_id)).id  # an unknown job: 404, not a stream
    feed = RunFeed(store, job_id, delegations=True)
    events: list[EventRecord] = []
    shown = version
    quiet = 0  # fallback timers passed since the last wake-up

    async def look(woken: bool, render: Renderer) -> Look:
        nonlocal shown, quiet
        quiet = 0 if woken else quiet + 1
        # nothing committed for a while: its process may have died. The job is read again
        # only then, or every few timers (a lost wake-up), not every second
        if not woken and not await heal(store) and quiet % QUIET_LOOKS:
            return Look(None, False)
        new = await feed.read()  # the run first: once it has ended, these are its last
        run = feed.run
        if run is None:  # deleted meanwhile: nothing more to show
            return Look(None, True)
        events.extend(new)
        events.sort(key=in_order)
        lines = LogLines()
        for event in events:
            lines(event.type, event.payload)
        context = await _job(store, run, lines)
        finished = bool(context["finished"])
        if context["version"] == shown:
            return Look(None, finished)
        shown = context["version"]
        return Look(render("_job.html", context), finished)

    return live_stream(request, feed, "job", look)


@router.post("/ui/jobs/{job_id}/stop")
async def stop_job(request: Request, job_id: Id) -> Response:
    await checked_form(request)
    killed = await kill(_store(request), job_id)
    return RedirectResponse(f"/ui/jobs/{killed.job_id}?stopped={killed.outcome}", status_code=303)


def _store(request: Request) -> Store:
    ws: Workspace = request.app.state.workspace
    return ws.app.store


async def _job(store: Store, run: RunRecord, lines: LogLines) -> dict[str, Any]:
    """The job's part of its page: ``run`` as it was when the events of ``lines`` were read."""
    company = (run.request or {}).get("company")
    session_id = company.get("session") if isinstance(company, dict) else None
    return {
        "money": money,
        "job": Job(run, session_id),
        "lines": lines.lines,
        "cost": await run_spend(store, run, split=True),
        "finished": run.settled,
        "version": f"{run.status}.{len(lines.lines)}.{sum(len(line.text) for line in lines.lines)}",
    }
