"""Spans of runs, model requests and tool calls, with the OpenTelemetry API in the GenAI
semantic conventions, so that Phoenix, Langfuse, Logfire, Jaeger or Tempo show them as they are:

    enqueue {channel or agent}    runs queued: a channel post, a run on a thread (queueing)
      wait {channel}              `post`/`dm` waiting for the replies (the CLI)
      claim {agent}               a worker's claim, in whichever process: the run's queue wait
      invoke_agent {agent}        a run (the runner); a queued one under what queued it
        thread_lock               the wait for its thread
        resolve_agent             its agent, as its file is now
        build_prompt              its system prompt and notes
        chat {model}              one per model request attempt, fallbacks as siblings
        execute_tool {tool}       one per tool call; a delegated run, a post, nest under it
        post_run {effect}         a thread's title, after the run
    execute_task {agent}          a task: its cache_lookup, and its run (invoke_agent) on a miss

A queued run keeps the W3C trace context it was queued in (``traceparent``, ``tracestate``),
and the worker that claims it continues it, so a post and the runs that answer it, in any
process, are one trace. Only the API is used here; the SDK (a tracer provider and its
exporter) is set up by the composition root, and only when ``[telemetry] enabled``. With
telemetry off this module is never imported: the engine and the runner hold ``None`` and
check for it.

The spans of runs, model requests and tool calls also measure them (``engine/metrics``: the
counts, durations and tokens), as each ends; the run a span belongs to is known from the
context, so a tool call or a charge is counted to its run's agent.

Prompts, replies, tool arguments and results go on spans only with ``capture_content``, and
then with every secret the runtime holds cut out (``engine.secrets``), as from tool results.
They go there twice: in the GenAI conventions' attributes, and as OpenInference's
``input.value`` and ``output.value`` (with their mime types), which Phoenix shows as a span's
input and output.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opentelemetry import context, propagate, trace
from opentelemetry.context import Context
from opentelemetry.metrics import NoOpMeter
from opentelemetry.trace import Span, SpanKind, StatusCode

from agentrunner.engine.fold import Delta, DeltaSink
from agentrunner.engine.messages import (
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from agentrunner.engine.metrics import Metrics
from agentrunner.engine.tools import ToolDenied
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.json_text import json_text

if TYPE_CHECKING:
    from agentrunner.engine.failures import ProviderError
    from agentrunner.engine.fallback import ChainEntry
    from agentrunner.engine.secrets import Secrets

__all__ = ["Tracing"]

# The GenAI conventions' names (opentelemetry-semantic-conventions holds them as incubating,
# so they are spelled out here rather than imported from a module that may move).
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_ID = "gen_ai.agent.id"
AGENT_NAME = "gen_ai.agent.name"
AGENT_DESCRIPTION = "gen_ai.agent.description"
CONVERSATION = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"
HTTP_STATUS = "http.response.status_code"
# OpenInference's, what Phoenix shows as a span's input and output.
INPUT_VALUE = "input.value"
INPUT_MIME = "input.mime_type"
OUTPUT_VALUE = "output.value"
OUTPUT_MIME = "output.mime_type"
TEXT, JSON = "text/plain", "application/json"
# Ours, for what the conventions have no name for.
RUN_ID = "agentrunner.run.id"
THREAD_ID = "agentrunner.thread.id"
PARENT_RUN_ID = "agentrunner.parent_run.id"
DEPTH = "agentrunner.depth"
STOP_REASON = "agentrunner.stop_reason"
COST_USD = "agentrunner.cost_usd"
MODEL_REF = "agentrunner.model"
ATTEMPT = "agentrunner.attempt"
FALLBACK = "agentrunner.fallback"
RETRY_REASON = "agentrunner.retry.reason"
CACHE_HIT = "agentrunner.cache.hit"
PROMPT_CHARS = "agentrunner.prompt.system_chars"
NOTES_CHARS = "agentrunner.prompt.notes_chars"
QUEUE_DESTINATION = "agentrunner.queue.destination"
QUEUE_AGENTS = "agentrunner.queue.agents"
QUEUE_RUN_IDS = "agentrunner.queue.run_ids"
QUEUE_REPEATED = "agentrunner.queue.repeated"
QUEUE_WAIT = "agentrunner.queue.wait_s"
WORKER_ID = "agentrunner.worker.id"


@dataclass(slots=True)
class _RunScope:
    """The run whose work is under way: whose agent a tool call and a charge count to."""

    agent_id: str
    name: str


@dataclass(slots=True)
class _Measure:
    """What a measured span's metrics need when it ends: its attributes, and how it failed."""

    span: Span
    attributes: dict[str, Any]
    error: str | None = None


_RUN: ContextVar[_RunScope | None] = ContextVar("agentrunner_run", default=None)
_MEASURE: ContextVar[_Measure | None] = ContextVar("agentrunner_measure", default=None)


class Tracing:
    """Makes the spans, and records the metrics they measure; one per engine, shared by its
    runs. Without ``metrics`` nothing is measured."""

    def __init__(
        self,
        tracer: trace.Tracer,
        *,
        capture_content: bool = False,
        secrets: Secrets | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.tracer = tracer
        self.capture_content = capture_content
        self.secrets = secrets
        self.metrics = metrics or Metrics(NoOpMeter("agentrunner"))

    # -- runs (the runner) -------------------------------------------------------------------

    def run(
        self,
        agent_id: str,
        *,
        thread_id: str | None,
        message: str,
        parent_run_id: str | None = None,
        depth: int = 0,
    ) -> AbstractContextManager[Span]:
        """The span of one run, current while it runs (its model requests and tool calls,
        and the runs its tools start, are its descendants); a raised error sets
        ``error.type`` to its code."""
        attributes: dict[str, Any] = {
            OPERATION: "invoke_agent",
            AGENT_ID: agent_id,
            AGENT_NAME: agent_id,
            DEPTH: depth,
        }
        if thread_id is not None:
            attributes[THREAD_ID] = thread_id
            attributes[CONVERSATION] = thread_id
        if parent_run_id is not None:
            attributes[PARENT_RUN_ID] = parent_run_id
        if self.capture_content:
            attributes[INPUT_MESSAGES] = self._json([_user(message)])
            attributes[INPUT_VALUE], attributes[INPUT_MIME] = self._scrub(message), TEXT
        self.metrics.run_started(agent_id)
        scope = _RunScope(agent_id, agent_id)
        return self._span(
            f"invoke_agent {agent_id}",
            SpanKind.INTERNAL,
            attributes,
            measure=lambda seconds, ended: self.metrics.run_ended(
                agent_id, scope.name, seconds, ended.error
            ),
            run=scope,
        )

    def run_started(self, run_id: str, name: str, description: str) -> str:
        """What a run knows once its agent is loaded and its id given (after the thread lock,
        so that a thread's runs are numbered in the order they ran), on the current run's span;
        its trace id, as the tools show it (32 hex digits)."""
        span = trace.get_current_span()
        span.set_attribute(RUN_ID, run_id)
        span.set_attribute(AGENT_NAME, name)
        if (scope := _RUN.get()) is not None:
            scope.name = name
        if description:
            span.set_attribute(AGENT_DESCRIPTION, description)
        return trace.format_trace_id(span.get_span_context().trace_id)

    def run_done(
        self,
        span: Span,
        *,
        stop_reason: str,
        model: str | None,
        usage: Usage,
        cost_micros: int,
        cost_known: bool,
        text: str,
    ) -> None:
        """A run that returned: settled as completed, or cancelled (``error.type``)."""
        span.set_attribute(STOP_REASON, stop_reason)
        if model is not None:
            span.set_attribute(MODEL_REF, model)
        span.set_attribute(INPUT_TOKENS, usage.input_tokens)
        span.set_attribute(OUTPUT_TOKENS, usage.output_tokens)
        if cost_known:
            span.set_attribute(COST_USD, cost_micros / 1_000_000)
        if stop_reason == "cancelled":
            self._fail(span, str(ErrorCode.CANCELLED), "cancelled")
        elif self.capture_content:
            span.set_attribute(OUTPUT_MESSAGES, self._json([_assistant(text, (), stop_reason)]))
            span.set_attribute(OUTPUT_VALUE, self._scrub(text))
            span.set_attribute(OUTPUT_MIME, TEXT)

    # -- tasks ----------------------------------------------------------------------------

    def task(self, agent_id: str) -> AbstractContextManager[Span]:
        """One task (seed 004's ``execute``): its cache lookup, and its run unless the cache
        answered. A failure becomes the task's outcome, but is ``error.type`` here."""
        # no gen_ai.operation.name: the conventions have no task, and tools read that name
        attributes = {AGENT_ID: agent_id}
        return self._span(f"execute_task {agent_id}", SpanKind.INTERNAL, attributes)

    def task_done(
        self,
        span: Span,
        *,
        model: str | None,
        cached: bool,
        error: Mapping[str, Any] | None,
    ) -> None:
        """A task that returned its outcome: answered (from the cache or not), or failed as
        an outcome (a run stopped by its abort signal)."""
        if model is not None:
            span.set_attribute(MODEL_REF, model)
        span.set_attribute(CACHE_HIT, cached)
        if error is not None:
            self._fail(span, str(error["code"]), self._scrub(str(error["message"])))

    def cache_looked_up(self, span: Span, *, hit: bool) -> None:
        span.set_attribute(CACHE_HIT, hit)

    def step(
        self, name: str, *, thread_id: str | None = None, agent_id: str | None = None
    ) -> AbstractContextManager[Span]:
        """A step that is not a model request or a tool call: the wait for a run's thread
        lock (``thread_lock``), finding its agent as its file is now (``resolve_agent``),
        building its prompt (``build_prompt``), a task's cache lookup (``cache_lookup``)."""
        attributes: dict[str, Any] = {} if thread_id is None else {THREAD_ID: thread_id}
        if agent_id is not None:
            attributes[AGENT_ID] = agent_id
        return self._span(name, SpanKind.INTERNAL, attributes)

    def prompt_built(self, span: Span, system: str, notes: str | None) -> None:
        span.set_attribute(PROMPT_CHARS, len(system))
        span.set_attribute(NOTES_CHARS, len(notes or ""))

    def effect(self, name: str, thread_id: str) -> AbstractContextManager[Span]:
        """A post-run effect (a thread's title), started by the run, done after it: its model
        request is charged to the run's agent (a cost row with the run), so its tokens and cost
        count to that agent here too (the run's scope, which the effect's task inherited)."""
        attributes = {THREAD_ID: thread_id, CONVERSATION: thread_id}
        return self._span(f"post_run {name}", SpanKind.INTERNAL, attributes)

    # -- queued runs: queueing, a worker's claim, a caller's wait ------------------------------

    @contextmanager
    def enqueue(self, destination: str) -> Iterator[tuple[Span, dict[str, str]]]:
        """Queueing runs in agents' mailboxes: a channel post (who hears it, the message, a run
        for each) or a run on a thread, for ``destination`` (the channel, the agent). Yields
        the span and the trace context to keep with the runs (W3C ``traceparent``,
        ``tracestate``): the workers that claim them, in any process, continue it, so their
        spans are this one's children."""
        attributes = {QUEUE_DESTINATION: destination}
        with self._span(f"enqueue {destination}", SpanKind.PRODUCER, attributes) as span:
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            yield span, carrier

    def enqueued(
        self, span: Span, agents: Sequence[str], run_ids: Sequence[str], *, repeated: bool
    ) -> None:
        """What was queued; ``repeated``: a repeat of an idempotent request, which queued
        nothing (the first request's runs stand)."""
        span.set_attribute(QUEUE_AGENTS, list(agents))
        span.set_attribute(QUEUE_RUN_IDS, list(run_ids))
        if len(set(agents)) == 1:
            span.set_attribute(AGENT_ID, agents[0])
        if repeated:
            span.set_attribute(QUEUE_REPEATED, True)

    def claimed(
        self,
        *,
        run_id: str,
        agent_id: str,
        attempt: int,
        worker_id: str,
        queued_at: float,
        claimed_at: float,
        trace_context: Mapping[str, str] | None,
        asked_ns: int,
    ) -> None:
        """A worker's claim of a queued run, from when it asked (``asked_ns``) until now: a
        child of the span the run was queued in (a run queued with telemetry off starts a
        trace of its own), with the time the run waited in its mailbox."""
        span = self.tracer.start_span(
            f"claim {agent_id}",
            context=_remote(trace_context),
            kind=SpanKind.CONSUMER,
            attributes={
                AGENT_ID: agent_id,
                RUN_ID: run_id,
                ATTEMPT: attempt,
                WORKER_ID: worker_id,
                # two processes' clocks (the database's and the queuing one's on PostgreSQL)
                QUEUE_WAIT: max(0.0, claimed_at - queued_at),
            },
            start_time=asked_ns,
        )
        span.end()

    @contextmanager
    def continued(self, trace_context: Mapping[str, str] | None) -> Iterator[None]:
        """The block runs in the trace a queued run was queued in (``trace_context``: W3C
        ``traceparent``, ``tracestate``), in whichever process; without one (queued with
        telemetry off), or with a malformed one, its spans start a trace of their own rather
        than join whatever span is current."""
        token = context.attach(_remote(trace_context))
        try:
            yield
        finally:
            context.detach(token)

    def wait(
        self, destination: str, run_ids: Sequence[str], trace_context: Mapping[str, str] | None
    ) -> AbstractContextManager[Span]:
        """A caller waiting for the runs it queued (``post``, ``dm``), in the trace they were
        queued in (``trace_context``): beside the workers' spans, under the ``enqueue``."""
        attributes = {QUEUE_DESTINATION: destination, QUEUE_RUN_IDS: list(run_ids)}
        parent = None if trace_context is None else _remote(trace_context)
        return self._span(f"wait {destination}", SpanKind.INTERNAL, attributes, parent=parent)

    # -- model requests (the fallback chain) -----------------------------------------------

    def chat(
        self,
        entry: ChainEntry,
        request: ModelRequest,
        *,
        attempt: int,
        fallback: bool,
        retry_reason: str | None,
    ) -> AbstractContextManager[Span]:
        """One model request attempt; ``retry_reason`` is the code of the failure before it."""
        model = entry.model
        attributes: dict[str, Any] = {
            OPERATION: "chat",
            PROVIDER: model.provider.name,
            REQUEST_MODEL: model.name,
            MODEL_REF: model.ref,
            ATTEMPT: attempt,
            FALLBACK: fallback,
        }
        if retry_reason is not None:
            attributes[RETRY_REASON] = retry_reason
        if request.max_output_tokens is not None:
            attributes[REQUEST_MAX_TOKENS] = request.max_output_tokens
        if self.capture_content:
            if request.system:
                attributes[SYSTEM_INSTRUCTIONS] = self._json(
                    [{"type": "text", "content": request.system}]
                )
            messages = attributes[INPUT_MESSAGES] = self._json(
                [_message(m) for m in request.messages]
            )
            attributes[INPUT_VALUE], attributes[INPUT_MIME] = messages, JSON
        return self._span(
            f"chat {model.name}",
            SpanKind.CLIENT,
            attributes,
            measure=lambda seconds, ended: self.metrics.requested(
                ended.attributes, seconds, ended.error
            ),
            measured={PROVIDER: model.provider.name, REQUEST_MODEL: model.name},
        )

    def streaming(self, entry: ChainEntry, on_delta: DeltaSink | None) -> DeltaSink | None:
        """``on_delta`` for one attempt about to be sent, timing its first delta (the time to
        the first chunk, of a streamed reply only)."""
        if on_delta is None:
            return None
        sent = time.perf_counter()
        request = {PROVIDER: entry.model.provider.name, REQUEST_MODEL: entry.model.name}
        first = True

        def sink(delta: Delta) -> None:
            nonlocal first
            if first:
                first = False
                self.metrics.streamed(request, time.perf_counter() - sent)
            on_delta(delta)

        return sink

    def provider_error(self, span: Span, error: ProviderError) -> None:
        """What the provider answered, beside ``error.type`` (set as the error leaves the span)."""
        if error.status is not None:
            span.set_attribute(HTTP_STATUS, error.status)

    def response(self, span: Span, response: ModelResponse) -> None:
        if (measure := self._measure(span)) is not None:
            measure.attributes[RESPONSE_MODEL] = response.model
        span.set_attribute(RESPONSE_MODEL, response.model)
        span.set_attribute(FINISH_REASONS, [response.finish_reason])
        span.set_attribute(INPUT_TOKENS, response.usage.input_tokens)
        span.set_attribute(OUTPUT_TOKENS, response.usage.output_tokens)
        if self.capture_content:
            message = response.message
            said = self._json(
                [_assistant(message.text, message.tool_calls, response.finish_reason)]
            )
            span.set_attribute(OUTPUT_MESSAGES, said)
            span.set_attribute(OUTPUT_VALUE, said)
            span.set_attribute(OUTPUT_MIME, JSON)

    def charged(
        self, entry: ChainEntry, usage: Usage, micros: int | None, *, answered: bool
    ) -> None:
        """What an attempt was charged (as its cost row records it), to the current run's
        agent."""
        scope = _RUN.get()
        self.metrics.charged(
            scope.agent_id if scope else None,
            {PROVIDER: entry.model.provider.name, REQUEST_MODEL: entry.model.name},
            usage,
            micros,
            answered=answered,
        )

    # -- tool calls (the turn) ----------------------------------------------------------------

    def tool(self, call: ToolCall) -> AbstractContextManager[Span]:
        """One tool call, current while the tool runs (a run it starts nests under it)."""
        attributes: dict[str, Any] = {
            OPERATION: "execute_tool",
            TOOL_NAME: call.name,
            TOOL_CALL_ID: call.id,
            TOOL_TYPE: "function",
        }
        if self.capture_content:
            raw = call.raw_arguments  # arguments that are not JSON, as the model wrote them
            arguments = attributes[TOOL_ARGUMENTS] = self._scrub(
                raw if raw is not None else json_text(call.arguments)
            )
            attributes[INPUT_VALUE] = arguments
            attributes[INPUT_MIME] = TEXT if raw is not None else JSON
        scope = _RUN.get()
        agent = (scope.agent_id, scope.name) if scope else None
        return self._span(
            f"execute_tool {call.name}",
            SpanKind.INTERNAL,
            attributes,
            ErrorCode.TOOL_FAILED,
            measure=lambda seconds, ended: self.metrics.tool_called(
                call.name, agent, seconds, ended.error
            ),
        )

    def tool_result(self, span: Span, result: ToolResult) -> None:
        """The result the model gets; one marked as an error is a failed call."""
        if result.is_error:
            self._fail(span, str(ErrorCode.TOOL_FAILED), result.content[:200])
        if self.capture_content:
            span.set_attribute(TOOL_RESULT, result.content)  # already scrubbed by the turn
            span.set_attribute(OUTPUT_VALUE, result.content)
            span.set_attribute(OUTPUT_MIME, TEXT)

    # -- helpers ----------------------------------------------------------------------------

    def _span(
        self,
        name: str,
        kind: SpanKind,
        attributes: dict[str, Any],
        otherwise: ErrorCode = ErrorCode.INTERNAL,
        *,
        parent: Context | None = None,
        measure: Callable[[float, _Measure], None] | None = None,
        measured: Mapping[str, Any] | None = None,
        run: _RunScope | None = None,
    ) -> _Current:
        """A span current while the block runs (a child of the current span, or of
        ``parent``); an exception ends it as failed, with our code as ``error.type``
        (``otherwise`` for an exception that carries none). With ``measure``, what it
        measured is given to it as the span ends: the seconds it took, and ``measured`` with
        what the block added to it and the error code it failed with. With ``run``, that
        run's work is under way while the block runs."""
        return _Current(self, name, kind, attributes, otherwise, parent, measure, measured, run)

    def _fail(self, span: Span, code: str, description: str) -> None:
        """``span`` failed with ``code``: its status, and the error its metrics record."""
        if (measure := self._measure(span)) is not None:
            measure.error = code
        span.set_attribute(ERROR_TYPE, code)
        span.set_status(StatusCode.ERROR, f"{code}: {description}")

    @staticmethod
    def _measure(span: Span) -> _Measure | None:
        measure = _MEASURE.get()
        return measure if measure is not None and measure.span is span else None

    def _json(self, value: Sequence[Any]) -> str:
        return self._scrub(json_text(value))

    def _scrub(self, text: str) -> str:
        return self.secrets.scrub(text) if self.secrets else text


@dataclass(slots=True, eq=False)
class _Current:
    """What ``start_as_current_span`` does for our spans, without its two generator-based
    context managers (``use_span`` within it): seven spans a turn each entered and left
    three layers deep cost a durable turn ~4 % of its instructions. The order is theirs:
    the span started, made current, its metrics recorded while it is current (an exemplar
    takes the span's trace), no longer current, ended."""

    tracing: Tracing
    name: str
    kind: SpanKind
    attributes: dict[str, Any]
    otherwise: ErrorCode
    parent: Context | None
    measure: Callable[[float, _Measure], None] | None
    measured: Mapping[str, Any] | None
    run: _RunScope | None
    # set on entering
    _span: Span = field(init=False)
    _token: Token[Context] = field(init=False)
    _ended: _Measure | None = field(init=False)
    _entered: Token[_Measure | None] = field(init=False)
    _run_entered: Token[_RunScope | None] = field(init=False)
    _begun: float = field(init=False)

    def __enter__(self) -> Span:
        if self.run is not None:
            self._run_entered = _RUN.set(self.run)
        span = self._span = self.tracing.tracer.start_span(
            self.name,
            context=self.parent,
            kind=self.kind,
            attributes=self.attributes,
            record_exception=False,
            set_status_on_exception=False,
        )
        self._token = context.attach(trace.set_span_in_context(span))
        self._ended = None if self.measure is None else _Measure(span, dict(self.measured or {}))
        self._entered = _MEASURE.set(self._ended)
        self._begun = time.perf_counter()
        return span

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        span = self._span
        try:
            try:
                if exc is not None:  # its text may quote a key a tool read: cut out
                    tracing = self.tracing
                    text = str(exc) or type(exc).__name__
                    tracing._fail(span, _code(exc, self.otherwise), tracing._scrub(text))
            finally:
                _MEASURE.reset(self._entered)
                if self._ended is not None and self.measure is not None:
                    self.measure(time.perf_counter() - self._begun, self._ended)
        finally:
            try:
                context.detach(self._token)
            finally:
                span.end()
                if self.run is not None:
                    _RUN.reset(self._run_entered)


def _remote(trace_context: Mapping[str, str] | None) -> Context:
    """The context a kept ``traceparent`` names, on nothing else: without one (or with a
    malformed one), a context in which the next span starts a trace."""
    return propagate.extract(trace_context or {}, context=Context())


def _code(exc: BaseException, otherwise: ErrorCode) -> str:
    if isinstance(exc, AgentRunnerError):
        return str(exc.code)
    if isinstance(exc, asyncio.CancelledError):
        return str(ErrorCode.CANCELLED)
    if isinstance(exc, ToolDenied):
        return str(ErrorCode.TOOL_DENIED)
    return str(otherwise)


# The conventions' message shapes: a role and its parts.


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def _assistant(text: str, calls: Sequence[ToolCall], finish_reason: str) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "content": text}] if text else []
    parts += [
        {"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments} for c in calls
    ]
    return {"role": "assistant", "parts": parts, "finish_reason": finish_reason}


def _message(message: Message) -> dict[str, Any]:
    if isinstance(message, UserMessage):
        return _user(message.content)
    if isinstance(message, AssistantMessage):
        shaped = _assistant(message.text, message.tool_calls, "")
        del shaped["finish_reason"]
        return shaped
    return {
        "role": "tool",
        "parts": [
            {"type": "tool_call_response", "id": message.call_id, "response": message.content}
        ],
    }
