"""What the runtime tells its telemetry, and the telemetry that is off.

``Tracing`` is every call the runtime makes to its telemetry (the runner, the turn, the
fallback chain, effects, tasks, queueing, channels, the worker and the CLI call nothing else),
so that no caller asks whether telemetry is on: an engine always holds one. ``NO_TRACING`` is
telemetry off, as the OpenAI Agents SDK's ``NoOpTrace`` and ``NoOpSpan`` are its tracing off:
every call does nothing and returns at once (a shared context manager, the delta sink it was
given, the thread's lock itself), and this module imports nothing of OpenTelemetry, or anything
else at run time, so the runtime pays neither an import nor a branch for it.
``telemetry.otel.OtelTracing`` is telemetry on.

A call that makes a span yields a ``Span``, which the caller hands back to say what the span
learnt (``run_done``, ``response``, …); to the caller it is opaque.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from agentrunner.engine.failures import ProviderError
    from agentrunner.engine.fallback import ChainEntry
    from agentrunner.engine.fold import DeltaSink
    from agentrunner.engine.messages import ModelRequest, ModelResponse, ToolCall, ToolResult, Usage

__all__ = ["NO_TRACING", "NoTracing", "QueueDepths", "Span", "Tracing"]

T = TypeVar("T")
# every agent's queued runs by status, as ``Mailbox.depths`` counts them
QueueDepths = Mapping[str, Mapping[str, int]]


class Span:
    """A span a ``Tracing`` made, handed back to it; nothing a caller reads."""

    __slots__ = ()


class Tracing(ABC):
    """The spans of runs, model requests, tool calls and queued runs, and the metrics they
    measure (docs/observability.md lists both); one per engine, shared by its runs. A span's
    block that raises ends it as failed, with the error's code as its ``error.type``."""

    __slots__ = ()

    # -- runs (the runner) -----------------------------------------------------------------

    @abstractmethod
    def run(
        self,
        agent_id: str,
        *,
        thread_id: str | None,
        message: str,
        parent_run_id: str | None = None,
        depth: int = 0,
    ) -> AbstractContextManager[Span]:
        """One run (``invoke_agent``), current while it runs: its requests, tool calls and the
        runs its tools start are its descendants."""

    @abstractmethod
    def run_started(self, run_id: str, name: str, description: str) -> str | None:
        """What the current run knows once its agent is loaded and its id given; its trace id
        (32 hex digits), None with telemetry off."""

    @abstractmethod
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
        """A run that returned: completed, or cancelled."""

    @abstractmethod
    def step(
        self, name: str, *, thread_id: str | None = None, agent_id: str | None = None
    ) -> AbstractContextManager[Span]:
        """A step of a run or a task that is not a model request or a tool call:
        ``resolve_agent``, ``build_prompt``, ``cache_lookup``."""

    @abstractmethod
    def thread_lock(
        self, hold: AbstractAsyncContextManager[T], thread_id: str
    ) -> AbstractAsyncContextManager[T]:
        """``hold`` (a thread's lock), its wait a ``thread_lock`` step."""

    @abstractmethod
    def prompt_built(self, span: Span, system: str, notes: str | None) -> None:
        """The prompt a ``build_prompt`` step built."""

    @abstractmethod
    def effect(self, name: str, thread_id: str) -> AbstractContextManager[Span]:
        """A post-run effect (a thread's title), under the run that started it."""

    @abstractmethod
    def turn_step(self, number: int | None) -> None:
        """The turn's step ``number`` begins (None: the turn is over): the model requests and
        tool calls it makes carry its number, so a run reads as run > step > tool (seed 003)
        while the spans stay the GenAI conventions' siblings."""

    @abstractmethod
    def eval_case(
        self, eval_run_id: str, eval_name: str, case: str, repeat: int, variant: str
    ) -> AbstractContextManager[Span]:
        """One case of an eval: its run and its judge's requests are its descendants, and the
        run's span carries the eval's and the case's ids too."""

    # -- tasks -------------------------------------------------------------------------------

    @abstractmethod
    def task(self, agent_id: str) -> AbstractContextManager[Span]:
        """One task: its cache lookup, and its run unless the cache answered."""

    @abstractmethod
    def task_done(
        self, span: Span, *, model: str | None, cached: bool, error: Mapping[str, Any] | None
    ) -> None:
        """A task that returned its outcome (``error``: a failed one's)."""

    @abstractmethod
    def cache_looked_up(self, span: Span, *, hit: bool) -> None:
        """What a ``cache_lookup`` step found."""

    # -- queued runs ---------------------------------------------------------------------------

    @abstractmethod
    def enqueue(
        self, destination: str
    ) -> AbstractContextManager[tuple[Span, dict[str, str] | None]]:
        """Queueing runs for ``destination`` (a channel, an agent): yields the span and the
        trace context the runs keep (W3C ``traceparent``, ``tracestate``; None when off), which
        the workers that claim them continue."""

    @abstractmethod
    def enqueued(
        self, span: Span, agents: Sequence[str], run_ids: Sequence[str], *, repeated: bool
    ) -> None:
        """What was queued; ``repeated``: a repeat of an idempotent request, which queued
        nothing."""

    @abstractmethod
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
        """A schedule's tick decided by this process (``queued``, its run; or ``skipped``, why),
        once committed: one per tick, whichever process won it."""

    @abstractmethod
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
        """A worker's claim of a queued run, asked at ``asked_ns`` (``time.time_ns``), and the
        time the run waited in its mailbox (``waited_s``)."""

    @abstractmethod
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
        """A request a run waited on, from its asking to its decision (``status``), recorded
        when the run goes on: a span in the run's trace, and the waiting time measured."""

    @abstractmethod
    def continued(self, trace_context: Mapping[str, str] | None) -> AbstractContextManager[None]:
        """The block runs in the trace a queued run was queued in."""

    @abstractmethod
    def wait(
        self, destination: str, run_ids: Sequence[str], trace_context: Mapping[str, str] | None
    ) -> AbstractContextManager[Span]:
        """A caller waiting for the runs it queued, in the trace they were queued in."""

    @abstractmethod
    async def count_queues(self, depths: Callable[[], Awaitable[QueueDepths]]) -> None:
        """Every agent's queued runs, counted by ``depths`` (not called with telemetry off)."""

    # -- model requests (the fallback chain) -----------------------------------------------

    @abstractmethod
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

    @abstractmethod
    def streaming(self, entry: ChainEntry, on_delta: DeltaSink | None) -> DeltaSink | None:
        """``on_delta`` for one attempt about to be sent (timing its first delta)."""

    @abstractmethod
    def provider_error(self, span: Span, error: ProviderError) -> None:
        """What the provider answered an attempt that failed."""

    @abstractmethod
    def response(self, span: Span, response: ModelResponse) -> None:
        """What an attempt was answered."""

    @abstractmethod
    def charged(
        self, entry: ChainEntry, usage: Usage, micros: int | None, *, answered: bool
    ) -> None:
        """What an attempt was charged (as its cost row records it), to the current run's
        agent."""

    # -- tool calls (the turn) ----------------------------------------------------------------

    @abstractmethod
    def tool(self, call: ToolCall) -> AbstractContextManager[Span]:
        """One tool call, current while the tool runs (a run it starts nests under it)."""

    @abstractmethod
    def tool_result(self, span: Span, result: ToolResult) -> None:
        """The result the model gets; one marked as an error is a failed call."""


_NO_SPAN = Span()
_SPAN = nullcontext(_NO_SPAN)
_ENQUEUE: nullcontext[tuple[Span, dict[str, str] | None]] = nullcontext((_NO_SPAN, None))
_NOTHING = nullcontext()


class NoTracing(Tracing):
    """Telemetry off: every call does nothing, making nothing, and returns at once."""

    __slots__ = ()

    def run(
        self,
        agent_id: str,
        *,
        thread_id: str | None,
        message: str,
        parent_run_id: str | None = None,
        depth: int = 0,
    ) -> AbstractContextManager[Span]:
        return _SPAN

    def run_started(self, run_id: str, name: str, description: str) -> str | None:
        return None

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
        pass

    def step(
        self, name: str, *, thread_id: str | None = None, agent_id: str | None = None
    ) -> AbstractContextManager[Span]:
        return _SPAN

    def thread_lock(
        self, hold: AbstractAsyncContextManager[T], thread_id: str
    ) -> AbstractAsyncContextManager[T]:
        return hold

    def prompt_built(self, span: Span, system: str, notes: str | None) -> None:
        pass

    def effect(self, name: str, thread_id: str) -> AbstractContextManager[Span]:
        return _SPAN

    def turn_step(self, number: int | None) -> None:
        pass

    def eval_case(
        self, eval_run_id: str, eval_name: str, case: str, repeat: int, variant: str
    ) -> AbstractContextManager[Span]:
        return _SPAN

    def task(self, agent_id: str) -> AbstractContextManager[Span]:
        return _SPAN

    def task_done(
        self, span: Span, *, model: str | None, cached: bool, error: Mapping[str, Any] | None
    ) -> None:
        pass

    def cache_looked_up(self, span: Span, *, hit: bool) -> None:
        pass

    def enqueue(
        self, destination: str
    ) -> AbstractContextManager[tuple[Span, dict[str, str] | None]]:
        return _ENQUEUE

    def enqueued(
        self, span: Span, agents: Sequence[str], run_ids: Sequence[str], *, repeated: bool
    ) -> None:
        pass

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
        pass

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
        pass

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
        pass

    def continued(self, trace_context: Mapping[str, str] | None) -> AbstractContextManager[None]:
        return _NOTHING

    def wait(
        self, destination: str, run_ids: Sequence[str], trace_context: Mapping[str, str] | None
    ) -> AbstractContextManager[Span]:
        return _SPAN

    async def count_queues(self, depths: Callable[[], Awaitable[QueueDepths]]) -> None:
        pass

    def chat(
        self,
        entry: ChainEntry,
        request: ModelRequest,
        *,
        attempt: int,
        fallback: bool,
        retry_reason: str | None,
    ) -> AbstractContextManager[Span]:
        return _SPAN

    def streaming(self, entry: ChainEntry, on_delta: DeltaSink | None) -> DeltaSink | None:
        return on_delta

    def provider_error(self, span: Span, error: ProviderError) -> None:
        pass

    def response(self, span: Span, response: ModelResponse) -> None:
        pass

    def charged(
        self, entry: ChainEntry, usage: Usage, micros: int | None, *, answered: bool
    ) -> None:
        pass

    def tool(self, call: ToolCall) -> AbstractContextManager[Span]:
        return _SPAN

    def tool_result(self, span: Span, result: ToolResult) -> None:
        pass


NO_TRACING: Tracing = NoTracing()
