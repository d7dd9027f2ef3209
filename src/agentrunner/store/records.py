"""What the store returns: plain records, one per row kind."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrunner.core.json_text import json_text, loads_exact

if TYPE_CHECKING:
    from agentrunner.engine.messages import Message

__all__ = [
    "RUN_ENDED",
    "RUN_STATUSES",
    "AgentState",
    "EventRecord",
    "Note",
    "RunMessageRecord",
    "RunRecord",
    "StepRecord",
    "Thread",
    "ThreadSummary",
    "from_json",
    "thread_message_dict",
    "to_json",
]


def from_json(value: Any) -> Any:
    """JSON columns come back as text from SQLite and parsed from PostgreSQL."""
    if isinstance(value, str):
        return loads_exact(value)
    return value


def to_json(value: Any) -> str | None:
    if value is None:
        return None
    return json_text(value, default=str)


@dataclass(slots=True)
class Thread:
    id: str
    agent_id: str
    title: str | None
    session_run_id: str | None
    session_state: dict[str, Any]
    active_task: str | None
    parent_thread_id: str | None
    message_count: int
    created_at: float
    updated_at: float
    summary_through: int = 0  # the last message its newest summary covers; 0: none
    waiting_run_id: str | None = None  # the run that holds it while it waits for a person
    forked_from: str | None = None  # the thread it was forked from (store/forks)
    forked_at: int | None = None  # the last of that thread's messages it began with

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Thread:
        row["session_state"] = from_json(row["session_state"]) or {}
        return cls(**row)

    def to_dict(self) -> dict[str, Any]:
        """The thread as the HTTP API and MCP show it (docs/http-api.md)."""
        return {
            "id": self.id,
            "agent_id": self.agent_id,
            "title": self.title,
            "message_count": self.message_count,
            "summary_through": self.summary_through,
            "forked_from": self.forked_from,
            "forked_at": self.forked_at,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


@dataclass(frozen=True, slots=True)
class ThreadSummary:
    """A summary of a thread's messages 1..``through_seq``, written by ``model`` in ``requests``
    model requests on the account of ``run_id`` (``cost_micros`` None: a price unknown)."""

    thread_id: str
    through_seq: int
    summary: str
    model: str
    run_id: str
    requests: int
    cost_micros: int | None
    created_at: float

    def to_dict(self) -> dict[str, Any]:
        """The summary as the HTTP API and ``threads show --json`` show it."""
        return {
            "through_seq": self.through_seq,
            "summary": self.summary,
            "model": self.model,
            "run_id": self.run_id,
            "requests": self.requests,
            "cost_usd": None if self.cost_micros is None else self.cost_micros / 1_000_000,
            "created_at": self.created_at,
        }


def thread_message_dict(
    seq: int, message: Message, run_id: str | None, created_at: float
) -> dict[str, Any]:
    """A thread's message as the HTTP API, MCP and ``threads show --json`` show it."""
    return {"seq": seq, **message.to_dict(), "run_id": run_id, "created_at": created_at}


# Seed 003's run statuses: created -> running -> completed / failed / cancelled.
RUN_STATUSES = ("created", "running", "waiting", "completed", "failed", "cancelled")
# A run in one of these has ended: every event it has is written (its events before its end),
# and its figures (its cost, its usage) are settled.
RUN_ENDED = frozenset({"completed", "failed", "cancelled"})


@dataclass(slots=True)
class RunRecord:
    id: str
    agent_id: str
    thread_id: str | None
    parent_run_id: str | None
    status: str
    stop_reason: str | None
    trigger_message_id: str | None
    channel_id: str | None
    dm_conversation_id: str | None
    request: dict[str, Any] | None
    model: str | None
    error_code: str | None
    error_message: str | None
    token_usage: dict[str, int] | None
    cost_micros: int
    cost_known: bool
    depth: int
    created_at: float
    started_at: float | None
    completed_at: float | None
    worker_id: str | None = None
    attempts: int = 0
    trace_id: str | None = None  # its OpenTelemetry trace, when telemetry was on
    # what [retention] removed of it ("events", "run_messages", "token_deltas"; run_get's)
    pruned: str | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RunRecord:
        row["request"] = from_json(row["request"])
        row["token_usage"] = from_json(row["token_usage"])
        row["cost_known"] = bool(row["cost_known"])
        return cls(**row)

    @property
    def settled(self) -> bool:
        """Whether it has ended: its usage and cost are then its own figures, written as it
        ended (until then, ``spend.run_spend`` says what it has spent so far)."""
        return self.status in RUN_ENDED

    def to_dict(self) -> dict[str, Any]:
        """The run as the HTTP API and MCP show it (docs/http-api.md): ``attachments``, the
        files its message was queued with (never their bytes), only when it has some."""
        error = self.error_code
        out: dict[str, Any] = {
            "id": self.id,
            "agent_id": self.agent_id,
            "thread_id": self.thread_id,
            "status": self.status,
            "stop_reason": self.stop_reason,
            "model": self.model,
            "error": {"code": error, "message": self.error_message} if error else None,
            "usage": self.token_usage,
            "cost_usd": self.cost_micros / 1e6 if self.cost_known else None,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "completed_at": self.completed_at,
            "trace_id": self.trace_id,
        }
        files = self.request.get("attachments") if self.request else None
        if files:
            out["attachments"] = files
        if self.pruned:
            out["removed"] = self.removed
        return out

    @property
    def removed(self) -> list[str]:
        """What ``[retention]`` removed of it: ``events``, ``run_messages``, ``token_deltas``."""
        return self.pruned.split(",") if self.pruned else []


@dataclass(slots=True)
class StepRecord:
    id: str
    run_id: str
    step_number: int
    status: str
    model_id: str
    token_usage: dict[str, int] | None
    cost_micros: int | None
    attempts: list[dict[str, Any]] | None
    created_at: float
    completed_at: float | None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> StepRecord:
        row["token_usage"] = from_json(row["token_usage"])
        row["attempts"] = from_json(row["attempts"])
        return cls(**row)

    def to_dict(self) -> dict[str, Any]:
        """The step as ``runs show --json`` shows it; cost in dollars, null when unknown."""
        return {
            "id": self.id,
            "step": self.step_number,
            "status": self.status,
            "model": self.model_id,
            "usage": self.token_usage,
            "cost_usd": None if self.cost_micros is None else self.cost_micros / 1e6,
            "attempts": self.attempts or [],
            "created_at": self.created_at,
            "completed_at": self.completed_at,
        }


@dataclass(slots=True)
class RunMessageRecord:
    id: str
    run_id: str
    step_id: str | None
    message_type: str
    content: str
    tool_name: str | None
    tool_input: Any
    tool_call_id: str | None
    is_error: bool | None
    created_at: float

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RunMessageRecord:
        row["tool_input"] = from_json(row["tool_input"])
        row["is_error"] = None if row["is_error"] is None else bool(row["is_error"])
        return cls(**row)

    def to_dict(self) -> dict[str, Any]:
        """The run message as ``runs show --json`` shows it (seed 003's columns)."""
        return {
            "id": self.id,
            "step_id": self.step_id,
            "type": self.message_type,
            "content": self.content,
            "tool_name": self.tool_name,
            "tool_input": self.tool_input,
            "tool_call_id": self.tool_call_id,
            "is_error": self.is_error,
            "created_at": self.created_at,
        }


@dataclass(slots=True)
class EventRecord:
    run_id: str
    seq: int
    type: str
    payload: dict[str, Any]
    created_at: float

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> EventRecord:
        row["payload"] = from_json(row["payload"])
        return cls(**row)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "seq": self.seq,
            "type": self.type,
            "data": self.payload,
            "time": self.created_at,
        }


@dataclass(slots=True)
class AgentState:
    agent_id: str
    current_thread_id: str | None
    status: str
    current_run_id: str | None  # the run in progress (status ``working``)
    updated_at: float | None
    last_run_id: str | None = None  # the latest run that started, running or settled


@dataclass(slots=True)
class Note:
    slug: str
    title: str
    body: str
    created_at: float
    updated_at: float
