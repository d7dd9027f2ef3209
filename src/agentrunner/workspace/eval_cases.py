"""How an eval case's run is made (docs/evals.md): in this process (``run_agent``, on the
variant's model or version of the agent's file), or queued for the project's workers
(``RunQueue.queue``) and followed to its end; either way, what judging it needs: its answer,
its tool calls, what it cost and how long it took, or why it failed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentrunner.core.ids import new_id
from agentrunner.errors import AgentRunnerError, ErrorCode

if TYPE_CHECKING:
    from agentrunner.agents.evals import CaseSpec
    from agentrunner.agents.spec import AgentSpec
    from agentrunner.engine.abort import AbortSignal
    from agentrunner.engine.messages import Attachment
    from agentrunner.run.runner import AgentRunner
    from agentrunner.store.records import RunMessageRecord, RunRecord
    from agentrunner.store.store import Store
    from agentrunner.workspace.queueing import RunQueue

__all__ = ["Ran", "no_worker", "run_here", "run_queued"]


@dataclass(frozen=True, slots=True)
class Ran:
    """A case's run as judging reads it; ``error`` (its code and message) when it failed or was
    cancelled (then ``run_id`` may be None: it never began)."""

    run_id: str | None
    seconds: float
    text: str = ""
    model: str | None = None
    cost_micros: int | None = None  # None: a price unknown
    tokens: int = 0
    calls: Sequence[tuple[str, Any]] = field(default_factory=tuple)
    error: str | None = None


async def run_here(
    runner: AgentRunner,
    case: CaseSpec,
    attachments: Sequence[Attachment],
    agent: str,
    model: str | None,
    version: AgentSpec | None,
    abort: AbortSignal | None,
) -> Ran:
    """The case run in this process, on a new thread."""
    from agentrunner.run.request import RunAgentOverrides  # loaded with the runner

    overrides = RunAgentOverrides(model=model, agent=version) if model or version else None
    started, thread = time.monotonic(), _thread(agent)
    try:
        result = await runner.run_agent(
            agent,
            thread,
            case.message,
            None,
            overrides,
            abort,
            input=dict(case.input),
            attachments=attachments,
        )
    except AgentRunnerError as exc:
        failed = f"{exc.code}: {exc.message}"
        ran = await runner.store.runs.list(thread_id=thread, limit=1)  # its thread's only run
        return _failed(ran[0] if ran else None, time.monotonic() - started, failed)
    seconds = time.monotonic() - started
    if result.stop_reason == "cancelled":
        stopped = f"{ErrorCode.CANCELLED}: its run was cancelled"
        return _failed(await runner.store.runs.get(result.run_id), seconds, stopped)
    return Ran(
        result.run_id,
        seconds,
        result.text,
        result.model,
        result.cost_micros if result.cost_known else None,
        result.usage.input_tokens + result.usage.output_tokens,
        _calls(await runner.store.runs.messages(result.run_id)),
    )


async def no_worker(store: Store) -> AgentRunnerError | None:
    """Why cases cannot be queued now: no worker is alive to take them."""
    if await store.workers.alive():
        return None
    return AgentRunnerError(
        ErrorCode.VALIDATION,
        "no worker is running to take the eval's cases",
        hint="Start one (`agentrunner worker`, in another terminal), or leave out --workers "
        "to run them in this process.",
    )


async def run_queued(
    queue: RunQueue,
    case: CaseSpec,
    attachments: Sequence[Attachment],
    agent: str,
    model: str | None,
    abort: AbortSignal | None,
) -> Ran:
    """The case queued on a new thread for the workers, and followed to its end. Once
    ``abort`` fires it is cancelled (queued: at once; running: its worker is asked)."""
    from agentrunner.workspace.feeds import RunFeed  # loaded with the workspace

    store = queue.app.store
    thread = _thread(agent)
    await store.threads.open(thread, agent)
    try:
        queued = await queue.queue(
            agent, thread, case.message, input=case.input, model=model, attachments=attachments
        )
    except AgentRunnerError as exc:
        return Ran(None, 0.0, cost_micros=0, error=f"{exc.code}: {exc.message}")
    run_id = queued.run_id
    cancelling: list[asyncio.Task[str]] = []
    feed = RunFeed(store, run_id)
    stop = (
        abort.on_abort(
            lambda: cancelling.append(asyncio.ensure_future(store.mailbox.cancel(run_id)))
        )
        if abort is not None
        else None
    )
    try:
        if abort is not None and abort.aborted:
            await store.mailbox.cancel(run_id)
        async for _ in feed.follow():
            pass  # its events: the answer is read from its messages once it has ended
    finally:
        if stop is not None:
            stop()
        await asyncio.gather(*cancelling, return_exceptions=True)
    run = feed.run or await store.runs.get(run_id)
    if run is None:
        return Ran(run_id, 0.0, error=f"{ErrorCode.NOT_FOUND}: its run was deleted")
    seconds = (run.completed_at or time.time()) - (run.started_at or run.created_at)
    if run.status == "cancelled":
        return _failed(run, seconds, f"{ErrorCode.CANCELLED}: its run was cancelled")
    if run.status != "completed":
        said = run.error_message or run.status
        return _failed(run, seconds, f"{run.error_code or run.status}: {said}")
    messages = await store.runs.messages(run_id)
    answers = [m.content for m in messages if m.message_type == "assistant_message"]
    return Ran(
        run_id,
        seconds,
        answers[-1] if answers else "",
        run.model,
        run.cost_micros if run.cost_known else None,
        _tokens(run),
        _calls(messages),
    )


def _failed(run: RunRecord | None, seconds: float, error: str) -> Ran:
    """A case whose run failed or was cancelled, with what the run spent all the same (none
    when it never began)."""
    if run is None:
        return Ran(None, seconds, cost_micros=0, error=error)
    cost = run.cost_micros if run.cost_known else None
    return Ran(run.id, seconds, model=run.model, cost_micros=cost, tokens=_tokens(run), error=error)


def _tokens(run: RunRecord) -> int:
    usage = run.token_usage or {}
    return int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))


def _thread(agent: str) -> str:
    return new_id(f"{agent}-eval-")


def _calls(messages: Sequence[RunMessageRecord]) -> list[tuple[str, Any]]:
    return [
        (m.tool_name or "", m.tool_input) for m in messages if m.message_type == "tool_call_message"
    ]
