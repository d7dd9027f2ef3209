"""Workers: processes that serve agents' mailboxes (seed 003), on one machine or many.

A worker claims queued runs (atomically; FIFO per agent, one running run per agent), runs up to
``concurrency`` of them at once, and renews their leases. When idle it waits for a NOTIFY
(PostgreSQL; idle CPU is near zero) or polls with backoff (SQLite). Every worker also fails the
runs whose worker stopped renewing its lease (killed, machine lost) — they are not re-run, since
their tools may already have had effects — and frees their threads. ``stop()`` (SIGTERM) drains:
no new claims; in-flight runs get ``drain_s`` to finish, then are cancelled, so nothing is left
``running``.

A worker renews only the leases of the runs it is serving, one by one: a run it lost (failed by
the lease rules while it was paused, or left unsettled because the database went away) is not
kept alive by it, and one whose renewal finds it settled is stopped. A database that goes away
— a restart — is waited for: the store reconnects, and the worker keeps claiming once it can.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from typing import TYPE_CHECKING

from agentrunner.engine.abort import AbortSignal
from agentrunner.engine.messages import Attachment
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.run.lifecycle import as_error
from agentrunner.store.drivers import is_unavailable
from agentrunner.workspace.retention import apply_retention, pass_held

if TYPE_CHECKING:
    from agentrunner.run.runner import AgentRunner
    from agentrunner.store.mailbox import ClaimedRun
    from agentrunner.workspace.channels.service import ChannelService
    from agentrunner.workspace.schedules import Scheduler

__all__ = ["Worker"]

log = logging.getLogger("agentrunner.worker")

# While the database is unavailable (past the store's own retries), the claim loop pauses this
# long, doubling up to the most.
_OUTAGE_PAUSE_S = 0.5
_OUTAGE_PAUSE_MAX_S = 10.0
# [retention] is applied this often, for at most this long each time.
RETENTION_EVERY_S = 60.0
RETENTION_FOR_S = 2.0


class Worker:
    def __init__(
        self,
        runner: AgentRunner,
        channels: ChannelService,
        *,
        concurrency: int = 1,
        lease_s: float = 30.0,
        idle_poll_s: float = 1.0,
        drain_s: float = 30.0,
        scheduler: Scheduler | None = None,
        retention_every_s: float = RETENTION_EVERY_S,
    ) -> None:
        self.runner = runner
        self.app = runner.app
        self.channels = channels
        self.store = runner.app.store
        self.concurrency = max(1, concurrency)
        self.lease_s = lease_s
        self.idle_poll_s = idle_poll_s
        self.drain_s = drain_s
        self.scheduler = scheduler  # the project's schedules, fired from here too
        self.retention_every_s = retention_every_s  # how often [retention] is applied
        # Lock tickets are owned by "host:pid:…"; so is a worker, so its tickets can be freed.
        self.id = f"{socket.gethostname()}:{os.getpid()}"
        self.served = 0
        self._stopping = asyncio.Event()
        self._inflight: dict[str, tuple[asyncio.Task[None], AbortSignal]] = {}
        self._wake = asyncio.Event()

    @property
    def stopping(self) -> bool:
        """Whether ``stop()`` was asked (it drains, then returns from ``run``)."""
        return self._stopping.is_set()

    @property
    def in_flight(self) -> int:
        """The runs it is serving now."""
        return len(self._inflight)

    def stop(self) -> None:
        """Stop claiming; in-flight runs finish (or are cancelled after ``drain_s``)."""
        self._stopping.set()
        self._wake.set()

    def cancel(self, reason: str) -> None:
        """Stop claiming and abort the in-flight runs now: each settles as cancelled (how a
        ``post`` serving in-process answers Ctrl-C). Queued runs stay queued."""
        self.stop()
        for _, abort in self._inflight.values():
            abort.abort(reason)

    async def run(self, *, until_idle: bool = False) -> int:
        """Serve mailboxes until ``stop()`` — or, with ``until_idle``, until nothing is queued
        or running (how ``post`` serves a laptop with no worker). Returns runs served."""
        listener = await self.store.run_listener()
        await self.store.workers.heartbeat(self.id, self.concurrency)
        upkeep = asyncio.create_task(self._upkeep())
        cancels = asyncio.create_task(self._watch_cancels())
        fires = (
            asyncio.create_task(self.scheduler.serve(self._stopping)) if self.scheduler else None
        )
        # [retention]: a worker that serves until stopped keeps the store small as it goes
        keeping = None if until_idle else asyncio.create_task(self._keep_small())
        delay, outage = 0.01, _OUTAGE_PAUSE_S
        try:
            await self.store.mailbox.fail_expired()
            await self._count_queues()
            while not self._stopping.is_set():
                try:
                    if len(self._inflight) < self.concurrency:
                        claimed = await self._claim()
                        if claimed is not None:
                            self._start(claimed)
                            delay = 0.01
                            continue
                    if until_idle and not self._inflight and not await self._queued():
                        break
                except Exception as exc:
                    if not is_unavailable(exc):
                        raise
                    log.warning("database unavailable (%s); trying again in %g s", exc, outage)
                    await self._pause(outage)
                    outage = min(outage * 2, _OUTAGE_PAUSE_MAX_S)
                    continue
                outage = _OUTAGE_PAUSE_S
                self._wake.clear()
                waits: list[asyncio.Future[bool]] = [asyncio.ensure_future(self._wake.wait())]
                if len(self._inflight) < self.concurrency:
                    waits.append(asyncio.ensure_future(listener.wait(min(delay, self.idle_poll_s))))
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                for waiter in waits:
                    waiter.cancel()
                delay = min(delay * 2, self.idle_poll_s)
            await self._drain()
            await self._count_queues()
        finally:
            for task in (upkeep, cancels, fires, keeping):
                if task is None:
                    continue
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await listener.close()
            await self.store.workers.remove(self.id)
        return self.served

    async def _pause(self, seconds: float) -> None:
        """Sleep, unless ``stop()`` comes first."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def _claim(self) -> ClaimedRun | None:
        asked = time.time_ns()
        claimed = await self.store.mailbox.claim(self.id, self.lease_s)
        if claimed is not None:  # a span per run claimed, none for each empty look
            self.app.engine.tracing.claimed(
                run_id=claimed.id,
                agent_id=claimed.agent_id,
                attempt=claimed.attempts,
                worker_id=self.id,
                waited_s=claimed.waited_s,
                trace_context=claimed.trace_context,
                asked_ns=asked,
            )
        return claimed

    def _start(self, claimed: ClaimedRun) -> None:
        abort = AbortSignal()
        task = asyncio.ensure_future(self._serve(claimed, abort))
        self._inflight[claimed.id] = (task, abort)

    async def _serve(self, claimed: ClaimedRun, abort: AbortSignal) -> None:
        try:
            # in the trace it was queued in, from whichever process queued it
            with self.app.engine.tracing.continued(claimed.trace_context):
                await self._run(claimed, abort)
        except AgentRunnerError as exc:  # recorded on the run by the runner, once it started
            if exc.code is ErrorCode.THREAD_WAITING:  # claimed as another run began waiting
                await self.store.mailbox.release(claimed.id)
                return
            log.info("run %s failed: %s: %s", claimed.id, exc.code, exc.message)
            await self.runner.lifecycle.fail_unstarted(claimed.id, exc)
        except Exception as exc:
            log.exception("run %s crashed", claimed.id)
            await self.runner.lifecycle.fail_unstarted(claimed.id, as_error(exc))
        finally:
            self.served += 1
            self._inflight.pop(claimed.id, None)
            self._wake.set()  # a slot is free, and this agent's next run may be claimable

    async def _run(self, claimed: ClaimedRun, abort: AbortSignal) -> None:
        if claimed.request.get("kind") == "channel":
            await self.channels.serve(claimed, abort=abort)
        else:
            from agentrunner.run.request import RunAgentOverrides  # loaded with the runner

            request = claimed.request
            settings = request.get("model_settings")  # checked when it was queued
            model, prompt = request.get("model"), request.get("prompt")  # a replay's
            only = request.get("tools")  # the caller's narrowing
            schema, retry = request.get("output_schema"), request.get("retry")  # the caller's
            overrides = None
            if (
                settings
                or request.get("background")
                or model
                or prompt
                or only is not None
                or schema
                or retry
            ):
                overrides = RunAgentOverrides(
                    model=model,
                    model_settings=settings,
                    background=bool(request.get("background")),  # a schedule's: nobody watches
                    notify_channel=request.get("notify_channel"),
                    prompt=(prompt[0], prompt[1]) if prompt else None,
                    only_tools=None if only is None else tuple(only),
                    output_schema=schema,
                    retry=retry,
                )
            await self.runner.run_agent(
                claimed.agent_id,
                claimed.thread_id or f"{claimed.agent_id}-queue",
                str(request.get("message", "")),
                overrides=overrides,
                abort=abort,
                input=dict(claimed.request.get("input") or {}),
                run_id=claimed.id,
                attachments=[
                    Attachment.from_dict(a) for a in claimed.request.get("attachments", ())
                ],
            )

    async def _queued(self) -> bool:
        return await self.store.mailbox.busy()

    async def _count_queues(self) -> None:
        """With telemetry on, every agent's queued runs counted for the queue depth gauge:
        as the worker starts and stops, and with its heartbeat. A count that fails (the
        database gone meanwhile) is skipped: a gauge never stops a worker."""
        try:
            await self.app.engine.tracing.count_queues(self.store.mailbox.depths)
        except Exception as exc:
            log.debug("counting the queues failed: %s", exc)

    async def _watch_cancels(self) -> None:
        """Abort in-flight runs someone asked to cancel (e.g. over HTTP, from another process)."""
        while True:
            await asyncio.sleep(0.2)
            if not self._inflight:
                continue
            try:
                for run_id in await self.store.mailbox.cancel_requested(self.id):
                    entry = self._inflight.get(run_id)
                    if entry is not None:
                        entry[1].abort("cancelled on request")
                if self.runner.delegations:  # theirs, asked of a delegation alone
                    requested = await self.store.mailbox.cancel_requested()
                    self.runner.abort_delegations(requested, "cancelled on request")
            except Exception:
                log.exception("checking for cancellations failed; retrying")

    async def _upkeep(self) -> None:
        """Heartbeat, lease renewal and recovery of other workers' expired runs."""
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                await self.store.workers.heartbeat(self.id, self.concurrency)
                await self._renew_leases()
                await self._count_queues()
                await self.runner.waits.expire_due()  # a request nobody decided: denied
                failed = await self.store.mailbox.fail_expired()
                if failed:
                    log.warning(
                        "failed %d run(s) whose worker stopped: %s", len(failed), ", ".join(failed)
                    )
                    self._wake.set()
            except Exception:
                log.exception("worker upkeep failed; retrying")

    async def _keep_small(self) -> None:
        """Apply ``[retention]`` every ``retention_every_s``, for a few seconds at most,
        pausing between its batches so that the runs served meanwhile get the database
        (``workspace.retention``); one worker at a time holds the pass."""
        retention = self.app.config.retention
        while True:
            await asyncio.sleep(self.retention_every_s)
            try:
                async with pass_held(self.store, self.id) as holder:
                    if holder is None:
                        continue  # another worker's turn
                    removal = await apply_retention(
                        self.store, retention, seconds=RETENTION_FOR_S, pause_s=0.02
                    )
                if removal.total:
                    log.info("[retention] removed or merged %d row(s)", removal.total)
            except Exception:
                log.exception("applying [retention] failed; retrying")

    async def _renew_leases(self) -> None:
        """Renew the runs in flight; stop those that are no longer this worker's to finish."""
        for run_id, (task, abort) in list(self._inflight.items()):
            if await self.store.mailbox.renew(run_id, self.id, self.lease_s) or task.done():
                continue
            if not await self._taken(run_id):  # settled by itself, still posting its reply
                continue
            # Failed by the lease rules while this worker was paused, or queued again:
            # whatever it does now would not be recorded (its settle is refused).
            log.warning("run %s was settled elsewhere (its lease ran out); stopping it", run_id)
            abort.abort("the run was settled elsewhere: its lease ran out")

    async def _taken(self, run_id: str) -> bool:
        """Whether a run this worker serves, no longer running, was taken from it — failed by
        the lease rules (``worker_lost``) or given back to its mailbox — rather than settled
        by its own run, which goes on after its settle (a channel run posts its reply)."""
        run = await self.store.runs.get(run_id)
        if run is None or run.worker_id != self.id or run.error_code == "worker_lost":
            return True
        return run.status in ("created", "running")

    async def _drain(self) -> None:
        if not self._inflight:
            return
        tasks = [task for task, _ in self._inflight.values()]
        _, pending = await asyncio.wait(tasks, timeout=self.drain_s)
        if pending:
            for _, abort in list(self._inflight.values()):
                abort.abort("the worker is stopping")
            await asyncio.wait(pending, timeout=10)
