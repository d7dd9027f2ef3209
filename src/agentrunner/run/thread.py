"""What a run reads of its thread and writes into it (seed 000 steps 3, 4 and 9-10).

A run reads its thread's manifest and its newest messages after its summary point (more are
read while the context window has room: ``compaction``); a run that died holding the thread left
tool calls unanswered, which are answered (``engine.history.missing_results``) before the new
message, and its row is marked failed. A run writes its message with its first events, the
model's tool calls (and earlier results) before tools run, and its answer with its settle, the
manifest's count with it and the session advanced to it. A run that failed or was cancelled
keeps what it said, ending in a message marked ``interrupted`` — never the error (DESIGN
decision 11) — and the session does not advance; one that ended before any request reached a
model leaves its message marked ``unsent``, so that no later request sends it. A task runs on no
thread: it reads and writes none of this.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from agentrunner.engine.history import missing_results, window
from agentrunner.engine.messages import AssistantMessage, Message, UserMessage
from agentrunner.run.compaction import HISTORY_PAGE, Recent
from agentrunner.run.sessions import check_owner

if TYPE_CHECKING:
    from agentrunner.engine.turn import TurnResult
    from agentrunner.store.drivers import Op
    from agentrunner.store.records import Thread
    from agentrunner.store.run_log import RunLog
    from agentrunner.store.store import Store

__all__ = ["RunThread"]


class RunThread:
    """One run's part of its thread (``manifest`` None: a task's, which writes nothing)."""

    def __init__(self, store: Store, thread: Thread | None, recent: Recent | None) -> None:
        self._store = store
        self.manifest = thread  # as the run found it
        self.recent = recent  # what it read: the newest messages after the summary point
        self.last_seq = recent.last_seq if recent else 0
        # a crashed run's unanswered tool calls, answered before the new message
        self.repairs: Sequence[Message] = missing_results(window(recent.messages)) if recent else []
        self.run_id = ""
        self._next_seq = self.last_seq + 1
        self._saved = 0  # how many of the turn's new messages are already in the thread
        # the run's message as written: the thread, its number there, the message
        self._said: tuple[str, int, UserMessage] | None = None

    @classmethod
    async def read(
        cls, store: Store, thread_id: str | None, agent_id: str, parent_thread_id: str | None
    ) -> RunThread:
        """Thread ``thread_id`` (opened for ``agent_id`` if new, under ``parent_thread_id``'s
        for a child run; ``thread_not_found`` if another agent's) as a run of it starts."""
        if thread_id is None:
            return cls(store, None, None)
        thread = await store.threads.open(thread_id, agent_id, parent_thread_id)
        check_owner(thread, agent_id)
        newest, last_seq = await store.messages.tail(
            thread_id, HISTORY_PAGE, after=thread.summary_through
        )
        return cls(store, thread, Recent(thread, newest, last_seq))

    @property
    def id(self) -> str | None:
        return self.manifest.id if self.manifest else None

    @property
    def untitled(self) -> str | None:
        """The thread's id if it is to be titled after this run: it had no messages before
        the run, and has no title."""
        thread = self.manifest
        if thread is None or self.last_seq or thread.title is not None:
            return None
        return thread.id

    def opening(self, run_id: str, user: UserMessage) -> tuple[list[Op], list[Op]]:
        """The rows of run ``run_id``'s beginning: the runs that died holding the thread (it is
        this run's now) failed, before its row; its message after the repairs, after it."""
        self.run_id = run_id
        thread = self.manifest
        if thread is None:
            return [], []
        self._said = (thread.id, self._next_seq + len(self.repairs), user)
        abandoned = self._store.runs.abandon_ops(
            thread.id, run_id, message_count=thread.message_count, last_seq=self.last_seq
        )
        return abandoned, self._append([*self.repairs, user], final=False)

    def resuming(self, run_id: str, *, step_paused: bool) -> tuple[list[Op], list[Op]]:
        """The rows of run ``run_id`` going on after a wait (it adds no message): as
        ``opening``'s, but when its ``step_paused`` calls are the unanswered ones, those are
        its own to answer (``engine.pause``), not repaired."""
        self.run_id = run_id
        if step_paused:
            self.repairs = []
        thread = self.manifest
        if thread is None:
            return [], []
        abandoned = self._store.runs.abandon_ops(
            thread.id, run_id, message_count=thread.message_count, last_seq=self.last_seq
        )
        return abandoned, self._append(list(self.repairs), final=False) if self.repairs else []

    def progress(self, new: Sequence[Message]) -> list[Op]:
        """Before tools run: the turn's ``new`` messages not in the thread yet (the model's
        tool calls, earlier results)."""
        unsaved = list(new[self._saved :])
        self._saved = len(new)
        return self._append(unsaved, final=False)

    def answer(self, result: TurnResult) -> list[Op]:
        """A completed turn's messages not in the thread yet; the session advances to it."""
        return self._append(result.new_messages[self._saved :], session=True)

    def interrupted(self, partial: TurnResult | None, log: RunLog) -> list[Op]:
        """What a failed or cancelled turn (``partial``: what it did) said, ending in a message
        marked ``interrupted`` — a reply cut off mid-way recorded as the run's too —, and the
        run's message marked ``unsent`` if no request was sent."""
        kept = list(partial.new_messages[self._saved :]) if partial else []
        last = kept[-1] if kept else None
        if not (isinstance(last, AssistantMessage) and last.interrupted):
            kept.append(
                AssistantMessage(model=partial.model if partial else None, interrupted=True)
            )
        elif last.text:  # cut off mid-reply: what it said so far is part of the run's record
            log.message("assistant_message", last.text)
        rows = self._append(kept)  # the session does not advance
        if self._said is not None and (partial is None or not partial.usage.requests):
            rows.append(self._store.messages.unsent_op(*self._said))
        return rows

    def _append(
        self, messages: list[Message], *, session: bool = False, final: bool = True
    ) -> list[Op]:
        """Append messages; ``final`` appends also update the manifest (step 10), and
        ``session`` advances it to this run."""
        if self.manifest is None:  # a task keeps no conversation
            return []
        first, self._next_seq = self._next_seq, self._next_seq + len(messages)
        rows = self._store.messages.append_ops(self.manifest.id, first, messages, self.run_id)
        if final:
            rows.append(
                self._store.threads.manifest_op(
                    self.manifest.id,
                    message_count=self._next_seq - 1,
                    session_run_id=self.run_id if session else None,
                )
            )
        return rows
