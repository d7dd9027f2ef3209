"""Queueing runs in agents' mailboxes for workers to start: ``queue_runs``, the one way a run is
queued — a run on a thread (``RunQueue``, what ``POST /threads/{id}/runs`` does) and the runs a
channel post queues alike — and the bound on each agent's queue (``[workers] max_queue``), past
which a request that would queue another run is refused with ``queue_full`` rather than left to
grow a backlog nobody will see the end of.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrunner.agents.spec import RetryPolicy
from agentrunner.config import DEFAULT_MAX_QUEUE
from agentrunner.core.ids import new_id
from agentrunner.core.inputs import check_id, check_input, check_text
from agentrunner.engine.messages import Attachment
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.run.idempotency import IdempotencyKey, commit_once, first_result
from agentrunner.run.sessions import agent_thread
from agentrunner.store.mailbox import NewRun

if TYPE_CHECKING:
    from agentrunner.run.runner import AgentRunner
    from agentrunner.store.drivers import Op
    from agentrunner.store.store import Store

__all__ = ["RETRY_AFTER_S", "QueuedRun", "RunQueue", "queue_runs"]

RETRY_AFTER_S = 5  # what a refused caller is told to wait before trying again


@dataclass(frozen=True, slots=True)
class QueuedRun:
    run_id: str
    thread_id: str
    repeated: bool = False  # a repeat of an idempotent request: nothing new was queued


async def queue_runs(
    store: Store,
    runs: Sequence[NewRun],
    *,
    result: dict[str, Any],
    with_ops: Sequence[Op] = (),
    max_queue: int | None = None,
    idempotency: IdempotencyKey | None = None,
    trace_context: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """Queue ``runs`` with ``with_ops`` in one transaction (``Mailbox.enqueue``) and wake the
    workers. With ``max_queue``, ``queue_full`` (with ``details["retry_after_s"]``) when one
    of their agents already has that many queued, and nothing is written. ``None`` once
    queued; with ``idempotency``, recorded as answered by ``result``, and the first request's
    result instead when a concurrent one with the key was queued first. ``trace_context``
    (telemetry on) is kept with the runs, for their workers to continue."""
    if max_queue is not None:
        await _ensure_room(store, (run.agent_id for run in runs), max_queue)
    return await commit_once(
        store,
        idempotency,
        result,
        lambda record: store.mailbox.enqueue(
            runs, with_ops=[*with_ops, *record], trace_context=trace_context
        ),
    )


async def _ensure_room(store: Store, agent_ids: Iterable[str], max_queue: int) -> None:
    """Concurrent requests may each see the last free place, so a queue can pass the bound by
    as many as arrive together; it cannot grow without end."""
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
        self.app = runner.app
        self.max_queue = max_queue

    async def queue(
        self,
        agent_id: str,
        thread_id: str,
        message: str,
        *,
        input: Mapping[str, Any] | None = None,
        model_settings: Mapping[str, Any] | None = None,
        idempotency: IdempotencyKey | None = None,
        attachments: Sequence[Attachment] = (),
        model: str | None = None,
        prompt: tuple[str, str | None] | None = None,
        tools: Sequence[str] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        retry: Mapping[str, Any] | None = None,
    ) -> QueuedRun:
        """Queue a run of ``agent_id`` on its thread ``thread_id`` and wake the workers.
        Raises ``validation`` for a bad id, message or input, ``thread_not_found`` for an
        unknown id (opening a thread is its own request: ``store.threads.open``, ``POST
        /threads``) or another agent's thread, ``queue_full`` past the bound; a repeat of
        ``idempotency`` returns the first run. ``model_settings`` are checked now
        (``validation`` naming a bad one) and kept with the run, as are ``model`` (that model
        only), ``prompt`` (a replay's: ``RunAgentOverrides.prompt``) and ``tools`` (the only
        tools it may use: ``RunAgentOverrides.only_tools``, a widening refused now),
        ``output_schema`` and ``retry`` (the run's over its agent file's, read by its rules now:
        ``validation`` naming the field). With telemetry on, an ``enqueue`` span whose trace the
        run keeps."""
        tracing = self.app.engine.tracing
        with tracing.enqueue(agent_id) as (span, carrier):
            queued = await self._queue(
                agent_id,
                thread_id,
                message,
                input,
                model_settings,
                idempotency,
                carrier,
                tuple(attachments),
                model,
                prompt,
                tools,
                (output_schema, retry),
            )
            tracing.enqueued(span, [agent_id], [queued.run_id], repeated=queued.repeated)
            return queued

    async def _queue(
        self,
        agent_id: str,
        thread_id: str,
        message: str,
        input: Mapping[str, Any] | None,
        model_settings: Mapping[str, Any] | None,
        idempotency: IdempotencyKey | None,
        trace_context: Mapping[str, str] | None,
        attachments: tuple[Attachment, ...],
        model: str | None,
        prompt: tuple[str, str | None] | None,
        tools: Sequence[str] | None,
        answer_rules: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None],
    ) -> QueuedRun:
        check_id(thread_id, "thread_id")
        check_text(message, "message")
        values = check_input(input)
        request: dict[str, Any] = {"kind": "direct", "message": message, "input": values}
        if attachments:  # references: the bytes are kept with the run's row
            request["attachments"] = [a.to_dict() for a in attachments]
        if model is not None:
            request["model"] = model
        if prompt is not None:
            request["prompt"] = list(prompt)
        if tools is not None:  # checked as the run will check them
            from agentrunner.run.request import RunAgentOverrides  # loaded with the runner

            request["tools"] = list(RunAgentOverrides(only_tools=tuple(tools)).only_tools or ())
        if model_settings is not None:  # stored as the input is: the input's bounds
            from agentrunner.core.model_settings import model_settings as checked

            settings = checked(check_input(model_settings, "model_settings"))
            if settings is not None:
                request["model_settings"] = settings.to_dict()
        store = self.app.store
        first = await first_result(store, idempotency)
        if first is not None:
            return QueuedRun(first["run_id"], first["thread_id"], repeated=True)
        agent = self.app.agents.runnable(agent_id)  # agent_disabled: nothing queued
        await agent_thread(store, agent_id, thread_id, prefix=False)  # the agent's own, or 404
        if tools is not None:  # a widening: refused now, where the agent's tools are known
            self.runner.toolsets.known(agent, None, (), request["tools"])
        if answer_rules != (None, None):  # read as the run will read them
            from agentrunner.run.request import RunAgentOverrides  # loaded with the runner

            read = RunAgentOverrides(output_schema=answer_rules[0], retry=answer_rules[1])
            if read.output_schema is not None:
                request["output_schema"] = dict(read.output_schema)
            if isinstance(read.retry, RetryPolicy):
                request["retry"] = {k: getattr(read.retry, k) for k in RetryPolicy.KEYS}
        run = NewRun(new_id("run_"), agent_id, thread_id, request)
        first = await queue_runs(
            store,
            [run],
            result={"run_id": run.id, "thread_id": thread_id},
            with_ops=store.attachments.keep_ops(attachments),
            max_queue=self.max_queue,
            idempotency=idempotency,
            trace_context=trace_context,
        )
        if first is not None:
            return QueuedRun(first["run_id"], first["thread_id"], repeated=True)
        return QueuedRun(run.id, thread_id)
