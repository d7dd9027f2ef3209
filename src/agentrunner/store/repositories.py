"""Repositories: one per aggregate, every database operation of agentrunner, no SQL outside.

Each method runs one named query (or one transaction of them) through the driver, so the same
code serves SQLite and PostgreSQL.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from agentrunner.core.ids import new_id
from agentrunner.engine.messages import Message, UserMessage, message_from_dict
from agentrunner.store.changes import payload
from agentrunner.store.drivers import Driver, GuardRefused, Op
from agentrunner.store.records import (
    RUN_STATUSES,
    AgentState,
    EventRecord,
    Note,
    RunMessageRecord,
    RunRecord,
    StepRecord,
    Thread,
    ThreadSummary,
    from_json,
    to_json,
)
from agentrunner.store.sql import SqlSet

__all__ = [
    "AgentStates",
    "Costs",
    "Events",
    "Memory",
    "Messages",
    "Notes",
    "Repository",
    "Runs",
    "TaskCacheRows",
    "Threads",
    "ops",
    "today",
]

FAR_FUTURE = 1e18
# A budget hold outlives any request it covers; one whose process died stops counting then.
HOLD_TTL_S = 3600.0
# A listing by agent first looks for the agent's threads among this many times the page of
# the most recently updated threads (one index walk), before reading all of the agent's own.
_RECENT_SCAN = 20
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


class Repository:
    def __init__(self, driver: Driver, sql: SqlSet) -> None:
        self.db = driver
        self.sql = sql

    def op(self, query: str, /, **params: Any) -> Op:
        return query, self.sql[query], params

    def changed_op(self, *keys: str) -> Op:
        """The row that tells the processes tailing the store what its batch changed, when it
        commits (``store/changes``): one per batch."""
        return self.op("changes_notify", keys=payload(keys))


async def _ids(db: Driver, sql: str, **params: str | int) -> list[str]:
    rows = await db.fetch_all(sql, params)
    return [str(row["id"]) for row in rows]


class Threads(Repository):
    async def get(self, thread_id: str) -> Thread | None:
        row = await self.db.fetch_one(self.sql["thread_get"], {"id": thread_id})
        return Thread.from_row(row) if row else None

    async def ids_starting(self, prefix: str, limit: int) -> list[str]:
        """Up to ``limit`` thread ids that begin with ``prefix``, in order."""
        return await _ids(self.db, self.sql["thread_ids_starting"], prefix=prefix, limit=limit)

    def create_op(self, thread_id: str, agent_id: str, parent_thread_id: str | None = None) -> Op:
        return self.op(
            "thread_create",
            id=thread_id,
            agent_id=agent_id,
            session_state="{}",
            parent_thread_id=parent_thread_id,
            now=time.time(),
        )

    async def open_with_history(
        self, thread_id: str, agent_id: str, history: Sequence[Message]
    ) -> bool:
        """Open thread ``thread_id`` of ``agent_id`` holding ``history`` (a conversation that
        began elsewhere: the OpenAI-compatible endpoint's earlier turns), in one transaction.
        False, with nothing written, when the thread exists — its own history stands —, checked
        in that transaction, so two requests opening it at once write the history once."""
        if await self.get(thread_id) is not None:
            return False
        now = time.time()
        opening = [
            self.op(
                "thread_create_new",
                id=thread_id,
                agent_id=agent_id,
                session_state="{}",
                message_count=len(history),
                now=now,
            ),
            *(
                self.op(
                    "message_insert_opening",
                    thread_id=thread_id,
                    seq=1 + n,
                    role=m.role,
                    body=to_json(m.to_dict()),
                    now=now,
                )
                for n, m in enumerate(history)
            ),
        ]
        try:
            await self.db.batch(opening)
        except GuardRefused:  # opened meanwhile
            return False
        return True

    async def open(
        self, thread_id: str, agent_id: str, parent_thread_id: str | None = None
    ) -> Thread:
        """The thread, created for ``agent_id`` if it does not exist yet."""
        found = await self.get(thread_id)
        if found is not None:
            return found
        await self.db.batch([self.create_op(thread_id, agent_id, parent_thread_id)])
        created = await self.get(thread_id)
        assert created is not None
        return created

    async def summary(self, thread_id: str) -> ThreadSummary | None:
        """The thread's newest summary (compaction), or None: never compacted."""
        row = await self.db.fetch_one(self.sql["thread_summary_latest"], {"thread_id": thread_id})
        return ThreadSummary(**row) if row else None

    def summary_ops(self, summary: ThreadSummary) -> list[Op]:
        """Keep ``summary`` and make it the thread's: runs send it from then on."""
        return [
            self.op(
                "thread_summary_insert",
                thread_id=summary.thread_id,
                through_seq=summary.through_seq,
                summary=summary.summary,
                model=summary.model,
                run_id=summary.run_id,
                requests=summary.requests,
                cost_micros=summary.cost_micros,
                now=summary.created_at,
            ),
            self.op(
                "thread_summary_point",
                thread_id=summary.thread_id,
                through_seq=summary.through_seq,
            ),
        ]

    async def list(
        self, *, agent_id: str | None = None, before: float | None = None, limit: int = 50
    ) -> list[Thread]:
        params: dict[str, Any] = {
            "before": before if before is not None else FAR_FUTURE,
            "limit": limit,
        }
        if agent_id is None:
            rows = await self.db.fetch_all(self.sql["thread_list"], params)
        else:
            params["agent_id"] = agent_id
            rows = await self.db.fetch_all(
                self.sql["thread_list_agent_recent"], {**params, "scan": limit * _RECENT_SCAN}
            )
            if len(rows) < limit:  # some may be older than the recent ones read
                rows = await self.db.fetch_all(self.sql["thread_list_agent"], params)
        return [Thread.from_row(r) for r in rows]

    async def set_title(self, thread_id: str, title: str) -> bool:
        """Set the title unless one was set already; True when this call set it."""
        return (
            await self.db.execute(self.sql["thread_set_title"], {"id": thread_id, "title": title})
            > 0
        )

    def manifest_op(self, thread_id: str, *, message_count: int, session_run_id: str | None) -> Op:
        """Seed 000 step 10: the message count, ``updated_at`` and (if given) the session.
        Written once, at the end of a run: appends before it leave the thread row (and its
        index on ``updated_at``) alone."""
        return self.op(
            "thread_manifest",
            id=thread_id,
            message_count=message_count,
            session_run_id=session_run_id,
            now=time.time(),
        )


class Messages(Repository):
    async def tail(
        self, thread_id: str, limit: int, *, after: int = 0
    ) -> tuple[list[Message], int]:
        """The last ``limit`` messages numbered above ``after``, oldest first — O(limit) rows,
        not the thread — and the thread's last sequence number (``after`` when there are none
        past it: 0 for an empty thread): the next message is numbered from the messages
        themselves, not from the manifest's count, which a run that died may have left behind.
        Messages are numbered 1..n, so the first returned is number ``last - len + 1``."""
        rows = await self.db.fetch_all(
            self.sql["messages_recent"],
            {"thread_id": thread_id, "after": after, "limit": max(limit, 1)},
        )
        last = int(rows[0]["seq"]) if rows else after
        return [message_from_dict(from_json(r["body"])) for r in reversed(rows[:limit])], last

    async def before(
        self, thread_id: str, before: int, limit: int, *, after: int = 0
    ) -> list[Message]:
        """The last ``limit`` messages numbered above ``after`` and below ``before``, oldest
        first: the page before one that ``tail`` or this returned."""
        rows = await self.db.fetch_all(
            self.sql["messages_before"],
            {"thread_id": thread_id, "after": after, "before": before, "limit": limit},
        )
        return [message_from_dict(from_json(r["body"])) for r in reversed(rows)]

    async def page(
        self, thread_id: str, *, after: int = 0, limit: int = 200
    ) -> list[tuple[int, Message, str | None, float]]:
        rows = await self.db.fetch_all(
            self.sql["messages_page"], {"thread_id": thread_id, "after": after, "limit": limit}
        )
        return [
            (r["seq"], message_from_dict(from_json(r["body"])), r["run_id"], r["created_at"])
            for r in rows
        ]

    async def page_before(
        self, thread_id: str, before: int, limit: int
    ) -> list[tuple[int, Message, str | None, float]]:
        """The last ``limit`` messages numbered below ``before``, oldest first, as ``page``
        gives them: a thread's newest page (``before`` past its last number) or the one before
        a page, read in O(limit) rows however long the thread."""
        rows = await self.db.fetch_all(
            self.sql["messages_page_before"],
            {"thread_id": thread_id, "before": before, "limit": limit},
        )
        return [
            (r["seq"], message_from_dict(from_json(r["body"])), r["run_id"], r["created_at"])
            for r in reversed(rows)
        ]

    def append_ops(
        self, thread_id: str, first_seq: int, messages: Iterable[Message], run_id: str | None
    ) -> list[Op]:
        now = time.time()
        return [
            self.op(
                "message_insert",
                thread_id=thread_id,
                seq=first_seq + n,
                role=m.role,
                body=to_json(m.to_dict()),
                run_id=run_id,
                now=now,
            )
            for n, m in enumerate(messages)
        ]

    def unsent_op(self, thread_id: str, seq: int, message: UserMessage) -> Op:
        """Message ``seq`` of the thread, ``message``, marked as never sent to a model."""
        unsent = UserMessage(message.content, unsent=True)
        return self.op(
            "message_body_update", thread_id=thread_id, seq=seq, body=to_json(unsent.to_dict())
        )


class Runs(Repository):
    async def get(self, run_id: str) -> RunRecord | None:
        row = await self.db.fetch_one(self.sql["run_get"], {"id": run_id})
        return RunRecord.from_row(row) if row else None

    async def ids_starting(self, prefix: str, limit: int) -> list[str]:
        """Up to ``limit`` run ids that begin with ``prefix``, in order."""
        return await _ids(self.db, self.sql["run_ids_starting"], prefix=prefix, limit=limit)

    async def ids_ending(self, suffix: str, limit: int) -> list[str]:
        """Up to ``limit`` run ids that end with ``suffix``, in order (a scan of the runs)."""
        return await _ids(self.db, self.sql["run_ids_ending"], suffix=suffix, limit=limit)

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
        """Micro-dollars spent today (UTC) by one agent, or by all with ``agent_id=None``: one
        row per agent, kept with the cost rows, not a sum over the day's requests."""
        row = await self.db.fetch_one(
            self.sql["cost_spent"], {"day": today(), "agent_id": agent_id}
        )
        return int(row["micros"]) if row else 0

    async def summary(self, *, since: str, agent_id: str | None = None) -> list[dict[str, Any]]:
        """The cost rows from the UTC day ``since`` (YYYY-MM-DD) on, summed per day, agent and
        model (newest day first): ``requests``, ``input_tokens`` (prompt-cache reads and writes
        included), ``output_tokens``, ``cache_read_tokens``, ``cache_write_tokens``,
        ``cost_micros`` (requests of unknown price count as nothing) and ``unknown`` (how many
        those were); one agent's with ``agent_id``."""
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


class Memory(Repository):
    async def blocks(self, agent_id: str) -> dict[str, str]:
        rows = await self.db.fetch_all(self.sql["memory_list"], {"agent_id": agent_id})
        return {r["label"]: r["content"] for r in rows}

    async def seed(self, agent_id: str, blocks: Mapping[str, str]) -> None:
        """Create the agent file's initial blocks; blocks that exist keep their content."""
        now = time.time()
        await self.db.batch(
            [
                self.op("memory_seed", agent_id=agent_id, label=k, content=v, now=now)
                for k, v in blocks.items()
            ]
        )

    async def set(self, agent_id: str, label: str, content: str) -> None:
        await self.db.execute(
            self.sql["memory_set"],
            {"agent_id": agent_id, "label": label, "content": content, "now": time.time()},
        )


class Notes(Repository):
    async def upsert(self, agent_id: str, slug: str, title: str, body: str) -> None:
        await self.db.execute(
            self.sql["note_upsert"],
            {"agent_id": agent_id, "slug": slug, "title": title, "body": body, "now": time.time()},
        )

    async def get(self, agent_id: str, slug: str) -> Note | None:
        row = await self.db.fetch_one(self.sql["note_get"], {"agent_id": agent_id, "slug": slug})
        return Note(**row) if row else None

    async def list(self, agent_id: str) -> list[Note]:
        return [
            Note(**r)
            for r in await self.db.fetch_all(self.sql["note_list"], {"agent_id": agent_id})
        ]


class TaskCacheRows(Repository):
    """Rows of the task result cache (``[cache] backend = "store"``)."""

    async def get(self, agent_id: str, model: str, key: str) -> tuple[str, float] | None:
        row = await self.db.fetch_one(
            self.sql["task_cache_get"], {"agent_id": agent_id, "model": model, "key": key}
        )
        return (row["result"], float(row["stored_at"])) if row else None

    async def put(self, agent_id: str, model: str, key: str, result: str) -> None:
        await self.db.execute(
            self.sql["task_cache_put"],
            {
                "agent_id": agent_id,
                "model": model,
                "key": key,
                "result": result,
                "bytes": len(result.encode()),
                "now": time.time(),
            },
        )

    async def per_agent(self) -> dict[str, tuple[int, int]]:
        """``agent -> (entries, bytes)``."""
        rows = await self.db.fetch_all(self.sql["task_cache_stats"], {})
        return {r["agent_id"]: (int(r["entries"]), int(r["bytes"] or 0)) for r in rows}

    async def evict_to(self, max_bytes: int) -> int:
        """Remove the oldest entries until the total is at most ``max_bytes``."""
        rows = await self.db.fetch_all(self.sql["task_cache_oldest"], {})
        total = sum(int(r["bytes"]) for r in rows)
        doomed: list[Op] = []
        for r in rows:
            if total <= max_bytes:
                break
            total -= int(r["bytes"])
            doomed.append(
                self.op(
                    "task_cache_delete",
                    agent_id=r["agent_id"],
                    model=r["model"],
                    key=r["cache_key"],
                )
            )
        if doomed:
            await self.db.batch(doomed)
        return len(doomed)

    async def clear(self, agent_id: str | None = None) -> int:
        if agent_id is None:
            return await self.db.execute(self.sql["task_cache_clear"], {})
        return await self.db.execute(self.sql["task_cache_clear_agent"], {"agent_id": agent_id})


class AgentStates(Repository):
    async def get(self, agent_id: str) -> AgentState:
        """The agent's session thread and its status, derived from its runs: ``working`` while
        a run is running, ``error`` when its last run failed, ``idle`` otherwise — a cancelled
        run (a person's Ctrl-C, a kill, a stop) leaves nothing wrong with the agent."""
        row = await self.db.fetch_one(self.sql["agent_state_get"], {"agent_id": agent_id})
        last = await self.db.fetch_one(self.sql["agent_last_run"], {"agent_id": agent_id})
        status, run_id = "idle", None
        if last is not None and last["status"] == "running":
            status, run_id = "working", last["id"]
        elif last is not None and last["status"] == "failed":
            status = "error"
        return AgentState(
            agent_id,
            row["current_thread_id"] if row else None,
            status,
            run_id,
            row["updated_at"] if row else None,
            last["id"] if last is not None else None,
        )

    async def set_current_thread(self, agent_id: str, thread_id: str) -> None:
        await self.db.execute(
            self.sql["agent_state_thread"],
            {"agent_id": agent_id, "thread_id": thread_id, "now": time.time()},
        )


def ops(*groups: Sequence[Op] | Op) -> list[Op]:
    """Flatten ops and lists of ops into one batch."""
    out: list[Op] = []
    for group in groups:
        if isinstance(group, tuple):
            out.append(group)
        else:
            out.extend(group)
    return out
