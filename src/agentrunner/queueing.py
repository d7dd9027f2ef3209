"""Queueing runs in agents' mailboxes for workers to start: a run on a thread (what
``POST /threads/{id}/runs`` does), and the bound on each agent's queue (``[workers]
max_queue``), past which a request that would queue another run is refused with
``queue_full`` rather than left to grow a backlog nobody will see the end of.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrunner.config import DEFAULT_MAX_QUEUE
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.idempotency import IdempotencyKey, commit_once, first_result
from agentrunner.ids import new_id
from agentrunner.inputs import check_id, check_input, check_text

if TYPE_CHECKING:
    from agentrunner.runner import AgentRunner
    from agentrunner.store.store import Store

__all__ = ["RETRY_AFTER_S", "QueuedRun", "RunQueue", "ensure_room"]

RETRY_AFTER_S = 5  # what a refused caller is told to wait before trying again


@dataclass(frozen=True, slots=True)
class QueuedRun:
    run_id: str
    thread_id: str
    repeated: bool = False  # a repeat of an idempotent request: nothing new was queued


async def ensure_room(store: Store, agent_ids: Iterable[str], max_queue: int) -> None:
    """``queue_full`` (with ``details["retry_after_s"]``) when one of the agents already has
    ``max_queue`` runs queued. Concurrent requests may each see the last free place, so a
    queue can pass the bound by as many as arrive together; it cannot grow without end."""
    for agent_id in dict.fromkeys(agent_ids):
        if await store.mailbox.queued(agent_id, max_queue) >= max_queue:
            raise AgentRunnerError(
                ErrorCode.QUEUE_FULL,
                f"agent '{agent_id}' already has {max_queue} runs queued",
                hint=f"Retry in {RETRY_AFTER_S} s; add workers (`agentrunner worker`), or "
                "raise [workers] max_queue in agentrunner.toml.",
                details={"retry_after_s": RETRY_AFTER_S},
            )


class RunQueue:
    def __init__(self, runner: AgentRunner, *, max_queue: int = DEFAULT_MAX_QUEUE) -> None:
        self.runner = runner
        self.max_queue = max_queue

    async def queue(
        self,
        agent_id: str,
        thread_id: str,
        message: str,
        *,
        input: Mapping[str, Any] | None = None,
        idempotency: IdempotencyKey | None = None,
    ) -> QueuedRun:
        """Queue a run of ``agent_id`` on ``thread_id`` (a new id opens a thread of the agent;
        an existing thread must be its own) and wake the workers. Raises ``validation`` for a
        bad id, message or input, ``thread_not_found`` for another agent's thread,
        ``queue_full`` past the bound; a repeat of ``idempotency`` returns the first run."""
        check_id(thread_id, "thread_id")
        check_text(message, "message")
        values = check_input(input)
        store = self.runner.store
        first = await first_result(store, idempotency)
        if first is not None:
            return QueuedRun(first["run_id"], first["thread_id"], repeated=True)
        self.runner.agents.get(agent_id)
        await ensure_room(store, [agent_id], self.max_queue)
        await store.threads.open(thread_id, agent_id)
        await self.runner.agent_thread(agent_id, thread_id)
        run_id = new_id("run_")
        ops = [
            store.mailbox.enqueue_op(
                run_id=run_id,
                agent_id=agent_id,
                thread_id=thread_id,
                request={"kind": "direct", "message": message, "input": values},
            ),
            *store.mailbox.notify_ops(agent_id),
        ]
        result = {"run_id": run_id, "thread_id": thread_id}
        first = await commit_once(store, idempotency, ops, result)
        if first is not None:
            return QueuedRun(first["run_id"], first["thread_id"], repeated=True)
        store.notify_runs()
        return QueuedRun(run_id, thread_id)
