"""REST routes and server-sent event streams.

Event streams tail the stored events, so a stream works whichever process runs the run: each
reads what is new when a commit says it changed what it follows (``store/changes``), or after
its fallback timer. Each SSE event's ``id`` is its position: a run's sequence number
(``/runs``), ``<run id>/<seq>`` (``/threads``), or a position in the channel's feed
(``/channels``: ``<feed key>.<message or event id>``); reconnecting with ``Last-Event-ID``
resumes exactly after it. Each stream follows its feed (``feeds``: ``RunFeed``, ``ThreadFeed``,
``ChannelFeed``). Every stream's reads are detached from its client (``event_source``), so one
that leaves mid-read leaves the database connection in the pool.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.types import DecoratedCallable
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema
from sse_starlette.sse import EventSourceResponse

from agentrunner.agents.spec import BACKOFFS
from agentrunner.core.ids import new_id
from agentrunner.core.model_settings import ModelSettings
from agentrunner.engine.messages import Attachment
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.events import ChannelMessageEvent, RunEnd
from agentrunner.interfaces.server.attachment_fields import AttachmentIn, attachments_of
from agentrunner.interfaces.server.fields import Id, Input, Retry, Text
from agentrunner.interfaces.server.responses import (
    Agent,
    AgentList,
    Cancelled,
    ChannelList,
    ChannelMessagePage,
    Costs,
    DirectMessagePosted,
    MessagePosted,
    Run,
    RunQueued,
    Thread,
    ThreadDetail,
    ThreadMessagePage,
    ThreadPage,
    event_source,
    event_stream,
    operation,
)
from agentrunner.run.sessions import agent_thread
from agentrunner.run.spend import with_spend
from agentrunner.store.channels import Channel, ChannelMessage
from agentrunner.store.records import thread_message_dict
from agentrunner.workspace.feeds import ChannelFeed, RunFeed, ThreadFeed
from agentrunner.workspace.workspace import Workspace

__all__ = ["router", "workspace"]

router = APIRouter()
T = TypeVar("T")
MAX_INT = 2**62  # database integers are 64-bit


def workspace(request: Request) -> Workspace:
    ws: Workspace = request.app.state.workspace
    return ws


class ThreadCreate(BaseModel):
    agent_id: Id
    id: str | None = Field(default=None, min_length=1, max_length=200, pattern=r"^[\w.@:-]+$")


_SETTINGS_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {
            **ModelSettings.model_json_schema(),
            "title": "ModelSettings",
            "description": "the run's model settings, over the agent file's and [defaults]' "
            "(docs/agent-file.md#model-settings)",
        },
        {"type": "null"},
    ]
}

_RETRY_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {
            "type": "object",
            "title": "RetryPolicy",
            "description": "the run's retry policy in place of the agent file's retry: "
            "(docs/agent-file.md); a wrong one is 400 validation naming it, nothing queued",
            "properties": {
                "max": {"type": "integer", "minimum": 1},
                "backoff": {"enum": list(BACKOFFS)},
                "initial_delay_s": {"type": "number", "exclusiveMinimum": 0},
                "max_delay_s": {"type": "number", "exclusiveMinimum": 0},
            },
            "additionalProperties": False,
        },
        {"type": "null"},
    ]
}


class RunCreate(BaseModel):
    # A misspelt field is refused (422), not ignored: a `tool` meant as `tools` would run with
    # every tool, a `model_setings` without its settings.
    model_config = ConfigDict(extra="forbid")

    agent_id: Id
    message: Text = Field(min_length=1)
    input: Input = Field(
        default_factory=dict,
        description="values for the agent's {{input.x}} placeholders: at most 32 levels deep "
        "and 200,000 bytes as JSON",
    )
    # Checked by the library when the run is queued (its errors name a bad setting and the one
    # meant); the schema states what it accepts.
    model_settings: Annotated[dict[str, Any] | None, WithJsonSchema(_SETTINGS_SCHEMA)] = None
    attachments: list[AttachmentIn] = Field(
        default_factory=list,
        description="files sent with the message: images (PNG, JPEG, GIF, WebP) and PDFs, "
        "each checked before anything is queued (docs/attachments.md)",
    )
    tools: list[Id] | None = Field(
        default=None,
        description="the only tools of the agent's the run may use (absent: all of them); a "
        "tool the agent is not granted is refused by name (400 validation), nothing queued",
    )
    output_schema: dict[str, Any] | None = Field(
        default=None,
        description="a JSON Schema the run's answer must match, in place of the agent file's "
        "output_schema (400 validation for one that is no valid schema, nothing queued)",
    )
    # Checked by the library when the run is queued (a misspelt key named with the one meant);
    # the schema states what it accepts.
    retry: Annotated[dict[str, Any] | None, WithJsonSchema(_RETRY_SCHEMA)] = None


class PostMessage(BaseModel):
    text: Text = Field(min_length=1)
    sender: Id | None = Field(
        default=None,
        description="who is speaking: a person's name, never an agent's id (agents speak only "
        "from their runs); default: [defaults] person",
    )
    thread: Id | None = Field(default=None, description="reply in the thread of this message")
    attachments: list[AttachmentIn] = Field(
        default_factory=list,
        description="files sent with it to every agent it reaches: images (PNG, JPEG, GIF, "
        "WebP) and PDFs, each checked before anything is posted (docs/attachments.md)",
    )


def _not_found(what: str, key: str) -> AgentRunnerError:
    return AgentRunnerError(ErrorCode.NOT_FOUND, f"no {what} '{key}'", details={"not_found": what})


def _found(record: T | None, what: str, key: str) -> T:
    """``record``, or ``not_found`` naming the ``what`` that is not there."""
    if record is None:
        raise _not_found(what, key)
    return record


@router.get("/agents", **operation("list_agents", AgentList, tag="agents"))
async def list_agents(ws: Workspace = Depends(workspace)) -> dict[str, Any]:
    return {"data": [a.summary() for a in ws.app.agents]}


@router.get("/agents/{agent_id}", **operation("get_agent", Agent, tag="agents"))
async def get_agent(agent_id: Id, ws: Workspace = Depends(workspace)) -> dict[str, Any]:
    return ws.app.agents.get(agent_id).summary()


@router.post("/threads", status_code=201, **operation("create_thread", Thread, tag="threads"))
async def create_thread(body: ThreadCreate, ws: Workspace = Depends(workspace)) -> dict[str, Any]:
    ws.app.agents.get(body.agent_id)
    thread = await ws.app.store.threads.open(body.id or new_id(f"{body.agent_id}-"), body.agent_id)
    return thread.to_dict()


@router.get("/threads", **operation("list_threads", ThreadPage, tag="threads"))
async def list_threads(
    agent_id: Id | None = None,
    cursor: float | None = Query(default=None, description="updated_at of the last item seen"),
    limit: int = Query(default=50, ge=1, le=500),
    ws: Workspace = Depends(workspace),
) -> dict[str, Any]:
    threads = await ws.app.store.threads.list(agent_id=agent_id, before=cursor, limit=limit)
    return {
        "data": [t.to_dict() for t in threads],
        "next_cursor": threads[-1].updated_at if len(threads) == limit else None,
    }


@router.get("/threads/{thread_id}", **operation("get_thread", ThreadDetail, tag="threads"))
async def get_thread(thread_id: Id, ws: Workspace = Depends(workspace)) -> dict[str, Any]:
    store = ws.app.store
    thread = _found(await store.threads.get(thread_id), "thread", thread_id)
    summary = await store.threads.summary(thread.id) if thread.summary_through else None
    return {**thread.to_dict(), "summary": summary.to_dict() if summary else None}


@router.get(
    "/threads/{thread_id}/messages",
    # an assistant message's keys left out when empty stay out
    response_model_exclude_unset=True,
    **operation("list_thread_messages", ThreadMessagePage, tag="threads"),
)
async def thread_messages(
    thread_id: Id,
    cursor: int = Query(
        default=0, ge=0, le=MAX_INT, description="the seq of the last message seen"
    ),
    limit: int = Query(default=100, ge=1, le=1000),
    ws: Workspace = Depends(workspace),
) -> dict[str, Any]:
    page = await ws.app.store.messages.page(thread_id, after=cursor, limit=limit)
    data = [thread_message_dict(*entry) for entry in page]
    return {"data": data, "next_cursor": page[-1][0] if len(page) == limit else None}


@router.post(
    "/threads/{thread_id}/runs",
    status_code=202,
    **operation(
        "start_run",
        RunQueued,
        tag="runs",
        errors={
            404: "`agent_not_found`; `thread_not_found`: no such thread (`POST /threads` opens "
            "one), or it is another agent's"
        },
    ),
)
async def start_run(
    thread_id: Id, body: RunCreate, retry: Retry = Depends(), ws: Workspace = Depends(workspace)
) -> dict[str, Any]:
    """Queue a run of ``agent_id`` on its thread, which must exist (404 ``thread_not_found``
    otherwise: ``POST /threads`` opens one); a worker starts it. Follow it on
    ``/runs/{run_id}/events``. 429 when the agent's queue is full. Its ``attachments`` are
    checked before it is queued, once its agent and thread are known (422
    ``attachment_refused`` naming a file, and nothing is queued)."""
    files: list[Attachment] = []
    if body.attachments:  # what is cheap to refuse first: an unknown agent or thread, a 404
        ws.app.agents.runnable(body.agent_id)
        await agent_thread(ws.app.store, body.agent_id, thread_id, prefix=False)
        files = await attachments_of(body.attachments, ws.runner)
    queued = await ws.runs.queue(
        body.agent_id,
        thread_id,
        body.message,
        input=body.input,
        model_settings=body.model_settings,
        idempotency=retry.key(body),
        attachments=files,
        tools=body.tools,
        output_schema=body.output_schema,
        retry=body.retry,
    )
    retry.answered(queued.repeated)
    return {"run_id": queued.run_id, "thread_id": queued.thread_id, "status": "created"}


@router.get(
    "/runs/{run_id}",
    response_model_exclude_unset=True,  # `attachments` only for a run with files
    **operation("get_run", Run, tag="runs"),
)
async def get_run(run_id: Id, ws: Workspace = Depends(workspace)) -> dict[str, Any]:
    store = ws.app.store
    return (await with_spend(store, _found(await store.runs.get(run_id), "run", run_id))).to_dict()


@router.post("/runs/{run_id}/cancel", **operation("cancel_run", Cancelled, tag="runs"))
async def cancel_run(run_id: Id, ws: Workspace = Depends(workspace)) -> dict[str, Any]:
    if await ws.app.store.runs.get(run_id) is None:
        raise _not_found("run", run_id)
    return {"run_id": run_id, "cancel": await ws.app.store.mailbox.cancel(run_id)}


@router.get(
    "/runs/{run_id}/events",
    **event_stream("stream_run_events", "the run's events from `after`, ending with `run.end`"),
)
async def run_events(
    run_id: Id,
    after: int = Query(default=0, ge=0, le=MAX_INT),
    last_event_id: str | None = Header(default=None),
    ws: Workspace = Depends(workspace),
) -> EventSourceResponse:
    if await ws.app.store.runs.get(run_id) is None:
        raise _not_found("run", run_id)
    start = int(last_event_id) if last_event_id and last_event_id.isdigit() else after
    return event_source(_tail_run(RunFeed(ws.app.store, run_id, start)))


@router.get(
    "/threads/{thread_id}/events",
    **event_stream(
        "stream_thread_events", "the events of the thread's runs, as they come; never ends"
    ),
)
async def thread_events(
    thread_id: Id,
    last_event_id: str | None = Header(default=None),
    ws: Workspace = Depends(workspace),
) -> EventSourceResponse:
    if await ws.app.store.threads.get(thread_id) is None:
        raise _not_found("thread", thread_id)
    return event_source(_tail_thread(ThreadFeed(ws.app.store, thread_id, last_event_id or "")))


@router.get("/channels", **operation("list_channels", ChannelList, tag="channels"))
async def list_channels(ws: Workspace = Depends(workspace)) -> dict[str, Any]:
    return {"data": await ws.app.store.channels.all()}


def _channel_post(
    path: str, operation_id: str, answers: type[BaseModel]
) -> Callable[[DecoratedCallable], DecoratedCallable]:
    """The route of a post to a channel or a DM: 201, the message and the runs it queued (a
    message's keys left out when empty stay out)."""
    return router.post(
        path,
        status_code=201,
        response_model_exclude_unset=True,
        **operation(operation_id, answers, tag="channels"),
    )


@_channel_post("/channels/{name}/messages", "post_channel_message", MessagePosted)
async def post_message(
    name: Id, body: PostMessage, retry: Retry = Depends(), ws: Workspace = Depends(workspace)
) -> dict[str, Any]:
    """Post to a channel; a run is queued for each agent that should hear it (429 when one's
    queue is full: nothing is posted)."""
    channel = await ws.channels.channel(name)
    return await _post(ws, channel, body, retry, thread_root=body.thread)


@_channel_post("/dm/{agent_id}", "send_direct_message", DirectMessagePosted)
async def direct_message(
    agent_id: Id, body: PostMessage, retry: Retry = Depends(), ws: Workspace = Depends(workspace)
) -> dict[str, Any]:
    channel = await ws.channels.dm_channel(agent_id, body.sender)
    return {"channel": channel.name, **await _post(ws, channel, body, retry)}


async def _post(
    ws: Workspace,
    channel: Channel,
    body: PostMessage,
    retry: Retry,
    *,
    thread_root: str | None = None,
) -> dict[str, Any]:
    """Post ``body`` to ``channel``, with its files (each read and checked first, or found by
    its digest): the message and the runs it queued (the first post's, for a retry)."""
    files = await attachments_of(body.attachments, ws.runner) if body.attachments else []
    posted = await ws.channels.post(
        channel,
        body.sender,
        body.text,
        thread_root=thread_root,
        idempotency=retry.key(body),
        attachments=files,
    )
    retry.answered(posted.repeated)
    return {"message": _message(posted.message), "run_ids": posted.run_ids}


@router.get(
    "/channels/{name}/messages",
    response_model_exclude_unset=True,  # a message without files has no attachments key
    **operation("list_channel_messages", ChannelMessagePage, tag="channels"),
)
async def channel_messages(
    name: Id,
    cursor: Id | None = Query(default=None, description="the id of the last message seen"),
    limit: int = Query(default=100, ge=1, le=1000),
    ws: Workspace = Depends(workspace),
) -> dict[str, Any]:
    channel = await ws.channels.channel(name)
    messages = await ws.app.store.channels.after(channel.id, cursor or "", limit)
    return {
        "data": [_message(m) for m in messages],
        "next_cursor": messages[-1].id if len(messages) == limit else None,
    }


@router.get(
    "/channels/{name}/events",
    **event_stream(
        "stream_channel_events",
        "the channel's messages, as `channel.message` events, and who is working "
        "(`agent.working`, `agent.failed`, `agent.idle`); never ends",
    ),
)
async def channel_events(
    name: Id, last_event_id: str | None = Header(default=None), ws: Workspace = Depends(workspace)
) -> EventSourceResponse:
    """Opened without `Last-Event-ID`, the stream starts with the channel's newest 50 events;
    with it, it gives every event after that one."""
    channel = await ws.channels.channel(name)
    feed = ChannelFeed(ws.app.store, channel.id, last_event_id, field="Last-Event-ID")
    await feed.start()  # a position the channel lacks is refused here, not in the stream
    return event_source(_tail_channel(feed))


@router.get("/costs", **operation("get_costs", Costs, tag="costs"))
async def costs(
    days: int = Query(default=7, ge=1, le=366), ws: Workspace = Depends(workspace)
) -> dict[str, Any]:
    since = time.strftime("%Y-%m-%d", time.gmtime(time.time() - (days - 1) * 86400))
    rows = await ws.app.store.costs.summary(since=since)
    return {"since": since, "data": [{**r, "cost_usd": int(r["cost_micros"]) / 1e6} for r in rows]}


# -- streams ---------------------------------------------------------------------------------


async def _tail_run(feed: RunFeed) -> AsyncGenerator[dict[str, Any], None]:
    async for event in feed.follow():
        yield {"id": str(event.seq), "event": event.type, "data": json.dumps(event.payload)}
    end: RunEnd = {"run_id": feed.run_id, "status": feed.run.status if feed.run else None}
    yield {"event": "run.end", "data": json.dumps(end)}


async def _tail_thread(feed: ThreadFeed) -> AsyncGenerator[dict[str, Any], None]:
    async for position, event in feed.follow():
        data = {"run_id": event.run_id, **event.payload}
        yield {"id": position, "event": event.type, "data": json.dumps(data)}


async def _tail_channel(feed: ChannelFeed) -> AsyncGenerator[dict[str, Any], None]:
    async for position, item in feed.follow():
        if isinstance(item, ChannelMessage):
            yield {"id": position, "event": "channel.message", "data": json.dumps(_message(item))}
        else:
            yield {"id": position, "event": item.type, "data": json.dumps(item.payload)}


def _message(message: ChannelMessage) -> ChannelMessageEvent:
    said: ChannelMessageEvent = {
        "id": message.id,
        "sender": message.sender,
        "sender_kind": message.sender_kind,
        "content": message.content,
        "thread": message.thread_root_id,
        "depth": message.depth,
        "created_at": message.created_at,
    }
    if message.attachments:  # a text message's is what it always was
        said["attachments"] = [a.to_dict() for a in message.attachments]
    return said
