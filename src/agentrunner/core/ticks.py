"""When a schedule's ticks fall: ``every`` a fixed period, or a cron expression in a time zone.

A tick is a moment, in seconds since the epoch, that every process computes alike from the
schedule alone: an ``every`` schedule's ticks are the multiples of its period counted from the
epoch (so ``"15m"`` falls at :00, :15, :30 and :45, whichever process looks, whenever it
started), a cron schedule's are its expression's matches in its zone (cronsim: daylight saving
handled as cron does, no hand-written parser). Nothing here reads a clock; the caller says what
the time is.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

__all__ = ["Ticks", "TicksError", "every_seconds", "zone"]

_EVERY = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
MIN_EVERY_S = 1.0  # finer than this, a schedule is a loop, not a schedule


class TicksError(ValueError):
    """A period, expression or zone that names no ticks, said in words."""


def every_seconds(text: str) -> float:
    """``"30s"``, ``"15m"``, ``"2h"``, ``"1d"`` as seconds; ``TicksError`` otherwise."""
    match = _EVERY.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise TicksError(f'{text!r} is not a period: write a number and a unit, e.g. "30s"')
    seconds = float(match[1]) * _UNITS[match[2]]
    if seconds < MIN_EVERY_S:
        raise TicksError(f"{text!r} is shorter than {MIN_EVERY_S:g} s")
    return seconds


def zone(name: str) -> ZoneInfo:
    """An IANA time zone by name (``"Europe/Paris"``, ``"UTC"``); ``TicksError`` otherwise."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise TicksError(f'{name!r} is no time zone: write an IANA name, e.g. "UTC"') from exc


@dataclass(frozen=True, slots=True)
class Ticks:
    """A schedule's ticks: ``every_s`` or ``cron`` (in ``timezone``), exactly one of them."""

    cron: str | None = None
    every_s: float | None = None
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        if (self.cron is None) == (self.every_s is None):
            raise TicksError("a schedule needs either cron or every, not both")
        tz = zone(self.timezone)
        if self.cron is not None:
            try:
                CronSim(self.cron, datetime.now(tz))
            except CronSimError as exc:
                raise TicksError(f"{self.cron!r} is not a cron expression: {exc}") from exc

    def describe(self) -> str:
        """In words: "every 30 s", "At 09:00 on Monday through Friday (Europe/Paris)"."""
        if self.every_s is not None:
            return f"every {_period(self.every_s)}"
        tz = zone(self.timezone)
        return f"{CronSim(self.cron or '', datetime.now(tz)).explain()} ({self.timezone})"

    def at_or_before(self, t: float) -> float | None:
        """The newest tick at or before ``t`` (``None``: none, for a cron that never matched)."""
        if self.every_s is not None:
            return math.floor(t / self.every_s) * self.every_s
        # cronsim looks strictly before its start: a second later finds a tick at ``t`` too.
        start = datetime.fromtimestamp(math.floor(t) + 1, zone(self.timezone))
        for moment in CronSim(self.cron or "", start, reverse=True):
            return moment.timestamp()
        return None

    def after(self, t: float) -> float | None:
        """The first tick after ``t``."""
        if self.every_s is not None:
            return (math.floor(t / self.every_s) + 1) * self.every_s
        for moment in CronSim(self.cron or "", datetime.fromtimestamp(t, zone(self.timezone))):
            return moment.timestamp()
        return None

    def between(self, after: float, upto: float, *, most: int = 10_000) -> Iterator[float]:
        """The ticks in (``after``, ``upto``], oldest first, at most ``most`` of them (a long
        outage of a short period is counted, never walked tick by tick)."""
        if self.every_s is not None:
            first = math.floor(after / self.every_s) + 1
            last = math.floor(upto / self.every_s)
            for k in range(max(first, last - most + 1), last + 1):
                yield k * self.every_s
            return
        start = datetime.fromtimestamp(after, zone(self.timezone))
        for count, moment in enumerate(CronSim(self.cron or "", start)):
            if moment.timestamp() > upto or count >= most:
                return
            yield moment.timestamp()

    def count_between(self, after: float, upto: float) -> int:
        """How many ticks fall in (``after``, ``upto``]: a missed stretch, said in numbers."""
        if self.every_s is not None:
            return max(0, math.floor(upto / self.every_s) - math.floor(after / self.every_s))
        return sum(1 for _ in self.between(after, upto))


def _period(seconds: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"
