"""A run's lifecycle, one for every kind of run: an agent's turn (``run_agent``, ``run_task``, a
delegation), a thread compacted on request (``compact_thread``), and the model requests made on
a run's account after its turn (a thread's title, a brief's journal entry: ``side_requests``).

A run opens with its log (``RunRows``: its events heard by its caller's callbacks and the
runner's message handlers, waking the readers of its thread and of the run that started it),
its cost tracker under its own limit (a child's adding to its parent's, whose limit bounds it
too) and the day's budgets. It begins with its row — inserted, or a queued run's begun — and
``agent.working``, written together. It settles once, however it ended: completed, failed (after
``agent.failed``, its error with every secret the runtime holds cut from it) or cancelled, with
``agent.idle`` and its row's end in one transaction, together with what the kind of run adds
(its thread's messages) and the release of its thread's lock.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentrunner.engine.budget import CostTracker
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.events import AgentWorking, EventSink
from agentrunner.run.budgets import DailyBudgets, run_limit
from agentrunner.run.callbacks import event_adapter, tee
from agentrunner.run.run_rows import ChannelRun, RunRows
from agentrunner.store.changes import run_key, thread_key

if TYPE_CHECKING:
    from agentrunner.agents.spec import AgentSpec
    from agentrunner.config import Budgets
    from agentrunner.engine.messages import Usage
    from agentrunner.engine.models import ModelRegistry
    from agentrunner.run.callbacks import AgentRunnerCallbacks, MessageHandlers
    from agentrunner.store.drivers import Op
    from agentrunner.store.locks import HeldLock
    from agentrunner.store.run_log import RunLog
    from agentrunner.store.store import Store

__all__ = ["LiveRun", "RunLifecycle", "as_error"]


@dataclass(slots=True)
class LiveRun:
    """One run between its beginning and its settle: what every kind of run is paid from and
    recorded in."""

    agent_id: str
    thread_id: str | None  # None: a task, a run on no thread
    run_id: str
    rows: RunRows  # its log, and what its events mean for its record
    cost: CostTracker
    budget: DailyBudgets | None  # the day's budgets it draws on; None: no daily limit is set
    parent_run_id: str | None = None  # the run that started it (``ask_agent``, ``delegate``)
    depth: int = 0
    lock: HeldLock | None = None  # its thread's, released in its settle's transaction
    waited: bool = False  # it waited for a person: its thread's hold ends with its settle

    @property
    def log(self) -> RunLog:
        return self.rows.log


def as_error(exc: BaseException) -> AgentRunnerError:
    """What a run's record says of ``exc``: its own error, ``cancelled`` for a cancelled task,
    else ``internal`` naming the exception (its cause)."""
    if isinstance(exc, AgentRunnerError):
        return exc
    if isinstance(exc, asyncio.CancelledError):
        return AgentRunnerError(ErrorCode.CANCELLED, "stopped by user")
    internal = AgentRunnerError(ErrorCode.INTERNAL, f"{type(exc).__name__}: {exc}")
    internal.__cause__ = exc
    return internal


class RunLifecycle:
    """Opens, begins and settles runs over ``store``, under ``budgets``; ``handlers`` hear
    every run's events, ``models`` hold the secrets cut from a failed run's error."""

    def __init__(
        self,
        store: Store,
        budgets: Budgets,
        handlers: MessageHandlers | None = None,
        models: ModelRegistry | None = None,
    ) -> None:
        self._store = store
        self._budgets = budgets
        self._handlers = handlers
        self._models = models

    def open(
        self,
        agent: AgentSpec,
        run_id: str,
        thread_id: str | None,
        *,
        callbacks: AgentRunnerCallbacks | None = None,
        channel: ChannelRun | None = None,
        notices: str | None = None,
        parent_run_id: str | None = None,
        parent_cost: CostTracker | None = None,
        depth: int = 0,
        lock: HeldLock | None = None,
    ) -> LiveRun:
        """A run of ``agent`` about to begin: nothing is written yet."""
        forward: EventSink | None = None
        if self._handlers is not None:
            forward = self._handlers.sink(run_id, agent.id, thread_id)
        if callbacks is not None:
            forward = tee(event_adapter(callbacks, agent.id, thread_id or ""), forward)
        # whose readers its events wake besides its own (store/changes): those of its thread's
        # events, and its parent's (a job followed with its delegations)
        changed = [] if thread_id is None else [thread_key(thread_id)]
        if parent_run_id is not None:
            changed.append(run_key(parent_run_id))
        rows = RunRows(
            self._store, run_id, agent.id, forward, channel, changed=changed, notices=notices
        )
        cost = CostTracker() if parent_cost is None else parent_cost.child()
        limit = run_limit(agent, self._budgets)
        if limit is not None:
            cost.limit, cost.label = limit
        budget = self._daily(agent.id, run_id, rows.log)
        return LiveRun(agent.id, thread_id, run_id, rows, cost, budget, parent_run_id, depth, lock)

    def after(self, agent_id: str, run_id: str) -> LiveRun:
        """Run ``run_id`` of ``agent_id`` after its turn, for a request made for it (a title, a
        journal entry): its cost rows and the day's budgets. It says nothing more: it neither
        begins nor settles again, and its own limit went with its turn."""
        rows = RunRows(self._store, run_id, agent_id)
        return LiveRun(
            agent_id, None, run_id, rows, CostTracker(), self._daily(agent_id, run_id, rows.log)
        )

    def _daily(self, agent_id: str, run_id: str, log: RunLog) -> DailyBudgets | None:
        return DailyBudgets.applying(self._store.costs, agent_id, run_id, self._budgets, log.write)

    def begin(
        self,
        run: LiveRun,
        *,
        before: Sequence[Op] = (),
        after: Sequence[Op] = (),
        claimed: bool = False,
        trace_id: str | None = None,
    ) -> None:
        """The run's row — a ``claimed`` run's (queued before, its row there) begun, else
        inserted ``running`` — between ``before`` and ``after``, written with its first events:
        ``agent.working`` first."""
        runs = self._store.runs
        row = (
            runs.begin_op(run.run_id, trace_id)
            if claimed
            else runs.insert_op(
                run_id=run.run_id,
                agent_id=run.agent_id,
                thread_id=run.thread_id,
                status="running",
                parent_run_id=run.parent_run_id,
                depth=run.depth,
                trace_id=trace_id,
            )
        )
        run.log.write([*before, row, *after])
        working: AgentWorking = {
            "agent_id": run.agent_id,
            "run_id": run.run_id,
            "thread_id": run.thread_id,
        }
        run.log.emit("agent.working", working)

    async def complete(
        self,
        run: LiveRun,
        rows: Sequence[Op] = (),
        *,
        stop_reason: str,
        model: str | None,
        usage: Usage,
    ) -> None:
        """Settle the run ``completed``, with ``rows``."""
        self._idle(run, "completed")
        end = self._end(run, "completed", stop_reason, model, usage, None)
        await run.log.flush_with([*rows, end, *self._release(run)])

    async def fail(
        self,
        run: LiveRun,
        error: AgentRunnerError,
        rows: Sequence[Op] = (),
        *,
        stop_reason: str | None = None,
        model: str | None = None,
        usage: Usage | None = None,
    ) -> None:
        """Settle the run ``failed`` with ``error`` — ``cancelled`` for a cancellation —, with
        ``rows``; the step it ended in fails. ``error`` is scrubbed of the runtime's secrets in
        place (an MCP server's last words may quote one). ``stop_reason`` defaults to
        ``error`` (``cancelled``)."""
        secrets = self._models.secrets if self._models is not None else None
        if secrets:
            secrets.scrub_error(error)
        cancelled = error.code is ErrorCode.CANCELLED
        status = "cancelled" if cancelled else "failed"
        run.rows.fail_step()
        if not cancelled:
            run.log.emit(
                "agent.failed",
                {
                    "agent_id": run.agent_id,
                    "run_id": run.run_id,
                    "thread_id": run.thread_id,
                    "error_code": str(error.code),
                    "message": error.message,
                },
            )
        self._idle(run, status)
        stop = stop_reason or ("cancelled" if cancelled else "error")
        end = self._end(run, status, stop, model, usage, error)
        await run.log.flush_with([*rows, end, *self._release(run)])

    async def fail_unstarted(self, run_id: str, error: AgentRunnerError) -> None:
        """Fail a queued run that could not begin (its agent's file gone or broken since it was
        queued) with ``error``, rather than leave it running until its lease runs out. A run
        that began settles itself: its row stays as it is (the update is guarded)."""
        finish = self._store.runs.finish_op(
            run_id,
            status="failed",
            stop_reason="error",
            error_code=str(error.code),
            error_message=error.message,
        )
        with contextlib.suppress(AgentRunnerError):  # run_settled: it began, and settled
            await self._store.batch([finish])

    async def wait(self, run: LiveRun, rows: Sequence[Op]) -> None:
        """Settle the run ``waiting`` for a person (``rows``: its requests and resume point,
        ``run_approvals``): ``agent.idle`` says so; its thread's lock is released, its hold
        on the thread stays, and so does its step's record."""
        self._idle(run, "waiting")
        lock = run.lock.release_ops() if run.lock is not None else []
        await run.log.flush_with([*rows, *lock])

    def _release(self, run: LiveRun) -> list[Op]:
        ops = run.lock.release_ops() if run.lock is not None else []
        if run.waited:
            ops.extend(self._store.approvals.release_ops(run.run_id, run.thread_id))
        return ops

    def _idle(self, run: LiveRun, outcome: str) -> None:
        """The run's last event, written with its settle: the agent no longer works on it."""
        run.log.emit(
            "agent.idle",
            {
                "agent_id": run.agent_id,
                "run_id": run.run_id,
                "thread_id": run.thread_id,
                "outcome": outcome,
            },
        )

    def _end(
        self,
        run: LiveRun,
        status: str,
        stop_reason: str,
        model: str | None,
        usage: Usage | None,
        error: AgentRunnerError | None,
    ) -> Op:
        return self._store.runs.finish_op(
            run.run_id,
            status=status,
            stop_reason=stop_reason,
            model=model,
            usage=usage.to_dict() if usage is not None else None,
            cost_micros=run.cost.micros,
            cost_known=run.cost.known,
            error_code=str(error.code) if error else None,
            error_message=error.message if error else None,
        )
