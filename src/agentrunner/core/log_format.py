"""What agentrunner's log lines carry and how they are printed.

A log record made while a run is in progress names it: ``in_run`` keeps the run's id, its agent
and its trace id (telemetry on) in a context variable for the run's task (and what it starts:
tools on worker threads, child runs), and the JSON format adds them to the line. Code that logs
says nothing about the run; a record may still name them itself (``extra={"agent": …}``).

Two formats (``agentrunner --log-format``): ``text``, Python's own (nothing set up: warnings
and errors as plain lines on stderr, as always; the CLI says them as its own warnings, each on a
line of its own: ``interfaces/cli/console``), and ``json``, one object per line on stderr —
``time``, ``level``, ``logger``, ``message``, then ``run_id`` / ``trace_id`` / ``agent`` where
known and any fields the record was given — with agentrunner's INFO lines (what agents decided)
included.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from agentrunner.core.json_text import json_text

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

__all__ = ["LOG_FORMATS", "JsonFormatter", "RunContext", "current_run", "in_run", "use_format"]

LOG_FORMATS = ("text", "json")
LogFormat = Literal["text", "json"]


class RunContext(NamedTuple):
    run_id: str
    agent: str
    trace_id: str | None


_current: ContextVar[RunContext | None] = ContextVar("agentrunner_run", default=None)


def current_run() -> RunContext | None:
    """The run in progress in this task or thread, if any."""
    return _current.get()


@contextlib.contextmanager
def in_run(run_id: str, agent: str, trace_id: str | None) -> Iterator[None]:
    """Log records made inside the block (and in what it starts) name this run."""
    token = _current.set(RunContext(run_id, agent, trace_id))
    try:
        yield
    finally:
        _current.reset(token)


# What every LogRecord has: anything else on a record was given to it (``extra``).
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        run = _current.get()
        if run is not None:
            line["run_id"] = run.run_id
            if run.trace_id is not None:
                line["trace_id"] = run.trace_id
            line["agent"] = run.agent
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json_text(line, default=str)


_installed: logging.Handler | None = None
# agentrunner's own records, and OpenTelemetry's (its SDK and exporters, telemetry on): in json
# every line on stderr is JSON
_LOGGERS = ("agentrunner", "opentelemetry")


def use_format(
    fmt: LogFormat, stream: SupportsWrite[str] | None = None, *, debug: bool = False
) -> None:
    """Print agentrunner's (and OpenTelemetry's) log records in ``fmt`` from now on, on
    ``stream`` (default: stderr; the CLI's ends a streamed line first): ``json`` puts a handler
    with the JSON format on their loggers (INFO and up, not passed on to the root logger);
    ``text`` takes it away again, leaving Python's default. ``debug`` shows their DEBUG
    records too (the exporters' retries among them), in either format."""
    global _installed
    loggers = [logging.getLogger(name) for name in _LOGGERS]
    if _installed is not None:
        for logger in loggers:
            logger.removeHandler(_installed)
            logger.propagate = True
            logger.setLevel(logging.NOTSET)
        _installed = None
    if fmt == "text" and not debug:
        return
    handler = logging.StreamHandler(stream or sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    level = logging.DEBUG if debug else logging.INFO
    handler.setLevel(level)  # what a filter lowered to DEBUG is not printed without --debug
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False
    _installed = handler
