"""A span of ours on OpenTelemetry's API: made current while its block runs, ended as failed
with our error code when the block raises, and measured as it ends; the run whose work is
under way (whose agent a tool call and a charge count to); a kept W3C trace context read back.
Imported only when telemetry is on, by ``telemetry/otel``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context, propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, StatusCode

from agentrunner.engine.tools import ToolDenied
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.telemetry.names import (
    ERROR_TYPE,
    EVAL_CASE,
    EVAL_ID,
    EVAL_NAME,
    EVAL_REPEAT,
    EVAL_VARIANT,
)
from agentrunner.telemetry.tracing import Span

__all__ = ["EVAL_IDS", "RUN", "STEP_NUMBER", "OtelSpan", "RunScope", "eval_ids", "remote"]


@dataclass(slots=True)
class RunScope:
    """The run whose work is under way: whose agent a tool call and a charge count to."""

    agent_id: str
    name: str


RUN: ContextVar[RunScope | None] = ContextVar("agentrunner_run", default=None)
# The turn's step under way (``OtelTracing.turn_step``): its requests and tool calls carry it.
STEP_NUMBER: ContextVar[int | None] = ContextVar("agentrunner_step", default=None)
# The eval case under way (``OtelTracing.eval_case``): its ids go on its run's span too.
EVAL_IDS: ContextVar[dict[str, Any] | None] = ContextVar("agentrunner_eval_case", default=None)


def eval_ids(
    eval_run_id: str, eval_name: str, case: str, repeat: int, variant: str
) -> dict[str, Any]:
    return {
        EVAL_ID: eval_run_id,
        EVAL_NAME: eval_name,
        EVAL_CASE: case,
        EVAL_REPEAT: repeat,
        EVAL_VARIANT: variant,
    }


@dataclass(slots=True, eq=False)
class OtelSpan(Span):
    """A span current while its block runs (a child of the current span, or of ``parent``),
    handed to its block; what ``start_as_current_span`` does, without its two generator-based
    context managers (``use_span`` within it): seven spans a turn each entered and left three
    layers deep cost a durable turn ~4 % of its instructions. The order is theirs: the span
    started, made current, its metrics recorded while it is current (an exemplar takes the
    span's trace), no longer current, ended.

    An exception ends it as failed, with our code as ``error.type`` (``otherwise`` for one
    that carries none) and its text, ``scrub``bed, as the status. With ``measure``, what it
    measured is given to it as the span ends: the seconds it took, and ``measured`` with what
    the block added to it (``measured``) and the code it failed with (``error``). With
    ``run``, that run's work is under way while the block runs."""

    tracer: trace.Tracer
    name: str
    kind: SpanKind
    attributes: dict[str, Any]
    scrub: Callable[[str], str]
    otherwise: ErrorCode = ErrorCode.INTERNAL
    parent: Context | None = None
    measure: Callable[[float, OtelSpan], None] | None = None
    measured: dict[str, Any] = field(default_factory=dict)
    run: RunScope | None = None
    error: str | None = None  # the code it failed with, once it did
    # set on entering
    span: trace.Span = field(init=False)
    _token: Token[Context] = field(init=False)
    _run_entered: Token[RunScope | None] = field(init=False)
    _begun: float = field(init=False)

    def __enter__(self) -> OtelSpan:
        if self.run is not None:
            self._run_entered = RUN.set(self.run)
        span = self.span = self.tracer.start_span(
            self.name,
            context=self.parent,
            kind=self.kind,
            attributes=self.attributes,
            record_exception=False,
            set_status_on_exception=False,
        )
        self._token = context.attach(trace.set_span_in_context(span))
        self._begun = time.perf_counter()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        try:
            try:
                if exc is not None:  # its text may quote a key a tool read: cut out
                    text = str(exc) or type(exc).__name__
                    self.fail(_code(exc, self.otherwise), self.scrub(text))
            finally:
                if self.measure is not None:
                    self.measure(time.perf_counter() - self._begun, self)
        finally:
            try:
                context.detach(self._token)
            finally:
                self.span.end()
                if self.run is not None:
                    RUN.reset(self._run_entered)

    def set(self, key: str, value: Any) -> None:
        self.span.set_attribute(key, value)

    def fail(self, code: str, description: str) -> None:
        """It failed with ``code``: its status, and the error its metrics record."""
        self.error = code
        self.span.set_attribute(ERROR_TYPE, code)
        self.span.set_status(StatusCode.ERROR, f"{code}: {description}")


def remote(trace_context: Mapping[str, str] | None) -> Context:
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
