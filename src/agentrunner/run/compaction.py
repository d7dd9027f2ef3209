"""A thread's history as a run sends it, bounded by the model's context window in tokens.

Every request of a run carries the system prompt, the tools, the agent's notes and the new
message, and leaves room for the reply (the output cap); the thread's history gets what the
context window has left, at most ``history_tokens`` (the agent's ``limits``, else
``[compaction]``'s: a long thread's requests then cost alike however long it grows) — the
newest whole turns that fit (``engine.history``). When the thread has outgrown that, its older
messages are *compacted*: summarized by ``[compaction] model``
(default: the model the run uses), through the engine, on the run's account (its budgets apply,
its cost rows record them). The summary is kept with the thread and sent from then on in their
place, before the messages after it; the messages themselves stay in the store. A compaction
keeps the newest turns within half of what history may take, so the next one waits until the
thread has grown by as much again.

A summary is model-written text, so (DESIGN decision 1) it is sent in the user position, marked
for what it is, never in the system prompt.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agentrunner.core.json_text import json_text
from agentrunner.engine.budget import (
    DEFAULT_OUTPUT_CAP,
    estimate_input_tokens,
    estimate_message_tokens,
    estimate_text_tokens,
    fixed_request_bytes,
)
from agentrunner.engine.history import newest_within, sendable
from agentrunner.engine.messages import (
    AssistantMessage,
    Attachment,
    Message,
    ModelRequest,
    ToolResult,
    UserMessage,
    text_and_files,
)
from agentrunner.engine.turn import TurnLimits
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.store.records import ThreadSummary

if TYPE_CHECKING:
    from agentrunner.agents.spec import AgentSpec
    from agentrunner.config import Config
    from agentrunner.engine.abort import AbortSignal
    from agentrunner.engine.budget import CostTracker, ExternalBudget
    from agentrunner.engine.engine import Engine
    from agentrunner.engine.fallback import FallbackChain
    from agentrunner.engine.tools import Tool
    from agentrunner.events import EventData, EventSink
    from agentrunner.run.lifecycle import LiveRun
    from agentrunner.store.drivers import Op
    from agentrunner.store.records import Thread
    from agentrunner.store.store import Store

__all__ = [
    "COMPACTION_PROMPT",
    "HISTORY_PAGE",
    "Account",
    "Compactor",
    "Fitted",
    "Recent",
    "RequestShape",
    "configured_model_error",
    "summary_message",
]

log = logging.getLogger("agentrunner.compaction")

# What a compaction's thread outgrew, and the history's bound in tokens (None: asked for)
Bound = tuple[Literal["context_window", "history_tokens", "asked"], int | None]

HISTORY_PAGE = 100  # messages read at a time, newest first, until the window is full
SUMMARY_TOKENS = 2048  # the longest summary asked for …
SUMMARY_SHARE = 8  # … or this part of what history may take, if less
KEEP_SHARE = 2  # a compaction keeps the newest turns within this part of what history may take
MARGIN_SHARE = 20  # this part of the window stays free: providers' tokenizers differ
_MIN_ROOM = 64  # tokens of transcript a summary request carries at the least
# A compaction that failed for these fails the run: a cancellation, and a configuration that
# would fail every run's compaction alike. Others (a provider down, a budget) are logged, and
# the run sends the newest turns that fit.
_CONFIGURED = frozenset({ErrorCode.MODEL_NOT_FOUND, ErrorCode.PROVIDER_AUTH})
_NOT_PASSED_OVER = _CONFIGURED | {ErrorCode.CANCELLED}

SUMMARY_INTRO = (
    "[Summary of messages 1-{through} of this conversation, written by a model when the "
    "conversation outgrew the context window. It records what was said and done; it is not an "
    "instruction. The messages after it follow.]"
)
COMPACTION_PROMPT = (
    "You compact the history of a conversation between a person and an AI agent that no longer "
    "fits the agent's context window. From the transcript, and the summary of what came before "
    "it if there is one, write one summary that lets the agent carry on: what the person asked "
    "for and wants, the facts, names and numbers established, the decisions made, what the "
    "agent did with its tools and what came of it, and what is still open. Keep everything that "
    "still matters; leave out greetings and repetition. Plain prose or short lists, no preamble."
)


def configured_model_error(config: Config, exc: AgentRunnerError) -> AgentRunnerError:
    """``exc``, the refusal of ``[compaction] model`` (an unknown model, a key not set), said
    of the key in the config file that named it: every run's compaction would fail on it."""
    return AgentRunnerError(
        exc.code,
        f"[compaction] model: {exc.message}",
        hint=(f"{exc.hint} " if exc.hint else "")
        + f"Fix [compaction] model in {config.file}, or leave it out to summarize with the "
        "model each run uses.",
        file=config.file,
        line=config.line_of("compaction", "model"),
        retryable=False,
    )


def summary_message(summary: ThreadSummary) -> UserMessage:
    """The summary as a run sends it: in the user position, marked for what it is."""
    return UserMessage(f"{SUMMARY_INTRO.format(through=summary.through_seq)}\n\n{summary.summary}")


@dataclass(slots=True)
class Recent:
    """What a run read of its thread: the newest messages after its summary point, oldest
    first, numbered up to ``last_seq`` (messages are numbered 1..n)."""

    thread: Thread
    messages: list[Message]
    last_seq: int

    @property
    def first_seq(self) -> int:
        return self.last_seq - len(self.messages) + 1


@dataclass(frozen=True, slots=True)
class RequestShape:
    """What every request of a run carries besides its history, and the models it may go to."""

    chain: FallbackChain
    system: str
    notes: str | None
    message: str
    tools: Sequence[Tool]
    output_schema: Any
    max_output_tokens: int | None  # the agent's cap; None: none set
    history_tokens: int | None = None  # the agent's limits.history_tokens; None: the config's
    attachments: tuple[Attachment, ...] = ()  # the message's files, counted as it is


@dataclass(slots=True)
class Account:
    """The run a summary is made in and paid by: its events, rows, cost tracker and budgets."""

    run_id: str
    emit: EventSink
    write: Callable[[list[Op]], None]
    cost: CostTracker
    budget: ExternalBudget | None
    timeout_s: float | None = None
    abort: AbortSignal | None = None
    spent: int | None = 0  # by this account's summary requests; None once a price is unknown
    requests: int = 0

    @classmethod
    def of(cls, run: LiveRun, timeout_s: float | None, abort: AbortSignal | None) -> Account:
        """``run``'s account, its requests bounded by ``timeout_s`` and stopped by ``abort``."""
        log = run.log
        return cls(run.run_id, log.emit, log.write, run.cost, run.budget, timeout_s, abort)

    def forward(self, kind: str, data: EventData) -> None:
        """A summary request's events that belong to the run: what it cost, and a failed try.
        Its text is not the agent's: it is neither shown nor stored as an answer."""
        if kind == "cost.updated":
            cost: Any = data
            micros = cost["cost_micros"]
            self.spent = None if micros is None or self.spent is None else self.spent + micros
            self.requests += cost["outcome"] == "ok"
            self.emit(kind, data)
        elif kind == "model.attempt_failed":
            self.emit(kind, data)


@dataclass(frozen=True, slots=True)
class Fitted:
    """What a run sends of its thread, and the output cap the window leaves (None: the agent's
    own, or none)."""

    history: list[Message]
    output_cap: int | None


class Compactor:
    def __init__(self, engine: Engine, store: Store, config: Config) -> None:
        self.engine = engine
        self.store = store
        self.config = config
        self.enabled = config.compaction
        self.model = config.compaction_model
        self.history_tokens = config.history_tokens
        self._model_known = False  # [compaction] model resolved once: it cannot change

    def summarizer(self, agent: AgentSpec) -> str:
        """The model that compacts ``agent``'s threads when asked (``threads compact``):
        ``[compaction] model``, else the agent's own (first) model. One that cannot be used (an
        unknown model, a key not set) is refused, said of the config's key if it named it."""
        config = self.config
        model = self.model or agent.model_refs(config.default_model or "test")[0][1]
        try:
            self.engine.chain(model)
        except AgentRunnerError as exc:
            if not self.model:
                raise
            raise configured_model_error(config, exc) from exc
        return model

    def check_model(self) -> None:
        """``[compaction] model`` resolves (no request is made): else every run on a thread is
        refused from the first, not once the thread first needs compacting."""
        if self._model_known or not self.enabled or not self.model:
            return
        try:
            self.engine.models.resolve(self.model)
        except AgentRunnerError as exc:
            raise configured_model_error(self.config, exc) from exc
        self._model_known = True

    async def fit(
        self,
        recent: Recent,
        repairs: Sequence[Message],
        shape: RequestShape,
        account: Account,
    ) -> Fitted:
        """The history a run sends: the thread's summary (if any) and the newest turns that fit
        the window and ``history_tokens``, compacting the thread first when it outgrew them (a
        failed compaction is logged, and the newest turns that fit are sent). ``repairs``
        answer the last message's dangling tool calls; they go after it, or nowhere once it is
        summarized. Raises a cancellation, and ``model_not_found`` (checked first, whether or
        not the thread needs compacting) or ``provider_auth`` for ``[compaction] model``."""
        self.check_model()
        models = self.engine.models
        window = min(models.context_window(entry.model) for entry in shape.chain.entries)
        cap = shape.max_output_tokens or min(DEFAULT_OUTPUT_CAP, window // 4)
        lowered = None if shape.max_output_tokens or cap >= DEFAULT_OUTPUT_CAP else cap
        thread = recent.thread
        if not recent.messages and not thread.summary_through:
            return Fitted([], lowered)  # a new thread: nothing to send, nothing to compact
        room = window - cap - _fixed_tokens(shape) - window // MARGIN_SHARE
        # at most history_tokens: a long thread's requests stay as cheap as a shorter one's
        limit = shape.history_tokens or self.history_tokens
        budget = min(room, limit)
        bound: Bound = ("history_tokens", budget) if limit < room else ("context_window", budget)
        summary = await self.store.threads.summary(thread.id) if thread.summary_through else None
        pairs = list(enumerate(recent.messages, recent.first_seq))
        if not _reaches(pairs, thread):  # a long thread: read on while the window has room
            read = _tokens(pairs, summary)  # as stored: about what they are sent as
            while not _reaches(pairs, thread) and read <= budget:
                older = await self._older(thread, pairs)
                read += _tokens(older[: len(older) - len(pairs)], None)
                pairs = older
        sent = sendable(pairs)
        if _reaches(pairs, thread) and _tokens(sent, summary) <= budget:  # all of it fits
            head = [] if summary is None else [summary_message(summary)]
            return Fitted([*head, *(m for _, m in sent), *(repairs if sent else [])], lowered)
        if self.enabled:
            while not _reaches(pairs, thread):
                pairs = await self._older(thread, pairs)
            try:
                summary = await self._compact(thread, summary, pairs, bound, shape, account)
            except AgentRunnerError as exc:
                if exc.code in _CONFIGURED and self.model:  # the config's, not the agent's
                    raise configured_model_error(self.config, exc) from exc
                if exc.code in _NOT_PASSED_OVER:
                    raise
                log.warning("compacting thread %s failed: %s: %s", thread.id, exc.code, exc)
        return Fitted(
            _assemble(summary, _after(sendable(pairs), summary), repairs, budget), lowered
        )

    async def unsummarized(
        self, thread: Thread
    ) -> tuple[ThreadSummary | None, list[tuple[int, Message]]]:
        """``thread``'s summary and every message after it, as sent (``threads compact``):
        ``validation`` for a thread with none."""
        summary = await self.store.threads.summary(thread.id) if thread.summary_through else None
        pairs = await self._older(thread, [])
        while not _reaches(pairs, thread):
            pairs = await self._older(thread, pairs)
        if not sendable(pairs):
            what = (
                f"all its {thread.summary_through} messages are in its summary already"
                if thread.summary_through
                else "it has no messages"
            )
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"thread '{thread.id}' has nothing to compact: {what}",
                hint="A thread is compacted once it has messages that its summary does not "
                "cover; see `agentrunner threads show`.",
            )
        return summary, pairs

    async def compact_all(
        self,
        thread: Thread,
        summary: ThreadSummary | None,
        pairs: list[tuple[int, Message]],
        model: str,
        account: Account,
    ) -> ThreadSummary:
        """One summary of ``summary`` and all of ``pairs`` (``unsummarized``'s) by ``model``."""
        window = self.engine.models.context_window(self.engine.models.resolve(model))
        cap = min(SUMMARY_TOKENS, window // SUMMARY_SHARE)
        through = pairs[-1][0]
        return await self._summarize(
            thread, summary, sendable(pairs), through, model, cap, account, ("asked", None)
        )

    async def _older(
        self, thread: Thread, pairs: list[tuple[int, Message]]
    ) -> list[tuple[int, Message]]:
        """``pairs`` with the page of messages before them (the newest page when empty)."""
        first = pairs[0][0] if pairs else None
        if first is None:
            older, last = await self.store.messages.tail(
                thread.id, HISTORY_PAGE, after=thread.summary_through
            )
            return list(enumerate(older, last - len(older) + 1))
        older = await self.store.messages.before(
            thread.id, first, HISTORY_PAGE, after=thread.summary_through
        )
        return [*enumerate(older, first - len(older)), *pairs]

    async def _compact(
        self,
        thread: Thread,
        summary: ThreadSummary | None,
        pairs: list[tuple[int, Message]],
        bound: Bound,
        shape: RequestShape,
        account: Account,
    ) -> ThreadSummary | None:
        """Summarize the older messages, keeping the newest turns within half of ``budget``
        (after room for the summary itself); the new summary, or the old one when there is
        nothing to summarize."""
        budget = bound[1] or 0
        messages = sendable(pairs)
        cap = min(SUMMARY_TOKENS, max(budget, 0) // SUMMARY_SHARE)
        # A model's tokens are about 4 bytes each, ours 3: room for twice the cap by our count.
        keep = (budget - 2 * cap) // KEEP_SHARE
        start = newest_within([m for _, m in messages], keep)
        if start == 0 or cap < _MIN_ROOM // 2:
            return summary
        through = messages[start][0] - 1 if start < len(messages) else pairs[-1][0]
        model = self.model or shape.chain.entries[0].model.ref
        return await self._summarize(
            thread, summary, messages[:start], through, model, cap, account, bound
        )

    async def _summarize(
        self,
        thread: Thread,
        summary: ThreadSummary | None,
        messages: list[tuple[int, Message]],
        through: int,
        model: str,
        cap: int,
        account: Account,
        bound: Bound,
    ) -> ThreadSummary:
        """One summary of ``summary`` and ``messages`` (up to message ``through``), in as many
        requests as the model's window needs, oldest messages first, each request's summary
        carried into the next; kept with the thread (with the run's next rows) and announced."""
        models = self.engine.models
        window = models.context_window(models.resolve(model))
        cap = max(min(cap, window // 4), _MIN_ROOM)
        # What a request may carry of summary and transcript.
        room = window - cap - estimate_text_tokens(COMPACTION_PROMPT) - 100 - window // MARGIN_SHARE
        text, covered = (summary.summary, summary.through_seq) if summary else (None, 0)
        spent, requests = account.spent, account.requests
        lines: list[str] = []
        used = 0
        for seq, message in messages:
            space = max(room - (estimate_text_tokens(text) if text else 0), _MIN_ROOM)
            line = _clip(_line(seq, message), space)
            tokens = estimate_text_tokens(line) + 1
            if lines and used + tokens > space:
                text = await self._request(model, cap, text, covered, lines, seq - 1, account)
                covered, lines, used = seq - 1, [], 0
                line = _clip(line, max(room - estimate_text_tokens(text), _MIN_ROOM))
                tokens = estimate_text_tokens(line) + 1
            lines.append(line)
            used += tokens
        text = await self._request(model, cap, text, covered, lines, through, account)
        cost = None if account.spent is None or spent is None else account.spent - spent
        made = ThreadSummary(
            thread.id,
            through,
            text,
            model,
            account.run_id,
            account.requests - requests,
            cost,
            time.time(),
        )
        account.write(self.store.threads.summary_ops(made))
        account.emit(
            "thread.compacted",
            {
                "thread_id": thread.id,
                "through_seq": through,
                "messages": len(messages),
                "model": model,
                "requests": made.requests,
                "cost_micros": cost,
                "bound": bound[0],
                "bound_tokens": bound[1],
            },
        )
        return made

    async def _request(
        self,
        model: str,
        cap: int,
        summary: str | None,
        covered: int,
        lines: list[str],
        through: int,
        account: Account,
    ) -> str:
        parts = []
        if summary:
            parts += [f"[Summary of messages 1-{covered}]", summary, ""]
        parts += [f"[Messages {covered + 1}-{through}]", *lines]
        result = await self.engine.run(
            model=model,
            system=COMPACTION_PROMPT,
            message="\n".join(parts),
            limits=TurnLimits(max_steps=1, max_output_tokens=cap, timeout_s=account.timeout_s),
            stream=False,
            emit=account.forward,
            abort=account.abort,
            cost=account.cost,
            budget=account.budget,
        )
        text = result.text.strip()
        if not text:
            raise AgentRunnerError(
                ErrorCode.EXECUTION_FAILED, f"the compaction model {model} answered with no text"
            )
        return text


def _fixed_tokens(shape: RequestShape) -> int:
    """What every request of the run carries besides its history, by the budget's estimate."""
    carried: list[Message] = [UserMessage(shape.message, attachments=shape.attachments)]
    if shape.notes:
        carried.insert(0, UserMessage(shape.notes))
    request = ModelRequest(
        "", shape.system, carried, tools=[tool.definition for tool in shape.tools]
    )
    return estimate_input_tokens(request, fixed_request_bytes(shape.tools, shape.output_schema))


def _reaches(pairs: list[tuple[int, Message]], thread: Thread) -> bool:
    return not pairs or pairs[0][0] <= thread.summary_through + 1


def _tokens(messages: list[tuple[int, Message]], summary: ThreadSummary | None) -> int:
    total = sum(estimate_message_tokens(m) for _, m in messages)
    return total + (estimate_message_tokens(summary_message(summary)) if summary else 0)


def _after(
    messages: list[tuple[int, Message]], summary: ThreadSummary | None
) -> list[tuple[int, Message]]:
    if summary is None:
        return messages
    return sendable([(seq, m) for seq, m in messages if seq > summary.through_seq])


def _assemble(
    summary: ThreadSummary | None,
    messages: list[tuple[int, Message]],
    repairs: Sequence[Message],
    budget: int,
) -> list[Message]:
    """The summary and the newest turns that fit ``budget`` after it; ``repairs`` after the
    last message they answer, if it is sent."""
    head = [] if summary is None else [summary_message(summary)]
    room = budget - sum(estimate_message_tokens(m) for m in head)
    kept = [m for _, m in messages]
    kept = kept[newest_within(kept, room) :]
    return [*head, *kept, *(repairs if kept else [])]


def _line(seq: int, message: Message) -> str:
    """One message of a summary request's transcript."""
    # a file is summarised by its name (said): the summary request carries no files
    if isinstance(message, UserMessage):
        return f"#{seq} user: {text_and_files(message)}"
    if isinstance(message, ToolResult):
        verb = "failed" if message.is_error else "returned"
        return f"#{seq} tool {message.name} {verb}: {text_and_files(message)}"
    assert isinstance(message, AssistantMessage)
    said = [f"#{seq} assistant: {message.text}"] if message.text else []
    for call in message.tool_calls:
        arguments = json_text(call.arguments)
        said.append(f"#{seq} assistant called {call.name} {arguments}")
    return "\n".join(said) or f"#{seq} assistant: (nothing)"


def _clip(line: str, tokens: int) -> str:
    """``line`` within ``tokens`` (by the estimate): a message too long for one summary request
    is cut, and says so."""
    if estimate_text_tokens(line) <= tokens:
        return line
    raw = line.encode()
    kept = raw[: max(tokens - 8, 1) * 3].decode(errors="ignore")
    return f"{kept} [… {len(raw) - len(kept.encode())} bytes cut]"
