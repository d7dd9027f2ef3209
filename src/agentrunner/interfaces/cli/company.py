"""``agentrunner start|brief|stop|journal|jobs|logs|kill``: company mode (seed 002), over the
library's ``agentrunner.workspace.company``. A brief's lines — who is speaking, tool calls, each
delegate's work, the cost line — are its run's events through ``run``'s printer, live or
(``logs``) read back, so both print the same."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.markup import escape
from rich.text import Text

from agentrunner.interfaces.cli.console import Column, err, listing, markup, out, verbatim
from agentrunner.interfaces.cli.workspace import ATTACH_HELP

if TYPE_CHECKING:
    from agentrunner.agents.registry import AgentRegistry
    from agentrunner.agents.spec import AgentSpec
    from agentrunner.interfaces.cli.run import EventPrinter
    from agentrunner.run.runner import AgentRunner
    from agentrunner.run.spend import RunSpend
    from agentrunner.store.records import RunRecord
    from agentrunner.store.store import Store
    from agentrunner.workspace.company.brief import Briefed

__all__ = ["brief", "jobs", "journal", "kill", "logs", "serve_briefs", "start", "stop"]

T = TypeVar("T")
_STATE_COLORS = {
    "completed": "green",
    "running": "cyan",
    "created": "yellow",
    "failed": "red",
    "cancelled": "yellow",
    "waiting": "yellow",
}


def _with_store(work: Callable[[Store], Awaitable[T]]) -> T:
    """Run ``work`` with the project's store only (no engine, no agents): quick to open."""

    async def main() -> T:
        from agentrunner.config import load_config
        from agentrunner.store.store import open_project_store

        config = await asyncio.to_thread(load_config)
        store = await open_project_store(config)
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(main())


def _with_runner(work: Callable[[AgentRunner], Awaitable[T]]) -> T:
    async def main() -> T:
        from agentrunner.runtime.compose import open_runner

        runner = await open_runner()
        try:
            return await work(runner)
        finally:
            await runner.close()

    return asyncio.run(main())


# -- start, brief, stop -----------------------------------------------------------------------


def start(
    resume: bool = typer.Option(
        False, "--resume", help="Continue the active session instead of refusing."
    ),
) -> None:
    """Open a company session: the root agent (`[company] root`, default ceo) starts a new
    session thread with the journal's recent history, introduces itself and confirms its team."""
    from agentrunner.workspace.company import brief as briefs

    async def work(runner: AgentRunner) -> tuple[Briefed, str | None]:
        return await _foreground(
            runner,
            lambda callbacks, abort: briefs.start(
                runner, callbacks=callbacks, abort=abort, resume=resume, warn=_warn
            ),
        )

    briefed, status = _with_runner(work)
    if briefed.run_id is None:
        err.print(
            f"[dim]resuming session {escape(briefed.session.id)} · thread "
            f"{escape(briefed.session.thread_id)}[/]"
        )
    out.print(_org_chart(_agents_of_project(), briefed.root))
    out.print(
        f"[green]session {escape(briefed.session.id)}[/] [dim]· {escape(briefed.root.id)}'s "
        'thread {thread} · next: agentrunner brief "…"[/]'.replace(
            "{thread}", escape(briefed.session.thread_id)
        ),
    )
    _exit_for(status)


def brief(
    directive: str = typer.Argument(
        ..., help="The directive; - reads it from stdin, @FILE from a file."
    ),
    background: bool = typer.Option(
        False, "--background", "-b", help="Queue it as a job and return at once."
    ),
    attach: list[str] = typer.Option([], "--attach", metavar="PATH", help=ATTACH_HELP),
) -> None:
    """Brief the company: the root agent works on the directive (and is sent its files) and
    delegates down its org chart (a session is started if none is active). Streams who is
    working, tool calls, and the cost; then writes the journal entry."""
    from agentrunner.interfaces.cli.project import read_message

    text = read_message(directive)
    if background:
        _brief_background(text, attach)
        return
    from agentrunner.interfaces.cli.workspace import attached
    from agentrunner.workspace.company import brief as briefs

    async def work(runner: AgentRunner) -> tuple[Briefed, str | None]:
        files = await attached(runner, attach)  # read and checked before anything starts
        return await _foreground(
            runner,
            lambda callbacks, abort: briefs.brief(
                runner, text, callbacks=callbacks, abort=abort, warn=_warn, attachments=files
            ),
        )

    briefed, status = _with_runner(work)
    if briefed.journal is not None:
        err.print(verbatim(f"journal: {briefed.journal.summary}", "dim"))
    _exit_for(status)


def _exit_for(status: str | None) -> None:
    """A job that waits for a person exits 3 (as ``run``), a cancelled one 130 (and one left
    to a worker elsewhere by Ctrl-C), one that failed after going on here 1 (its error line is
    printed)."""
    from agentrunner.interfaces.cli.run import WAITING_EXIT

    codes = {"waiting": WAITING_EXIT, "cancelled": 130, "failed": 1, "created": 130, "running": 130}
    if status in codes:
        raise typer.Exit(codes[status])


def _brief_background(text: str, attach: list[str]) -> None:
    from agentrunner.workspace.company.brief import Queued

    async def main() -> Queued:
        from agentrunner.config import load_config
        from agentrunner.engine.attachment_checks import read_file
        from agentrunner.store.store import open_project_store
        from agentrunner.workspace.company.brief import queue_brief

        config = await asyncio.to_thread(load_config)
        # read as runner.attach reads a path, without a runner: the job's agents are the
        # worker's to load
        files = [await asyncio.to_thread(read_file, p, config.attachments) for p in attach]
        store = await open_project_store(config)
        try:
            return await queue_brief(config, store, text, files)
        finally:
            await store.close()

    queued = asyncio.run(main())
    for warning in queued.warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}")
    if queued.opened:
        err.print(f"[dim]started session {escape(queued.session.id)}[/]")
    worker = (
        f"a worker was started (pid {queued.worker_pid})"
        if queued.worker_pid
        else "a live worker will serve it"
    )
    out.print(f"job {queued.job_id}")
    err.print(f"[dim]queued · {worker} · follow it: agentrunner logs {queued.job_id} --follow[/]")


def _warn(warning: str) -> None:
    err.print(f"[yellow]warning:[/] {escape(warning)}")


async def _foreground(
    runner: AgentRunner, call: Callable[[Any, Any], Awaitable[Briefed]]
) -> tuple[Briefed, str | None]:
    """Run a start or brief here, its events printed as they happen; Ctrl-C cancels it. A job
    that waits for a person is decided on a terminal and goes on here (``decide``), else the
    commands that decide it are printed. The end lines are read back from the store, as
    ``logs`` prints them. The job's status at the end (None: nothing was run)."""
    from agentrunner.engine.abort import AbortSignal
    from agentrunner.errors import AgentRunnerError
    from agentrunner.interfaces.cli.run import EventPrinter
    from agentrunner.run.callbacks import AgentRunnerCallbacks
    from agentrunner.workspace.company.brief import journal_brief
    from agentrunner.workspace.company.session import root_agent

    root = root_agent(runner.app.config, runner.app.agents)
    abort = AbortSignal()
    printer = EventPrinter()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, abort.abort, "Ctrl-C")
    header = _Header(root.id, printer)
    try:
        briefed = await call(AgentRunnerCallbacks(on_event=header), abort)
    except AgentRunnerError as exc:
        job_id = exc.details.get("job_id")  # set when the job itself failed
        failed = await runner.app.store.runs.get(job_id) if isinstance(job_id, str) else None
        if failed is not None:
            await _print_end(runner.app.store, failed, with_error=False)  # the error line follows
        raise
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    run = await runner.app.store.runs.get(briefed.run_id) if briefed.run_id else None
    if run is not None and run.status == "waiting":
        run = await _waiting(runner, run, printer, header)
        await journal_brief(runner, briefed)  # a brief that waited, once it went on here
    for warning in briefed.warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}")
    if briefed.opened and briefed.run_id is not None:
        err.print(f"[dim]started session {escape(briefed.session.id)}[/]")
    if run is not None:
        await _print_end(runner.app.store, run)
    return briefed, run.status if run is not None else None


async def _waiting(
    runner: AgentRunner, run: RunRecord, printer: EventPrinter, header: _Header
) -> RunRecord | None:
    """A job that waits for a person: asked about on a terminal, and gone on with here
    (printed as it goes); otherwise, the commands that decide it."""
    from agentrunner.interfaces.cli.decide import asked_of, decide_here, on_terminal, print_waiting
    from agentrunner.workspace.approvals import waiting_on

    if on_terminal():
        return await decide_here(runner, run.id, printer, header)
    print_waiting(asked_of(await waiting_on(runner.app.store, run.id)), run.id, run.thread_id)
    return run


class _Header:
    """Says who is speaking before the root's first event, then passes events to ``printer``."""

    def __init__(self, agent_id: str, printer: Callable[[str, Any], None]) -> None:
        self.agent_id, self.printer, self.said = agent_id, printer, False

    def __call__(self, kind: str, data: Any) -> None:
        if not self.said:
            self.said = True
            _say_header(self.agent_id)
        self.printer(kind, data)


def _say_header(agent_id: str) -> None:
    err.print(f"[bold]{escape(agent_id)}[/] ›")


async def _print_end(store: Store, run: RunRecord, *, with_error: bool = True) -> None:
    """The job's last lines: its state, tokens and cost, per agent and per model, and why it
    failed (left out where the command's own error line follows and says it, with its hint)."""
    from agentrunner.errors import error_line
    from agentrunner.run.spend import run_spend

    cost = await run_spend(store, run, split=True)
    color = _STATE_COLORS.get(run.status, "white")
    err.print(
        f"[{color}]{run.status}[/] [dim]· {cost.tokens:,} tokens · {_usd(cost)} · "
        f"job {escape(run.id)}[/]"
    )
    if cost.by_agent:
        err.print(f"[dim]  by agent: {_breakdown(cost.by_agent)}[/]")
        err.print(f"[dim]  by model: {_breakdown(cost.by_model)}[/]")
    if with_error and run.status == "failed" and run.error_code:
        err.print(verbatim(f"  {error_line(run.error_code, run.error_message)}", "red"))


def _usd(cost: RunSpend) -> str:
    return f"${cost.micros / 1e6:.4f}" + ("" if cost.known else " (some cost unknown)")


def _breakdown(micros: dict[str, int]) -> str:
    ordered = sorted(micros.items(), key=lambda item: -item[1])
    return ", ".join(f"{escape(name)} ${value / 1e6:.4f}" for name, value in ordered)


def stop() -> None:
    """End the active company session: its background jobs are killed, the last brief's
    journal entry written if it has none, and the session marked ended."""
    from agentrunner.workspace.company.brief import stop as stop_session

    stopped = _with_runner(stop_session)
    if stopped.session is None:
        err.print("[dim]no company session is active: nothing to stop[/]")
        return
    for job in stopped.killed:
        err.print(f"[yellow]killed[/] job {escape(job.job_id)} [dim]({job.status})[/]")
    for warning in stopped.warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}")
    if stopped.journal is not None:
        err.print(verbatim(f"journal: {stopped.journal.summary}", "dim"))
    out.print(f"[green]session {escape(stopped.session.id)} ended[/]")


# -- journal, jobs, logs, kill ----------------------------------------------------------------


def journal(
    search: str | None = typer.Option(
        None, "--search", "-s", help="Only entries whose directive or summary holds this text."
    ),
    limit: int = typer.Option(10, "--limit", "-n", min=1, help="How many entries, newest first."),
    as_json: bool = typer.Option(False, "--json", help="Print the entries as JSON."),
) -> None:
    """The company journal: a summary of each brief, newest first."""
    entries = _with_store(lambda store: store.company.entries(limit=limit, search=search))
    if as_json:
        out.print_json(data=[entry.to_dict() for entry in entries])
        return
    if not entries:
        err.print(
            "[dim]no journal entries"
            + (f" holding '{escape(search)}'" if search else " yet: each brief writes one")
            + "[/]"
        )
        return
    for entry in entries:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.created_at))
        out.print(
            Text.assemble(
                markup(
                    f"[bold]{when}[/] [dim]· ${entry.cost_micros / 1e6:.4f} · job {entry.run_id}[/]"
                ),
                "\n",
                (entry.directive, "cyan"),
                f"\n{entry.summary}\n",
            )
        )


def jobs(
    limit: int = typer.Option(20, "--limit", "-n", min=1, help="How many jobs, newest first."),
    as_json: bool = typer.Option(False, "--json", help="Print the jobs as JSON."),
) -> None:
    """The company's jobs, running and recent: state, age, spend. A job whose process is gone
    is marked failed here, with the reason."""

    async def work(store: Store) -> tuple[list[Any], list[Any]]:
        from agentrunner.workspace.company.jobs import heal, list_jobs

        healed = await heal(store)
        return healed, await list_jobs(store, limit=limit)  # with what each spent so far

    healed, listed = _with_store(work)
    for fixed in healed:
        err.print(f"[yellow]healed[/] job {escape(fixed.run_id)}: {escape(fixed.reason)}")
    if as_json:
        out.print_json(data=[job.to_dict() for job in listed])
        return
    now = time.time()
    listing(
        "Jobs",
        [
            Column("job", whole=True),
            Column("kind", whole=True, drop=2),
            Column("state", whole=True),
            Column("age", number=True),
            Column("spend", number=True),
            Column("directive", drop=1),
        ],
        [
            [
                escape(job.id),
                job.kind + (" (bg)" if job.background else ""),
                f"[{_STATE_COLORS.get(job.run.status, 'white')}]{job.run.status}[/]",
                _age(now - job.run.created_at),
                f"${job.run.cost_micros / 1e6:.4f}",
                verbatim(job.directive or "—"),
            ]
            for job in listed
        ],
    )
    for job in listed:
        for request in job.waiting_on:
            out.print(
                f"[yellow]job {escape(job.id)} waits[/] for a decision on "
                f"[bold]{escape(request.tool)}[/] ({escape(request.id)}) [dim]· "
                f"agentrunner approve {escape(request.id)} · agentrunner deny "
                f"{escape(request.id)} --reason …[/]"
            )


def _age(seconds: float) -> str:
    if seconds < 90:
        return f"{max(0, int(seconds))}s"
    if seconds < 5400:
        return f"{int(seconds // 60)}m"
    if seconds < 86400 * 2:
        return f"{int(seconds // 3600)}h"
    return f"{int(seconds // 86400)}d"


def logs(
    job: str | None = typer.Argument(None, help="The job (default: the newest)."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until it ends."),
) -> None:
    """A job's log: the lines its brief printed (or prints, with --follow)."""

    async def work(store: Store) -> RunRecord:
        from agentrunner.interfaces.cli.run import EventPrinter
        from agentrunner.workspace.company.jobs import find_job, heal, replay

        await heal(store)
        run = await find_job(store, job)
        printer = EventPrinter()
        header = _Header(run.agent_id, printer)
        stopped = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, stopped.set)
        try:
            following = asyncio.ensure_future(replay(store, run.id, header, follow=follow))
            interrupted = asyncio.ensure_future(stopped.wait())
            await asyncio.wait([following, interrupted], return_when=asyncio.FIRST_COMPLETED)
            interrupted.cancel()
            if not following.done():
                following.cancel()
                err.print("[yellow]stopped following[/] [dim]· the job goes on[/]")
                return run
            final = following.result()
        finally:
            loop.remove_signal_handler(signal.SIGINT)
        if not header.said:
            _say_header(final.agent_id)
        if "events" in final.removed:
            err.print("[dim](its events were removed by the \\[retention] rules: events_days)[/]")
        if final.settled:
            await _print_end(store, final)
        else:
            err.print(
                f"[dim]{final.status} · job {escape(final.id)} · "
                f"--follow prints the rest as it comes[/]"
            )
        return final

    _with_store(work)


def kill(job: str = typer.Argument(..., help="The job to stop.")) -> None:
    """Stop a job: a queued one at once, a running one (and its delegations) by asking its
    process. A job that already ended is left as it was."""

    async def work(store: Store) -> Any:
        from agentrunner.workspace.company.jobs import kill as kill_job

        return await kill_job(store, job)

    killed = _with_store(work)
    if killed.outcome == "settled":
        err.print(
            f"job {escape(killed.job_id)} had already ended ({killed.status}); left as it was"
        )
        return
    color = _STATE_COLORS.get(killed.status, "white")
    out.print(f"job {escape(killed.job_id)}: [{color}]{killed.status}[/]")


def serve_briefs() -> None:
    """(Started by `brief --background`.) Serve the queued runs until none is left, writing
    the journal entry of each background brief."""

    async def main() -> None:
        from agentrunner.runtime.compose import open_workspace
        from agentrunner.workspace.company.jobs import serve_background

        workspace = await open_workspace()
        try:
            await serve_background(workspace)
        finally:
            await workspace.close()

    asyncio.run(main())


# -- the org chart ----------------------------------------------------------------------------


def _agents_of_project() -> AgentRegistry:
    from agentrunner.agents.project import load_project

    return load_project(strict=False).agents


def _org_chart(agents: AgentRegistry, root: AgentSpec) -> Any:
    from rich.tree import Tree

    def label(spec: AgentSpec) -> str:
        text = f"[bold]{escape(spec.id)}[/] [dim]{escape(spec.name)}[/]"
        return text if spec.enabled else f"{text} [dim](disabled)[/]"

    tree = Tree(label(root))

    def add(node: Tree, spec: AgentSpec) -> None:
        for report in agents.direct_reports(spec.id):
            add(node.add(label(report)), report)

    add(tree, root)
    return tree
