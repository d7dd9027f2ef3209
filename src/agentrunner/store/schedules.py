"""Schedules' rows (docs/schedules.md): each schedule's cursor and pause, and its fires.

A tick is decided once however many processes look: whoever decides moves the schedule's cursor
from where it found it (``advance_op``, guarded) in the transaction that writes the tick's fire
and queues its run, so a process that looked at the same cursor has its whole batch refused.
The cursor only moves on (a resume after the clock went back leaves it where it is). The fire
is guarded too, by its key (schedule, tick): a batch whose fire another wrote first is refused,
its run with it, so the fires stored and the runs queued are the same. Ticks are kept in
milliseconds since the epoch, so equal ticks compare equal in both databases.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agentrunner.store.changes import SCHEDULES_KEY
from agentrunner.store.drivers import Op
from agentrunner.store.repositories import Repository

__all__ = ["Fire", "ScheduleRows", "ScheduleState", "to_ms"]


def to_ms(t: float) -> int:
    return round(t * 1000)


@dataclass(frozen=True, slots=True)
class ScheduleState:
    name: str
    cursor: float  # the newest tick decided, in seconds
    paused: bool


@dataclass(frozen=True, slots=True)
class Fire:
    """A tick decided: ``queued`` (its run, whose status is ``run_status``) or ``skipped`` (and
    ``reason``). ``missed``: ticks it stands for that passed while nothing ran."""

    schedule: str
    tick: float
    outcome: str
    reason: str | None
    run_id: str | None
    missed: int
    fired_at: float
    run_status: str | None = None
    error_code: str | None = None
    thread_id: str | None = None

    @property
    def result(self) -> str:
        """What came of it in one word: ``skipped``, or its run's status (``completed``,
        ``failed``, ``running``, ``queued`` while it waits for a worker…)."""
        if self.outcome != "queued":
            return self.outcome
        status = self.run_status or "deleted"
        return "queued" if status == "created" else status

    def to_dict(self) -> dict[str, Any]:
        return {
            "schedule": self.schedule,
            "tick": self.tick,
            "outcome": self.result,
            "reason": self.reason,
            "run_id": self.run_id,
            "missed": self.missed,
            "fired_at": self.fired_at,
            "error_code": self.error_code,
            "thread_id": self.thread_id,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Fire:
        return cls(
            row["schedule"],
            int(row["tick_ms"]) / 1000,
            row["outcome"],
            row["reason"],
            row["run_id"],
            int(row["missed"]),
            float(row["fired_at"]),
            row.get("run_status"),
            row.get("error_code"),
            row.get("thread_id"),
        )


class ScheduleRows(Repository):
    async def states(self) -> dict[str, ScheduleState]:
        rows = await self.db.fetch_all(self.sql["schedule_states"], {})
        return {
            r["name"]: ScheduleState(r["name"], int(r["cursor_ms"]) / 1000, bool(r["paused"]))
            for r in rows
        }

    async def start(self, names: Iterable[tuple[str, float]]) -> None:
        """Schedules seen for the first time, each from its cursor (the tick at or before
        now); one already started is left as it is."""
        now = time.time()
        ops = [
            self.op("schedule_start", name=name, cursor_ms=to_ms(cursor), now=now)
            for name, cursor in names
        ]
        if ops:
            await self.db.batch(ops)

    def advance_op(self, name: str, seen: float, cursor: float) -> Op:
        """Move ``name``'s cursor from ``seen`` to ``cursor``: refuses the batch (guarded) when
        another process moved it first, or the schedule was paused meanwhile."""
        return self.op(
            "schedule_advance",
            name=name,
            seen_ms=to_ms(seen),
            cursor_ms=to_ms(cursor),
            now=time.time(),
        )

    def fire_op(
        self,
        schedule: str,
        tick: float,
        outcome: str,
        *,
        reason: str | None = None,
        run_id: str | None = None,
        missed: int = 0,
        now: float,
    ) -> Op:
        """The fire at ``tick``, decided at ``now`` (the deciding process's clock): refuses the
        batch (guarded) when ``schedule`` has one there."""
        return self.op(
            "schedule_fire",
            schedule=schedule,
            tick_ms=to_ms(tick),
            outcome=outcome,
            reason=reason,
            run_id=run_id,
            missed=missed,
            now=now,
        )

    def changed(self) -> Op:
        """Word to the readers of schedules (a page, a stream) that one changed."""
        return self.changed_op(SCHEDULES_KEY)

    async def pause(self, name: str, cursor: float) -> None:
        op = self.op("schedule_pause", name=name, cursor_ms=to_ms(cursor), now=time.time())
        await self.db.batch([op, self.changed()])

    async def resume(self, name: str, cursor: float) -> None:
        """Resumed from ``cursor`` (now's tick), or from its own when that is newer (the clock
        went back): started there when it never was."""
        now = time.time()
        await self.db.batch(
            [
                self.op("schedule_start", name=name, cursor_ms=to_ms(cursor), now=now),
                self.op("schedule_resume", name=name, cursor_ms=to_ms(cursor), now=now),
                self.changed(),
            ]
        )

    async def live_run(self, schedule: str) -> str | None:
        """The newest fire's run while it has not ended (queued, running or waiting)."""
        row = await self.db.fetch_one(self.sql["schedule_run_live"], {"schedule": schedule})
        return None if row is None else str(row["id"])

    async def recent(
        self, schedule: str, *, limit: int = 20, before: float | None = None
    ) -> list[Fire]:
        """``schedule``'s newest fires first, before tick ``before`` (a page's end)."""
        rows = await self.db.fetch_all(
            self.sql["schedule_fires_recent"],
            {
                "schedule": schedule,
                "limit": limit,
                "before_ms": to_ms(before) if before is not None else 2**62,
            },
        )
        return [Fire.from_row(r) for r in rows]

    async def feed_after(
        self, key: int, schedule: str, tick_ms: int, limit: int
    ) -> tuple[list[tuple[int, Fire]], int]:
        """The fires after the position (``key``, ``schedule``, ``tick_ms``) in the order they
        were committed, each with its feed key (up to ``limit``), and the key below which every
        fire is settled (``feeds.ScheduleFeed`` gives only those)."""
        rows = await self.db.fetch_all(
            self.sql["schedule_fires_after"],
            {"key": key, "schedule": schedule, "tick_ms": tick_ms, "limit": limit},
        )
        if not rows:
            return [], 0
        return [(int(r["feed_key"]), Fire.from_row(r)) for r in rows], int(rows[0]["settled"])

    async def feed_settled(self) -> int:
        """The feed key below which every fire is settled now: where a reader that starts now
        starts (what it gives is every fire from this key on)."""
        row = await self.db.fetch_one(self.sql["schedule_fires_settled"], {})
        return 0 if row is None else int(row["settled"])

    async def last(self) -> dict[str, Fire]:
        """Each schedule's newest fire."""
        rows = await self.db.fetch_all(self.sql["schedule_fires_last"], {})
        return {r["schedule"]: Fire.from_row(r) for r in rows}

    async def counts(self) -> dict[str, dict[str, int]]:
        """Fires per schedule and outcome (``queued``, ``skipped``)."""
        counts: dict[str, dict[str, int]] = {}
        for r in await self.db.fetch_all(self.sql["schedule_fire_count"], {}):
            counts.setdefault(r["schedule"], {})[r["outcome"]] = int(r["n"])
        return counts
