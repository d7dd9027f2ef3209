"""``/ui/approvals``: what waits for a person's decision, in every run — each request's agent,
tool, arguments, run and time left, with a form to approve or deny it (with a reason) — live:
a request asked, decided or cancelled anywhere shows at once (``feeds.PendingFeed``). The same
form is on a waiting run's page. A decision is ``Waits.decide``'s (docs/approvals.md); one
that came second is said on the page it was sent from, naming the first, not an error page.
"""

from __future__ import annotations

import hashlib
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from sse_starlette.sse import EventSourceResponse
from starlette.responses import RedirectResponse, Response

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.interfaces.server.dashboard.auth import safe_next
from agentrunner.interfaces.server.dashboard.forms import checked_form
from agentrunner.interfaces.server.dashboard.live import Look, Renderer, live_stream
from agentrunner.interfaces.server.dashboard.templating import page
from agentrunner.interfaces.server.fields import Id
from agentrunner.store.approvals import ApprovalRecord
from agentrunner.workspace.feeds import PendingFeed
from agentrunner.workspace.workspace import Workspace

__all__ = ["decision_said", "router"]

router = APIRouter()

PAGE = "/ui/approvals"
MAX_REASON = 4000  # as the JSON API's
# While nothing wakes the list's stream, it reads the list again at every this many fallback
# timers (``store/changes``: a lost wake-up).
QUIET_LOOKS = 5


@router.get(PAGE)
async def approvals_page(
    request: Request, decided: str | None = None, refused: str | None = None
) -> Response:
    ws = _ws(request)
    pending = await ws.runner.waits.pending()  # expired ones denied first
    context = {
        "active": "approvals",
        "pending": pending,
        "version": version_of(pending),
        "said": await decision_said(ws, decided, refused),
    }
    return page(request, "approvals.html", context)


@router.get(PAGE + "/stream")
async def approvals_stream(request: Request, version: str = "") -> EventSourceResponse:
    """The list as an ``approvals`` event whenever what waits differs from ``version`` (at
    once if it already does): a request asked, decided, expired or cancelled, in whichever
    process. It never ends (``end`` is never sent)."""
    feed = PendingFeed(_ws(request).app.store)
    shown = version
    quiet = 0  # fallback timers passed since the last wake-up

    async def look(woken: bool, render: Renderer) -> Look:
        nonlocal shown, quiet
        quiet = 0 if woken else quiet + 1
        if not woken and quiet % QUIET_LOOKS:
            return Look(None, False)
        pending = await feed.read()
        now = version_of(pending)
        if now == shown:
            return Look(None, False)
        shown = now
        return Look(render("_approvals.html", {"pending": pending, "version": now}), False)

    return live_stream(request, feed, "approvals", look)


@router.post(PAGE + "/{approval_id}")
async def decide(request: Request, approval_id: Id) -> Response:
    """Approve or deny, as the project's person (``[defaults] person``); back to the page the
    form was on, which says what came of it."""
    form = await checked_form(request)
    decision = form.get("decision")
    if decision not in ("approve", "deny"):
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            "decision: must be approve or deny",
            hint="Use the Approve or Deny button of the request.",
        )
    reason = str(form.get("reason") or "").strip() or None
    if reason is not None and len(reason) > MAX_REASON:
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"reason: at most {MAX_REASON:,} characters ({len(reason):,} given)",
            hint="Say it in fewer words.",
        )
    back = safe_next(str(form.get("back") or PAGE))
    ws = _ws(request)
    key = "decided"
    try:
        decided = await ws.runner.waits.decide(
            approval_id, approve=decision == "approve", by=ws.app.config.person, reason=reason
        )
        approval_id = decided.record.id
    except AgentRunnerError as exc:
        if exc.code is not ErrorCode.APPROVAL_DECIDED:
            raise
        approval_id, key = (await ws.runner.waits.find(approval_id)).id, "refused"
    where = "&" if "?" in back else "?"
    return RedirectResponse(f"{back}{where}{urlencode({key: approval_id})}", status_code=303)


async def decision_said(ws: Workspace, decided: str | None, refused: str | None) -> str | None:
    """What a page says of a decision it was sent back with: the one made (``decided``), or
    why one came too late (``refused``, naming the first), from the request as it is now."""
    approval_id = decided or refused
    if not approval_id:
        return None
    try:
        record = await ws.runner.waits.find(approval_id)
    except AgentRunnerError:  # gone meanwhile: nothing to say of it
        return None
    what = f"{record.tool} for {record.agent_id}"
    if refused:
        return f"Not decided: {what} was {_decided_as(record)} first. The first decision stands."
    if record.status == "pending":  # not decided after all: nothing to say
        return None
    return f"{what}: {_decided_as(record)}."


def _decided_as(record: ApprovalRecord) -> str:
    match record.status:
        case "pending":
            return "left undecided, as its run no longer waits"
        case "expired":
            return "denied, as nobody decided in time"
        case "cancelled":
            return "cancelled with its run"
    reason = f" ({record.reason})" if record.reason else ""
    return f"{record.status} by {record.decided_by}{reason}"


def version_of(pending: list[ApprovalRecord]) -> str:
    """What the list shows, in short: the requests that wait (a request leaves it once
    decided; nothing else of one changes while it waits)."""
    return hashlib.sha256(" ".join(p.id for p in pending).encode()).hexdigest()[:16]


def _ws(request: Request) -> Workspace:
    ws: Workspace = request.app.state.workspace
    return ws
