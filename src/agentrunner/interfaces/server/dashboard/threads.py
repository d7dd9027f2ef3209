"""``/ui/threads``: agents' threads, most recently updated first, a page at a time (of one
agent's with ``?agent=``). ``/ui/threads/{id}``: a thread's messages a page at a time from its
newest end — read by number, so a thread of any length costs a page — each with its role, its
text, its tool calls and results folded, and the run that wrote it; the thread's runs; on a
person's message, "try again from here" (``POST /ui/threads/{id}/fork``): a fork of the thread
before it (``store/forks``), and the message, as edited, queued there."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from starlette.responses import RedirectResponse, Response

from agentrunner.core.inputs import check_id, invalid
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.interfaces.server.dashboard.forms import checked_form
from agentrunner.interfaces.server.dashboard.templating import page
from agentrunner.workspace.workspace import Workspace

__all__ = ["PAGE", "router"]

router = APIRouter()
PAGE = 50  # messages, or threads, a page shows
RUNS = 20  # the thread's newest runs listed
MAX_SEQ = 2**62  # database integers are 64-bit


@router.get("/ui/threads")
async def thread_list(
    request: Request,
    agent: str | None = None,
    before: float | None = Query(default=None, ge=0, description="updated_at of the last seen"),
) -> Response:
    ws: Workspace = request.app.state.workspace
    agent = agent or None  # the filter's "every agent" sends it empty
    if agent is not None:
        check_id(agent, "agent")
    rows = await ws.app.store.threads.list(agent_id=agent, before=before, limit=PAGE + 1)
    context = {
        "active": "threads",
        "threads": rows[:PAGE],
        "agent": agent,
        "agents": ws.app.agents.ids(),
        "older": rows[PAGE - 1].updated_at if len(rows) > PAGE else None,
        "paged": before is not None,
    }
    return page(request, "threads.html", context)


@router.get("/ui/threads/{thread_id}")
async def thread_page(
    request: Request,
    thread_id: str,
    before: int | None = Query(default=None, ge=1, le=MAX_SEQ),
    after: int | None = Query(default=None, ge=0, le=MAX_SEQ),
) -> Response:
    """The newest page of messages, or the page ``before`` or ``after`` a message number."""
    ws: Workspace = request.app.state.workspace
    store = ws.app.store
    thread = await store.threads.get(check_id(thread_id, "thread"))
    if thread is None:
        raise AgentRunnerError(
            ErrorCode.NOT_FOUND,
            f"no thread '{thread_id}'",
            hint="See the threads there are on /ui/threads.",
            details={"not_found": "thread"},
        )
    if before is not None and after is not None:
        raise invalid("before", "and after cannot both be given", "Page one way at a time.")
    if after is not None:
        rows = await store.messages.page(thread.id, after=after, limit=PAGE + 1)
        newer, rows = len(rows) > PAGE, rows[:PAGE]
        older = rows[0][0] > 1 if rows else after > 0
    else:
        rows = await store.messages.page_before(thread.id, before or MAX_SEQ, PAGE + 1)
        older, rows = len(rows) > PAGE, rows[-PAGE:]
        newer = before is not None
    summary = await store.threads.summary(thread.id) if thread.summary_through else None
    context: dict[str, Any] = {
        "active": "threads",
        "thread": thread,
        "summary": summary,
        "messages": rows,
        "older": rows[0][0] if older and rows else None,
        "newer": rows[-1][0] if newer and rows else None,
        "runs": await store.runs.list(thread_id=thread.id, limit=RUNS),
        "runs_shown": RUNS,
    }
    return page(request, "thread.html", context)


@router.post("/ui/threads/{thread_id}/fork")
async def try_again(request: Request, thread_id: str) -> Response:
    """A fork of the thread with its first ``at`` messages and, with ``message``, a run of its
    agent queued there with that message and the input of the run that sent the one it
    replaces (a worker runs it); 303 to the fork's page. The thread is left as it is."""
    form = await checked_form(request)
    ws: Workspace = request.app.state.workspace
    store = ws.app.store
    given = str(form.get("at") or "")
    if not given.isdigit():
        raise invalid("at", "is not a message number", "Use the page's own form.")
    at = int(given)
    cut = await store.forks.fork(check_id(thread_id, "thread"), at)
    message = str(form.get("message") or "")
    if message.strip():
        replaced = await store.messages.page(thread_id, after=cut.at, limit=1)
        run_id = replaced[0][2] if replaced else None
        earlier = await store.runs.get(run_id) if run_id else None
        values = (earlier.request or {}).get("input") if earlier else None
        await ws.runs.queue(cut.thread.agent_id, cut.thread.id, message, input=values)
    return RedirectResponse(f"/ui/threads/{quote(cut.thread.id, safe='')}", status_code=303)
