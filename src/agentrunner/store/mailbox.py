"""Mailboxes (seed 003) and the workers that serve them: every database operation they need.

A queued run is a ``runs`` row with status ``created``. A claim atomically takes the oldest queued
run of an agent that has none running — FIFO per agent, one at a time — and gives it a lease.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentrunner.core.ids import new_id
from agentrunner.store.approvals import Approvals
from agentrunner.store.changes import APPROVALS_KEY, channel_key, run_key, thread_key
from agentrunner.store.drivers import GuardRefused, Op
from agentrunner.store.records import from_json, to_json
from agentrunner.store.repositories import Repository

__all__ = ["ClaimedRun", "Mailbox", "NewRun", "Workers"]


@dataclass(frozen=True, slots=True)
class ClaimedRun:
    id: str
    agent_id: str
    thread_id: str | None
    request: dict[str, Any]
    attempts: int
    trigger_message_id: str | None
    channel_id: str | None
    depth: int
    queued_at: float  # the queuing process's clock
    claimed_at: float  # the claiming one's (the database's, on PostgreSQL)
    trace_context: dict[str, str] | None  # the trace it was queued in (telemetry on)

    @property
    def waited_s(self) -> float:
        """From being queued to this claim: across machines the two clocks may differ a
        little, never below nothing."""
        return max(0.0, self.claimed_at - self.queued_at)


@dataclass(frozen=True, slots=True)
class NewRun:
    """A run to queue in ``agent_id``'s mailbox: on a thread (a channel's, for a run that
    answers a post) or none (a task), with what the worker will be asked to do."""

    id: str
    agent_id: str
    thread_id: str | None
    request: Mapping[str, Any]
    depth: int = 0
    trigger_message_id: str | None = None
    channel_id: str | None = None
    dm_conversation_id: str | None = None


class Mailbox(Repository):
    async def enqueue(
        self,
        runs: Sequence[NewRun],
        *,
        with_ops: Sequence[Op] = (),
        trace_context: Mapping[str, str] | None = None,
    ) -> None:
        """Queue ``runs`` in one transaction with ``with_ops`` (what they answer: a post, an
        idempotency key; nothing of either is written if one fails), then wake idle workers:
        PostgreSQL's ``NOTIFY`` goes out with the commit, SQLite's workers are woken after.
        ``trace_context`` (W3C ``traceparent``/``tracestate``) is kept with each, for the
        worker that claims it to continue."""
        now = time.time()
        context = to_json(dict(trace_context)) if trace_context else None
        ops = [*with_ops, *(self._row(run, now, context) for run in runs)]
        if runs and self.sql.dialect == "postgres":
            agents = dict.fromkeys(run.agent_id for run in runs)
            ops.extend(self.op("notify_runs", agent_id=agent_id) for agent_id in agents)
        await self.db.batch(ops)
        if runs:
            self.db.notify()

    def _row(self, run: NewRun, now: float, trace_context: str | None) -> Op:
        return self.op(
            "run_enqueue",
            id=run.id,
            agent_id=run.agent_id,
            thread_id=run.thread_id,
            request=to_json(dict(run.request)),
            depth=run.depth,
            trigger_message_id=run.trigger_message_id,
            channel_id=run.channel_id,
            dm_conversation_id=run.dm_conversation_id,
            now=now,
            trace_context=trace_context,
        )

    async def claim(self, worker_id: str, lease_s: float) -> ClaimedRun | None:
        rows = await self.db.fetch_stamped(
            self.sql["run_claim"], {"lease_s": lease_s, "worker_id": worker_id}
        )
        row = rows[0] if rows else None
        if row is None:
            return None
        return ClaimedRun(
            row["id"],
            row["agent_id"],
            row["thread_id"],
            from_json(row["request"]) or {},
            int(row["attempts"]),
            row["trigger_message_id"],
            row["channel_id"],
            int(row["depth"]),
            float(row["created_at"]),
            float(row["started_at"]),
            from_json(row["trace_context"]),
        )

    async def renew(self, run_id: str, worker_id: str, lease_s: float) -> bool:
        """Extend the lease of a run ``worker_id`` is serving; False when the run is no longer
        its to finish (settled meanwhile, by the lease rules or a cancel)."""
        changed = await self.db.execute(
            self.sql["run_lease_renew"],
            {"id": run_id, "worker_id": worker_id, "lease_until": time.time() + lease_s},
        )
        return changed > 0

    async def release(self, run_id: str) -> None:
        """Put a claimed run back in its mailbox (a worker stopping before it started it)."""
        await self.db.execute(self.sql["run_release"], {"id": run_id})

    async def fail_expired(self) -> list[str]:
        """Fail runs whose worker stopped renewing their lease, and free their threads.

        A run whose worker died is not run again: its tools may already have had effects —
        unless it waited for a person (``run_approvals``): it is queued again. Its thread is
        released at once (the dead worker's lock tickets are removed)."""
        now = time.time()
        failed = []
        for row in await self.db.fetch_all(self.sql["runs_lease_expired"], {"now": now}):
            if row["resumable"]:
                await self._requeue(row, now)
                continue
            message = (
                f"worker {row['worker_id']} stopped renewing its lease; the run was not retried"
            )
            params = {"id": row["id"], "message": message, "now": now}
            ended: list[Op] = []
            keys = [run_key(row["id"])]  # its readers learn it ended (store/changes)
            if row["channel_id"]:  # its channel saw it start: it sees it end, once
                ended = await self._ended_in_channel(row, message, now)
                keys.append(channel_key(row["channel_id"]))
            try:
                fail = self.op("run_lease_fail", **params)
                await self.db.batch([fail, *ended, self.changed_op(*keys)])
                changed = True
            except GuardRefused:  # another upkeep failed it first
                changed = False
            if changed and row["thread_id"] and row["worker_id"]:
                await self.db.execute(
                    self.sql["locks_drop_owner"],
                    {"thread_id": row["thread_id"], "owner_prefix": f"{row['worker_id']}:%"},
                )
            if changed:
                failed.append(row["id"])
        return failed

    async def _requeue(self, row: dict[str, Any], now: float) -> None:
        """A run that had waited for a person is not failed with its worker: its resume point
        and its approved calls' journal let any worker go on without running a call twice."""
        try:
            requeue = self.op("run_lease_requeue", id=row["id"], now=now)
            await self.db.batch([requeue, self.changed_op(run_key(row["id"]))])
        except GuardRefused:
            return
        if row["thread_id"] and row["worker_id"]:
            await self.db.execute(
                self.sql["locks_drop_owner"],
                {"thread_id": row["thread_id"], "owner_prefix": f"{row['worker_id']}:%"},
            )
        self.db.notify()

    async def _ended_in_channel(self, row: dict[str, Any], message: str, now: float) -> list[Op]:
        """A lost run's ``agent.failed`` and ``agent.idle`` in its channel's feed, as its
        worker would have written them (the run's own events are its worker's to number)."""
        trigger = await self.db.fetch_one(
            self.sql["channel_message_get"],
            {"channel_id": row["channel_id"], "id": row["trigger_message_id"] or ""},
        )
        run = {"agent_id": row["agent_id"], "run_id": row["id"], "thread_id": row["thread_id"]}
        where = {
            "message_id": row["trigger_message_id"],
            "thread": trigger["thread_root_id"] if trigger else None,
        }
        ended = [
            ("agent.failed", {**run, "error_code": "worker_lost", "message": message, **where}),
            ("agent.idle", {**run, "outcome": "failed", **where}),
        ]
        return [
            self.op(
                "channel_activity_insert",
                channel_id=row["channel_id"],
                id=new_id("a_"),
                run_id=row["id"],
                type=kind,
                payload=to_json(payload),
                now=now,
            )
            for kind, payload in ended
        ]

    async def cancel(self, run_id: str) -> str:
        """Cancel a run: a queued one at once; a running one by asking its worker.
        Returns ``cancelled``, ``requested`` or ``not_cancellable`` (already finished)."""
        now = time.time()
        if await self.db.execute(self.sql["run_cancel_queued"], {"id": run_id, "now": now}):
            await self.db.batch([self.changed_op(run_key(run_id))])  # its readers: it ended
            return "cancelled"
        if await self.db.execute(self.sql["run_request_cancel"], {"id": run_id}):
            return "requested"
        if await self._cancel_waiting(run_id, now):
            return "cancelled"
        return "not_cancellable"

    async def _cancel_waiting(self, run_id: str, now: float) -> bool:
        row = await self.db.fetch_one(self.sql["run_get"], {"id": run_id})
        if row is None or row["status"] != "waiting":
            return False
        ops = [
            self.op("run_cancel_waiting", id=run_id, now=now),
            self.op("approvals_cancel", run_id=run_id, by="cancel", now=now),
        ]
        keys = [run_key(run_id), APPROVALS_KEY]  # its requests are cancelled with it
        if row["thread_id"]:
            ops.append(self.op("thread_unhold", thread_id=row["thread_id"], run_id=run_id))
            keys.append(thread_key(row["thread_id"]))
        # a delegation: the run waiting on it is told, and goes on
        said = f"{row['agent_id']}'s run was cancelled while it waited for a person"
        ops.extend(
            await Approvals(self.db, self.sql).child_done_ops(
                run_id, row["agent_id"], said, is_error=True
            )
        )
        try:
            await self.db.batch([*ops, self.changed_op(*keys)])
        except GuardRefused:  # it went on meanwhile
            return False
        self.db.notify()  # runs queued behind it on its thread may go now
        return True

    async def cancel_requested(self, worker_id: str | None = None) -> list[str]:
        """The running runs someone asked to cancel: ``worker_id``'s, or (None) all of them."""
        if worker_id is None:
            rows = await self.db.fetch_all(self.sql["runs_cancel_requested"], {})
        else:
            rows = await self.db.fetch_all(self.sql["runs_to_cancel"], {"worker_id": worker_id})
        return [r["id"] for r in rows]

    async def queued(self, agent_id: str, limit: int) -> int:
        """How many runs ``agent_id`` has queued, counting no further than ``limit``."""
        row = await self.db.fetch_one(
            self.sql["mailbox_queued"], {"agent_id": agent_id, "limit": limit}
        )
        return int(row["runs"]) if row else 0

    async def busy(self) -> bool:
        """Whether a run is running, or queued and claimable (``mailbox_busy``): what a
        process serving until idle waits for."""
        row = await self.db.fetch_one(self.sql["mailbox_busy"], {})
        return bool(row and row["busy"])

    async def depths(self) -> dict[str, dict[str, int]]:
        """Per agent: how many runs are queued (``created``) and ``running``."""
        out: dict[str, dict[str, int]] = {}
        for row in await self.db.fetch_all(self.sql["mailbox_depths"], {}):
            out.setdefault(row["agent_id"], {})[row["status"]] = int(row["runs"])
        return out


class Workers(Repository):
    async def heartbeat(self, worker_id: str, concurrency: int) -> None:
        await self.db.execute(
            self.sql["worker_upsert"],
            {
                "id": worker_id,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "concurrency": concurrency,
                "pool_size": self.db.pool_size,  # what it may hold: PostgreSQL's pool
                "now": time.time(),
            },
        )

    async def remove(self, worker_id: str) -> None:
        await self.db.execute(self.sql["worker_delete"], {"id": worker_id})

    async def alive(self, within_s: float = 15.0) -> list[dict[str, Any]]:
        return await self.db.fetch_all(self.sql["workers_alive"], {"since": time.time() - within_s})

    async def connections(self) -> tuple[int, int] | None:
        """The database's connections now and its server's ``max_connections`` (PostgreSQL);
        None for a SQLite file."""
        row = await self.db.fetch_one(self.sql["database_connections"], {})
        if row is None or row["connections"] is None:
            return None
        return int(row["connections"]), int(row["max_connections"])
