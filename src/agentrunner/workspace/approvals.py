"""What waits for a person, as the workspace's commands show it and go on with it
(docs/approvals.md): the requests a waiting run waits on (``waiting_on``, ``waiting_runs``:
what ``jobs`` and ``status`` show), and a run gone on with once decided (``go_on``): served in
this process when no worker is alive — as ``post`` and ``dm`` serve their replies — and
followed from the store, whichever process serves it, until it ends or waits again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrunner.workspace.feeds import RunFeed

if TYPE_CHECKING:
    from agentrunner.store.approvals import ApprovalRecord
    from agentrunner.store.records import RunRecord
    from agentrunner.store.store import Store
    from agentrunner.workspace.worker import Worker
    from agentrunner.workspace.workspace import Workspace

__all__ = ["GoneOn", "go_on", "paused_at", "waiting_on", "waiting_runs"]


async def waiting_on(store: Store, run_id: str) -> list[ApprovalRecord]:
    """The requests run ``run_id`` waits on, as a person decides them (``waited_on``: a
    delegation's wait is what the delegated run waits on)."""
    return await store.approvals.waited_on(run_id)


async def waiting_runs(store: Store) -> dict[str, list[ApprovalRecord]]:
    """Every run that waits for a person, each with the requests it waits on (oldest first)."""
    runs: dict[str, list[ApprovalRecord]] = {}
    for request in await store.approvals.pending():
        runs.setdefault(request.run_id, []).append(request)
    return runs


async def paused_at(store: Store, run_id: str) -> int:
    """The number of the last event run ``run_id`` wrote before it began to wait (0 when it
    does not wait): a follower of what it does once decided starts after it."""
    point = await store.approvals.resume_point(run_id)
    return point.last_seq if point is not None else 0


@dataclass(frozen=True, slots=True)
class GoneOn:
    """What ``go_on`` came to: the run as it then is (``None``: no such run), whether this
    process served it, and whether ``stop`` was set (following stopped, or the run served
    here was cancelled)."""

    run: RunRecord | None
    served_here: bool
    stopped: bool


async def go_on(
    ws: Workspace,
    run_id: str,
    sink: Callable[[str, Any], None] | None = None,
    *,
    after: int = 0,
    delegations: bool = False,
    stop: asyncio.Event | None = None,
) -> GoneOn:
    """Go on with run ``run_id``, queued again once its requests were decided: with no worker
    alive, this process serves the mailboxes until nothing is queued or running (the run among
    them); each event of the run after number ``after`` is passed to ``sink`` as it is written,
    until the run has ended or waits again (with ``delegations``, those of the runs it
    delegates to as well, marked as theirs, as ``logs`` prints a job). ``stop`` set: the runs
    this process serves are cancelled (each settles ``cancelled``), or, served elsewhere, the
    following stops and the run goes on there."""
    store = ws.app.store
    serving = None if await store.workers.alive() else ws.worker(concurrency=1)
    stop = stop or asyncio.Event()
    feed = RunFeed(store, run_id, after, delegations=delegations)
    served: asyncio.Future[int] | None = None
    stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    stopping.add_done_callback(lambda _: feed.wake())
    try:
        async with feed.watching():
            if serving is not None:
                served = asyncio.ensure_future(serving.run(until_idle=True))
                served.add_done_callback(lambda _: feed.wake())
            await _follow(feed, run_id, sink, serving, served, stop)
        if served is not None:
            await _served(serving, served, stopping)
    except asyncio.CancelledError:
        if serving is not None and served is not None:
            serving.cancel("stopped")
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(served)  # the runs it serves settle before this returns
        raise
    finally:
        stopping.cancel()
    return GoneOn(await store.runs.get(run_id), serving is not None, stop.is_set())


async def _follow(
    feed: RunFeed,
    run_id: str,
    sink: Callable[[str, Any], None] | None,
    serving: Worker | None,
    served: asyncio.Future[int] | None,
    stop: asyncio.Event,
) -> None:
    """Pass the run's events on until it settles (its ``agent.idle``: ended or waiting again),
    the worker serving here is done, or — served elsewhere — ``stop`` is set."""
    cancelled = False
    while True:
        finished = served is not None and served.done()  # then this read finds all it wrote
        for event in await feed.read():
            if sink is not None:
                sink(event.type, event.payload)
            if event.type == "agent.idle" and event.payload.get("run_id") == run_id:
                return  # its last event, written with its settle
        if feed.ended:
            return
        if stop.is_set():
            if serving is None:
                return  # served elsewhere: it goes on there
            if not cancelled:
                serving.cancel("Ctrl-C")
                cancelled = True
        if finished and not feed.more:
            assert served is not None
            served.result()  # a crash of the worker is raised
            return  # nothing is queued or running: whatever the run came to is read
        if not feed.more:
            await feed.wait()


async def _served(
    serving: Worker | None, served: asyncio.Future[int], stopping: asyncio.Future[Any]
) -> None:
    """The worker serving here, until nothing is queued or running, or ``stop``."""
    if not served.done():
        waits: list[asyncio.Future[Any]] = [served, stopping]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    if not served.done() and serving is not None:
        serving.cancel("Ctrl-C")
    await served
