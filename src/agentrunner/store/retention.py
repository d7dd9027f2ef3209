"""What ``[retention]`` reads and removes (``workspace.retention`` owns the rules): the settled
runs in the order they settled, a batch at a time with what each holds; each rule's place in
that order; the claim on the pass, so that one process applies the rules at a time; and the
statements that drop a run's rows, or merge its token deltas."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from agentrunner.store.drivers import Op
from agentrunner.store.records import to_json
from agentrunner.store.repositories import Repository

__all__ = ["RetentionRows", "SettledRun"]


@dataclass(frozen=True, slots=True)
class SettledRun:
    """A settled run, with the rows it holds; ``kept``: no rule removes the run itself (a run
    of its own still runs, or it is its thread's newest completed run)."""

    id: str
    completed_at: float
    events: int
    deltas: int  # its agent.token and agent.thinking rows
    following: int  # of them, those right after a row of their kind (what may be merged)
    run_messages: int
    steps: int
    kept: bool


class RetentionRows(Repository):
    async def claim(self, holder: str, hold_s: float) -> bool:
        """Whether ``holder`` now holds the pass (for ``hold_s``): no other process does."""
        now = time.time()
        rows = await self.db.fetch_in_transaction(
            [self.op("retention_claim", holder=holder, expires_at=now + hold_s, now=now)]
        )
        return bool(rows)

    async def release(self, holder: str) -> None:
        await self.db.execute(self.sql["retention_release"], {"holder": holder})

    async def cursor(self, rule: str) -> tuple[float, str]:
        """The last settled run ``rule`` went through: (completed_at, id); (0, "") for none."""
        row = await self.db.fetch_one(self.sql["retention_cursor"], {"rule": rule})
        return (0.0, "") if row is None else (float(row["through_at"]), str(row["through_id"]))

    def restart_op(self, rule: str) -> Op:
        """``rule`` starts from the first settled run again, next time."""
        return self.op("retention_advance", rule=rule, through_at=0.0, through_id="")

    def advance_op(self, rule: str, through: SettledRun) -> Op:
        return self.op(
            "retention_advance", rule=rule, through_at=through.completed_at, through_id=through.id
        )

    async def settled(self, after: tuple[float, str], until: float, batch: int) -> list[SettledRun]:
        """The next ``batch`` runs settled after ``after`` (in (completed_at, id) order) and by
        ``until``, oldest first."""
        rows = await self.db.fetch_all(
            self.sql["retention_runs"],
            {"after_at": after[0], "after_id": after[1], "until": until, "batch": batch},
        )
        return [
            SettledRun(
                str(row["id"]),
                float(row["completed_at"]),
                int(row["events"]),
                int(row["deltas"]),
                int(row["following"]),
                int(row["run_messages"]),
                int(row["steps"]),
                bool(row["kept"]),
            )
            for row in rows
        ]

    async def deltas(self, run_id: str) -> list[dict[str, Any]]:
        """Run ``run_id``'s token deltas (seq, type, payload) in order."""
        return await self.db.fetch_all(self.sql["retention_deltas"], {"run_id": run_id})

    def merge_op(self, run_id: str, seq: int, payload: dict[str, Any]) -> Op:
        return self.op("retention_delta_merge", run_id=run_id, seq=seq, payload=to_json(payload))

    def drop_merged_op(self, run_id: str, seq: int, last: int, kind: str) -> Op:
        return self.op("retention_delta_drop", run_id=run_id, seq=seq, last=last, type=kind)

    def drop_op(self, what: str, run_id: str) -> Op:
        """Drop run ``run_id``'s ``what``: ``events``, ``deltas``, ``run_messages`` or ``run``
        (its steps and run messages with it)."""
        return self.op(f"retention_drop_{what}", run_id=run_id)

    def mark_op(self, run_id: str, what: str) -> Op:
        """Run ``run_id`` says that ``what`` of it was removed (``RunRecord.removed``)."""
        return self.op("retention_mark", run_id=run_id, what=what)

    async def count_costs(self, before_day: str) -> int:
        row = await self.db.fetch_one(self.sql["retention_costs_count"], {"day": before_day})
        return int(row["n"]) if row else 0

    async def drop_costs(self, before_day: str, batch: int) -> int:
        """Up to ``batch`` of the cost rows of days before ``before_day``; how many went."""
        return await self.db.execute(
            self.sql["retention_drop_costs"], {"day": before_day, "batch": batch}
        )
