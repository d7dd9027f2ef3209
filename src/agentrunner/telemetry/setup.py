"""Telemetry's set-up: the OpenTelemetry SDK (a tracer and a meter provider, OTLP/HTTP
exporters) once per process, unless an application set its own up, and what is left of it
sent as the process ends, in one bounded wait. Nothing of OpenTelemetry is imported here
unless telemetry is on."""

from __future__ import annotations

import atexit
import importlib
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.telemetry.tracing import NO_TRACING, Tracing

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import Sampler

    from agentrunner.config import Telemetry
    from agentrunner.engine.secrets import Secrets
    from agentrunner.telemetry.metrics import Metrics

__all__ = ["EXIT_FLUSH_S", "send_telemetry", "start_tracing", "telemetry_to_send"]

EXIT_FLUSH_S = 3.0  # the longest a process's exit waits for its last spans and metrics
log = logging.getLogger("agentrunner.telemetry")


def start_tracing(settings: Telemetry, secrets: Secrets | None = None) -> Tracing:
    """The engine's tracing (its spans, and the metrics they and the worker record), with
    ``[telemetry]`` on, cutting ``secrets`` out of what spans carry; off, ``NO_TRACING`` (and
    nothing imported).

    An application that set up OpenTelemetry itself (a global tracer or meter provider:
    Logfire, its own SDK) gets agentrunner's spans and metrics there. Otherwise the SDK is set
    up here, once per process: providers for ``service_name`` whose spans are batched to
    ``traces_url`` and metrics sent every ``metric_interval_ms`` to ``metrics_url``, over
    OTLP/HTTP (the exporters read ``OTEL_EXPORTER_OTLP_HEADERS`` themselves), and what is left
    sent at exit, for at most ``EXIT_FLUSH_S``."""
    if not settings.enabled:
        return NO_TRACING
    from opentelemetry import trace

    from agentrunner._version import __version__
    from agentrunner.telemetry.otel import OtelTracing

    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):  # nobody has set one up
        provider = _sdk_tracer_provider(settings)
        trace.set_tracer_provider(provider)
    return OtelTracing(
        provider.get_tracer("agentrunner", __version__),
        capture_content=settings.capture_content,
        secrets=secrets,
        metrics=_metrics(settings) if settings.metrics else None,
    )


_instruments: dict[MeterProvider, Metrics] = {}  # a meter provider's, made once per process


def _metrics(settings: Telemetry) -> Metrics:
    from opentelemetry import metrics
    from opentelemetry.metrics._internal import _ProxyMeterProvider

    from agentrunner._version import __version__
    from agentrunner.telemetry.metrics import Metrics

    provider = metrics.get_meter_provider()
    # the API's stand-in until a provider is set (its class is private; there is no other test)
    if isinstance(provider, _ProxyMeterProvider):
        provider = _sdk_meter_provider(settings)
        metrics.set_meter_provider(provider)
    if provider not in _instruments:  # a second runner's instruments would be the first's
        _instruments[provider] = Metrics(provider.get_meter("agentrunner", __version__))
    return _instruments[provider]


def _sdk_tracer_provider(settings: Telemetry) -> TracerProvider:
    _sdk_missing()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(
        resource=_resource(settings), shutdown_on_exit=False, sampler=_sampler(settings)
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=settings.traces_url)))
    exporter_log = _quiet(OTLPSpanExporter.__module__, "traces", settings.traces_url)
    _send_at_exit(provider.shutdown, exporter_log)
    return provider


def _sampler(settings: Telemetry) -> Sampler | None:
    """``sample_ratio``'s head sampler; None (the SDK's own choice: ``OTEL_TRACES_SAMPLER``,
    else every trace) where the environment names a sampler or every trace is kept."""
    if os.environ.get("OTEL_TRACES_SAMPLER") or settings.sample_ratio >= 1:
        return None
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    return ParentBased(TraceIdRatioBased(settings.sample_ratio))


def _sdk_meter_provider(settings: Telemetry) -> MeterProvider:
    _sdk_missing()
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    reader = PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=settings.metrics_url),
        export_interval_millis=settings.metric_interval_ms,
    )
    provider = MeterProvider([reader], resource=_resource(settings), shutdown_on_exit=False)
    exporter_log = _quiet(OTLPMetricExporter.__module__, "metrics", settings.metrics_url)
    _send_at_exit(provider.shutdown, exporter_log)
    return provider


def _sdk_missing() -> None:
    """Telemetry on without the ``otel`` extra: an error saying which to install."""
    try:
        for package in ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"):
            importlib.import_module(package)
    except ImportError as exc:
        raise AgentRunnerError(
            ErrorCode.INTERNAL,
            f"[telemetry] is enabled but the OpenTelemetry SDK is not installed ({exc.name})",
            hint='pip install "agentrunner[otel]", or turn telemetry off in agentrunner.toml.',
        ) from exc


def _resource(settings: Telemetry) -> Resource:
    from opentelemetry.sdk.resources import Resource

    return Resource.create({"service.name": settings.service_name})


class _ExporterLog(logging.Filter):
    """What an OTLP exporter logs (``Transient error … retrying in 0.86s`` two to five times a
    run while its receiver is down, raw text among JSON lines) is kept at DEBUG (``--debug``
    shows it); why it failed is remembered for agentrunner's own warning, which says it once:
    at exit, or when the exporter gives a batch up."""

    def __init__(self, what: str, url: str) -> None:
        super().__init__()
        self.what = what
        self.url = url
        self.why: str | None = None  # the last failure's reason, in words
        self._said: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        why = _why(record)
        if why is not None:
            self.why = why
        if record.levelno >= logging.ERROR and self.why is not None:  # a batch given up
            self.say(self.why)
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True

    def say(self, why: str) -> None:
        if why not in self._said:  # once per reason, not once per batch
            self._said.add(why)
            log.warning("%s not sent: %s %s", self.what, self.url, why)


def _why(record: logging.LogRecord) -> str | None:
    """Why an exporter's request failed, from its log record's arguments (the exception, or
    the status it was answered with)."""
    args = record.args if isinstance(record.args, tuple) else ()
    for arg in args:
        if isinstance(arg, BaseException):
            return _error_reason(arg)
    if record.msg.startswith("Failed to export") and len(args) == 3 and args[1] is not None:
        return f"answered {args[1]} {args[2]}"
    if record.msg.startswith("Transient error") and args and isinstance(args[0], str):
        return f"answered {args[0]}"
    return None


_NO_ANSWER = "did not answer in time"


def _error_reason(error: BaseException) -> str:
    seen: list[BaseException] = [error]
    for exc in seen:  # the chain: requests wraps urllib3, which wraps the socket's error
        if isinstance(exc, ConnectionRefusedError):
            return "refused the connection"
        if isinstance(exc, TimeoutError) or "Timeout" in type(exc).__name__:
            return _NO_ANSWER
        for inner in (exc.__cause__, exc.__context__, getattr(exc, "reason", None), *exc.args):
            if isinstance(inner, BaseException) and inner not in seen and len(seen) < 20:
                seen.append(inner)
    return f"could not be reached ({type(error).__name__})"


def _quiet(logger_name: str, what: str, url: str) -> _ExporterLog:
    exporter_log = _ExporterLog(what, url)
    logging.getLogger(logger_name).addFilter(exporter_log)
    return exporter_log


_at_exit: list[tuple[Callable[[], object], _ExporterLog]] = []  # how each is sent, its log
_sent = False  # the exit flush is done once, by the CLI or else at exit


def _send_at_exit(shutdown: Callable[[], object], exporter_log: _ExporterLog) -> None:
    if not _at_exit:
        atexit.register(_send_the_rest)
    _at_exit.append((shutdown, exporter_log))


def telemetry_to_send() -> bool:
    """Whether this process set up OpenTelemetry's SDK and has not sent its last spans yet."""
    return bool(_at_exit) and not _sent


def send_telemetry() -> bool:
    """Send the spans and metrics not sent yet (telemetry on, with agentrunner's SDK set-up),
    once: what the CLI does as it ends, and else an ``atexit`` hook. False when Ctrl-C gave
    the wait up (quietly: one warning line), so the CLI can exit 130."""
    global _sent
    if _sent or not _at_exit:
        return True
    _sent = True
    try:
        _send_the_last()
    except KeyboardInterrupt:
        log.warning("telemetry not sent: interrupted")
        return False
    return True


def _send_the_rest() -> None:
    send_telemetry()


def _send_the_last() -> None:
    """The spans and metrics not sent yet are, together; but a receiver that is down or
    stalled must not hold a command's exit for the exporters' whole timeout and retries (10 s
    by default, or ``OTEL_EXPORTER_OTLP_TIMEOUT``): past ``EXIT_FLUSH_S`` they are given up,
    saying why where the exporter told (refused), else that no answer came."""
    stopping = [
        (exporter_log, threading.Thread(target=shutdown, daemon=True))
        for shutdown, exporter_log in _at_exit
    ]
    for exporter_log, thread in stopping:
        thread.name = f"agentrunner-{exporter_log.what}"
        thread.start()
    log.debug("sending the last spans and metrics (at most %g s)", EXIT_FLUSH_S)
    deadline = time.monotonic() + EXIT_FLUSH_S
    for exporter_log, thread in stopping:
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            why = exporter_log.why
            if why is None or why == _NO_ANSWER:  # a request still waiting, or one timed out
                why = f"did not answer within {EXIT_FLUSH_S:g} s"
            exporter_log.say(why)
