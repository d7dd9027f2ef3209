"""``/ui/runs/{id}``: one run as a timeline — its steps and model attempts, its tool calls with
their arguments and results, what it asked a person and the decisions, its delegations, its
answer — followed while it runs or waits (``live``), with a form to cancel it and, while it
waits, the forms that decide its requests (``approvals``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from sse_starlette.sse import EventSourceResponse
from starlette.responses import RedirectResponse, Response

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.interfaces.server.dashboard.approvals import decision_said
from agentrunner.interfaces.server.dashboard.forms import checked_form
from agentrunner.interfaces.server.dashboard.live import Look, Renderer, live_stream
from agentrunner.interfaces.server.dashboard.money import money
from agentrunner.interfaces.server.dashboard.run_view import (
    RunView,
    load_run_view,
    unchanged,
)
from agentrunner.interfaces.server.dashboard.templating import page
from agentrunner.interfaces.server.fields import Id
from agentrunner.store.records import RunRecord
from agentrunner.store.store import Store
from agentrunner.workspace.feeds import RunFeed
from agentrunner.workspace.workspace import Workspace

__all__ = ["router"]

router = APIRouter()

# What a cancel did (``Mailbox.cancel``), as the page then says it.
CANCEL_OUTCOMES = {
    "cancelled": "The run was cancelled before it started.",
    "requested": "Cancel requested: the run stops at its next step, or at once if it waits on "
    "a model.",
    "not_cancellable": "The run had already ended: nothing was cancelled.",
}


@router.get("/ui/runs/{run_id}")
async def run_page(
    request: Request,
    run_id: Id,
    cancel: str | None = None,
    decided: str | None = None,
    refused: str | None = None,
) -> Response:
    """The run; ``cancel``, ``decided``, ``refused``: what a form sent from it came to."""
    view = await load_run_view(_store(request), await _run(request, run_id))
    said = await decision_said(request.app.state.workspace, decided, refused)
    context = {
        "active": "",
        "view": view,
        "money": money,
        "decision_said": said,
        **_cancel_said(view, cancel),
    }
    return page(request, "run.html", context)


@router.get("/ui/runs/{run_id}/stream")
async def run_stream(
    request: Request, run_id: Id, version: str = "", cancel: str | None = None
) -> EventSourceResponse:
    """The part of the page that changes while the run goes on, as a ``run`` event whenever
    what it shows differs from ``version`` (at once if it already does), until the run ends
    (``end``): its events and its end wake it, in whichever process they are committed."""
    store = _store(request)
    await _run(request, run_id)  # an unknown run: 404, not a stream
    shown = version

    async def look(woken: bool, render: Renderer) -> Look:
        nonlocal shown
        run = await store.runs.get(run_id)
        if run is None:  # deleted meanwhile: nothing more to show
            return Look(None, True)
        if shown and await unchanged(store, run, shown):
            return Look(None, run.settled)
        view = await load_run_view(
            store, run
        )  # the run read first: a finished one's events are all there
        shown = view.version
        context = {"view": view, "money": money, **_cancel_said(view, cancel)}
        return Look(render("_run.html", context), view.finished)

    return live_stream(request, RunFeed(store, run_id), "run", look)


@router.post("/ui/runs/{run_id}/cancel")
async def cancel_run(request: Request, run_id: Id) -> Response:
    await checked_form(request)
    await _run(request, run_id)
    outcome = await _store(request).mailbox.cancel(run_id)
    return RedirectResponse(f"/ui/runs/{run_id}?cancel={outcome}", status_code=303)


def _cancel_said(view: RunView, cancel: str | None) -> dict[str, Any]:
    """What the page says of a cancel it was sent back with (``cancel`` in its address, which
    its refreshes keep): "requested" only while the run goes on — once it ends, its status
    says the rest."""
    if cancel == "requested" and view.finished:
        cancel = None
    return {"cancel": cancel or "", "cancel_said": CANCEL_OUTCOMES.get(cancel or "")}


def _store(request: Request) -> Store:
    ws: Workspace = request.app.state.workspace
    return ws.app.store


async def _run(request: Request, run_id: str) -> RunRecord:
    run = await _store(request).runs.get(run_id)
    if run is None:
        raise AgentRunnerError(
            ErrorCode.NOT_FOUND,
            f"no run '{run_id}'",
            hint="Runs are linked from the team page, threads and jobs; "
            "`agentrunner runs list` lists the recent ones.",
            details={"not_found": "run"},
        )
    return run
