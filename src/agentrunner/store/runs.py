"""A run's rows: ``Runs`` (a run inserted, begun, abandoned and finished; its steps and run
messages; runs listed, and a thread's runs in the order they held it) and ``Events`` (the
events it emitted, by sequence number)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from agentrunner.store.drivers import Op
from agentrunner.store.records import (
    RUN_STATUSES,
    EventRecord,
    RunMessageRecord,
    RunRecord,
    StepRecord,
    to_json,
)
from agentrunner.store.repositories import FAR_FUTURE, Repository

__all__ = ["Events", "Runs"]


class Runs(Repository):
    async def get(self, run_id: str) -> RunRecord | None:
        row = await self.db.fetch_one(self.sql["run_get"], {"id": run_id})
        return RunRecord.from_row(row) if row else None

    async def ids_starting(self, prefix: str, limit: int) -> list[str]:
        """Up to ``limit`` run ids that begin with ``prefix``, in order."""
        return await self.ids("run_ids_starting", prefix=prefix, limit=limit)

    async def ids_ending(self, suffix: str, limit: int) -> list[str]:
        """Up to ``limit`` run ids that end with ``suffix``, in order (a scan of the runs)."""
        return await self.ids("run_ids_ending", suffix=suffix, limit=limit)

    async def on_thread_from(
        self, thread_id: str, first: tuple[int, str], limit: int = 100
    ) -> list[dict[str, Any]]:
        """(id, status, thread_order) of the thread's runs in the order they held the thread
        (each numbered as it began, under the thread's lock: not the order of their ids, as a
        run queued earlier may run later), from ``first`` — a run's (thread_order, id) — on.
        Runs not begun yet are not among them."""
        order, after = first
        return await self.db.fetch_all(
            self.sql["thread_runs_after"],
            {"thread_id": thread_id, "order": order, "after": after, "limit": limit},
        )

    async def thread_order(self, thread_id: str, run_id: str) -> int | None:
        """Run ``run_id``'s place in thread ``thread_id``'s order; None: not begun, or no run
        of that thread."""
        row = await self.db.fetch_one(
            self.sql["thread_run_order"], {"id": run_id, "thread_id": thread_id}
        )
        return None if row is None or row["thread_order"] is None else int(row["thread_order"])

    async def steps(self, run_id: str) -> list[StepRecord]:
        rows = await self.db.fetch_all(self.sql["step_list"], {"run_id": run_id})
        return [StepRecord.from_row(r) for r in rows]

    async def messages(self, run_id: str) -> list[RunMessageRecord]:
        rows = await self.db.fetch_all(self.sql["run_message_list"], {"run_id": run_id})
        return [RunMessageRecord.from_row(r) for r in rows]

    def insert_op(
        self,
        *,
        run_id: str,
        agent_id: str,
        thread_id: str | None,
        status: str,
        parent_run_id: str | None = None,
        depth: int = 0,
        request: Mapping[str, Any] | None = None,
        trigger_message_id: str | None = None,
        channel_id: str | None = None,
        dm_conversation_id: str | None = None,
        trace_id: str | None = None,
    ) -> Op:
        now = time.time()
        return self.op(
            "run_insert",
            id=run_id,
            agent_id=agent_id,
            thread_id=thread_id,
            parent_run_id=parent_run_id,
            status=status,
            trigger_message_id=trigger_message_id,
            channel_id=channel_id,
            dm_conversation_id=dm_conversation_id,
            request=to_json(request),
            depth=depth,
            now=now,
            started_at=now if status == "running" else None,
            trace_id=trace_id,
        )

    def begin_op(self, run_id: str, trace_id: str | None) -> Op:
        """A run inserted before it ran (a queued one) begins, holding its thread's lock: its
        place in the thread's order (``on_thread_from``) and its trace id, if any."""
        return self.op("run_begin", id=run_id, trace_id=trace_id)

    def abandon_ops(
        self, thread_id: str, current_run_id: str, *, message_count: int, last_seq: int
    ) -> list[Op]:
        """Mark failed the runs still ``running`` that wrote the thread's messages past its
        manifest's ``message_count`` (the count its last finished run left): their process died
        holding the thread lock (whoever calls this holds it now). None when the thread's last
        message, ``last_seq``, is within the count — no run died mid-way."""
        if last_seq <= message_count:
            return []
        return [
            self.op(
                "run_abandon",
                thread_id=thread_id,
                run_id=current_run_id,
                after=message_count,
                now=time.time(),
            )
        ]

    async def last_trigger(self, thread_id: str, before_run: str) -> str | None:
        """The channel message that the thread's last completed run before ``before_run``
        answered (None: none did): what a channel agent's history already holds up to."""
        row = await self.db.fetch_one(
            self.sql["run_last_trigger"], {"thread_id": thread_id, "run_id": before_run}
        )
        return None if row is None else str(row["trigger_message_id"])

    async def set_stop_reason(self, run_id: str, stop_reason: str) -> None:
        await self.db.execute(
            self.sql["run_stop_reason"], {"id": run_id, "stop_reason": stop_reason}
        )

    def finish_op(
        self,
        run_id: str,
        *,
        status: str,
        stop_reason: str | None,
        model: str | None = None,
        usage: Mapping[str, int] | None = None,
        cost_micros: int = 0,
        cost_known: bool = True,
        error_code: str | None = None,
        error_message: str | None = None,
    ) -> Op:
        """The run's end; the defaults describe a run that made no model request."""
        return self.op(
            "run_finish",
            id=run_id,
            status=status,
            stop_reason=stop_reason,
            model=model,
            error_code=error_code,
            error_message=error_message,
            token_usage=to_json(usage),
            cost_micros=cost_micros,
            cost_known=cost_known,
            now=time.time(),
        )

    async def list(
        self,
        *,
        agent_id: str | None = None,
        thread_id: str | None = None,
        before: float | None = None,
        limit: int = 50,
    ) -> list[RunRecord]:
        params = {
            "agent_id": agent_id,
            "thread_id": thread_id,
            "before": before if before is not None else FAR_FUTURE,
            "limit": limit,
        }
        if thread_id:
            rows = await self.db.fetch_all(self.sql["run_list_thread"], params)
        else:
            # The newest of each status, merged: an index walk per status, not a sort of all.
            query = self.sql["run_list_agent_status" if agent_id else "run_list_status"]
            rows = [
                row
                for status in RUN_STATUSES
                for row in await self.db.fetch_all(query, {**params, "status": status})
            ]
            rows.sort(key=lambda row: row["created_at"], reverse=True)
            del rows[limit:]
        return [RunRecord.from_row(r) for r in rows]


class Events(Repository):
    async def list(self, run_id: str, *, after: int = 0, limit: int = 1000) -> list[EventRecord]:
        rows = await self.db.fetch_all(
            self.sql["event_list"], {"run_id": run_id, "after": after, "limit": limit}
        )
        return [EventRecord.from_row(r) for r in rows]
