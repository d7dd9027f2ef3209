"""What is spent: ``Costs`` (the day's spend per agent and in all, budget holds for requests in
flight, each day's running totals per agent and model, a run's cost rows) and ``today``, the
UTC day every cost row is kept under."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from agentrunner.core.ids import new_id
from agentrunner.store.drivers import Op
from agentrunner.store.records import RunRecord
from agentrunner.store.repositories import Repository

__all__ = ["Costs", "today"]

# A budget hold outlives any request it covers; one whose process died stops counting then.
HOLD_TTL_S = 3600.0
_LAST_DAY = "9999-12-31"  # the cost rows of every day from a given one on


_day: tuple[float, float, str] = (0.0, 0.0, "")  # [start, end) of the last day asked for


def today(now: float | None = None) -> str:
    """The UTC day of ``now`` (default: now) as YYYY-MM-DD; every cost row asks for it."""
    global _day
    if now is None:
        now = time.time()
    start, end, day = _day
    if start <= now < end:
        return day
    moment = datetime.fromtimestamp(now, UTC)
    midnight = moment.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    day = moment.strftime("%Y-%m-%d")
    _day = (midnight, midnight + 86_400, day)
    return day


class Costs(Repository):
    async def spent_and_held(self, agent_id: str) -> tuple[int, int, int, int]:
        """Micro-dollars spent today (UTC) and held by requests in flight: by ``agent_id``
        (spent, held), then by every agent (spent, held)."""
        row = await self.db.fetch_one(
            self.sql["budget_spent"], {"day": today(), "agent_id": agent_id, "now": time.time()}
        )
        assert row is not None
        return (
            int(row["agent_spent"]),
            int(row["agent_held"]),
            int(row["all_spent"]),
            int(row["all_held"]),
        )

    async def hold(
        self,
        agent_id: str,
        run_id: str,
        micros: int,
        *,
        agent_limit: int | None,
        all_limit: int | None,
        ttl_s: float = HOLD_TTL_S,
    ) -> tuple[str, str, str] | None:
        """Hold ``micros`` of today's budgets for a request of ``run_id``, if with them the
        agent's spend stays within ``agent_limit`` and everyone's within ``all_limit``; the
        hold's key, or None when they would not."""
        day, now, hold_id = today(), time.time(), new_id()
        rows = await self.db.fetch_in_transaction(
            [
                self.op("budget_lock"),
                self.op("budget_expire", day=day, now=now),
                self.op(
                    "budget_hold",
                    day=day,
                    agent_id=agent_id,
                    id=hold_id,
                    run_id=run_id,
                    micros=micros,
                    expires_at=now + ttl_s,
                    agent_limit=agent_limit,
                    all_limit=all_limit,
                ),
            ]
        )
        return (day, agent_id, hold_id) if rows else None

    def release_op(self, hold: tuple[str, str, str]) -> Op:
        day, agent_id, hold_id = hold
        return self.op("budget_release", day=day, agent_id=agent_id, id=hold_id)

    async def spent_today(self, agent_id: str | None = None) -> int:
        """Micro-dollars spent today (UTC) by one agent, or by all with ``agent_id=None``: from
        the day's running totals (a row per agent and model), not a sum over its requests."""
        row = await self.db.fetch_one(
            self.sql["cost_spent"], {"day": today(), "agent_id": agent_id}
        )
        return int(row["micros"]) if row else 0

    async def summary(self, *, since: str, agent_id: str | None = None) -> list[dict[str, Any]]:
        """The running totals from the UTC day ``since`` (YYYY-MM-DD) on, per day, agent and
        model (newest day first), as the cost rows sum up: ``requests``, ``input_tokens``
        (prompt-cache reads and writes included), ``output_tokens``, ``cache_read_tokens``,
        ``cache_write_tokens``, ``cost_micros`` (requests of unknown price count as nothing) and
        ``unknown`` (how many those were); one agent's with ``agent_id``."""
        return await self.db.fetch_all(
            self.sql["cost_summary"], {"since": since, "agent_id": agent_id}
        )

    async def of_run(self, run: RunRecord) -> list[dict[str, Any]]:
        """The cost rows ``run`` and the runs it started, at any depth, made until each of them
        ended, summed per agent and model (in the order they first spent): ``requests``,
        ``tokens`` (in and out), ``cost_micros`` (requests of unknown price count as nothing)
        and ``unknown`` (how many those were)."""
        until = _LAST_DAY if run.completed_at is None else today(run.completed_at)
        params = {"run_id": run.id, "since": today(run.created_at), "until_day": until}
        return await self.db.fetch_all(self.sql["cost_of_run"], params)
