"""The turn core (seed 001): assemble → request through the fallback chain → fold the stream
into events → run the tool calls → repeat until the model answers → settle.

Events, in the order they happen: ``agent.thinking``, ``agent.token`` (streamed deltas),
``cost.updated`` (one per model attempt that reached a provider), ``model.attempt_failed``,
``agent.tool_call``, ``agent.tool_result``, ``agent.message`` (the final answer).

Limits are checked before every model request, so none is overshot by a request: requests
(``max_steps`` → ``turn_limit``), tokens, tool calls, and money: each request's worst case is
reserved against the tightest budget and its output cap lowered to fit (``engine.budget``), so
a reply cannot overshoot a budget either (``budget_exceeded``). A deadline (``timeout_s``) bounds
the whole turn — requests, retries, backoff waits and tool calls — and ends it as
``run_timeout`` the way an abort ends it. Cancellation wins over every other outcome and leaves
a history that can be sent again: interrupted tool calls get a synthetic error result, streamed
text is kept as an interrupted message, and a request cut off mid-way is charged at the
provider's figures or, failing those, an estimate marked as such.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, assert_never

from agentrunner.engine.abort import AbortSignal
from agentrunner.engine.budget import (
    BudgetGate,
    CostTracker,
    ExternalBudget,
    Reservation,
    budget_cut_off,
    estimate_output_tokens,
)
from agentrunner.engine.failures import ProviderError
from agentrunner.engine.fallback import Attempt, ChainEntry, FallbackChain
from agentrunner.engine.fold import Delta
from agentrunner.engine.http_client import HttpModelClient
from agentrunner.engine.messages import (
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from agentrunner.engine.pricing import PriceBook
from agentrunner.engine.secrets import Secrets, SecretStream
from agentrunner.engine.structured_output import (
    correction,
    parse_output,
    schema_instructions,
    takes_schema_natively,
)
from agentrunner.engine.tools import Tool, ToolContext, ToolDenied, ToolRetry, render_result
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.events import Emit, EventData, EventSink
from agentrunner.telemetry.tracing import NO_TRACING, Tracing

if TYPE_CHECKING:
    from agentrunner.core.model_settings import ModelSettings

__all__ = [
    "CostTracker",
    "EventSink",
    "StopReason",
    "Turn",
    "TurnCancelled",
    "TurnError",
    "TurnLimits",
    "TurnResult",
    "cancelled_result",
    "output_cap",
    "run_turn",
]

log = logging.getLogger("agentrunner.engine")

StopReason = Literal[
    "end_turn",
    "max_steps",
    "max_tokens_exceeded",
    "cancelled",
    "error",
    "no_tool_call",
    "invalid_tool_call",
    "budget_exceeded",
    "timeout",
]
INTERRUPTED = "interrupted: the run stopped before this tool call finished"


@dataclass(slots=True)
class TurnLimits:
    max_steps: int = 10
    max_tool_calls: int | None = None
    max_tokens: int | None = None
    max_budget_micros: int | None = None
    max_output_tokens: int | None = None
    max_corrections: int = 3
    max_output_retries: int = 2
    budget_label: str = "the run's budget"
    timeout_s: float | None = None  # the turn's deadline; None: none (runs get the agent's)


@dataclass(slots=True)
class TurnResult:
    text: str
    output: Any
    new_messages: list[Message]
    usage: Usage
    cost_micros: int
    cost_known: bool
    stop_reason: StopReason
    model: str | None
    attempts: list[Attempt]
    tool_calls: int = 0


class TurnCancelled(Exception):
    """What a turn had done (``result``) when the task running it was cancelled (``asyncio``
    cancellation, not an abort): the cause of the ``CancelledError`` the turn ends in, read
    with ``cancelled_result``. Never raised itself: a cancelled task must end in
    ``CancelledError`` and nothing else, since ``asyncio.timeout`` (and ``wait_for``, which
    uses it from Python 3.12 on) tells its own cancellation from others by that exact type
    before Python 3.13, and a subclass would reach its caller instead of ``TimeoutError``."""

    def __init__(self, result: TurnResult) -> None:
        super().__init__("the turn's task was cancelled")
        self.result = result


def cancelled_result(exc: BaseException) -> TurnResult | None:
    """What the turn that ended in ``exc`` (a ``CancelledError``) had done, if a turn did."""
    cause = exc.__cause__
    return cause.result if isinstance(cause, TurnCancelled) else None


class TurnError(AgentRunnerError):
    """A turn that ended in a classified failure; ``result`` holds what happened before it."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        stop_reason: StopReason,
        result: TurnResult,
        hint: str | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(code, message, hint=hint, retryable=retryable)
        self.stop_reason = stop_reason
        self.result = result


@dataclass(slots=True)
class Turn:
    """Everything one turn needs. ``messages`` is the history ending with the new user message;
    the turn appends to it, so after the turn it is the conversation to store."""

    system: str
    messages: list[Message]
    chain: FallbackChain
    tools: Sequence[Tool] = ()
    prices: PriceBook = field(default_factory=PriceBook)
    limits: TurnLimits = field(default_factory=TurnLimits)
    emit: EventSink | None = None
    abort: AbortSignal | None = None
    stream: bool = True
    output_schema: Mapping[str, Any] | None = None
    cost: CostTracker = field(default_factory=CostTracker)
    tool_context: Mapping[str, Any] = field(default_factory=dict)
    before_tools: Callable[[Sequence[Message]], Awaitable[None]] | None = None
    budget: ExternalBudget | None = None
    # cut out of what the model says and of tool results (a tool may read a key)
    secrets: Secrets | None = None
    tracing: Tracing = NO_TRACING  # telemetry on: each tool call a span, each charge counted
    cache_key: str | None = None  # the conversation's prompt-cache key (ModelRequest)
    settings: ModelSettings | None = None  # what the requests ask of the model


async def run_turn(turn: Turn) -> TurnResult:
    """Run one turn. Raises ``TurnError`` (with the partial result) for every failure: a
    classified provider or tool failure, a limit, cancellation through ``turn.abort`` (which
    wins over any other outcome), or — as ``internal`` — a bug. Cancelling the calling task
    itself raises ``CancelledError`` after repairing the history, with what the turn had done
    for ``cancelled_result``."""
    limits = turn.limits
    if limits.max_budget_micros is not None:
        tracker = turn.cost
        if tracker.limit is None or limits.max_budget_micros < tracker.limit:
            tracker.limit, tracker.label = limits.max_budget_micros, limits.budget_label
    run = _TurnRun(turn)
    abort = turn.abort
    if abort is not None and abort.aborted:
        raise run.cancelled()
    work = run.run() if limits.timeout_s is None else _within(run, limits.timeout_s)
    if abort is None:
        return await _settle(run, work)
    # The turn runs in its own task so an abort cancels only the turn, never the caller.
    inner = asyncio.ensure_future(work)

    def cancel() -> None:
        run.silenced = True
        inner.cancel()

    unsubscribe = abort.on_abort(cancel)
    try:
        return await _settle(run, inner)
    finally:
        unsubscribe()


async def _within(run: _TurnRun, seconds: float) -> TurnResult:
    """``run`` with its deadline: past it, the task running the turn is cancelled where it
    waits (as by the caller, but told apart from that: ``run.expired``)."""
    deadline = asyncio.timeout(seconds)
    try:
        async with deadline:
            return await run.run()
    finally:
        run.expired = deadline.expired()


async def _settle(run: _TurnRun, work: Awaitable[TurnResult]) -> TurnResult:
    abort = run.turn.abort
    try:
        return await work
    except asyncio.CancelledError as exc:
        run.repair()
        caller_cancelled = (task := asyncio.current_task()) is not None and task.cancelling() > 0
        if caller_cancelled or not (run.expired or (abort is not None and abort.aborted)):
            raise exc from TurnCancelled(run.result("", None, "cancelled"))
        if abort is not None and abort.aborted:
            raise run.cancelled() from None
        raise run.timed_out() from None
    except Exception as exc:
        if abort is not None and abort.aborted:
            run.repair()
            raise run.cancelled() from exc
        if run.expired:  # asyncio.timeout's TimeoutError, or a tool that turned the
            run.repair()  # cancellation into an error of its own
            raise run.timed_out() from None
        if isinstance(exc, TurnError):
            run.gate.release()
            raise
        run.repair()
        if isinstance(exc, AgentRunnerError):
            stop: StopReason = (
                "budget_exceeded" if exc.code is ErrorCode.BUDGET_EXCEEDED else "error"
            )
            raise run.error(exc.code, exc.message, stop, hint=exc.hint) from exc
        raise run.error(
            ErrorCode.INTERNAL, f"internal error in the turn: {type(exc).__name__}: {exc}", "error"
        ) from exc


class _TurnRun:
    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.start = len(turn.messages)
        self.silenced = False
        self.expired = False  # the deadline passed
        self.responses = 0
        self.tool_calls = 0
        self.corrections = 0
        self.output_retries = 0
        self.usage = Usage()
        self.cost = 0
        self.cost_known = True
        self.model: str | None = None
        self.partial: list[str] = []
        self.current = ""
        self.finished: dict[str, ToolResult] = {}
        self.tools = {t.name: t for t in turn.tools}
        self.definitions = [t.definition for t in turn.tools]
        self.gate = BudgetGate(
            turn.cost, turn.budget, turn.prices, self.definitions, turn.output_schema
        )
        self.inflight: tuple[ChainEntry, ModelRequest] | None = None
        settings = turn.settings
        self.settings = settings
        # A tool choice that forces a call holds until the model has called tools: forced
        # every time, it would never let the model answer.
        self.after_tools = settings
        if settings is not None and settings.forces_tool:
            self.after_tools = settings.model_copy(update={"tool_choice": None})
        self.warned: set[str] = set()  # settings dropped with a warning: once a run each
        self.cut_by_budget: Reservation | None = None  # the last response's, if it lowered
        self.emit: Emit = self._emit
        # What the model says is passed on with the secrets cut (None: there are none).
        self.secrets = turn.secrets if turn.secrets else None
        self.text_stream: SecretStream | None = None
        self.thinking_stream: SecretStream | None = None
        if self.secrets is not None and turn.emit is not None and turn.stream:
            self.text_stream, self.thinking_stream = self.secrets.stream(), self.secrets.stream()

    def _emit(self, kind: str, data: EventData) -> None:
        if not self.silenced and self.turn.emit is not None:
            self.turn.emit(kind, data)

    async def run(self) -> TurnResult:
        turn = self.turn
        while True:
            self.check_limits()
            if self.gate.active:  # refused here, a request never becomes a step
                primary = turn.chain.entries[0]
                await self.gate.reserve(primary.model, self.request(primary))
            self.emit(
                "step.started",
                {"step": self.responses + 1, "model": turn.chain.entries[0].model.ref},
            )
            try:
                response, entry = await turn.chain.request(
                    self.build, self.on_delta if turn.stream else None, self.on_attempt
                )
            except ProviderError as exc:
                raise self.error(
                    exc.code, exc.message, "error", hint=exc.hint, retryable=exc.retryable
                ) from exc
            self.partial = []
            message = self.said(response.message)
            turn.messages.append(message)
            self.responses += 1
            self.model = entry.model.ref
            if not turn.stream:
                self.emit_whole(message)
            if response.finish_reason == "content_filter":
                raise self.error(
                    ErrorCode.CONTENT_FILTER,
                    f"{entry.model.ref} refused to answer: {message.text[:200]}",
                    "error",
                )
            if response.finish_reason == "length" and self.cut_by_budget is not None:
                self.stop_at_budget(message, self.cut_by_budget)
            if message.tool_calls:
                if response.finish_reason == "length":
                    self.answer_calls(
                        message.tool_calls,
                        "not run: the call was cut off at the output token limit",
                    )
                    raise self.error(
                        ErrorCode.VALIDATION,
                        "the model's tool call was cut off at the output token limit",
                        "max_tokens_exceeded",
                        hint="Raise limits.max_output_tokens.",
                    )
                await self.run_tools(message.tool_calls)
                continue
            output: Any = message.text
            if turn.output_schema is not None:
                parsed, problem = parse_output(message.text, turn.output_schema)
                if problem is not None:
                    if self.output_retries < turn.limits.max_output_retries:
                        self.output_retries += 1
                        turn.messages.append(UserMessage(correction(problem)))
                        continue
                    raise self.error(
                        ErrorCode.VALIDATION,
                        f"the answer does not match output_schema: {problem}",
                        "error",
                    )
                output = parsed
            self.emit("agent.message", {"text": message.text, "model": self.model})
            stop: StopReason = (
                "max_tokens_exceeded" if response.finish_reason == "length" else "end_turn"
            )
            return self.result(message.text, output, stop)

    # -- requests ------------------------------------------------------------------------

    def request(self, entry: ChainEntry) -> ModelRequest:
        turn = self.turn
        native = turn.output_schema is None or takes_schema_natively(entry)
        system = turn.system if native else turn.system + schema_instructions(turn.output_schema)
        settings = self.settings
        cap = output_cap(turn.limits.max_output_tokens, settings)
        if settings is not None and self.tool_calls:
            settings = self.after_tools
        return ModelRequest(
            model=entry.model.name,
            system=system,
            messages=turn.messages,
            tools=self.definitions,
            max_output_tokens=cap,
            output_schema=turn.output_schema if native else None,
            stream=turn.stream,
            cache_key=turn.cache_key,
            settings=settings,
        )

    async def build(self, entry: ChainEntry) -> ModelRequest:
        """One attempt's request, its worst case reserved against the budgets."""
        self.partial = []
        for stream in (self.text_stream, self.thinking_stream):
            if stream is not None:
                stream.rest()  # what a failed attempt held back: dropped with it
        self.current = entry.model.ref
        request = self.request(entry)
        if self.gate.active:
            await self.gate.reserve(entry.model, request)
        client = entry.client
        if request.settings is not None and isinstance(client, HttpModelClient):
            self.warn_dropped(entry, client.dropped_settings(request))
        self.inflight = (entry, request)
        return request

    def warn_dropped(self, entry: ChainEntry, dropped: list[tuple[str, str]]) -> None:
        """A setting the provider is not sent (it cannot take it, or not with the others, or
        not under this output cap) is said once a run, not sent to fail the request."""
        for setting, reason in dropped:
            if setting not in self.warned:
                self.warned.add(setting)
                self.emit(
                    "model.setting_dropped",
                    {"setting": setting, "model": entry.model.ref, "reason": reason},
                )

    def stop_at_budget(self, message: AssistantMessage, held: Reservation) -> None:
        """A reply cut off at an output cap the budget lowered: the run ends there."""
        message.interrupted = not message.tool_calls
        if message.tool_calls:
            self.answer_calls(
                message.tool_calls, "not run: the call was cut off at the budget's output cap"
            )
        raise self.error(
            ErrorCode.BUDGET_EXCEEDED,
            budget_cut_off(held),
            "budget_exceeded",
            hint=held.budget.hint if held.budget is not None else None,
        )

    def on_delta(self, delta: Delta) -> None:
        match delta:
            case TextDelta():
                self.partial.append(delta.text)
                if self.turn.emit is not None:  # no event built for a token nobody takes
                    text = delta.text
                    if self.text_stream is not None and not (text := self.text_stream.feed(text)):
                        return  # held back: it may begin a secret
                    self.emit("agent.token", {"token": text, "model": self.current})
            case ThinkingDelta():
                text = delta.text
                if self.thinking_stream is not None:
                    text = self.thinking_stream.feed(text)
                if text:
                    self.emit("agent.thinking", {"text": text, "model": self.current})
            case _:
                assert_never(delta)

    def said(self, message: AssistantMessage) -> AssistantMessage:
        """A reply as it is kept, sent back and shown: what its streamed deltas held back
        passed on, and every secret cut from its text, its thinking (a block that held one is
        not sent back: its signature no longer fits) and its tool calls' arguments."""
        secrets = self.secrets
        if secrets is None:
            return message
        if self.text_stream is not None and self.thinking_stream is not None:
            if thought := self.thinking_stream.rest():
                self.emit("agent.thinking", {"text": thought, "model": self.current})
            if text := self.text_stream.rest():
                self.emit("agent.token", {"token": text, "model": self.current})
        message.text = secrets.scrub(message.text)
        for thinking in message.thinking:
            cut = secrets.scrub(thinking.text)
            if cut != thinking.text:
                thinking.text, thinking.signature = cut, None
        for call in message.tool_calls:
            call.arguments = secrets.scrub_value(call.arguments)
            if call.raw_arguments is not None:
                call.raw_arguments = secrets.scrub(call.raw_arguments)
        return message

    def emit_whole(self, message: AssistantMessage) -> None:
        for thought in message.thinking:
            if thought.text:
                self.emit("agent.thinking", {"text": thought.text, "model": self.current})
        if message.text:
            self.emit("agent.token", {"token": message.text, "model": self.current})

    def on_attempt(
        self, attempt: Attempt, entry: ChainEntry, outcome: ModelResponse | ProviderError
    ) -> None:
        if isinstance(outcome, ModelResponse):
            usage = outcome.usage
            micros = self.turn.prices.cost_micros(
                entry.model.provider.name, entry.model.name, usage, outcome.model
            )
        elif self.partial:  # it failed mid-stream, after the provider began billing
            usage, micros = self.estimated_usage(entry)
        else:
            usage, micros = Usage(requests=1), 0
        self.inflight = None
        self.charge(entry, attempt.number, attempt.outcome, usage, micros)
        if isinstance(outcome, ProviderError):
            self.emit(
                "model.attempt_failed",
                {
                    "model": entry.model.ref,
                    "attempt": attempt.number,
                    "error_code": str(outcome.code),
                    "status": outcome.status,
                    "duration_ms": attempt.duration_ms,
                    "message": outcome.message,
                    "failover": outcome.failover,
                },
            )

    def estimated_usage(self, entry: ChainEntry) -> tuple[Usage, int | None]:
        """What the request in flight used by estimate: the size of what it sent (not the
        worst case its reservation holds), and the output streamed."""
        request = self.inflight[1] if self.inflight is not None else self.request(entry)
        usage = Usage(
            input_tokens=self.gate.sent_tokens(entry.model.ref, request),
            output_tokens=estimate_output_tokens("".join(self.partial)),
            requests=1,
            estimated=True,
        )
        prices = self.turn.prices
        return usage, prices.cost_micros(entry.model.provider.name, entry.model.name, usage)

    def charge(
        self, entry: ChainEntry, attempt: int, outcome: str, usage: Usage, micros: int | None
    ) -> None:
        """Record what one attempt cost; only then is its reservation given back, so what is
        spent plus what is held never drops below what was really used."""
        self.usage.add(usage)
        self.turn.cost.add(micros, usage)
        self.turn.tracing.charged(entry, usage, micros, answered=outcome == "ok")
        if micros is None:
            self.cost_known = False
        else:
            self.cost += micros
        if self.turn.emit is not None:  # even after an abort: money is always recorded
            emit: Emit = self.turn.emit
            emit(
                "cost.updated",
                {
                    "model": entry.model.ref,
                    "attempt": attempt,
                    "outcome": outcome,
                    "input_tokens": usage.input_tokens,
                    "output_tokens": usage.output_tokens,
                    "cache_read_tokens": usage.cache_read_tokens,
                    "cache_write_tokens": usage.cache_write_tokens,
                    "cost_micros": micros,
                    "cost_known": micros is not None,
                    "estimated": usage.estimated,
                    "cumulative_cost_micros": self.turn.cost.root.micros,
                },
            )
        settled = self.gate.settle(usage)
        self.cut_by_budget = settled if settled is not None and settled.lowered else None

    def charge_interrupted(self) -> None:
        """A request cut off mid-way (cancelled, or the turn failed around it) was still sent:
        charge its estimate."""
        if self.inflight is None:
            self.gate.release()
            return
        entry, _ = self.inflight
        usage, micros = self.estimated_usage(entry)
        self.inflight = None
        self.charge(entry, len(self.turn.chain.attempts) + 1, "cancelled", usage, micros)
        self.cut_by_budget = None

    def check_limits(self) -> None:
        limits = self.turn.limits
        if self.responses >= limits.max_steps:
            raise self.error(
                ErrorCode.TURN_LIMIT,
                f"reached max_steps ({limits.max_steps}) model requests without a final answer",
                "max_steps",
                hint="Raise limits.max_steps in the agent file.",
            )
        if limits.max_tokens is not None and self.usage.total_tokens >= limits.max_tokens:
            raise self.error(
                ErrorCode.TURN_LIMIT,
                f"used {self.usage.total_tokens} tokens; "
                f"the limit is max_tokens ({limits.max_tokens})",
                "max_tokens_exceeded",
            )

    # -- tools ----------------------------------------------------------------------------

    async def run_tools(self, calls: Sequence[ToolCall]) -> None:
        limits = self.turn.limits
        if (
            limits.max_tool_calls is not None
            and self.tool_calls + len(calls) > limits.max_tool_calls
        ):
            self.answer_calls(calls, "not run: the tool call limit was reached")
            raise self.error(
                ErrorCode.TURN_LIMIT,
                f"reached max_tool_calls ({limits.max_tool_calls})",
                "max_steps",
            )
        self.tool_calls += len(calls)
        if log.isEnabledFor(logging.INFO):  # an agent's decision, for structured logs
            names = [call.name for call in calls]
            log.info("chose tools: %s", ", ".join(names), extra={"tools": names})
        for call in calls:
            self.emit(
                "agent.tool_call",
                {
                    "call_id": call.id,
                    "name": call.name,
                    "input": call.arguments,
                    "model": self.current,  # the model of the attempt that answered
                },
            )
        if self.turn.before_tools is not None:
            # The conversation so far (ending with these calls) is made durable before any
            # tool runs, so a crash leaves a record the next run can repair.
            await self.turn.before_tools(self.turn.messages[self.start :])
        self.finished = {}
        try:
            if len(calls) == 1:
                await self.run_tool(calls[0])
            else:
                async with asyncio.TaskGroup() as group:
                    for call in calls:
                        group.create_task(self.run_tool(call))
        except* ToolDenied as group:
            self.answer_calls(calls, INTERRUPTED)
            raise self.error(
                ErrorCode.TOOL_DENIED, str(group.exceptions[0]) or "tool call denied", "error"
            ) from None
        except* _ToolCrashed as group:
            crash = group.exceptions[0]
            assert isinstance(crash, _ToolCrashed)
            self.answer_calls(calls, INTERRUPTED)
            raise self.error(
                ErrorCode.TOOL_FAILED, f"tool '{crash.name}' failed: {crash.cause}", "error"
            ) from crash.__cause__
        if any(c.id not in self.finished for c in calls):
            # A tool of several raised CancelledError, which a task group takes for that task
            # being cancelled: the turn is cancelled, as with a single tool.
            self.answer_calls(calls, INTERRUPTED)
            raise asyncio.CancelledError
        errors = sum(1 for c in calls if self.finished[c.id].is_error)
        self.turn.messages.extend(self.finished[c.id] for c in calls)
        self.finished = {}
        self.corrections += errors
        if errors and self.corrections > limits.max_corrections:
            raise self.error(
                ErrorCode.TOOL_FAILED,
                f"the model kept making invalid tool calls ({self.corrections} so far)",
                "invalid_tool_call",
            )

    async def run_tool(self, call: ToolCall) -> None:
        tracing = self.turn.tracing
        with tracing.tool(call) as span:  # current while the tool runs: runs it starts nest
            await self.call_tool(call)
            tracing.tool_result(span, self.finished[call.id])

    async def call_tool(self, call: ToolCall) -> None:
        tool = self.tools.get(call.name)
        if tool is None:
            known = ", ".join(self.tools) or "none"
            self.settle(call, f"Unknown tool '{call.name}'. Available tools: {known}.", error=True)
            return
        if call.raw_arguments is not None:
            self.settle(
                call, f"The arguments are not valid JSON: {call.raw_arguments[:200]}", error=True
            )
            return
        problem = tool.validation_error(call.arguments)
        if problem is not None:
            self.settle(call, f"Invalid arguments for '{call.name}': {problem}", error=True)
            return
        try:
            value = await tool.fn(
                call.arguments, ToolContext(call.id, call.name, self.turn.tool_context)
            )
        except ToolRetry as exc:
            self.settle(call, str(exc), error=True)
            return
        except (ToolDenied, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise _ToolCrashed(call.name, exc, self.turn.secrets) from exc
        self.settle(call, render_result(value), error=False)

    def settle(self, call: ToolCall, content: str, *, error: bool) -> None:
        if self.turn.secrets:
            content = self.turn.secrets.scrub(content)
        result = ToolResult(call.id, call.name, content, is_error=error)
        self.finished[call.id] = result
        self.emit(
            "agent.tool_result",
            {
                "call_id": call.id,
                "name": call.name,
                "success": not error,
                "is_error": error,
                "output_summary": content[:200],
                "output": content,
            },
        )

    def answer_calls(self, calls: Sequence[ToolCall], reason: str) -> None:
        """Give every call of the last assistant message a result, so the history can be resent."""
        for call in calls:
            self.turn.messages.append(
                self.finished.get(call.id) or ToolResult(call.id, call.name, reason, is_error=True)
            )
        self.finished = {}

    def repair(self) -> None:
        """After a cancellation or failure: charge the request in flight, keep its streamed
        text as an interrupted message, answer calls that never finished."""
        self.charge_interrupted()
        messages = self.turn.messages
        if self.partial:
            self.model = self.model or self.current  # the model that said it, for the record
            text = "".join(self.partial)
            messages.append(
                AssistantMessage(
                    text=self.secrets.scrub(text) if self.secrets else text,
                    model=self.current or None,
                    interrupted=True,
                )
            )
            self.partial = []
            return
        last = messages[-1] if len(messages) > self.start else None
        if isinstance(last, AssistantMessage) and last.tool_calls:
            self.answer_calls(last.tool_calls, INTERRUPTED)

    # -- settling -------------------------------------------------------------------------

    def result(self, text: str, output: Any, stop: StopReason) -> TurnResult:
        return TurnResult(
            text=text,
            output=output,
            new_messages=self.turn.messages[self.start :],
            usage=self.usage,
            cost_micros=self.cost,
            cost_known=self.cost_known,
            stop_reason=stop,
            model=self.model,
            attempts=list(self.turn.chain.attempts),
            tool_calls=self.tool_calls,
        )

    def error(
        self,
        code: ErrorCode,
        message: str,
        stop: StopReason,
        hint: str | None = None,
        retryable: bool | None = None,
    ) -> TurnError:
        result = self.result("", None, stop)
        return TurnError(
            code, message, stop_reason=stop, result=result, hint=hint, retryable=retryable
        )

    def cancelled(self) -> TurnError:
        """Stopped by the turn's abort signal: the message is the reason it was given, the
        code says that it was cancelled (``errors.in_words``: said once)."""
        reason = self.turn.abort.reason if self.turn.abort is not None else None
        return self.error(ErrorCode.CANCELLED, reason or "aborted", "cancelled")

    def timed_out(self) -> TurnError:
        seconds = self.turn.limits.timeout_s
        return self.error(
            ErrorCode.RUN_TIMEOUT,
            f"the run passed its deadline, limits.timeout_s ({seconds:g} s), which covers "
            "model requests, retries, waits and tool calls",
            "timeout",
            hint="Raise limits.timeout_s in the agent file if the work needs longer.",
        )


class _ToolCrashed(Exception):
    def __init__(self, name: str, cause: BaseException, secrets: Secrets | None) -> None:
        self.name = name
        self.cause = f"{type(cause).__name__}: {cause}"
        if secrets:  # the run's error, its record and events quote it: no key a tool read
            self.cause = secrets.scrub(self.cause)
        super().__init__(f"tool '{name}' failed: {self.cause}")  # what its span says


def output_cap(limit: int | None, settings: ModelSettings | None) -> int | None:
    """A request's output cap: the lower of the agent's limit and the run's
    ``max_output_tokens`` setting (what the history must leave room for, too)."""
    asked = settings.max_output_tokens if settings is not None else None
    caps = [cap for cap in (limit, asked) if cap]
    return min(caps) if caps else None
