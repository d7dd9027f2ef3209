"""A company's jobs — which are runs (DESIGN decision 6; no second job system).

A job is a root run on a company session's thread: a ``start``, a foreground ``brief`` (run by
the process that was asked, named in the run's ``worker_id``) or a background one (queued, served
by a worker). Its log is its events and its child runs' events; killing it is cancelling the run.
A job still marked running whose process is gone is *stale*: the commands that look at jobs heal
it — failed with ``worker_lost``, the reason naming the process — before they show it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.run.run_ids import find_run
from agentrunner.run.spend import with_spend
from agentrunner.store.records import RUN_ENDED
from agentrunner.workspace.approvals import waiting_on
from agentrunner.workspace.feeds import RunFeed, descendants

if TYPE_CHECKING:
    from agentrunner.config import Config
    from agentrunner.run.runner import AgentRunner
    from agentrunner.store.approvals import ApprovalRecord
    from agentrunner.store.records import RunRecord
    from agentrunner.store.store import Store
    from agentrunner.workspace.workspace import Workspace

__all__ = [
    "Healed",
    "Job",
    "Killed",
    "ensure_worker",
    "find_job",
    "heal",
    "kill",
    "list_jobs",
    "process_alive",
    "replay",
    "serve_background",
]

log = logging.getLogger("agentrunner.company")

_KILL_WAIT_S = 15.0
_JOURNAL_POLL_S = 0.5
_spawned: list[subprocess.Popen[bytes]] = []  # kept, so none is reaped (and warned about) early


@dataclass(frozen=True, slots=True)
class Job:
    run: RunRecord
    session_id: str | None = None
    waiting_on: tuple[ApprovalRecord, ...] = ()  # a waiting job's pending requests

    @property
    def id(self) -> str:
        return self.run.id

    @property
    def _company(self) -> dict[str, Any]:
        company = (self.run.request or {}).get("company")
        return company if isinstance(company, dict) else {}

    @property
    def kind(self) -> str:
        """``start``, ``brief``, or ``run`` (an ``agentrunner run`` on the session thread)."""
        return str(self._company.get("kind", "run"))

    @property
    def background(self) -> bool:
        return bool(self._company.get("background", False))

    @property
    def directive(self) -> str:
        return str(self._company.get("directive", ""))

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.run.to_dict(),
            "session_id": self.session_id,
            "worker_id": self.run.worker_id,
            "kind": self.kind,
            "background": self.background,
            "directive": self.directive,
            "waiting_on": [request.to_dict() for request in self.waiting_on],
        }


@dataclass(frozen=True, slots=True)
class Healed:
    run_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class Killed:
    """``outcome``: ``cancelled`` (it was queued), ``requested`` (its process was asked to stop
    it), or ``settled`` (it had ended: left as it was). ``status``: the job's status after."""

    job_id: str
    outcome: str
    status: str


# -- processes ------------------------------------------------------------------------------


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` on this machine is alive (a zombie is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's: alive
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc here: the signal said it exists


def _gone(worker_ids: Iterable[str]) -> dict[str, str]:
    """Of ``host:pid`` names, those on this machine whose process is gone, with the reason."""
    host = socket.gethostname()
    out = {}
    for worker_id in worker_ids:
        name, _, pid = worker_id.rpartition(":")
        if name == host and pid.isdigit() and not process_alive(int(pid)):
            out[worker_id] = f"its process (pid {pid} on {host}) is gone"
    return out


async def heal(store: Store) -> list[Healed]:
    """Fail the jobs marked running whose process is gone, with the reason (and their
    delegations still running), and the runs of workers whose lease ran out."""
    await store.mailbox.fail_expired()
    running = await store.company.running_jobs()
    gone = await asyncio.to_thread(_gone, {r["worker_id"] for r in running if r["worker_id"]})
    healed = []
    for row in running:
        reason = gone.get(row["worker_id"] or "")
        if reason is None:
            continue
        reason += "; the job was marked failed when it was found so"
        for child in await descendants(store, row["id"]):
            if child.status == "running":
                await store.company.fail_gone(child.id, reason)
        if await store.company.fail_gone(row["id"], reason):
            healed.append(Healed(row["id"], reason))
    return healed


async def ensure_worker(config: Config, store: Store) -> int | None:
    """Start a worker, detached (it outlives this process and its terminal), unless one is
    alive; returns the new worker's pid, or None. It serves until nothing is queued."""
    alive = await store.workers.alive()
    gone = await asyncio.to_thread(
        _gone, [f"{w['host']}:{w['pid']}" for w in alive if w.get("host") and w.get("pid")]
    )
    if any(f"{w['host']}:{w['pid']}" not in gone for w in alive):
        return None
    return await asyncio.to_thread(_spawn, config)


def _spawn(config: Config) -> int:
    logs = config.state_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / "background-worker.log", "ab") as output:
        process = subprocess.Popen(
            # -P: Python puts no working directory first on the import path, where a file an
            # agent wrote in the project would be imported in place of the module it names
            [sys.executable, "-P", "-m", "agentrunner", "serve-briefs"],
            cwd=config.root,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # no SIGHUP when the terminal closes
        )
    _spawned.append(process)
    return process.pid


async def serve_background(workspace: Workspace) -> int:
    """What a detached worker does: serve the mailboxes until nothing is queued or running,
    writing the journal entry of each background brief as it completes. Returns runs served."""
    store = workspace.app.store
    failed: set[str] = set()
    journals = asyncio.ensure_future(_journal_loop(workspace.runner, failed))
    served = 0
    try:
        while True:
            served += await workspace.worker().run(until_idle=True)
            # It left the live workers before this look: a brief queued since then either
            # saw it gone (and started another) or is seen here.
            depths = await store.mailbox.depths()
            if not any(d.get("created") for d in depths.values()):
                break
    finally:
        journals.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await journals
        await _write_journals(workspace.runner, failed)
    return served


async def _journal_loop(runner: AgentRunner, failed: set[str]) -> None:
    """Journal entries as briefs complete; and stale jobs healed now and then — a job left
    running by a dead process would otherwise keep this worker from ever being idle."""
    rounds = 0
    while True:
        await asyncio.sleep(_JOURNAL_POLL_S)
        await _write_journals(runner, failed)
        rounds += 1
        if rounds % 10 == 0:
            try:
                for healed in await heal(runner.app.store):
                    log.warning("job %s: %s", healed.run_id, healed.reason)
            except Exception as exc:
                log.warning("healing stale jobs failed: %r", exc)


async def _write_journals(runner: AgentRunner, failed: set[str]) -> None:
    """The entries of the active session's completed background briefs that have none; a
    failure is logged (once per brief) and never stops the worker."""
    from agentrunner.workspace.company import journal, session

    try:
        current = await session.active(runner.app.store)
        if current is None:
            return
        pending = await runner.app.store.company.unjournaled(current.id)
        root = runner.app.agents.get(current.root_agent)
    except Exception as exc:
        log.warning("journal: cannot look for briefs without an entry: %r", exc)
        return
    for run_id, request in pending:
        company = request.get("company") or {}
        if company.get("kind") != "brief" or not company.get("background") or run_id in failed:
            continue
        try:
            await journal.write_entry(runner, current, root, run_id, str(company["directive"]))
        except Exception as exc:
            failed.add(run_id)
            why = exc.one_line() if isinstance(exc, AgentRunnerError) else repr(exc)
            log.warning("the journal entry of brief %s was not written: %s", run_id, why)


# -- listing, killing, following -------------------------------------------------------------


async def list_jobs(store: Store, *, limit: int = 20) -> list[Job]:
    """The company's jobs, newest first, stale ones healed first; each with what it has spent
    so far (``spend.with_spend``), and a waiting one with what it waits on."""
    await heal(store)
    return [
        Job(
            await with_spend(store, run),
            session_id,
            tuple(await waiting_on(store, run.id)) if run.status == "waiting" else (),
        )
        for run, session_id in await store.company.jobs(limit=limit)
    ]


async def find_job(store: Store, job_id: str | None) -> RunRecord:
    """The job ``job_id`` (a run id, its beginning or its end: ``run_ids.find_run``); the
    newest job for None. ``not_found`` otherwise."""
    if job_id is None:
        jobs = await store.company.jobs(limit=1)
        if not jobs:
            raise AgentRunnerError(
                ErrorCode.NOT_FOUND,
                "this project has no jobs yet",
                hint='Brief the company: agentrunner brief "…" (--background for a job).',
            )
        return jobs[0][0]
    return await find_run(
        store, job_id, kind="job", hint="`agentrunner jobs` lists the jobs, running and recent."
    )


async def kill(store: Store, job_id: str) -> Killed:
    """Stop the job: a queued one at once, a running one by asking its process (which aborts
    it and its delegations), waited for. A job that had ended is left as it was — a completed
    one is never turned into a failed one."""
    await heal(store)
    run = await find_job(store, job_id)
    outcome = await store.mailbox.cancel(run.id)
    if outcome == "not_cancellable":
        return Killed(run.id, "settled", run.status if run.status in RUN_ENDED else "unknown")
    if outcome == "requested":
        waited = 0.0
        while waited < _KILL_WAIT_S:
            current = await store.runs.get(run.id)
            if current is None or current.status in RUN_ENDED:
                break
            await asyncio.sleep(0.1)
            waited += 0.1
    after = await store.runs.get(run.id)
    return Killed(run.id, outcome, after.status if after else "unknown")


async def replay(
    store: Store,
    job_id: str,
    sink: Callable[[str, Any], None],
    *,
    follow: bool = False,
) -> RunRecord:
    """Pass the job's events, and its delegations' (marked as theirs, as a live caller gets
    them), to ``sink`` in the order they happened; with ``follow``, as they come (``RunFeed``),
    until the job ends. Returns the job's run as it was when its last event had been passed on."""
    feed = RunFeed(store, job_id, delegations=True)
    if follow:
        async for event in feed.follow():
            sink(event.type, event.payload)
    else:
        for event in await feed.read():
            sink(event.type, event.payload)
    if feed.run is None:
        raise AgentRunnerError(ErrorCode.NOT_FOUND, f"no job '{job_id}'")
    return feed.run
