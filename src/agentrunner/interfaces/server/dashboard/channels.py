"""``/ui/channels``: every channel and DM. ``/ui/channels/{name}`` (a DM by its name,
``dm:a:b``): the conversation a page at a time from its newest end, a form to post as a
person, and on the newest page what comes next as it comes — new messages and who is working —
over ``…/stream``, HTML fragments by server-sent events that tail the channel's feed as the
JSON API's stream does (resumed with ``Last-Event-ID``). ``…/thread/{id}``: a message and its
replies, with a form to reply."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Header, Request
from sse_starlette.sse import EventSourceResponse
from starlette.datastructures import FormData, UploadFile
from starlette.responses import RedirectResponse, Response

from agentrunner.core.inputs import check_id, invalid
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.interfaces.server.dashboard.forms import checked_form, is_htmx
from agentrunner.interfaces.server.dashboard.templating import fragment, page
from agentrunner.interfaces.server.responses import event_source
from agentrunner.interfaces.server.statuses import status_for
from agentrunner.run.attachment_entries import AttachmentEntry, attach_entries
from agentrunner.store.channels import Channel, ChannelActivityRow, ChannelMessage
from agentrunner.store.store import Store
from agentrunner.workspace.feeds import ChannelFeed, FeedPosition
from agentrunner.workspace.workspace import Workspace

__all__ = ["PAGE", "router"]

router = APIRouter()
PAGE = 50  # messages a page shows
_CURSORS = ("m_",)  # a page starts at a message


@router.get("/ui/channels")
async def channel_list(request: Request) -> Response:
    ws: Workspace = request.app.state.workspace
    channels = [(c, _path(c.name)) for c in await ws.app.store.channels.overview()]
    return page(request, "channels.html", {"active": "channels", "channels": channels})


@router.get("/ui/channels/{name}")
async def conversation(
    request: Request, name: str, before: str | None = None, after: str | None = None
) -> Response:
    """The newest page, or the page ``before`` or ``after`` a message."""
    ws: Workspace = request.app.state.workspace
    channel = await ws.channels.channel(name)
    read = ws.app.store.channels
    if before is not None and after is not None:
        raise invalid("before", "and after cannot both be given", "Page one way at a time.")
    # The newest end is live: its stream starts where the page's read of the feed ended, so it
    # gives exactly the messages and activity the page could not show.
    settled = 0
    if after is not None:
        rows, settled = await read.settled_page(channel.id, _cursor(after, "after"), PAGE + 1)
        newer, rows = len(rows) > PAGE, rows[:PAGE]
        older = True
    elif before is None:
        rows, settled = await read.settled_page(channel.id, None, PAGE + 1)
        older, rows, newer = len(rows) > PAGE, rows[-PAGE:], False
    else:
        rows = await read.page_before(channel.id, _cursor(before, "before"), PAGE + 1)
        older, rows, newer = len(rows) > PAGE, rows[-PAGE:], True
    members = await read.members(channel.id)
    live = not newer
    context = {
        "active": "channels",
        "channel": channel,
        "path": _path(channel.name),
        "members": members,
        "messages": rows,
        "replies": await read.reply_counts(channel.id, rows[0].id, rows[-1].id) if rows else {},
        "older": rows[0].id if older and rows else None,
        "newer": rows[-1].id if newer and rows else None,
        "live": live,
        "start": str(FeedPosition(settled)),
        "composer": _composer(ws, channel, members),
        # who is working now: the working region's "working" and "failed"
        **Activity(await _working_now(ws, channel, members)).context(),
    }
    return page(request, "channel.html", context)


@router.get("/ui/channels/{name}/thread/{message_id}")
async def message_thread(
    request: Request,
    name: str,
    message_id: str,
    before: str | None = None,
    after: str | None = None,
) -> Response:
    """A message and its replies: the newest page of them, or the page ``before`` or ``after``
    a reply."""
    ws: Workspace = request.app.state.workspace
    channel = await ws.channels.channel(name)
    read = ws.app.store.channels
    root = await read.message(channel.id, check_id(message_id, "message"))
    if root is None or root.thread_root_id is not None:
        raise AgentRunnerError(
            ErrorCode.NOT_FOUND,
            f"{channel.label} has no thread begun by message '{message_id}'",
            hint="Open the conversation and follow a message's replies from there.",
            details={"not_found": "message"},
        )
    if before is not None and after is not None:
        raise invalid("before", "and after cannot both be given", "Page one way at a time.")
    context = await _thread(ws, channel, root, before, after)
    return page(request, "channel_thread.html", context)


async def _thread(
    ws: Workspace,
    channel: Channel,
    root: ChannelMessage,
    before: str | None = None,
    after: str | None = None,
) -> dict[str, Any]:
    """What a thread's page shows: a page of replies from its newest end (or before or after
    a reply), as a conversation's page does."""
    read = ws.app.store.channels
    if after is not None:
        rows = await read.replies(channel.id, root.id, _cursor(after, "after"), PAGE + 1)
        newer, rows = len(rows) > PAGE, rows[:PAGE]
        older = True
    else:
        cursor = None if before is None else _cursor(before, "before")
        rows = await read.replies_before(channel.id, root.id, cursor, PAGE + 1)
        older, rows = len(rows) > PAGE, rows[-PAGE:]
        newer = before is not None
    members = await read.members(channel.id)
    return {
        "active": "channels",
        "channel": channel,
        "path": _path(channel.name),
        "root": root,
        "messages": rows,
        "older": rows[0].id if older and rows else None,
        "newer": rows[-1].id if newer and rows else None,
        "live": not newer,
        "composer": _composer(ws, channel, members, thread=root.id),
    }


@router.post("/ui/channels/{name}/messages")
async def post_message(request: Request, name: str) -> Response:
    """Post as a person, with the files chosen (each checked by ``runner.attach`` before
    anything is posted); without JavaScript, 303 back to the conversation (or the thread),
    which shows the message; with htmx, a fresh form (the page's stream brings the message,
    once), or in a thread the thread's newest replies with it. Bad input: an error page, or
    with htmx the form again with the error in it."""
    form = await checked_form(request)
    ws: Workspace = request.app.state.workspace
    channel = await ws.channels.channel(name)
    members = await ws.app.store.channels.members(channel.id)
    thread = str(form.get("thread") or "") or None
    composer = _composer(ws, channel, members, thread=thread)
    composer.sender = str(form.get("sender") or "").strip() or composer.sender
    composer.text = str(form.get("text") or "")
    chosen = await _chosen(form)
    composer.had_files = bool(chosen)
    try:
        if not composer.text.strip():
            raise invalid("text", "is empty", "Say something: the agents who hear it will reply.")
        entries = [AttachmentEntry(n, d, where=f"files.{i}") for i, (n, d) in enumerate(chosen)]
        files = await attach_entries(entries, ws.runner)
        posted = await ws.channels.post(
            channel, composer.sender, composer.text, thread_root=thread, attachments=files
        )
    except AgentRunnerError as exc:
        if not is_htmx(request):
            raise
        composer.error = exc
        response = page(request, "_composer.html", {"composer": composer}, status=status_for(exc))
        response.headers["x-composer-error"] = str(exc.code)
        # in a thread the form's answer is the thread's part: an error goes in the form only
        response.headers["hx-retarget"] = "#composer"
        response.headers["hx-reswap"] = "outerHTML"
        return response
    root = posted.message.thread_root_id  # a reply to a reply is in its root's thread
    if is_htmx(request) and root is not None:
        found = await ws.app.store.channels.message(channel.id, root)
        if found is not None:
            context = await _thread(ws, channel, found)
            context["composer"].sender = composer.sender
            return page(request, "_channel_thread.html", context)
    if is_htmx(request):
        composer.text = ""
        return page(request, "_composer.html", {"composer": composer})
    target = _path(channel.name) + (f"/thread/{quote(root, safe='')}" if root else "")
    return RedirectResponse(target, status_code=303)


@router.get("/ui/channels/{name}/stream")
async def stream(
    request: Request,
    name: str,
    after: str = "",
    last_event_id: str | None = Header(default=None),
) -> EventSourceResponse:
    """What comes after ``after`` — a position in the channel's feed, which the page that opens
    the stream gives it — or the ``Last-Event-ID`` a reconnecting browser sends: a ``message``
    event (an ``<li>`` for the message list) per message, and a ``working`` event (the working
    region's content) at the start and per activity event."""
    ws: Workspace = request.app.state.workspace
    channel = await ws.channels.channel(name)
    field = "Last-Event-ID" if last_event_id else "after"
    feed = ChannelFeed(ws.app.store, channel.id, last_event_id or after, field=field)
    await feed.start()  # a position the channel lacks is refused here, not in the stream
    return event_source(_tail(ws, channel, feed))


# -- what the pages and the stream share -----------------------------------------------------


@dataclass(slots=True)
class Composer:
    """The post form as it is shown: where it posts, as whom, in which thread, what it holds
    (kept when it was refused) and why it was refused."""

    action: str
    sender: str
    thread: str | None = None
    text: str = ""
    error: AgentRunnerError | None = None
    had_files: bool = False  # the refused post had files, which the form cannot keep


@dataclass(slots=True)
class Activity:
    """Who is working in a channel now (their runs, by id) and whose run failed since."""

    working: dict[str, str] = field(default_factory=dict)  # run id -> agent id
    failed: dict[str, tuple[str, str]] = field(default_factory=dict)  # agent -> (code, message)

    def apply(self, row: ChannelActivityRow) -> None:
        agent, run_id = str(row.payload.get("agent_id", "")), row.run_id
        if row.type == "agent.working":
            self.working[run_id] = agent
            self.failed.pop(agent, None)  # working again: the failure is behind it
        elif row.type == "agent.failed":
            code, message = row.payload.get("error_code", ""), row.payload.get("message", "")
            self.failed[agent] = (str(code), str(message))
        elif row.type == "agent.idle":
            self.working.pop(run_id, None)

    def context(self) -> dict[str, Any]:
        return {"working": sorted(set(self.working.values())), "failed": dict(self.failed)}


async def _tail(
    ws: Workspace, channel: Channel, feed: ChannelFeed
) -> AsyncGenerator[dict[str, Any], None]:
    store = ws.app.store
    activity = Activity(await _working_now(ws, channel, await store.channels.members(channel.id)))
    # no id: the browser's position stays where it was
    yield {"event": "working", "data": fragment("_working.html", activity.context())}
    path = _path(channel.name)
    async for position, item in feed.follow():
        if isinstance(item, ChannelMessage):
            html = fragment("_message.html", {"m": item, "path": path, "replies": {}})
            if item.thread_root_id is not None:  # its thread's first message: the link again
                html += await _replies_link(store, channel, item.thread_root_id, path)
            yield {"id": position, "event": "message", "data": html}
        else:
            activity.apply(item)
            html = fragment("_working.html", activity.context())
            yield {"id": position, "event": "working", "data": html}


async def _replies_link(store: Store, channel: Channel, root_id: str, path: str) -> str:
    """The link to a thread with as many replies as it has now, to take the place of the one
    its first message shows (out of band: htmx swaps it by its id, where it is on the page)."""
    replies = await store.channels.reply_counts(channel.id, root_id, root_id)
    root = {"id": root_id}
    return fragment("_replies.html", {"m": root, "path": path, "replies": replies, "oob": True})


async def _working_now(
    ws: Workspace, channel: Channel, members: list[tuple[str, str]]
) -> dict[str, str]:
    """The runs of the channel's agents under way in it now, by id (what the page shows before
    its stream says more)."""
    store = ws.app.store
    working: dict[str, str] = {}
    for member, kind in members:
        if kind != "agent":
            continue
        state = await store.agent_states.get(member)
        if state.status != "working" or state.current_run_id is None:
            continue
        run = await store.runs.get(state.current_run_id)
        if run is not None and run.channel_id == channel.id:
            working[run.id] = member
    return working


def _composer(
    ws: Workspace, channel: Channel, members: list[tuple[str, str]], *, thread: str | None = None
) -> Composer:
    """The form, as the project's person by default (in a DM: the person in it)."""
    people = [name for name, kind in members if kind == "person"]
    person = ws.app.config.person
    sender = people[0] if channel.kind == "dm" and people and person not in people else person
    return Composer(_path(channel.name) + "/messages", sender, thread)


async def _chosen(form: FormData) -> list[tuple[str, bytes]]:
    """The files the form's file input sent, each its name and bytes (a browser sends an
    empty part, with no name, when none was chosen); the form's spooled files closed."""
    try:
        given = [f for f in form.getlist("files") if isinstance(f, UploadFile)]
        return [(f.filename or "", await f.read()) for f in given if f.filename or f.size]
    finally:
        await form.close()


def _path(name: str) -> str:
    """A conversation's page (a DM's name, ``dm:a:b``, as it is)."""
    return "/ui/channels/" + quote(name, safe=":@")


def _cursor(value: str, name: str, prefixes: tuple[str, ...] = _CURSORS) -> str:
    check_id(value, name)
    if not value.startswith(prefixes):
        raise invalid(
            name,
            f"'{value}' is not a position in a conversation (an id beginning "
            + " or ".join(prefixes)
            + ")",
            "Follow the page's own links to page through a conversation.",
        )
    return value
