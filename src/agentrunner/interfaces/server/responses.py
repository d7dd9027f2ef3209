"""What the REST routes answer, as pydantic models: the OpenAPI document's response bodies.

The models describe the JSON the library's own dicts make (``AgentSpec.summary``,
``Thread.to_dict``, ``RunRecord.to_dict``, ``thread_message_dict``…); the routes return those
dicts, which FastAPI checks against these models and writes in the models' field order (the
dicts' own); where a dict may leave a key out (an assistant message without tool calls), the
route serialises with ``response_model_exclude_unset`` so it stays out. The JSON is the same
as without the models, byte for byte (tests/server/test_responses.py).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, Field, WithJsonSchema
from sse_starlette.sse import EventSourceResponse

from agentrunner.interfaces.server.statuses import ErrorBody
from agentrunner.store import detach_reads

__all__ = [
    "Agent",
    "AgentList",
    "AttachmentRef",
    "Cancelled",
    "ChannelList",
    "ChannelMessagePage",
    "Costs",
    "DirectMessagePosted",
    "Health",
    "MessagePosted",
    "Run",
    "RunQueued",
    "Thread",
    "ThreadDetail",
    "ThreadMessagePage",
    "ThreadPage",
    "ThreadSummary",
    "event_source",
    "event_stream",
    "operation",
]

T = TypeVar("T")


def operation(
    operation_id: str,
    body: type[BaseModel],
    *,
    tag: str,
    errors: Mapping[int, str] | None = None,
) -> dict[str, Any]:
    """What the OpenAPI document says of a route: its id, stable (clients are generated from
    it), its tag, the model of the body it answers, and (``errors``) what an error status
    means for it, over the API's general description of that status."""
    declared: dict[str, Any] = {"operation_id": operation_id, "tags": [tag], "response_model": body}
    if errors:
        declared["responses"] = {
            status: {"model": ErrorBody, "description": description}
            for status, description in errors.items()
        }
    return declared


def event_stream(operation_id: str, description: str) -> dict[str, Any]:
    """The same for a server-sent event stream: ``text/event-stream``, described."""
    return {
        "operation_id": operation_id,
        "tags": ["events"],
        "response_class": EventSourceResponse,
        "responses": {
            200: {
                "description": description,
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            }
        },
    }


def event_source(events: AsyncGenerator[Any, None], *, ping: int = 15) -> EventSourceResponse:
    """The response of every server-sent event stream: ``events`` sent as they come, with a
    ping every ``ping`` seconds, its store reads detached (``store.detach_reads``), so a client
    that goes away in the middle of one leaves the database connection in the pool."""
    return EventSourceResponse(_detached(events), ping=ping)


async def _detached(events: AsyncGenerator[T, None]) -> AsyncIterator[T]:
    detach_reads()  # in the task that sends the stream (sse-starlette's own, one a response)
    async with aclosing(events):
        async for event in events:
            yield event


class Health(BaseModel):
    status: Literal["ok"]
    version: str


class Agent(BaseModel):
    """An agent as its file declares it."""

    id: str
    name: str
    description: str
    model: str | None
    fallback: list[str]
    tools: list[str]
    capabilities: list[str]
    reports_to: str | None
    enabled: bool


class AgentList(BaseModel):
    data: list[Agent]


class Thread(BaseModel):
    id: str
    agent_id: str
    title: str | None
    message_count: int
    summary_through: int = Field(
        description="the last message its summary covers (runs send the summary in their "
        "place); 0: never compacted"
    )
    forked_from: str | None = Field(description="the thread it was forked from; null: none")
    forked_at: int | None = Field(description="the last of that thread's messages it began with")
    created_at: float
    updated_at: float


class ThreadSummary(BaseModel):
    through_seq: int = Field(description="the last message it covers (messages are 1..n)")
    summary: str
    model: str = Field(description="the model that wrote it, `provider:model`")
    run_id: str = Field(description="the run that paid for it")
    requests: int
    cost_usd: float | None = Field(description="null: a price unknown")
    created_at: float


class ThreadDetail(Thread):
    summary: ThreadSummary | None = Field(description="the newest summary; null: none")


class ThreadPage(BaseModel):
    data: list[Thread]
    next_cursor: float | None = Field(description="the last thread's updated_at: the next page")


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str | None = Field(
        default=None, description="present when the model's arguments were not valid JSON"
    )
    item_id: str | None = Field(
        default=None, description="the provider's id of the item that carried the call"
    )


class Thinking(BaseModel):
    text: str
    provider: str
    signature: str | None
    redacted: str | None
    id: str | None = Field(default=None, description="the provider's id of the reasoning item")


class AttachmentRef(BaseModel):
    """A file a message carries, named (its bytes are kept in the store, once, by digest);
    the optional keys are left out when empty."""

    sha256: str = Field(description="the digest of its bytes, which names it")
    media_type: str = Field(
        description="read from its bytes: image/png, image/jpeg, image/gif, image/webp or "
        "application/pdf"
    )
    size: int = Field(description="bytes")
    name: str
    width: int | None = Field(default=None, description="an image's, in pixels")
    height: int | None = Field(default=None, description="an image's, in pixels")
    pages: int | None = Field(default=None, description="a PDF's")
    detail: str | None = Field(
        default=None, description="what OpenAI models are asked to see of it; absent: auto"
    )


_FILES = "its files (images and PDFs); left out when it has none"


class UserMessage(BaseModel):
    seq: int
    role: Literal["user"]
    content: str
    unsent: bool = Field(
        default=False,
        description="no model was sent it: its run ended before any model request (refused "
        "by a budget, say); later runs do not send it either. Left out when false",
    )
    attachments: list[AttachmentRef] = Field(default=[], description=_FILES)
    run_id: str | None
    created_at: float


class AssistantMessage(BaseModel):
    """What the model said; the optional keys are left out when empty."""

    seq: int
    role: Literal["assistant"]
    content: str
    tool_calls: list[ToolCall] = []
    thinking: list[Thinking] = []
    model: str | None = None
    provider: str | None = None
    interrupted: bool = Field(default=False, description="the turn stopped before it finished")
    text_id: str | None = Field(
        default=None, description="the provider's id of the item that carried the text"
    )
    phase: str | None = Field(
        default=None,
        description="what that item said the text is (`commentary` or `final_answer`: "
        "OpenAI's Responses API)",
    )
    run_id: str | None
    created_at: float


class ToolResultMessage(BaseModel):
    seq: int
    role: Literal["tool"]
    call_id: str
    name: str
    content: str
    is_error: bool
    attachments: list[AttachmentRef] = Field(
        default=[], description="the files its tool returned; left out when none"
    )
    run_id: str | None
    created_at: float


ThreadMessage = Annotated[
    UserMessage | AssistantMessage | ToolResultMessage, Field(discriminator="role")
]


class ThreadMessagePage(BaseModel):
    data: list[ThreadMessage]
    next_cursor: int | None = Field(description="the last message's seq: the next page")


class RunQueued(BaseModel):
    run_id: str
    thread_id: str
    status: Literal["created"]


# A run's usage is passed on as stored (a model would put its keys in its own order, where
# PostgreSQL's jsonb keeps them in another); the schema says what it holds.
Usage = Annotated[
    dict[str, int | bool],
    WithJsonSchema(
        {
            "type": "object",
            "description": "tokens the run used; `estimated` (present only when true): "
            "agentrunner's estimate for a request cut off before the provider reported it; "
            "`reasoning_tokens` (present only when some): of `output_tokens`, the model's "
            "reasoning",
            "properties": {
                **{
                    key: {"type": "integer"}
                    for key in (
                        "input_tokens",
                        "output_tokens",
                        "cache_read_tokens",
                        "cache_write_tokens",
                        "requests",
                        "reasoning_tokens",
                    )
                },
                "estimated": {"type": "boolean"},
            },
        }
    ),
]


class RunError(BaseModel):
    code: str = Field(description="a code from the error taxonomy (docs/errors.md)")
    message: str


class Run(BaseModel):
    id: str
    agent_id: str
    thread_id: str | None
    status: Literal["created", "running", "waiting", "completed", "failed", "cancelled"] = Field(
        description="`waiting`: for a person's decision (`GET /approvals`)"
    )
    stop_reason: str | None
    model: str | None
    error: RunError | None
    usage: Usage | None
    cost_usd: float | None = Field(
        description="what it cost, its delegations included; while it runs, what their "
        "finished requests cost so far; null when a price was unknown"
    )
    created_at: float
    started_at: float | None
    completed_at: float | None
    trace_id: str | None = Field(
        description="its OpenTelemetry trace id (32 hex digits); null when telemetry was off"
    )
    attachments: list[AttachmentRef] = Field(
        default=[], description="the files its message was sent with; left out when none"
    )


class Cancelled(BaseModel):
    run_id: str
    cancel: Literal["cancelled", "requested", "not_cancellable"]


class Channel(BaseModel):
    id: str
    name: str
    kind: Literal["public", "private", "dm"]
    created_at: float
    members: int


class ChannelList(BaseModel):
    data: list[Channel]


class ChannelMessage(BaseModel):
    """A message as the channel keeps it; `attachments` is left out when it carries none."""

    id: str
    sender: str
    sender_kind: Literal["person", "agent", "notice", "schedule"] = Field(
        description="`schedule`: the message a schedule's fire posted (sender `schedule:NAME`)"
    )
    content: str
    thread: str | None = Field(description="the id of the thread's first message, if a reply")
    depth: int
    created_at: float
    attachments: list[AttachmentRef] = Field(default=[], description=_FILES)


class ChannelMessagePage(BaseModel):
    data: list[ChannelMessage]
    next_cursor: str | None = Field(description="the last message's id: the next page")


class MessagePosted(BaseModel):
    message: ChannelMessage
    run_ids: list[str] = Field(description="a run queued for each agent that should hear it")


class DirectMessagePosted(BaseModel):
    channel: str
    message: ChannelMessage
    run_ids: list[str]


class CostRow(BaseModel):
    agent_id: str
    model: str
    day: str
    requests: int
    input_tokens: int = Field(description="prompt-cache reads and writes included")
    output_tokens: int
    cache_read_tokens: int = Field(description="input tokens read from the prompt cache")
    cache_write_tokens: int = Field(description="input tokens written to the prompt cache")
    cost_micros: int
    unknown: int = Field(description="requests whose price was unknown (not in cost_micros)")
    cost_usd: float


class Costs(BaseModel):
    since: str
    data: list[CostRow]
