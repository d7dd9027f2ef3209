"""Trying again from a point of a thread (docs/threads.md): a fork is a new thread that begins
with another's first messages, copied as they are stored, so what its runs send the model is
its parent's history byte for byte; a rewind cuts a thread back in place. Either way a point
inside a step's tool calls moves past their results, or before the calls while they are not all
answered (a call is never kept without its answer), a compaction's summary comes along when the
point is past it, and no session carries over. What a rewind cuts stays in the records of the
runs that wrote it (``runs show``)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from agentrunner.core.ids import new_id
from agentrunner.engine.messages import AssistantMessage, ToolResult
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.store.attachments import Attachments
from agentrunner.store.changes import thread_key
from agentrunner.store.drivers import Driver, GuardRefused
from agentrunner.store.records import Thread
from agentrunner.store.repositories import Repository
from agentrunner.store.sql import SqlSet
from agentrunner.store.threads import Messages, Threads

__all__ = ["Cut", "Forks"]

# How many messages either side of the point are read to find the step's calls and results it
# falls among: more calls than this in one step is past any model's habit.
_PAGE = 64


@dataclass(frozen=True, slots=True)
class Cut:
    """What a fork or a rewind made: the thread, the last message it keeps (``at``: the point
    asked for, moved past or before the tool calls it fell among) and how many of the source's
    messages it left out."""

    thread: Thread
    at: int
    asked: int
    left_out: int

    def to_dict(self) -> dict[str, Any]:
        """As the CLI's ``--json`` and the HTTP API give it."""
        return {
            "thread": self.thread.to_dict(),
            "at": self.at,
            "asked": self.asked,
            "left_out": self.left_out,
        }


class Forks(Repository):
    def __init__(
        self, driver: Driver, sql: SqlSet, threads: Threads, messages: Messages, files: Attachments
    ) -> None:
        super().__init__(driver, sql)
        self._threads = threads
        self._messages = messages
        self._files = files

    async def fork(self, thread_id: str, at: int) -> Cut:
        """A new thread of the same agent beginning with thread ``thread_id``'s first ``at``
        messages; the parent is left as it was."""
        parent, point, last = await self.point(thread_id, at)
        fork_id = new_id(f"{parent.agent_id}-")
        params = {"id": fork_id, "parent": parent.id, "at": point}
        try:
            await self.db.batch(
                [
                    self.op("thread_fork", **params, session_state="{}", now=time.time()),
                    self.op("thread_fork_messages", **params),
                    self.op("thread_fork_summaries", **params),
                    self.op("thread_fork_files", **params),
                    self.changed_op(thread_key(fork_id)),
                ]
            )
        except GuardRefused:
            raise _moved(parent.id) from None
        forked = await self._threads.get(fork_id)
        assert forked is not None
        return Cut(forked, point, at, last - point)

    async def rewind(self, thread_id: str, at: int) -> Cut:
        """Thread ``thread_id`` cut back to its first ``at`` messages, in one transaction with
        the summaries past them and each file only they named; refused while a run on it is
        queued, running or waiting."""
        thread, point, last = await self.point(thread_id, at)
        if point == last:  # nothing to cut: nothing written, the thread's place kept
            return Cut(thread, point, at, 0)
        live = await self.db.fetch_one(self.sql["thread_live_run"], {"thread_id": thread.id})
        if live is not None:
            raise _live(thread.id, live["id"], live["status"])
        params = {"id": thread.id, "at": point}
        cut_files = await self.db.fetch_all(self.sql["attachment_uses_after"], params)
        digests = [str(row["sha256"]) for row in cut_files]
        try:
            await self.db.batch(
                [
                    self.op("thread_rewind", **params, now=time.time()),
                    self.op("thread_rewind_messages", **params),
                    self.op("thread_rewind_summaries", **params),
                    self.op("thread_rewind_files", **params),
                    *self._files.release_ops(digests),
                    self.changed_op(thread_key(thread.id)),
                ]
            )
        except GuardRefused:
            raise _live(thread.id, None, "queued") from None
        rewound = await self._threads.get(thread.id)
        assert rewound is not None
        return Cut(rewound, point, at, last - point)

    async def point(self, thread_id: str, at: int) -> tuple[Thread, int, int]:
        """The thread, the point ``at`` as it is kept (``_paired``), and the thread's last
        message number; ``validation`` for a point that is no message."""
        thread = await self._threads.get(thread_id)
        if thread is None:
            raise AgentRunnerError(
                ErrorCode.THREAD_NOT_FOUND,
                f"no thread {thread_id!r}",
                hint="`agentrunner threads list` shows the threads.",
            )
        _, last = await self._messages.tail(thread.id, 1)
        if not 0 <= at <= last:
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"thread {thread.id} has messages 1-{last}; there is no message {at}"
                if last
                else f"thread {thread.id} has no messages; there is no message {at}",
                hint=f"`agentrunner threads show {thread.id}` numbers its messages.",
                details={"thread_id": thread.id, "at": at, "last": last},
            )
        return thread, await self._paired(thread.id, at), last

    async def _paired(self, thread_id: str, at: int) -> int:
        """``at`` past the results of the step's calls it falls among, or, where they are not
        all answered (a run waits for a person, or died), before the message that made them:
        a call is never kept without its answer."""
        if at == 0:
            return 0
        around = await self._messages.page(thread_id, after=max(at - _PAGE, 0), limit=2 * _PAGE)
        seqs = [seq for seq, *_ in around]
        if at not in seqs:
            return at
        first = seqs.index(at)
        while first > 0 and isinstance(around[first][1], ToolResult):
            first -= 1
        step = around[first][1]
        if not isinstance(step, AssistantMessage) or not step.tool_calls:
            return at  # not among a step's calls
        end = first
        while end + 1 < len(around) and isinstance(around[end + 1][1], ToolResult):
            end += 1
        results = [m for _, m, _, _ in around[first + 1 : end + 1]]
        answered = {m.call_id for m in results if isinstance(m, ToolResult)}
        if {call.id for call in step.tool_calls} <= answered:
            return seqs[end]
        return seqs[first] - 1


def _moved(thread_id: str) -> AgentRunnerError:
    return AgentRunnerError(
        ErrorCode.VALIDATION,
        f"thread {thread_id} was cut back while it was being forked; nothing was written",
        hint=f"`agentrunner threads show {thread_id}` shows what it holds now; fork it again.",
    )


def _live(thread_id: str, run_id: str | None, status: str) -> AgentRunnerError:
    which = f" ({run_id})" if run_id else ""
    cancel = run_id or "RUN"
    return AgentRunnerError(
        ErrorCode.VALIDATION,
        f"thread {thread_id} has a run that is {status}{which}; nothing was cut",
        hint=f"Cancel it first (`agentrunner runs cancel {cancel}`), or wait for it to end; "
        f"or fork the thread instead (`agentrunner threads fork {thread_id} --at SEQ`).",
        details={"thread_id": thread_id, "run_id": run_id},
    )
