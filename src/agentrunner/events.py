"""The events a run reports, one typed shape per kind: the source of ``docs/events.md``.

An event is a kind (``"agent.token"``, …; stable, a public protocol) and a JSON object. At run
time the object is a plain ``dict`` — events are made once per streamed token, and a
``TypedDict`` costs nothing over the dict (a slotted dataclass costs more to make, and about
seven times as much for ``orjson`` to write) — so the shapes here are what type-checking and
the documentation know of them.

Code that makes an event calls an ``Emit`` (its kind and its shape checked together); code that
receives events is an ``EventSink``, ``(kind, data)``, and reads one through ``typed``, which
pairs the kind with its shape so a ``match`` narrows both::

    match typed(kind, data):
        case ("agent.tool_call", call):
            print(call["name"])

Each field's description is its ``Annotated`` text; each kind's, its class docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, NotRequired, Protocol, TypedDict, cast, overload

__all__ = [
    "ACTIVITY",
    "DELTA_TEXT",
    "AgentFailed",
    "AgentFile",
    "AgentIdle",
    "AgentMemoryUpdated",
    "AgentMessage",
    "AgentNoteShared",
    "AgentNotify",
    "AgentThinking",
    "AgentToken",
    "AgentToolCall",
    "AgentToolResult",
    "AgentWorking",
    "ApprovalDecided",
    "ApprovalRequested",
    "ChannelActivity",
    "ChannelMessageEvent",
    "CostUpdated",
    "Emit",
    "Event",
    "EventData",
    "EventSink",
    "FromChild",
    "ModelAttemptFailed",
    "ModelSettingDropped",
    "RunEnd",
    "StepStarted",
    "StreamEvent",
    "ThreadCompacted",
    "child_of",
    "from_child",
    "ignore",
    "typed",
]


class FromChild(TypedDict, total=False):
    """What a child run's events carry on their way to its caller's callbacks (not stored)."""

    from_agent: Annotated[str, "the agent that `ask_agent` asked, whose run this is"]
    depth: Annotated[int, "how deep in delegation that run is (1: asked by the top run)"]


class ThreadCompacted(FromChild):
    """the thread outgrew what its history may take (the model's context window, or
    `history_tokens` below it) and its older messages were summarized, before the run's first
    step (or by `agentrunner threads compact`); the summary is sent from then on in their place"""

    thread_id: Annotated[str, "the thread"]
    through_seq: Annotated[int, "the last message the summary covers (messages are numbered 1..n)"]
    messages: Annotated[int, "how many messages this compaction summarized"]
    model: Annotated[str, "the model that wrote the summary, `provider:model`"]
    requests: Annotated[int, "how many requests it took (a long backlog is summarized in parts)"]
    cost_micros: Annotated[int | None, "what they cost in micro-dollars; null: unknown"]
    bound: Annotated[
        Literal["context_window", "history_tokens", "asked"],
        "what the thread outgrew: the context window (what it leaves for history), "
        "`history_tokens` (the config's or the agent's `limits.history_tokens`); `asked`: "
        "`threads compact`",
    ]
    bound_tokens: Annotated[int | None, "the history's bound in tokens; null: `asked`"]


class StepStarted(FromChild):
    """before each model request (a step may take several attempts)"""

    step: Annotated[int, "the step's number in the run: 1, 2, …"]
    model: Annotated[str, "the chain's primary model, `provider:model`"]


class AgentThinking(FromChild):
    """a reasoning delta arrives (Anthropic thinking, OpenAI-compatible `reasoning_content`)"""

    text: Annotated[str, "the reasoning text of this delta"]
    model: Annotated[str, "the model thinking, `provider:model`"]


class AgentToken(FromChild):
    """a text delta arrives (non-streaming requests: once, with the whole text)"""

    token: Annotated[str, "the text of this delta"]
    model: Annotated[str, "the model answering, `provider:model`"]


class CostUpdated(FromChild):
    """after every model attempt that reached a provider — failed ones too (with zero tokens, or
    an estimate if it failed after streaming), and a request an abort cut off"""

    model: Annotated[str, "`provider:model` of *this* attempt"]
    attempt: Annotated[
        int,
        "the attempt's number among those the run made: 1, 2, … (a model skipped is not counted)",
    ]
    outcome: Annotated[str, "`ok`, `error` or `cancelled`"]
    input_tokens: Annotated[int, "input tokens billed"]
    output_tokens: Annotated[int, "output tokens billed"]
    cache_read_tokens: Annotated[int, "input tokens read from the provider's cache"]
    cache_write_tokens: Annotated[int, "input tokens written to the provider's cache"]
    cost_micros: Annotated[int | None, "what the attempt cost in micro-dollars; null: unknown"]
    cost_known: Annotated[bool, "whether `cost_micros` is known"]
    estimated: Annotated[bool, "true: agentrunner's estimate, the provider reported none"]
    cumulative_cost_micros: Annotated[int, "the whole run so far, child runs included"]


class ModelAttemptFailed(FromChild):
    """an attempt failed; the chain may retry or fail over next"""

    model: Annotated[str, "`provider:model` of the attempt"]
    attempt: Annotated[int, "the attempt's number in the run's fallback chain"]
    error_code: Annotated[str, "its code from the error taxonomy (docs/errors.md)"]
    status: Annotated[int | None, "the provider's HTTP status; null: no response"]
    duration_ms: Annotated[float, "how long the attempt took"]
    message: Annotated[str, "what went wrong, in words"]
    failover: Annotated[
        bool,
        "true: the chain may try again (rate limit, overload, timeout, 5xx); "
        "false: it never does (a bad request, a rejected key) and the run fails with it",
    ]


class ModelSettingDropped(FromChild):
    """a model setting was left out of the requests to a provider that cannot take it (or not
    with the other settings, or under the output cap): once a run for each setting, before the
    first request without it"""

    setting: Annotated[str, "the setting, e.g. `seed`"]
    model: Annotated[str, "`provider:model` of the request it was left out of"]
    reason: Annotated[str, "why, in words"]


class AgentToolCall(FromChild):
    """the model asked for a tool call (before it runs)"""

    call_id: Annotated[str, "the call's id, stable: use it as an idempotency key"]
    name: Annotated[str, "the tool's name"]
    input: Annotated[dict[str, Any], "the call's arguments"]
    model: Annotated[str, "the model that asked, `provider:model`"]


class AgentToolResult(FromChild):
    """a tool call finished, or was answered with an error the model can correct"""

    call_id: Annotated[str, "the id of the call it answers"]
    name: Annotated[str, "the tool's name"]
    success: Annotated[bool, "the opposite of `is_error`"]
    is_error: Annotated[bool, "true: the model was sent an error to correct"]
    output_summary: Annotated[str, "the first 200 characters of `output`"]
    output: Annotated[str, "what the model was sent, all of it"]
    attachments: NotRequired[
        Annotated[
            list[dict[str, Any]],
            "the images and PDFs the tool returned, sent to the model with `output`: each its "
            "`sha256`, `media_type`, `size`, `name`, and `width` and `height` or `pages` "
            "(never its bytes); only when there are some",
        ]
    ]


class AgentMessage(FromChild):
    """the final answer of the turn"""

    text: Annotated[str, "the answer"]
    model: Annotated[str, "the model that gave it, `provider:model`"]


class AgentNotify(FromChild):
    """the `notify_user` tool: a notification for the person"""

    message: Annotated[str, "the notification"]


class AgentFile(FromChild):
    """the `send_file` tool: a file for the person"""

    path: Annotated[str, "the file's absolute path"]
    caption: Annotated[str | None, "what the agent said about it"]
    kind: Annotated[str, "the first half of its media type: `text`, `image`, `application`, …"]


class AgentNoteShared(FromChild):
    """the `note_share` tool: a note for the person"""

    slug: Annotated[str, "the note's slug"]
    title: Annotated[str, "the note's title"]
    body: Annotated[str, "the note's text"]
    message: Annotated[str | None, "what the agent said with it"]


class AgentMemoryUpdated(FromChild):
    """a memory tool changed a core memory block"""

    label: Annotated[str, "the block's label"]


class AgentWorking(FromChild):
    """a run began: the agent is working (a run's first event; a chat client shows "… is
    typing" until the run's `agent.idle`)"""

    agent_id: Annotated[str, "the agent working"]
    run_id: Annotated[str, "its run"]
    thread_id: Annotated[str | None, "the run's thread; null: a task (a run on no thread)"]


class AgentFailed(FromChild):
    """the run failed (just before its `agent.idle`): what went wrong, for people"""

    agent_id: Annotated[str, "the agent whose run failed"]
    run_id: Annotated[str, "the run"]
    thread_id: Annotated[str | None, "the run's thread; null: a task"]
    error_code: Annotated[str, "its code from the error taxonomy (docs/errors.md)"]
    message: Annotated[str, "what went wrong, in words (as the run's record has it)"]


class AgentIdle(FromChild):
    """the run ended, however it ended: the agent no longer works on it (a run's last event)"""

    agent_id: Annotated[str, "the agent"]
    run_id: Annotated[str, "the run that ended"]
    thread_id: Annotated[str | None, "the run's thread; null: a task"]
    outcome: Annotated[
        str, "`completed`, `failed`, `cancelled`, or `waiting` (for a person): the run's status"
    ]


class ApprovalRequested(FromChild):
    """a tool call waits for a person's decision (docs/approvals.md): the run settles `waiting`
    after its step's other calls ran"""

    approval_id: Annotated[str, "the request's id: `agentrunner approve ID` decides it"]
    run_id: Annotated[str, "the waiting run"]
    agent_id: Annotated[str, "the agent that asked"]
    thread_id: Annotated[str | None, "the thread it holds while it waits; null: a task"]
    call_id: Annotated[str, "the tool call's id"]
    kind: Annotated[str, "`tool`: a call to approve; `question`: `ask_person`'s question"]
    tool: Annotated[str, "the tool"]
    arguments: Annotated[dict[str, Any], "the arguments it would run with"]
    rule: Annotated[str, "what asked for a decision (the agent file's rule)"]
    expires_at: Annotated[float, "when an undecided request is denied (UNIX seconds)"]


class ApprovalDecided(FromChild):
    """a person (or the timeout) decided a request; the first decision is the one that counts"""

    approval_id: Annotated[str, "the request"]
    run_id: Annotated[str, "its run"]
    call_id: Annotated[str, "the tool call"]
    tool: Annotated[str, "the tool"]
    decision: Annotated[str, "`approve` or `deny`"]
    by: Annotated[str, "who decided (`timeout` for an expired request)"]
    reason: Annotated[str | None, "the reason given, if any"]
    arguments: Annotated[dict[str, Any] | None, "the arguments it runs with, if edited"]
    edited: Annotated[bool, "whether the arguments were edited"]
    always: Annotated[str | None, "`thread` or `agent`: the tool needs no approval there from now"]
    timed_out: Annotated[bool, "denied because nobody decided in time"]


# Every kind with its shape, in the order the documentation lists them. ``EventData``, the
# overloads of ``Emit`` and this union name the same kinds (a test checks it).
Event = (
    tuple[Literal["agent.working"], AgentWorking]
    | tuple[Literal["thread.compacted"], ThreadCompacted]
    | tuple[Literal["step.started"], StepStarted]
    | tuple[Literal["agent.thinking"], AgentThinking]
    | tuple[Literal["agent.token"], AgentToken]
    | tuple[Literal["cost.updated"], CostUpdated]
    | tuple[Literal["model.attempt_failed"], ModelAttemptFailed]
    | tuple[Literal["model.setting_dropped"], ModelSettingDropped]
    | tuple[Literal["agent.tool_call"], AgentToolCall]
    | tuple[Literal["agent.tool_result"], AgentToolResult]
    | tuple[Literal["agent.message"], AgentMessage]
    | tuple[Literal["agent.notify"], AgentNotify]
    | tuple[Literal["agent.file"], AgentFile]
    | tuple[Literal["agent.note_shared"], AgentNoteShared]
    | tuple[Literal["agent.memory_updated"], AgentMemoryUpdated]
    | tuple[Literal["agent.failed"], AgentFailed]
    | tuple[Literal["approval.requested"], ApprovalRequested]
    | tuple[Literal["approval.decided"], ApprovalDecided]
    | tuple[Literal["agent.idle"], AgentIdle]
)
EventData = (
    AgentWorking
    | ThreadCompacted
    | StepStarted
    | AgentThinking
    | AgentToken
    | CostUpdated
    | ModelAttemptFailed
    | ModelSettingDropped
    | AgentToolCall
    | AgentToolResult
    | AgentMessage
    | AgentNotify
    | AgentFile
    | AgentNoteShared
    | AgentMemoryUpdated
    | AgentFailed
    | ApprovalRequested
    | ApprovalDecided
    | AgentIdle
)
EventSink = Callable[[str, EventData], None]
"""What receives events: the run log, callbacks, the interfaces."""

# What says who is working, for people: a run's first event, and its last one (or two).
ACTIVITY = frozenset({"agent.working", "agent.failed", "agent.idle"})

# The deltas, by the field that holds their text: stored merged (see ``store.run_log``).
DELTA_TEXT: dict[str, str] = {"agent.token": "token", "agent.thinking": "text"}


class Emit(Protocol):
    """What code that makes an event calls: the kind decides the shape the data must have.
    Every ``EventSink`` is one."""

    @overload
    def __call__(self, kind: Literal["agent.working"], data: AgentWorking, /) -> None: ...
    @overload
    def __call__(self, kind: Literal["thread.compacted"], data: ThreadCompacted, /) -> None: ...
    @overload
    def __call__(self, kind: Literal["step.started"], data: StepStarted, /) -> None: ...
    @overload
    def __call__(self, kind: Literal["agent.thinking"], data: AgentThinking, /) -> None: ...
    @overload
    def __call__(self, kind: Literal["agent.token"], data: AgentToken, /) -> None: ...
    @overload
    def __call__(self, kind: Literal["cost.updated"], data: CostUpdated, /) -> None: ...
    @overload
    def __call__(
        self, kind: Literal["model.attempt_failed"], data: ModelAttemptFailed, /
    ) -> None: ...
    @overload
    def __call__(
        self, kind: Literal["model.setting_dropped"], data: ModelSettingDropped, /
    ) -> None: ...
    @overload
    def __call__(self, kind: Literal["agent.tool_call"], data: AgentToolCall, /) -> None: ...
    @overload
    def __call__(self, kind: Literal["agent.tool_result"], data: AgentToolResult, /) -> None: ...
    @overload
    def __call__(self, kind: Literal["agent.message"], data: AgentMessage, /) -> None: ...
    @overload
    def __call__(self, kind: Literal["agent.notify"], data: AgentNotify, /) -> None: ...
    @overload
    def __call__(self, kind: Literal["agent.file"], data: AgentFile, /) -> None: ...
    @overload
    def __call__(self, kind: Literal["agent.note_shared"], data: AgentNoteShared, /) -> None: ...
    @overload
    def __call__(
        self, kind: Literal["agent.memory_updated"], data: AgentMemoryUpdated, /
    ) -> None: ...
    @overload
    def __call__(self, kind: Literal["agent.failed"], data: AgentFailed, /) -> None: ...
    @overload
    def __call__(self, kind: Literal["approval.requested"], data: ApprovalRequested, /) -> None: ...
    @overload
    def __call__(self, kind: Literal["approval.decided"], data: ApprovalDecided, /) -> None: ...
    @overload
    def __call__(self, kind: Literal["agent.idle"], data: AgentIdle, /) -> None: ...


def typed(kind: str, data: EventData) -> Event:
    """The event as its kind paired with its shape, for a ``match`` to narrow. Sound because
    every event is made through an ``Emit``, which checks the pair where it is made."""
    return cast("Event", (kind, data))


def ignore(kind: str, data: EventData) -> None:
    """An ``EventSink`` for events nobody follows."""


def from_child(data: EventData, agent_id: str, depth: int) -> EventData:
    """``data`` marked as coming from ``agent_id``'s run, ``depth`` delegations down. An event
    already marked (a grandchild's, passing through its parent's callbacks) keeps its mark."""
    if "from_agent" in data:
        return data
    return cast("EventData", {**data, "from_agent": agent_id, "depth": depth})


def child_of(data: EventData) -> tuple[str, int] | None:
    """The agent whose run sent ``data`` and its depth, for a child run's event; else None."""
    agent_id = data.get("from_agent")
    return None if agent_id is None else (agent_id, data.get("depth", 1))


# -- the HTTP event streams' own events ---------------------------------------------------------


class RunEnd(TypedDict):
    """the last event of a run's stream (`/runs/{id}/events`), once the run has ended and every
    event it wrote has been sent"""

    run_id: Annotated[str, "the run"]
    status: Annotated[str | None, "`completed`, `failed` or `cancelled`; null: no such run"]


class ChannelMessageEvent(TypedDict):
    """a message posted to the channel (`/channels/{name}/events`)"""

    id: Annotated[str, "the message's id, time-ordered"]
    sender: Annotated[
        str, "who posted it: an agent's id, a person's name, or `schedule:NAME` (a schedule's fire)"
    ]
    sender_kind: Annotated[
        str, "`agent`, `person`, `notice` (about an agent's run) or `schedule` (a fire's message)"
    ]
    content: Annotated[str, "the message's text"]
    thread: Annotated[
        str | None, "the id of the first message of its thread; null: a top-level message"
    ]
    depth: Annotated[int, "how many agent replies led to it (0: not a reply of an agent run)"]
    created_at: Annotated[float, "when it was posted, seconds since the epoch"]
    attachments: NotRequired[
        Annotated[
            list[dict[str, Any]],
            "the images and PDFs it carries, sent to each agent it reaches: each its `sha256` "
            "(`GET /attachments/{sha256}` answers its bytes), `media_type`, `size`, `name`, and "
            "`width` and `height` or `pages` (never its bytes); only when there are some",
        ]
    ]


class ChannelActivity(TypedDict):
    """the fields the activity events (`agent.working`, `agent.failed`, `agent.idle`) of a
    channel's members' runs carry on the channel's stream (`/channels/{name}/events`), beside
    their own"""

    message_id: Annotated[str, "the message the run answers"]
    thread: Annotated[
        str | None,
        "the id of the first message of that message's thread; null: a top-level message",
    ]


StreamEvent = (
    tuple[Literal["run.end"], RunEnd] | tuple[Literal["channel.message"], ChannelMessageEvent]
)
