"""``[retention]``: how long what a settled run leaves behind is kept (docs/retention.md). Each
key is a number of days, counted from when the run settled; a key left out keeps that kind
of row for good. Threads and their messages are not a rule's: they are kept.
``compact_token_deltas``: a settled run's streamed deltas are merged into one row per stream
(the same text, a row instead of dozens) — on unless turned off."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from agentrunner.config.source import Table
from agentrunner.config.values import flag

__all__ = ["Retention"]

_HINT = (
    "A number of days, 0 or more, e.g. events_days = 30 (fractions too: 0.5 is twelve hours); "
    "leave it out to keep those rows (docs/retention.md)."
)


@dataclass(frozen=True, slots=True)
class Retention:
    NAME: ClassVar[str] = "retention"
    KEYS: ClassVar[tuple[str, ...]] = (
        "runs_days",
        "events_days",
        "token_deltas_days",
        "run_messages_days",
        "costs_days",
        "compact_token_deltas",
    )

    runs_days: float | None = None  # a settled run, with its steps, run messages and events
    events_days: float | None = None  # a settled run's events
    token_deltas_days: float | None = None  # its agent.token and agent.thinking events
    run_messages_days: float | None = None  # its run messages (its steps stay)
    costs_days: float | None = None  # cost rows (the day totals that reports read stay)
    compact_token_deltas: bool = True

    @property
    def removes(self) -> bool:
        """Whether any rule removes rows (compaction merges them)."""
        return any(getattr(self, key) is not None for key in self.KEYS[:-1])

    @classmethod
    def read(cls, table: Table) -> Retention:
        days = {key: _days(table, key) for key in cls.KEYS[:-1]}
        return cls(**days, compact_token_deltas=flag(table, "compact_token_deltas", True))


def _days(table: Table, key: str) -> float | None:
    value = table.get(key)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise table.error(
            key, f"{table.name(key)} must be a number of days, 0 or more, got {value!r}", _HINT
        )
    return float(value)
