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

Each request's attempts (built, reserved, streamed, charged) are ``engine.model_calls``'; the
tool calls, run and each answered, are ``engine.tool_calls``'. This module is the loop between
them: the limits, the steps, the deadline and cancellation, and what the turn comes to.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agentrunner.engine.abort import AbortSignal
from agentrunner.engine.budget import CostTracker, ExternalBudget, Reservation, budget_cut_off
from agentrunner.engine.failures import ProviderError
from agentrunner.engine.fallback import Attempt, FallbackChain
from agentrunner.engine.messages import (
    AssistantMessage,
    Message,
    Usage,
    UserMessage,
    needed_inputs,
)
from agentrunner.engine.model_calls import ModelCalls
from agentrunner.engine.pause import Pending, Policy, Resumed, TurnPaused
from agentrunner.engine.pricing import PriceBook
from agentrunner.engine.secrets import Secrets
from agentrunner.engine.structured_output import correction, parse_output
from agentrunner.engine.tool_calls import INTERRUPTED, ToolCalls
from agentrunner.engine.tools import Tool
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
    "run_turn",
]

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
    "waiting",
]


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
    policy: Policy | None = None  # which calls wait for a person (engine.pause); None: none
    resume: Resumed | None = None  # the paused step this turn finishes first
    # sees the final answer before it is said (its text event, ``agent.message``) and refuses
    # it by raising an ``AgentRunnerError``: the answer is then dropped from the messages and
    # the turn fails with that error. With it, a reply's text is not streamed (``Engine.run``).
    check_answer: Callable[[str], Awaitable[None]] | None = None


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
        if isinstance(exc, TurnError | TurnPaused):
            run.gate.release()
            raise
        run.repair()
        if isinstance(exc, AgentRunnerError):
            stop: StopReason = (
                "budget_exceeded" if exc.code is ErrorCode.BUDGET_EXCEEDED else "error"
            )
            error = run.error(exc.code, exc.message, stop, hint=exc.hint)
            error.details.update(exc.details)  # what the error says of itself goes with it
            raise error from exc
        raise run.error(
            ErrorCode.INTERNAL, f"internal error in the turn: {type(exc).__name__}: {exc}", "error"
        ) from exc


class _TurnRun:
    """One turn as it runs: its steps, each a model request (``model_calls``) and the tool
    calls its reply makes (``tool_calls``), until an answer or a failure settles it."""

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.start = len(turn.messages)
        self.silenced = False
        self.expired = False  # the deadline passed
        self.responses = 0
        self.output_retries = 0
        self.model: str | None = None
        self.emit: Emit = self._emit
        self.model_calls = ModelCalls(turn, self.emit)
        self.gate = self.model_calls.gate
        self.tool_calls = ToolCalls(turn, self.emit, self.error, self.start)

    def _emit(self, kind: str, data: EventData) -> None:
        if not self.silenced and self.turn.emit is not None:
            self.turn.emit(kind, data)

    async def run(self) -> TurnResult:
        try:
            return await self._steps()
        finally:  # what the run does after its turn is of no step
            self.turn.tracing.turn_step(None)

    async def _steps(self) -> TurnResult:
        turn = self.turn
        model_calls, tool_calls = self.model_calls, self.tool_calls
        if turn.resume is not None:
            self.responses = turn.resume.steps
            await tool_calls.resume(turn.resume)
            model_calls.tools_ran()
        while True:
            self.check_limits()
            if self.gate.active:  # refused here, a request never becomes a step
                primary = turn.chain.entries[0]
                await self.gate.reserve(primary.model, model_calls.request(primary))
            self.emit(
                "step.started",
                {"step": self.responses + 1, "model": turn.chain.entries[0].model.ref},
            )
            turn.tracing.turn_step(self.responses + 1)
            try:
                response, entry = await turn.chain.request(
                    model_calls.build,
                    model_calls.on_delta if turn.stream else None,
                    model_calls.on_attempt,
                    needed_inputs(turn.messages),
                )
            except ProviderError as exc:
                raise self.error(
                    exc.code, exc.message, "error", hint=exc.hint, retryable=exc.retryable
                ) from exc
            message = model_calls.reply(response.message)
            turn.messages.append(message)
            self.responses += 1
            self.model = entry.model.ref
            if response.finish_reason == "content_filter":
                raise self.error(
                    ErrorCode.CONTENT_FILTER,
                    f"{entry.model.ref} refused to answer: {message.text[:200]}",
                    "error",
                )
            if response.finish_reason == "length" and model_calls.cut_by_budget is not None:
                self.stop_at_budget(message, model_calls.cut_by_budget)
            if message.tool_calls:
                if response.finish_reason == "length":
                    tool_calls.answer(
                        message.tool_calls,
                        "not run: the call was cut off at the output token limit",
                    )
                    raise self.error(
                        ErrorCode.VALIDATION,
                        "the model's tool call was cut off at the output token limit",
                        "max_tokens_exceeded",
                        hint="Raise limits.max_output_tokens.",
                    )
                pending = await tool_calls.run(message.tool_calls, model_calls.current)
                if pending:
                    raise self.paused(pending)
                model_calls.tools_ran()
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
            if turn.check_answer is not None:
                await self.checked(message)
            self.emit("agent.message", {"text": message.text, "model": self.model})
            stop: StopReason = (
                "max_tokens_exceeded" if response.finish_reason == "length" else "end_turn"
            )
            return self.result(message.text, output, stop)

    async def checked(self, message: AssistantMessage) -> None:
        """The final answer past ``check_answer``, its text said (held back until now); one
        refused is not said, nor kept to be sent again."""
        assert self.turn.check_answer is not None
        try:
            await self.turn.check_answer(message.text)
        except AgentRunnerError:
            self.turn.messages.remove(message)
            raise
        if message.text:
            self.emit("agent.token", {"token": message.text, "model": self.model_calls.current})

    def check_limits(self) -> None:
        limits = self.turn.limits
        if self.responses >= limits.max_steps:
            raise self.error(
                ErrorCode.TURN_LIMIT,
                f"reached max_steps ({limits.max_steps}) model requests without a final answer",
                "max_steps",
                hint="Raise limits.max_steps in the agent file.",
            )
        usage = self.model_calls.usage
        if limits.max_tokens is not None and usage.total_tokens >= limits.max_tokens:
            raise self.error(
                ErrorCode.TURN_LIMIT,
                f"used {usage.total_tokens} tokens; the limit is max_tokens ({limits.max_tokens})",
                "max_tokens_exceeded",
            )

    def stop_at_budget(self, message: AssistantMessage, held: Reservation) -> None:
        """A reply cut off at an output cap the budget lowered: the run ends there."""
        message.interrupted = not message.tool_calls
        if message.tool_calls:
            self.tool_calls.answer(
                message.tool_calls, "not run: the call was cut off at the budget's output cap"
            )
        raise self.error(
            ErrorCode.BUDGET_EXCEEDED,
            budget_cut_off(held),
            "budget_exceeded",
            hint=held.budget.hint if held.budget is not None else None,
        )

    def repair(self) -> None:
        """After a cancellation or failure: charge the request in flight, keep its streamed
        text as an interrupted message, answer calls that never finished."""
        messages = self.turn.messages
        cut_off = self.model_calls.cut_off()
        if cut_off is not None:
            self.model = self.model or self.model_calls.current  # who said it, for the record
            messages.append(cut_off)
            return
        last = messages[-1] if len(messages) > self.start else None
        if isinstance(last, AssistantMessage) and last.tool_calls:
            self.tool_calls.answer(last.tool_calls, INTERRUPTED)

    # -- settling -------------------------------------------------------------------------

    def result(self, text: str, output: Any, stop: StopReason) -> TurnResult:
        model_calls = self.model_calls
        return TurnResult(
            text=text,
            output=output,
            new_messages=self.turn.messages[self.start :],
            usage=model_calls.usage,
            cost_micros=model_calls.cost,
            cost_known=model_calls.cost_known,
            stop_reason=stop,
            model=self.model,
            attempts=list(self.turn.chain.attempts),
            tool_calls=self.tool_calls.count,
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

    def paused(self, pending: list[Pending]) -> TurnPaused:
        """Stopped for a person: the step's other calls ran (their results held, none in the
        history yet), ``pending`` wait."""
        tool_calls = self.tool_calls
        return TurnPaused(
            self.result("", None, "waiting"),
            pending,
            tool_calls.finished,
            steps=self.responses,
            corrections=tool_calls.corrections,
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
