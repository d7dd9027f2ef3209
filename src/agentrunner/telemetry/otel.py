"""Telemetry on: the spans ``telemetry/__init__`` draws, with OpenTelemetry's API in the GenAI
semantic conventions (Phoenix, Langfuse, Logfire, Jaeger and Tempo show them as they are), and
the metrics they measure as each ends (``telemetry/metrics``); a span's run is known from the
context, so a tool call or a charge counts to its run's agent. Only the API is used here: the
SDK is set up by ``telemetry/setup``, with ``[telemetry] enabled``; off, this is never imported.

Prompts, replies, tool arguments and results go on spans only with ``capture_content``, every
secret the runtime holds cut out (``engine.secrets``): in the GenAI conventions' attributes,
and as OpenInference's ``input.value`` and ``output.value``, Phoenix's input and output.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AsyncExitStack,
    asynccontextmanager,
    contextmanager,
)
from typing import TYPE_CHECKING, Any, TypeVar, cast

from opentelemetry import context, propagate, trace
from opentelemetry.context import Context
from opentelemetry.metrics import NoOpMeter
from opentelemetry.trace import SpanKind

from agentrunner.core.json_text import json_text
from agentrunner.engine.fold import Delta, DeltaSink
from agentrunner.errors import ErrorCode
from agentrunner.telemetry.content import (
    assistant_message,
    conversation_message,
    user_message,
)
from agentrunner.telemetry.metrics import Metrics
from agentrunner.telemetry.names import (
    AGENT_DESCRIPTION,
    AGENT_ID,
    AGENT_NAME,
    APPROVAL_BY,
    APPROVAL_DECISION,
    APPROVAL_ID,
    ATTEMPT,
    CACHE_HIT,
    CONVERSATION,
    COST_USD,
    DEPTH,
    FALLBACK,
    FINISH_REASONS,
    HTTP_STATUS,
    INPUT_MESSAGES,
    INPUT_MIME,
    INPUT_TOKENS,
    INPUT_VALUE,
    JSON,
    MODEL_REF,
    NOTES_CHARS,
    OPERATION,
    OUTPUT_MESSAGES,
    OUTPUT_MIME,
    OUTPUT_TOKENS,
    OUTPUT_VALUE,
    PARENT_RUN_ID,
    PROMPT_CHARS,
    PROVIDER,
    QUEUE_AGENTS,
    QUEUE_DESTINATION,
    QUEUE_REPEATED,
    QUEUE_RUN_IDS,
    QUEUE_WAIT,
    REQUEST_MAX_TOKENS,
    REQUEST_MODEL,
    RESPONSE_MODEL,
    RETRY_REASON,
    RUN_ID,
    SCHEDULE,
    SCHEDULE_MISSED,
    SCHEDULE_OUTCOME,
    SCHEDULE_REASON,
    SCHEDULE_TICK,
    STEP,
    STOP_REASON,
    SYSTEM_INSTRUCTIONS,
    TEXT,
    THREAD_ID,
    TOOL_ARGUMENTS,
    TOOL_CALL_ID,
    TOOL_NAME,
    TOOL_RESULT,
    TOOL_TYPE,
    WORKER_ID,
)
from agentrunner.telemetry.spans import (
    EVAL_IDS,
    RUN,
    STEP_NUMBER,
    OtelSpan,
    RunScope,
    eval_ids,
    remote,
)
from agentrunner.telemetry.tracing import QueueDepths, Span, Tracing

if TYPE_CHECKING:
    from agentrunner.engine.failures import ProviderError
    from agentrunner.engine.fallback import ChainEntry
    from agentrunner.engine.messages import ModelRequest, ModelResponse, ToolCall, ToolResult, Usage
    from agentrunner.engine.secrets import Secrets

__all__ = ["OtelTracing"]

T = TypeVar("T")
_STEPPED = ("chat", "execute_tool")  # a turn's step's spans, which carry its number


class OtelTracing(Tracing):
    """Makes the spans, and records the metrics they measure, with OpenTelemetry's API; one
    per engine, shared by its runs. Without ``metrics`` nothing is measured."""

    __slots__ = ("capture_content", "metrics", "secrets", "tracer")

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
    ) -> OtelSpan:
        """The span of one run, current while it runs (its model requests, tool calls and the
        runs its tools start are its descendants); a raised error sets ``error.type``."""
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
        if (case := EVAL_IDS.get()) is not None:  # an eval's case: found by its ids
            attributes.update(case)
        if self.capture_content:
            attributes[INPUT_MESSAGES] = self._json([user_message(message)])
            attributes[INPUT_VALUE], attributes[INPUT_MIME] = self.scrub(message), TEXT
        self.metrics.run_started(agent_id)
        scope = RunScope(agent_id, agent_id)
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
        """What a run knows once its agent is loaded and its id given (after the thread lock:
        runs numbered in the order they ran), on its span; its trace id (32 hex digits)."""
        span = trace.get_current_span()
        span.set_attribute(RUN_ID, run_id)
        span.set_attribute(AGENT_NAME, name)
        if (scope := RUN.get()) is not None:
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
        ours = _ours(span)
        ours.set(STOP_REASON, stop_reason)
        if model is not None:
            ours.set(MODEL_REF, model)
        ours.set(INPUT_TOKENS, usage.input_tokens)
        ours.set(OUTPUT_TOKENS, usage.output_tokens)
        if cost_known:
            ours.set(COST_USD, cost_micros / 1_000_000)
        if stop_reason == "cancelled":
            ours.fail(str(ErrorCode.CANCELLED), "cancelled")
        elif self.capture_content:
            ours.set(OUTPUT_MESSAGES, self._json([assistant_message(text, (), stop_reason)]))
            ours.set(OUTPUT_VALUE, self.scrub(text))
            ours.set(OUTPUT_MIME, TEXT)

    def step(
        self, name: str, *, thread_id: str | None = None, agent_id: str | None = None
    ) -> OtelSpan:
        """A step that is not a model request or a tool call: ``resolve_agent``,
        ``build_prompt``, a task's ``cache_lookup``."""
        attributes: dict[str, Any] = {} if thread_id is None else {THREAD_ID: thread_id}
        if agent_id is not None:
            attributes[AGENT_ID] = agent_id
        return self._span(name, SpanKind.INTERNAL, attributes)

    @asynccontextmanager
    async def thread_lock(
        self, hold: AbstractAsyncContextManager[T], thread_id: str
    ) -> AsyncIterator[T]:
        """The wait for a run's thread lock, a ``thread_lock`` step."""
        async with AsyncExitStack() as locked:
            with self.step("thread_lock", thread_id=thread_id):
                held = await locked.enter_async_context(hold)
            yield held

    def prompt_built(self, span: Span, system: str, notes: str | None) -> None:
        ours = _ours(span)
        ours.set(PROMPT_CHARS, len(system))
        ours.set(NOTES_CHARS, len(notes or ""))

    def effect(self, name: str, thread_id: str) -> OtelSpan:
        """A post-run effect (a thread's title), started by the run, done after it: its request
        is charged to the run's agent, here too (the run's scope, which its task inherited)."""
        attributes = {THREAD_ID: thread_id, CONVERSATION: thread_id}
        return self._span(f"post_run {name}", SpanKind.INTERNAL, attributes)

    @contextmanager
    def eval_case(
        self, eval_run_id: str, eval_name: str, case: str, repeat: int, variant: str
    ) -> Iterator[Span]:
        """One case of an eval (``workspace/evals``): its run and its judge's requests are its
        descendants, and the run's span carries its ids too (``EVAL_IDS``)."""
        ids = eval_ids(eval_run_id, eval_name, case, repeat, variant)
        entered = EVAL_IDS.set(ids)
        try:
            with self._span(f"eval_case {case}", SpanKind.INTERNAL, dict(ids)) as span:
                yield span
        finally:
            EVAL_IDS.reset(entered)

    # -- tasks ----------------------------------------------------------------------------

    def task(self, agent_id: str) -> OtelSpan:
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
        """A task that returned its outcome: answered (from the cache or not), or failed."""
        ours = _ours(span)
        if model is not None:
            ours.set(MODEL_REF, model)
        ours.set(CACHE_HIT, cached)
        if error is not None:
            ours.fail(str(error["code"]), self.scrub(str(error["message"])))

    def cache_looked_up(self, span: Span, *, hit: bool) -> None:
        _ours(span).set(CACHE_HIT, hit)

    # -- queued runs: queueing, a worker's claim, a caller's wait ------------------------------

    @contextmanager
    def enqueue(self, destination: str) -> Iterator[tuple[Span, dict[str, str] | None]]:
        """Queueing runs in agents' mailboxes (a channel post, a run on a thread) for
        ``destination``. Yields the span and the trace context kept with the runs (W3C
        ``traceparent``, ``tracestate``), which their workers, in any process, continue."""
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
        ours = _ours(span)
        ours.set(QUEUE_AGENTS, list(agents))
        ours.set(QUEUE_RUN_IDS, list(run_ids))
        if len(set(agents)) == 1:
            ours.set(AGENT_ID, agents[0])
        if repeated:
            ours.set(QUEUE_REPEATED, True)

    def schedule_fired(
        self,
        *,
        schedule: str,
        agent_id: str,
        tick: float,
        outcome: str,
        reason: str | None,
        run_id: str | None,
        missed: int,
    ) -> None:
        """A tick decided: a span under what is current (the queueing of its run, whose trace
        the run keeps), and the fires counted per schedule and outcome."""
        attributes: dict[str, Any] = {
            SCHEDULE: schedule,
            AGENT_ID: agent_id,
            SCHEDULE_TICK: tick,
            SCHEDULE_OUTCOME: outcome,
            SCHEDULE_MISSED: missed,
        }
        if reason:
            attributes[SCHEDULE_REASON] = reason
        if run_id:
            attributes[RUN_ID] = run_id
        self.tracer.start_span(f"fire {schedule}", attributes=attributes).end()
        self.metrics.schedule_fired(schedule, agent_id, outcome)

    def claimed(
        self,
        *,
        run_id: str,
        agent_id: str,
        attempt: int,
        worker_id: str,
        waited_s: float,
        trace_context: Mapping[str, str] | None,
        asked_ns: int,
    ) -> None:
        """A worker's claim of a queued run, from when it asked (``asked_ns``) until now: a
        child of the span it was queued in (else a trace of its own), with its measured wait."""
        span = self.tracer.start_span(
            f"claim {agent_id}",
            context=remote(trace_context),
            kind=SpanKind.CONSUMER,
            attributes={
                AGENT_ID: agent_id,
                RUN_ID: run_id,
                ATTEMPT: attempt,
                WORKER_ID: worker_id,
                QUEUE_WAIT: waited_s,
            },
            start_time=asked_ns,
        )
        span.end()
        self.metrics.claimed(agent_id, waited_s)

    def approval_waited(
        self,
        *,
        approval_id: str,
        agent_id: str,
        tool: str,
        decision: str,
        by: str,
        requested_ns: int,
        decided_ns: int,
    ) -> None:
        span = self.tracer.start_span(
            f"approval {tool}",
            attributes={
                AGENT_ID: agent_id,
                TOOL_NAME: tool,
                APPROVAL_ID: approval_id,
                APPROVAL_DECISION: decision,
                APPROVAL_BY: by,
            },
            start_time=requested_ns,
        )
        span.end(end_time=decided_ns)
        self.metrics.approval_decided(agent_id, tool, decision, (decided_ns - requested_ns) / 1e9)

    @contextmanager
    def continued(self, trace_context: Mapping[str, str] | None) -> Iterator[None]:
        """The block runs in the trace a queued run was queued in (``trace_context``: W3C
        ``traceparent``, ``tracestate``), in whichever process; without one (queued with
        telemetry off), or with a malformed one, its spans start a trace of their own rather
        than join whatever span is current."""
        token = context.attach(remote(trace_context))
        try:
            yield
        finally:
            context.detach(token)

    def wait(
        self, destination: str, run_ids: Sequence[str], trace_context: Mapping[str, str] | None
    ) -> OtelSpan:
        """A caller waiting for the runs it queued (``post``, ``dm``), in the trace they were
        queued in (``trace_context``): beside the workers' spans, under the ``enqueue``."""
        attributes = {QUEUE_DESTINATION: destination, QUEUE_RUN_IDS: list(run_ids)}
        parent = None if trace_context is None else remote(trace_context)
        return self._span(f"wait {destination}", SpanKind.INTERNAL, attributes, parent=parent)

    async def count_queues(self, depths: Callable[[], Awaitable[QueueDepths]]) -> None:
        """A count of every agent's queued runs, for the queue depth gauge."""
        self.metrics.queue_depths(await depths())

    # -- model requests (the fallback chain) -----------------------------------------------

    def chat(
        self,
        entry: ChainEntry,
        request: ModelRequest,
        *,
        attempt: int,
        fallback: bool,
        retry_reason: str | None,
    ) -> OtelSpan:
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
                [conversation_message(m) for m in request.messages]
            )
            attributes[INPUT_VALUE], attributes[INPUT_MIME] = messages, JSON
        return self._span(
            f"chat {model.name}",
            SpanKind.CLIENT,
            attributes,
            measure=lambda seconds, ended: self.metrics.requested(
                ended.measured, seconds, ended.error
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
            _ours(span).set(HTTP_STATUS, error.status)

    def response(self, span: Span, response: ModelResponse) -> None:
        ours = _ours(span)
        ours.measured[RESPONSE_MODEL] = response.model
        ours.set(RESPONSE_MODEL, response.model)
        ours.set(FINISH_REASONS, [response.finish_reason])
        ours.set(INPUT_TOKENS, response.usage.input_tokens)
        ours.set(OUTPUT_TOKENS, response.usage.output_tokens)
        if self.capture_content:
            message = response.message
            said = self._json(
                [assistant_message(message.text, message.tool_calls, response.finish_reason)]
            )
            ours.set(OUTPUT_MESSAGES, said)
            ours.set(OUTPUT_VALUE, said)
            ours.set(OUTPUT_MIME, JSON)

    def charged(
        self, entry: ChainEntry, usage: Usage, micros: int | None, *, answered: bool
    ) -> None:
        """What an attempt was charged (as its cost row records it), to the current run's
        agent."""
        scope = RUN.get()
        self.metrics.charged(
            scope.agent_id if scope else None,
            {PROVIDER: entry.model.provider.name, REQUEST_MODEL: entry.model.name},
            usage,
            micros,
            answered=answered,
        )

    # -- tool calls (the turn) ----------------------------------------------------------------

    def turn_step(self, number: int | None) -> None:
        STEP_NUMBER.set(number)

    def tool(self, call: ToolCall) -> OtelSpan:
        """One tool call, current while the tool runs (a run it starts nests under it)."""
        attributes: dict[str, Any] = {
            OPERATION: "execute_tool",
            TOOL_NAME: call.name,
            TOOL_CALL_ID: call.id,
            TOOL_TYPE: "function",
        }
        if self.capture_content:
            raw = call.raw_arguments  # arguments that are not JSON, as the model wrote them
            arguments = attributes[TOOL_ARGUMENTS] = self.scrub(
                raw if raw is not None else json_text(call.arguments)
            )
            attributes[INPUT_VALUE] = arguments
            attributes[INPUT_MIME] = TEXT if raw is not None else JSON
        scope = RUN.get()
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
        ours = _ours(span)
        if result.is_error:
            ours.fail(str(ErrorCode.TOOL_FAILED), result.content[:200])
        if self.capture_content:
            ours.set(TOOL_RESULT, result.content)  # already scrubbed by the turn
            ours.set(OUTPUT_VALUE, result.content)
            ours.set(OUTPUT_MIME, TEXT)

    # -- helpers ----------------------------------------------------------------------------

    def _span(
        self,
        name: str,
        kind: SpanKind,
        attributes: dict[str, Any],
        otherwise: ErrorCode = ErrorCode.INTERNAL,
        *,
        parent: Context | None = None,
        measure: Callable[[float, OtelSpan], None] | None = None,
        measured: dict[str, Any] | None = None,
        run: RunScope | None = None,
    ) -> OtelSpan:
        if (step := STEP_NUMBER.get()) is not None and attributes.get(OPERATION) in _STEPPED:
            attributes[STEP] = step  # run > step > tool, read from the spans the conventions draw
        return OtelSpan(
            self.tracer,
            name,
            kind,
            attributes,
            self.scrub,
            otherwise,
            parent,
            measure,
            {} if measured is None else measured,
            run,
        )

    def _json(self, value: Sequence[Any]) -> str:
        return self.scrub(json_text(value))

    def scrub(self, text: str) -> str:
        """``text`` with every secret the runtime holds cut out."""
        return self.secrets.scrub(text) if self.secrets else text


def _ours(span: Span) -> OtelSpan:
    """A span this tracing made, as the caller handed it back."""
    return cast(OtelSpan, span)
