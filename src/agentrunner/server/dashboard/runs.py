"""``/ui/runs/{id}``: one run as a timeline — its steps and model attempts, its tool calls with
their arguments and results, its delegations, its answer — refreshed while it runs, with a
form to cancel it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from agentrunner.compose import Workspace
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.server.dashboard.forms import checked_form
from agentrunner.server.dashboard.money import money
from agentrunner.server.dashboard.run_view import RunView, load_run_view, unchanged
from agentrunner.server.dashboard.templating import page
from agentrunner.server.fields import Id
from agentrunner.store.records import RunRecord
from agentrunner.store.store import Store

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
async def run_page(request: Request, run_id: Id, cancel: str | None = None) -> Response:
    view = await load_run_view(_store(request), await _run(request, run_id))
    context = {"active": "", "view": view, "money": money, **_cancel_said(view, cancel)}
    return page(request, "run.html", context)


@router.get("/ui/runs/{run_id}/live")
async def run_live(
    request: Request, run_id: Id, version: str = "", cancel: str | None = None
) -> Response:
    """The part of the page that changes while the run goes on; 204 (htmx leaves the page as
    it is) when nothing has since ``version``."""
    store = _store(request)
    run = await _run(request, run_id)
    if version and await unchanged(store, run, version):
        return Response(status_code=204)
    view = await load_run_view(store, run)
    return page(request, "_run.html", {"view": view, "money": money, **_cancel_said(view, cancel)})


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
    return ws.runner.store


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
