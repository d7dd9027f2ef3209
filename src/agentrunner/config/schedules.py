"""``[schedules.NAME]``: agents that run on their own (docs/schedules.md) — and the one reading of
a schedule, which an agent file's ``schedule:`` goes through too (``Schedule.parse``).

A schedule names its agent, when it fires (``cron`` in a ``timezone``, or ``every`` a period:
``core/ticks``), the ``message`` its runs are sent (a template over its ``input`` and the fire
time), where they go (``thread``: ``"new"``, a new thread each time, or a thread's name;
``channel``: a post there), where what nobody is watching goes (``notify``: a channel; by
default its own channel, else the person's DM with the agent), and two rules: ``missed``, what
becomes of ticks that passed while nothing ran (``"skip"`` them, or run ``"once"`` for them all)
and ``overlap``, a tick that comes while the previous fire's run has not ended (``"skip"`` it,
or ``"queue"`` it behind).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from agentrunner.config.source import Table
from agentrunner.core.ticks import Ticks, TicksError, every_seconds

__all__ = ["SCHEDULE_KEYS", "Schedule", "ScheduleProblem", "Schedules"]

SCHEDULE_KEYS: tuple[str, ...] = (
    "agent",
    "cron",
    "every",
    "timezone",
    "message",
    "input",
    "thread",
    "channel",
    "notify",
    "enabled",
    "missed",
    "overlap",
)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_HINTS = {
    "cron": 'Five fields: minute hour day-of-month month day-of-week, e.g. "0 9 * * 1-5".',
    "timezone": 'An IANA name, e.g. "Europe/Paris", "America/New_York" or "UTC".',
    "every": 'A number and a unit (s, m, h, d), 1 s at least: "30s", "15m", "2h".',
}
_RESERVED = ("events", "stream")  # GET /schedules/events, /ui/schedules/stream: not schedules
_WHEN_HINT = 'Write cron = "0 9 * * 1-5" (with timezone = "Europe/Paris") or every = "15m".'

# (key, message, hint): where a problem is in the block, what, what to do
ScheduleProblem = tuple[str, str, str]


def _frozen(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(value))


@dataclass(frozen=True, slots=True)
class Schedule:
    """One schedule, read and checked: ``[schedules.NAME]`` or an agent file's ``schedule:``
    (named after its agent). ``source``: where it is written, for messages."""

    name: str
    agent: str
    ticks: Ticks
    message: str
    input: Mapping[str, Any] = field(default_factory=lambda: _frozen({}))
    thread: str = "new"
    channel: str | None = None
    notify: str | None = None
    enabled: bool = True
    missed: str = "skip"
    overlap: str = "skip"
    source: str = "agentrunner.toml"

    @property
    def period_s(self) -> float | None:
        return self.ticks.every_s

    @property
    def target(self) -> str:
        """Where its runs go, in words: ``#general``, ``a new thread``, ``thread daily``."""
        if self.channel is not None:
            return f"#{self.channel}"
        return "a new thread" if self.thread == "new" else f"thread {self.thread}"

    @classmethod
    def parse(
        cls, name: str, value: Any, *, agent: str | None = None, source: str = "agentrunner.toml"
    ) -> tuple[Schedule | None, list[ScheduleProblem]]:
        """A schedule from its block; ``agent`` given (an agent file's own) is its agent, and
        the block names none. The problems found, each located by its key; none and no
        schedule for no block (``None``)."""
        if value is None:
            return None, []
        if not isinstance(value, Mapping):
            return None, [("", "a schedule must be a table of keys", _WHEN_HINT)]
        problems: list[ScheduleProblem] = []

        def wrong(key: str, message: str, hint: str = "") -> None:
            problems.append((key, message, hint))

        keys = SCHEDULE_KEYS if agent is None else tuple(k for k in SCHEDULE_KEYS if k != "agent")
        for key in value:
            if key not in keys:
                near = difflib.get_close_matches(str(key), keys, n=1, cutoff=0.6)
                meant = f" (did you mean '{near[0]}'?)" if near else ""
                hint = f"A schedule's keys: {', '.join(keys)}."
                wrong(str(key), f"unknown key '{key}'{meant}", hint)
        if not _NAME.fullmatch(name):
            wrong("", f"{name!r} is not a schedule name", "Letters, digits, '_', '.', '-'.")
        elif name in _RESERVED:
            wrong("", f"'{name}' is a name the API keeps for itself", "Choose another name.")
        owner = agent if agent is not None else value.get("agent")
        if not isinstance(owner, str) or not owner.strip():
            wrong("agent", "a schedule needs the agent it runs", 'Write agent = "assistant".')
        message = value.get("message")
        if not isinstance(message, str) or not message.strip():
            wrong("message", "a schedule needs the message its runs are sent", "")
        ticks = _ticks(value, wrong)
        inputs = value.get("input", {})
        if not isinstance(inputs, Mapping):
            wrong("input", "input must be a table of values for the message's {{input.x}}")
        thread, channel = value.get("thread", "new"), value.get("channel")
        if not isinstance(thread, str) or not thread.strip():
            wrong("thread", 'thread must be "new" or a thread\'s name')
        if channel is not None and (not isinstance(channel, str) or not channel.strip()):
            wrong("channel", 'channel must be a channel\'s name, e.g. "general"')
        if channel is not None and "thread" in value:
            wrong("channel", "a schedule posts to a channel or runs on a thread, not both")
        notify = value.get("notify")
        if notify is not None and (not isinstance(notify, str) or not notify.strip()):
            wrong("notify", "notify must be a channel's name")
        enabled = value.get("enabled", True)
        if not isinstance(enabled, bool):
            wrong("enabled", f"enabled must be true or false, got {enabled!r}")
        missed, overlap = value.get("missed", "skip"), value.get("overlap", "skip")
        if missed not in ("skip", "once"):
            wrong("missed", f'missed must be "skip" or "once", got {missed!r}', _MISSED_HINT)
        if overlap not in ("skip", "queue"):
            wrong("overlap", f'overlap must be "skip" or "queue", got {overlap!r}', _OVERLAP_HINT)
        if problems or ticks is None:
            return None, problems
        return (
            cls(
                name,
                str(owner).strip(),
                ticks,
                str(message),
                _frozen(inputs),
                str(thread).strip(),
                None if channel is None else str(channel).strip().lstrip("#"),
                None if notify is None else str(notify).strip().lstrip("#"),
                enabled,
                str(missed),
                str(overlap),
                source,
            ),
            [],
        )


_MISSED_HINT = '"skip": ticks missed while nothing ran are not run; "once": one run for them all.'
_OVERLAP_HINT = '"skip": a tick is skipped while the last fire runs; "queue": it waits its turn.'


def _ticks(value: Mapping[str, Any], wrong: Any) -> Ticks | None:
    cron, every, tz = value.get("cron"), value.get("every"), value.get("timezone", "UTC")
    if (cron is None) == (every is None):
        key = "cron" if cron is not None else ""
        wrong(key, "a schedule needs either cron or every (one of them)", _WHEN_HINT)
        return None
    if not isinstance(tz, str):
        wrong("timezone", f"timezone must be an IANA name, got {tz!r}", 'e.g. "Europe/Paris"')
        return None
    if every is not None and "timezone" in value:
        wrong("timezone", "timezone applies to cron; an every schedule's ticks are UTC's", "")
        return None
    try:
        if cron is not None:
            if not isinstance(cron, str):
                raise TicksError(f"{cron!r} is not a cron expression")
            return Ticks(cron=cron.strip(), timezone=tz)
        return Ticks(every_s=every_seconds(str(every)), timezone=tz)
    except TicksError as exc:
        key = "timezone" if "time zone" in str(exc) else ("cron" if cron is not None else "every")
        wrong(key, str(exc), _HINTS[key])
        return None


@dataclass(frozen=True, slots=True)
class Schedules:
    """``[schedules]``: a ``Schedule`` by name."""

    NAME: ClassVar[str] = "schedules"
    KEYS: ClassVar[tuple[str, ...]] = ()  # a table of named tables, each checking its own

    by_name: Mapping[str, Schedule]

    @classmethod
    def read(cls, table: Table) -> Schedules:
        """Raises ``invalid_specification`` at the first wrong value's line."""
        found: dict[str, Schedule] = {}
        for name, value in table.values.items():
            schedule, problems = Schedule.parse(str(name), value, source=table.source.file or "")
            if problems:
                key, message, hint = problems[0]
                path = ("schedules", str(name), *([key] if key else []))
                raise table.source.error(path, f"schedule '{name}': {message}", hint or None)
            if schedule is not None:
                found[str(name)] = schedule
        return cls(MappingProxyType(found))
