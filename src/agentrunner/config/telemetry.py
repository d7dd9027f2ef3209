"""``[telemetry]``, with the standard ``OTEL_*`` variables over it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

from agentrunner.config.source import Table
from agentrunner.config.values import holds_password, name
from agentrunner.errors import AgentRunnerError, ErrorCode

__all__ = ["Telemetry"]

_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")
_OTLP_HTTP = "http/protobuf"
_OTLP_ENDPOINT = "http://localhost:4318"  # OTLP/HTTP's own default


@dataclass(frozen=True, slots=True)
class Telemetry:
    """``[telemetry]`` with the standard ``OTEL_*`` variables applied: traces, and metrics
    unless ``metrics`` is off, sent over OTLP (HTTP, protobuf) when ``enabled``. Headers, such
    as a receiver's API key, come only from ``OTEL_EXPORTER_OTLP_HEADERS``, which the
    exporters read themselves."""

    NAME: ClassVar[str] = "telemetry"
    KEYS: ClassVar[tuple[str, ...]] = (
        "enabled",
        "capture_content",
        "service_name",
        "endpoint",
        "metrics",
        "sample_ratio",
    )

    enabled: bool = False
    capture_content: bool = False  # prompts, replies, tool arguments and results on spans
    service_name: str = "agentrunner"
    endpoint: str = _OTLP_ENDPOINT  # the receiver's OTLP/HTTP base URL
    traces_endpoint: str | None = None  # OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: used as it is
    metrics: bool = True  # off for a receiver that takes only traces (Phoenix, Jaeger)
    metrics_endpoint: str | None = None  # OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: used as it is
    metric_interval_ms: int = 60_000  # OTEL_METRIC_EXPORT_INTERVAL: between two exports
    # The share of traces kept, decided at each trace's root and followed by its children
    # (a head sampler: ParentBased(TraceIdRatioBased)); 1: every one. OTEL_TRACES_SAMPLER
    # and OTEL_TRACES_SAMPLER_ARG over it, as the SDK reads them.
    sample_ratio: float = 1.0

    @property
    def traces_url(self) -> str:
        """Where spans are posted: the traces endpoint, or the base URL's ``/v1/traces``."""
        return self.traces_endpoint or self.endpoint.rstrip("/") + "/v1/traces"

    @property
    def metrics_url(self) -> str:
        """Where metrics are posted: the metrics endpoint, or the base URL's ``/v1/metrics``."""
        return self.metrics_endpoint or self.endpoint.rstrip("/") + "/v1/metrics"

    @classmethod
    def read(cls, table: Table, env: Mapping[str, str]) -> Telemetry:
        """``[telemetry]``, then the environment over it: ``AGENTRUNNER_TELEMETRY`` and
        ``OTEL_SDK_DISABLED`` (on or off), the OpenTelemetry SDK's ``OTEL_SERVICE_NAME``,
        ``OTEL_EXPORTER_OTLP_(TRACES_|METRICS_)ENDPOINT``, ``OTEL_METRICS_EXPORTER`` and
        ``OTEL_METRIC_EXPORT_INTERVAL``, and the GenAI conventions'
        ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``. A variable that cannot be
        honoured is a ``validation`` error naming it."""
        for key in ("enabled", "capture_content", "metrics"):
            if key in table and not isinstance(table.get(key), bool):
                raise table.error(
                    key, f"{table.name(key)} must be true or false, got {table.get(key)!r}"
                )
        endpoint = _endpoint(table)
        telemetry = cls(
            enabled=_switch(env, "AGENTRUNNER_TELEMETRY", table.get("enabled", False)),
            capture_content=_switch(
                env,
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
                table.get("capture_content", False),
            ),
            service_name=env.get("OTEL_SERVICE_NAME") or name(table, "service_name", "agentrunner"),
            endpoint=env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or endpoint,
            traces_endpoint=env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or None,
            metrics=table.get("metrics", True),
            metrics_endpoint=env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or None,
            sample_ratio=_ratio(table),
        )
        if _switch(env, "OTEL_SDK_DISABLED", False):
            return replace(telemetry, enabled=False)
        if not telemetry.enabled:  # the variables below only telemetry that is on reads
            return telemetry  # (other programs may set them for themselves)
        telemetry = replace(
            telemetry,
            metrics=_metrics_exporter(env, telemetry.metrics),
            metric_interval_ms=_export_interval(env),
        )
        _check_protocols(env, ("TRACES", "METRICS") if telemetry.metrics else ("TRACES",))
        return telemetry


def _ratio(table: Table) -> float:
    """``[telemetry] sample_ratio``: a number from 0 to 1."""
    value = table.get("sample_ratio", 1.0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise table.error(
            "sample_ratio",
            f"telemetry.sample_ratio must be a number from 0 to 1, got {value!r}",
            "The share of traces kept: 1 keeps every one, 0.1 one in ten.",
        )
    return float(value)


def _endpoint(table: Table) -> str:
    """``[telemetry] endpoint``: an http(s) URL without a password."""
    endpoint = table.get("endpoint", _OTLP_ENDPOINT)
    if not isinstance(endpoint, str) or not re.match(r"https?://[^/\s]+", endpoint):
        raise table.error(
            "endpoint",
            f"telemetry.endpoint must be an http:// or https:// URL, got {endpoint!r}",
            'The receiver\'s OTLP/HTTP address, e.g. "http://localhost:4318" (Jaeger, a '
            'Collector) or "http://localhost:6006" (Phoenix); /v1/traces is added.',
        )
    if holds_password(endpoint):
        raise table.error(
            "endpoint",
            "telemetry.endpoint holds a password; secrets never go in agentrunner.toml",
            "Give the receiver's credentials in OTEL_EXPORTER_OTLP_HEADERS instead.",
        )
    return endpoint


def _check_protocols(env: Mapping[str, str], signals: tuple[str, ...]) -> None:
    """Each signal sent is sent as OTLP over HTTP; its own variable wins over the general one,
    as in the SDK."""
    for signal in signals:
        named = [
            (variable, env[variable].strip().lower())
            for variable in (f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
            if env.get(variable, "").strip()
        ]
        if named and named[0][1] != _OTLP_HTTP:
            variable, protocol = named[0]
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"{variable}={protocol}: agentrunner sends {signal.lower()} as OTLP over "
                f"HTTP ({_OTLP_HTTP}) only",
                hint=f"Unset {variable}, or set it to {_OTLP_HTTP}, and point the endpoint "
                "at the receiver's OTLP/HTTP port (4318 for Jaeger and a Collector).",
            )


def _metrics_exporter(env: Mapping[str, str], default: bool) -> bool:
    """``OTEL_METRICS_EXPORTER`` over ``[telemetry] metrics``: ``otlp`` sends metrics, ``none``
    does not; the SDK's other exporters are not set up here."""
    value = env.get("OTEL_METRICS_EXPORTER", "").strip().lower()
    if not value:
        return default
    if value in ("otlp", "none"):
        return value == "otlp"
    raise AgentRunnerError(
        ErrorCode.VALIDATION,
        f"OTEL_METRICS_EXPORTER={value}: agentrunner sends metrics over OTLP or not at all",
        hint="Set OTEL_METRICS_EXPORTER=otlp (a Collector can pass them on to Prometheus) or "
        "none, or unset it.",
    )


def _export_interval(env: Mapping[str, str]) -> int:
    """``OTEL_METRIC_EXPORT_INTERVAL``: milliseconds between two exports of the metrics."""
    value = env.get("OTEL_METRIC_EXPORT_INTERVAL", "").strip()
    if not value:
        return 60_000
    try:
        interval = int(value)
    except ValueError:
        interval = 0
    if interval <= 0:
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"OTEL_METRIC_EXPORT_INTERVAL must be a whole number of milliseconds above 0, "
            f"got {value!r}",
            hint="Set it to e.g. 60000 (a minute, the default), or unset it.",
        )
    return interval


def _switch(env: Mapping[str, str], variable: str, default: bool) -> bool:
    """An on/off environment variable over the file's value; anything else is an error."""
    value = env.get(variable, "")
    if not value.strip():  # set but empty reads as unset, as the OpenTelemetry SDK reads it
        return default
    if value.strip().lower() in _TRUE:
        return True
    if value.strip().lower() in _FALSE:
        return False
    raise AgentRunnerError(
        ErrorCode.VALIDATION,
        f"{variable} must be true or false, got {value!r}",
        hint=f"Set {variable}=true or {variable}=false, or unset it.",
    )
