"""A run as the run page shows it: its steps with their model attempts, its tool calls with
their arguments and results, what it asked a person and the decisions, its delegations and its
answer, in the order they happened.

Read from the run's own rows — steps (status, usage, cost, times), run messages (the prompt,
the tool calls, the answer) — and its events, which hold what the rows do not: each attempt's
tokens, cost and error, a tool's whole result (a run message keeps its first 200 characters),
the text of a step still being written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentrunner.run.spend import with_spend

if TYPE_CHECKING:
    from agentrunner.engine.messages import Attachment
    from agentrunner.store.approvals import ApprovalRecord
    from agentrunner.store.records import (
        EventRecord,
        RunMessageRecord,
        RunRecord,
        StepRecord,
    )
    from agentrunner.store.store import Store

__all__ = [
    "Attempt",
    "RunView",
    "Step",
    "ToolCall",
    "load_run_view",
    "run_files",
    "unchanged",
    "version_of",
]

_EVENT_PAGE = 1000


@dataclass(slots=True)
class Attempt:
    """One request of a step to one model of its chain."""

    number: int
    model: str
    outcome: str = "started"
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_micros: int | None = None
    estimated: bool = False
    error_code: str | None = None
    error_message: str | None = None
    http_status: int | None = None
    duration_ms: float | None = None

    @property
    def provider(self) -> str:
        return self.model.partition(":")[0] if ":" in self.model else ""


@dataclass(slots=True)
class ToolCall:
    call_id: str
    name: str
    arguments: Any
    called_at: float
    result: str | None = None  # None: no result yet
    is_error: bool = False
    answered_at: float | None = None
    children: list[RunRecord] = field(default_factory=list)  # the runs it started


@dataclass(slots=True)
class Step:
    number: int
    model: str
    started_at: float
    record: StepRecord | None = None  # None while its row is not written yet
    attempts: list[Attempt] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    thinking: str = ""
    text: str = ""  # what it has written so far (the answer, once it is the last step)

    @property
    def status(self) -> str:
        return self.record.status if self.record is not None else "running"


@dataclass(slots=True)
class RunView:
    run: RunRecord
    prompt: str | None
    system: str | None
    steps: list[Step]
    answer: str | None
    children: list[RunRecord]
    compactions: list[dict[str, Any]]
    told: list[tuple[str, dict[str, Any]]]  # what tools showed the person: notes, files, …
    version: str  # changes whenever what the page shows could have (``version_of``)
    # what it asked a person, and the decisions (docs/approvals.md), in the order asked
    approvals: list[ApprovalRecord] = field(default_factory=list)
    files: tuple[Attachment, ...] = ()  # the files its message carried (``run_files``)

    @property
    def finished(self) -> bool:
        return self.run.settled

    @property
    def model(self) -> str | None:
        """The model it ran on: its row's once it has ended, while it runs the one its newest
        step asked last (a fallback's, after a failed attempt); None before its first step."""
        if self.run.model:
            return self.run.model
        step = self.steps[-1] if self.steps else None
        if step is None:
            return None
        return step.attempts[-1].model if step.attempts else step.model

    @property
    def duration(self) -> float | None:
        if self.run.started_at is None:
            return None
        if self.run.completed_at is None:
            return None
        return self.run.completed_at - self.run.started_at

    @property
    def tokens_so_far(self) -> dict[str, int]:
        """Its steps' tokens so far, in and out (those of attempts where a step has no row)."""
        tokens = {"input_tokens": 0, "output_tokens": 0}
        for step in self.steps:
            usage = step.record.token_usage if step.record is not None else None
            if usage:
                for key in tokens:
                    tokens[key] += int(usage.get(key, 0))
            else:
                for attempt in step.attempts:
                    tokens["input_tokens"] += attempt.input_tokens
                    tokens["output_tokens"] += attempt.output_tokens
        return tokens

    @property
    def waiting(self) -> bool:
        """Whether it waits for a person now (its pending requests get a form)."""
        return self.run.status == "waiting"

    def approval_of(self, call_id: str) -> ApprovalRecord | None:
        """The request a tool call waited on, if it did."""
        return next((a for a in self.approvals if a.call_id == call_id), None)

    @property
    def orphans(self) -> list[RunRecord]:
        """Child runs no tool call of the timeline claims."""
        claimed = {c.id for s in self.steps for t in s.tool_calls for c in t.children}
        return [child for child in self.children if child.id not in claimed]


async def load_run_view(store: Store, run: RunRecord) -> RunView:
    """The view of ``run``; it and its delegations with what they have spent so far
    (``spend.with_spend``: a running run's cost is its finished requests')."""
    steps = await store.runs.steps(run.id)
    messages = await store.runs.messages(run.id)
    events = await _events(store, run.id)
    children = [await with_spend(store, child) for child in await store.company.children(run.id)]
    view = build(await with_spend(store, run), steps, messages, events, children)
    asked = await store.approvals.of_run(run.id)
    view.approvals = sorted(asked, key=lambda a: (a.created_at, a.position))
    view.files = await run_files(store, run)
    return view


async def run_files(store: Store, run: RunRecord) -> tuple[Attachment, ...]:
    """The files the message ``run`` answers carried: a channel run's, its trigger message's;
    a queued run's (a brief's, a run queued over HTTP), those its request names."""
    from agentrunner.engine.messages import Attachment

    if run.channel_id and run.trigger_message_id:
        trigger = await store.channels.message(run.channel_id, run.trigger_message_id)
        return trigger.attachments if trigger is not None else ()
    named = (run.request or {}).get("attachments") or ()
    return tuple(Attachment.from_dict(a) for a in named)


async def _events(store: Store, run_id: str) -> list[EventRecord]:
    out: list[EventRecord] = []
    after = 0
    while True:
        page = await store.events.list(run_id, after=after, limit=_EVENT_PAGE)
        out.extend(page)
        if len(page) < _EVENT_PAGE:
            return out
        after = page[-1].seq


def build(
    run: RunRecord,
    records: list[StepRecord],
    messages: list[RunMessageRecord],
    events: list[EventRecord],
    children: list[RunRecord],
) -> RunView:
    """The view of ``run`` from its rows and events (pure: the page's tests feed it rows)."""
    by_number = {record.step_number: record for record in records}
    steps: list[Step] = []
    calls: dict[str, ToolCall] = {}
    compactions: list[dict[str, Any]] = []
    told: list[tuple[str, dict[str, Any]]] = []
    answer: str | None = None
    for event in events:
        data = event.payload
        step = steps[-1] if steps else None
        match event.type:
            case "step.started":
                number = int(data["step"])
                record = by_number.get(number)
                steps.append(Step(number, str(data["model"]), event.created_at, record))
            case "cost.updated" if step is not None:
                attempt = _attempt(step, int(data["attempt"]), str(data["model"]))
                attempt.outcome = str(data["outcome"])
                attempt.input_tokens = int(data.get("input_tokens", 0))
                attempt.output_tokens = int(data.get("output_tokens", 0))
                attempt.cache_read_tokens = int(data.get("cache_read_tokens", 0))
                attempt.cache_write_tokens = int(data.get("cache_write_tokens", 0))
                attempt.cost_micros = data.get("cost_micros") if data.get("cost_known") else None
                attempt.estimated = bool(data.get("estimated"))
            case "model.attempt_failed" if step is not None:
                attempt = _attempt(step, int(data["attempt"]), str(data["model"]))
                if attempt.outcome == "started":
                    attempt.outcome = "error"
                attempt.error_code = str(data["error_code"])
                attempt.error_message = str(data.get("message", ""))
                attempt.http_status = data.get("status")
                attempt.duration_ms = data.get("duration_ms")
            case "agent.thinking" if step is not None:
                step.thinking += str(data.get("text", ""))
            case "agent.token" if step is not None:
                step.text += str(data.get("token", ""))
            case "agent.tool_call" if step is not None:
                call = ToolCall(
                    str(data["call_id"]), str(data["name"]), data.get("input"), event.created_at
                )
                calls[call.call_id] = call
                step.tool_calls.append(call)
            case "agent.tool_result":
                found = calls.get(str(data["call_id"]))
                if found is not None:
                    found.result = str(data.get("output", data.get("output_summary", "")))
                    found.is_error = bool(data.get("is_error"))
                    found.answered_at = event.created_at
            case "agent.message":
                answer = str(data.get("text", ""))
            case "thread.compacted":
                compactions.append(data)
            case "agent.notify" | "agent.file" | "agent.note_shared":
                told.append((event.type, data))
    _claim_children(calls.values(), children)
    prompt = next((m.content for m in messages if m.message_type == "user_message"), None)
    system = next((m.content for m in messages if m.message_type == "system_message"), None)
    if answer is None and run.settled:
        answer = next(
            (m.content for m in reversed(messages) if m.message_type == "assistant_message"), None
        )
    last = events[-1].seq if events else 0
    return RunView(
        run=run,
        prompt=prompt,
        system=system,
        steps=steps,
        answer=answer,
        children=children,
        compactions=compactions,
        told=told,
        version=version_of(run, last),
    )


def version_of(run: RunRecord, last_seq: int) -> str:
    """What the run's page depends on, in short: its status and its last event (a delegation
    begins with its caller's tool call and ends before its result, both events)."""
    return f"{run.status}.{last_seq}"


async def unchanged(store: Store, run: RunRecord, version: str) -> bool:
    """Whether the page of ``version`` still shows ``run`` as it is: one small read, not the
    run's whole record, for a page's stream woken by every commit of the run and its
    delegations'."""
    status, _, seq = version.rpartition(".")
    if status != run.status or not seq.isdigit():
        return False
    return not await store.events.list(run.id, after=int(seq), limit=1)


def _attempt(step: Step, number: int, model: str) -> Attempt:
    for attempt in step.attempts:
        if attempt.number == number:
            return attempt
    made = Attempt(number, model)
    step.attempts.append(made)
    return made


def _claim_children(calls: Any, children: list[RunRecord]) -> None:
    """Each child run to the delegating call that started it: one to that agent, made while
    the call was running (a child's id is not in its caller's events)."""
    free = list(children)
    for call in calls:
        if not isinstance(call.arguments, dict) or not free:
            continue
        asked = call.arguments.get("agent")
        end = call.answered_at if call.answered_at is not None else float("inf")
        for child in list(free):
            if child.agent_id == asked and call.called_at <= child.created_at <= end:
                call.children.append(child)
                free.remove(child)
