"""A thread and its messages: ``Threads`` (open, list, title, the manifest a run writes at its
end, compaction's summaries) and ``Messages`` (a thread's messages appended, and read by page
from either end)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from agentrunner.engine.messages import Message, UserMessage, message_from_dict
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.store.attachments import Attachments, attachment_ops
from agentrunner.store.drivers import GuardRefused, Op
from agentrunner.store.records import Thread, ThreadSummary, from_json, to_json
from agentrunner.store.repositories import FAR_FUTURE, Repository

__all__ = ["Messages", "Threads"]

# A listing by agent first looks for the agent's threads among this many times the page of
# the most recently updated threads (one index walk), before reading all of the agent's own.
_RECENT_SCAN = 20


class Threads(Repository):
    async def get(self, thread_id: str) -> Thread | None:
        row = await self.db.fetch_one(self.sql["thread_get"], {"id": thread_id})
        return Thread.from_row(row) if row else None

    async def ids_starting(self, prefix: str, limit: int) -> list[str]:
        """Up to ``limit`` thread ids that begin with ``prefix``, in order."""
        return await self.ids("thread_ids_starting", prefix=prefix, limit=limit)

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
            *_files(self, thread_id, 1, history),
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

    async def delete(self, thread_id: str, files: Attachments) -> tuple[list[str], int]:
        """Delete thread ``thread_id`` with its delegations' threads (``<thread>.<agent>``):
        their messages, summaries, and each file no other thread names, in one transaction.
        Its runs stay, with what they cost (spend is kept whatever is deleted). The threads
        deleted and the files dropped; ``validation`` when a run on one is not settled."""
        threads, pending = [thread_id], [thread_id]
        while pending:
            children = await self.ids("thread_children", id=pending.pop())
            threads.extend(children)
            pending.extend(children)
        digests: set[str] = set()
        ops: list[Op] = []
        for tid in threads:
            live = await self.db.fetch_one(self.sql["thread_live_run"], {"thread_id": tid})
            if live is not None:
                raise AgentRunnerError(
                    ErrorCode.VALIDATION,
                    f"thread {tid} has a run that is {live['status']} ({live['id']}); nothing "
                    "was deleted",
                    hint=f"Cancel it first (`agentrunner runs cancel {live['id']}`), or wait "
                    "for it to end.",
                )
            rows = await self.db.fetch_all(
                self.sql["attachment_uses_of_thread"], {"thread_id": tid}
            )
            digests.update(str(r["sha256"]) for r in rows)
            ops += [
                self.op("thread_attachment_uses_delete", thread_id=tid),
                self.op("thread_messages_delete", thread_id=tid),
                self.op("thread_summaries_delete", thread_id=tid),
                self.op("thread_delete", id=tid),
            ]
        before = await files.stats()
        try:
            await self.db.batch([*ops, *files.release_ops(sorted(digests))])
        except GuardRefused:
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"a run began on thread {thread_id} as it was being deleted; nothing was deleted",
                hint="Cancel it, or wait for it to end, and delete the thread again.",
            ) from None
        return threads, before[0] - (await files.stats())[0]

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

    async def set_task(self, thread_id: str, task: str | None) -> None:
        """The thread's current task (what its agent is working on in it); None clears it."""
        await self.db.execute(self.sql["thread_set_task"], {"id": thread_id, "task": task})

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

    async def first_of_run(self, thread_id: str, run_id: str) -> int | None:
        """The number of the first message run ``run_id`` wrote in the thread (its person's
        message); None when the thread holds none of its messages."""
        row = await self.db.fetch_one(
            self.sql["message_first_of_run"], {"thread_id": thread_id, "run_id": run_id}
        )
        return int(row["seq"]) if row and row["seq"] is not None else None

    def append_ops(
        self, thread_id: str, first_seq: int, messages: Iterable[Message], run_id: str | None
    ) -> list[Op]:
        now = time.time()
        messages = messages if isinstance(messages, Sequence) else list(messages)
        ops = [
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
        ops.extend(_files(self, thread_id, first_seq, messages))
        return ops

    def unsent_op(self, thread_id: str, seq: int, message: UserMessage) -> Op:
        """Message ``seq`` of the thread, ``message``, marked as never sent to a model."""
        unsent = UserMessage(message.content, unsent=True, attachments=message.attachments)
        return self.op(
            "message_body_update", thread_id=thread_id, seq=seq, body=to_json(unsent.to_dict())
        )


def _files(
    repo: Repository, thread_id: str, first_seq: int, messages: Sequence[Message]
) -> list[Op]:
    """The files ``messages`` (numbered from ``first_seq``) carry, kept with them."""
    ops: list[Op] = []
    for n, m in enumerate(messages):
        if m.attachments:
            ops.extend(attachment_ops(repo, thread_id, first_seq + n, m.attachments))
    return ops
