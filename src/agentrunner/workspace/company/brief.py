"""Starting a company session and briefing it (seed 002's ``start`` and ``brief``).

A brief is a run of the root agent on the session thread (DESIGN decision 6): in the foreground
this process runs it, its row naming this process (``host:pid``, as a worker is named) so that
``kill`` reaches it and a dead process is seen; in the background it is queued for a worker,
started detached when none is alive (``jobs.ensure_worker``). Either way its output is the
run's events, and its delegations are its child runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentrunner.core.ids import new_id
from agentrunner.core.inputs import check_text
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.run.spend import preflight
from agentrunner.workspace.company import journal, session

if TYPE_CHECKING:
    from agentrunner.agents.registry import AgentRegistry
    from agentrunner.agents.spec import AgentSpec
    from agentrunner.config import Config
    from agentrunner.engine.abort import AbortSignal
    from agentrunner.engine.messages import Attachment
    from agentrunner.run.callbacks import AgentRunnerCallbacks
    from agentrunner.run.request import RunResult
    from agentrunner.run.runner import AgentRunner
    from agentrunner.store.company import CompanySession, JournalEntry
    from agentrunner.store.store import Store
    from agentrunner.workspace.company.jobs import Killed

__all__ = [
    "Briefed",
    "Queued",
    "Stopped",
    "brief",
    "intro_message",
    "journal_brief",
    "queue_brief",
    "start",
    "stop",
    "this_process",
]

log = logging.getLogger("agentrunner.company")

_KILL_POLL_S = 0.3


@dataclass
class Briefed:
    """What a foreground ``start`` or ``brief`` did. ``run_id`` is None for a ``start --resume``
    that found the session active (nothing was run)."""

    session: CompanySession
    root: AgentSpec
    run_id: str | None = None
    result: RunResult | None = None
    journal: JournalEntry | None = None
    warnings: list[str] = field(default_factory=list)
    opened: bool = False  # a new session was opened
    directive: str | None = None  # a brief's, as the person gave it


@dataclass
class Queued:
    """A background brief: its job (run) id, and the worker started for it (None: one was
    alive)."""

    job_id: str
    session: CompanySession
    worker_pid: int | None
    warnings: list[str] = field(default_factory=list)
    opened: bool = False


@dataclass
class Stopped:
    """What ``stop`` did: the session it ended (None: none was active), the jobs it killed."""

    session: CompanySession | None
    killed: list[Killed] = field(default_factory=list)
    journal: JournalEntry | None = None
    warnings: list[str] = field(default_factory=list)


def this_process() -> str:
    """How a run names the process running it: ``host:pid``, as a worker names itself."""
    return f"{socket.gethostname()}:{os.getpid()}"


def intro_message(agents: AgentRegistry, root: AgentSpec) -> str:
    team = session.team_lines(agents, root)
    if not team:
        return (
            "A new session begins. Introduce yourself in two or three sentences. You have no "
            "team: nobody reports to you, so you work alone."
        )
    return (
        "A new session begins. Introduce yourself in two or three sentences and confirm your "
        "team. You delegate to your direct reports; they delegate to theirs:\n" + "\n".join(team)
    )


async def start(
    runner: AgentRunner,
    *,
    callbacks: AgentRunnerCallbacks | None = None,
    abort: AbortSignal | None = None,
    resume: bool = False,
    warn: Callable[[str], None] | None = None,
) -> Briefed:
    """Open a new company session: a new session thread of the root agent, marked active,
    whose first message carries the journal's recent history; the root introduces itself and
    confirms its team. ``session_active`` when one is active — unless ``resume``, which
    returns the active one, running nothing. Before it runs, ``budget_exceeded`` when the
    root's or the global daily limit is used up; the limits 80 % used are warnings."""
    store = runner.app.store
    root = session.root_agent(runner.app.config, runner.app.agents)
    if resume:
        current = await session.active(store)
        if current is not None:
            return Briefed(current, root)
    warnings = _told(await _budget_warnings(runner, root), warn)
    history = await _history(store, warnings)
    opened = await session.open_session(store, root.id)
    briefed = Briefed(opened, root, warnings=warnings, opened=True)
    message = _with_history(history, intro_message(runner.app.agents, root))
    try:
        briefed.run_id, briefed.result = await _run_here(
            runner, opened, root, message, {"kind": "start"}, callbacks, abort
        )
    except AgentRunnerError:
        # the introduction failed: no session was started (the next `start` is not refused)
        await session.end(store, opened)
        raise
    return briefed


async def brief(
    runner: AgentRunner,
    directive: str,
    *,
    callbacks: AgentRunnerCallbacks | None = None,
    abort: AbortSignal | None = None,
    warn: Callable[[str], None] | None = None,
    attachments: Sequence[Attachment] = (),
) -> Briefed:
    """Send ``directive`` to the active session (opening one if none), run it here, then write
    its journal entry (``journal_brief``: not yet for a run that waits for a person). A failed
    run raises its error, as ``run_agent`` does; a journal that cannot be written is a warning
    in the result. The budget is checked first, as ``start`` does. ``attachments``: files sent
    to the root with the directive (``runner.attach``), within a message's bounds
    (``attachment_refused`` before anything is opened or run)."""
    _check_directive(directive)
    files = runner.check_attachments(attachments)
    store = runner.app.store
    root = session.root_agent(runner.app.config, runner.app.agents)
    spending = _told(await _budget_warnings(runner, root), warn)
    current, message, warnings, opened = await _session_for(store, root.id, directive)
    briefed = Briefed(
        current, root, warnings=spending + warnings, opened=opened, directive=directive
    )
    briefed.run_id, briefed.result = await _run_here(
        runner,
        current,
        root,
        message,
        {"kind": "brief", "directive": directive},
        callbacks,
        abort,
        files,
    )
    await journal_brief(runner, briefed)
    return briefed


async def journal_brief(runner: AgentRunner, briefed: Briefed) -> None:
    """Write a foreground brief's journal entry once its run has completed — at its end, or
    after it waited for a person and went on (``brief`` cannot write it while the run waits).
    Nothing for a run that did not complete, nor for a ``start``; an entry that cannot be
    written is a warning in ``briefed``."""
    if briefed.directive is None or briefed.run_id is None or briefed.journal is not None:
        return
    run = await runner.app.store.runs.get(briefed.run_id)
    if run is None or run.status != "completed":
        return
    try:
        briefed.journal = await journal.write_entry(
            runner, briefed.session, briefed.root, briefed.run_id, briefed.directive
        )
    except Exception as exc:
        briefed.warnings.append(f"the journal entry was not written: {_why(exc)}")


async def queue_brief(
    config: Config, store: Store, directive: str, attachments: Sequence[Attachment] = ()
) -> Queued:
    """Queue ``directive`` as a run of the root on the active session's thread (opening a
    session if none) and make sure a worker will serve it; returns at once. The agent files
    are the worker's to read: a broken root file fails the job, not this call.
    ``attachments``: files for the root (read by ``engine.attachment_checks``), within a
    message's bounds (``attachment_refused`` before anything is written), their bytes kept
    with the job's row."""
    from agentrunner.engine.attachment_checks import check_message
    from agentrunner.store.mailbox import NewRun
    from agentrunner.workspace.company.jobs import ensure_worker
    from agentrunner.workspace.queueing import queue_runs

    _check_directive(directive)
    check_message(attachments, config.attachments)
    root = await asyncio.to_thread(session.root_agent_id, config)  # a stat: off the loop
    # the root's and the global daily limits, against the root's smallest request; the
    # team's own are the worker's to meet
    floors = await _root_floor(config, store, root)
    spending = [
        use.message() for use in await preflight(store, config.budgets, root, floors=floors)
    ]
    current, message, warnings, opened = await _session_for(store, root, directive)
    warnings = spending + warnings
    run = NewRun(
        new_id("run_"),
        root,
        current.thread_id,
        _request(
            message,
            current,
            {"kind": "brief", "directive": directive, "background": True},
            attachments,
        ),
    )
    await queue_runs(
        store,
        [run],
        result={"run_id": run.id, "thread_id": current.thread_id},
        with_ops=store.attachments.keep_ops(attachments),
        max_queue=config.max_queue,
    )
    pid = await ensure_worker(config, store)
    return Queued(run.id, current, pid, warnings, opened)


async def stop(runner: AgentRunner) -> Stopped:
    """End the active session: its queued, running and waiting jobs are killed (as ``kill``;
    a waiting one's requests are cancelled with it), the last brief's journal entry is written
    if it has none (a failure is a warning), and the session is marked ended. Nothing to do
    when none is active."""
    from agentrunner.workspace.company import jobs

    store = runner.app.store
    current = await session.active(store)
    if current is None:
        return Stopped(None)
    stopped = Stopped(current)
    for job in await jobs.list_jobs(store, limit=100):
        if job.session_id == current.id and job.run.status in ("created", "running", "waiting"):
            stopped.killed.append(await jobs.kill(store, job.id))
    briefs = [
        (run_id, request["company"])
        for run_id, request in await store.company.unjournaled(current.id)
        if (request.get("company") or {}).get("kind") == "brief"
    ]
    if briefs:
        run_id, company = briefs[-1]
        try:
            root = runner.app.agents.get(current.root_agent)
            stopped.journal = await journal.write_entry(
                runner, current, root, run_id, str(company.get("directive", ""))
            )
        except Exception as exc:
            stopped.warnings.append(f"the last brief's journal entry was not written: {_why(exc)}")
    await session.end(store, current)
    return stopped


# -- helpers ------------------------------------------------------------------------------


def _told(warnings: list[str], warn: Callable[[str], None] | None) -> list[str]:
    """Budget warnings go to ``warn`` at once where given (before the work starts, for the
    person to see first), else with the result."""
    if warn is None:
        return warnings
    for warning in warnings:
        warn(warning)
    return []


async def _budget_warnings(runner: AgentRunner, root: AgentSpec) -> list[str]:
    """Today's spend before the work starts: ``budget_exceeded`` (nothing started) when what
    is left of the root's or the global daily limit cannot pay for the root's smallest
    request; a warning for each limit at 80 % or more, or exhausted for its agent."""
    team = session.team_ids(runner.app.agents, root)
    uses = await preflight(
        runner.app.store,
        runner.app.config.budgets,
        root.id,
        team=team,
        floors=await runner.smallest_requests([root.id, *team]),
    )
    return [use.message() for use in uses]


async def _root_floor(config: Config, store: Store, root: str) -> dict[str, int]:
    """The root's smallest request (``budgets.request_floors``), its files read leniently off
    the loop (a broken root file fails the job, as the worker reads it); nothing is read
    without a daily limit."""
    from agentrunner.agents.project import read_agents
    from agentrunner.run.budgets import request_floors

    if not config.budgets.daily:  # request_floors' own test, before the files are read
        return {}
    agents, personas = await asyncio.to_thread(read_agents, config, strict=False)
    return await request_floors(config, agents, store, only=[root], personas=personas)


def _check_directive(directive: str) -> None:
    check_text(directive, "directive")
    if not directive.strip():
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            "the directive is empty",
            hint='Say what the company should do: agentrunner brief "…" (- reads stdin).',
        )


def _why(exc: BaseException) -> str:
    return exc.one_line() if isinstance(exc, AgentRunnerError) else repr(exc)


async def _history(store: Store, warnings: list[str]) -> str | None:
    try:
        return await journal.load_history(store)
    except Exception as exc:  # the session starts without its memory, never not at all
        warnings.append(f"the journal could not be loaded: {_why(exc)}")
        return None


def _with_history(history: str | None, text: str) -> str:
    return f"{history}\n\n---\n\n{text}" if history else text


async def _session_for(
    store: Store, root: str, directive: str
) -> tuple[CompanySession, str, list[str], bool]:
    """The active session and the message to send it; a new session (its first message
    carrying the journal's history) when none is active."""
    current = await session.active(store)
    if current is not None:
        return current, directive, [], False
    warnings: list[str] = []
    history = await _history(store, warnings)
    try:
        opened = await session.open_session(store, root)
    except AgentRunnerError as exc:  # another process opened one meanwhile: brief that one
        raced = await session.active(store) if exc.code is ErrorCode.SESSION_ACTIVE else None
        if raced is None:
            raise
        return raced, directive, warnings, False
    return opened, _with_history(history, directive), warnings, True


def _request(
    message: str,
    current: CompanySession,
    company: dict[str, Any],
    attachments: Sequence[Attachment] = (),
) -> dict[str, Any]:
    """The run's request (what a worker serves: a direct run), with what the company commands
    read back: which session, what kind of job, the directive as the person gave it; and the
    files sent with it, by reference (their bytes kept in the store)."""
    request: dict[str, Any] = {
        "kind": "direct",
        "message": message,
        "input": {},
        "company": {"session": current.id, **company},
    }
    if attachments:
        request["attachments"] = [a.to_dict() for a in attachments]
    return request


async def _run_here(
    runner: AgentRunner,
    current: CompanySession,
    root: AgentSpec,
    message: str,
    company: dict[str, Any],
    callbacks: AgentRunnerCallbacks | None,
    abort: AbortSignal | None,
    attachments: Sequence[Attachment] = (),
) -> tuple[str, RunResult]:
    """Run the root on the session thread in this process, as a job ``kill`` can reach."""
    from agentrunner.engine.abort import AbortSignal

    store = runner.app.store
    run_id = new_id("run_")
    me = this_process()
    await store.batch(
        [
            store.company.brief_op(
                run_id,
                agent_id=root.id,
                thread_id=current.thread_id,
                request=_request(message, current, company, attachments),
                worker_id=me,
            )
        ]
    )
    abort = abort or AbortSignal()
    watcher = asyncio.ensure_future(_watch_kill(runner, run_id, me, abort))
    try:
        result = await runner.run_agent(
            root.id,
            current.thread_id,
            message,
            callbacks,
            None,
            abort,
            run_id=run_id,
            attachments=attachments,
        )
    except AgentRunnerError as exc:
        # Failed before the runner took the run over (the root's file broke since it was
        # read): failed here, not left running.
        await runner.lifecycle.fail_unstarted(run_id, exc)
        exc.details.setdefault("job_id", run_id)  # the failed job, for whoever shows it
        raise
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    return run_id, result


async def _watch_kill(runner: AgentRunner, run_id: str, me: str, abort: AbortSignal) -> None:
    """``agentrunner kill`` of this job from another process: abort the run (and its
    delegations, which its abort reaches); a cancel asked of one delegation stops it alone."""
    store = runner.app.store
    while True:
        await asyncio.sleep(_KILL_POLL_S)
        try:
            if run_id in await store.mailbox.cancel_requested(me):
                abort.abort("killed (agentrunner kill)")
                return
            if runner.delegations:
                requested = await store.mailbox.cancel_requested()
                runner.abort_delegations(requested, "cancelled on request")
        except Exception:
            log.warning("checking whether job %s was killed failed; retrying", run_id)
