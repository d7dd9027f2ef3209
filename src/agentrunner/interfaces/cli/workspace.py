"""``agentrunner channels|post|dm|worker|status``: agents as members of a workspace."""

from __future__ import annotations

import asyncio
import difflib
import signal
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.markup import escape
from rich.text import Text

from agentrunner.interfaces.cli.console import Column, err, listing, markup, out

if TYPE_CHECKING:
    from agentrunner.agents.project import Project
    from agentrunner.engine.messages import Attachment
    from agentrunner.run.runner import AgentRunner
    from agentrunner.store.channels import Channel, ChannelMessage
    from agentrunner.store.store import Store
    from agentrunner.workspace.channels import Posted
    from agentrunner.workspace.feeds import ChannelFeed
    from agentrunner.workspace.status import ProjectStatus
    from agentrunner.workspace.worker import Worker
    from agentrunner.workspace.workspace import Workspace

__all__ = [
    "ATTACH_HELP",
    "attached",
    "channels_app",
    "dm",
    "post",
    "schedule_lines",
    "status",
    "with_workspace",
    "worker",
]

channels_app = typer.Typer(
    help="Channels: rooms with people and agents as members.", no_args_is_help=True
)
T = TypeVar("T")
# How often `post`/`dm` look whether runs are still queued or running anywhere (a commit in the
# channel, Ctrl-C or the in-process worker's end wakes them sooner).
_FOLLOW_S = 0.1
ATTACH_HELP = (
    "A file to send with the message: an image (PNG, JPEG, GIF, WebP) or a PDF; repeat for "
    "more. Each is checked before anything is sent (docs/attachments.md)."
)


def with_workspace(
    work: Callable[[Workspace], Awaitable[T]], *, worker: int | bool | None = None
) -> T:
    """``work`` on the project's workspace (``worker``: a worker's, its pool sized to it)."""

    async def main() -> T:
        from agentrunner.runtime.compose import open_workspace

        workspace = await open_workspace(worker=worker)
        try:
            return await work(workspace)
        finally:
            await workspace.close()

    return asyncio.run(main())


@channels_app.command("create")
def channels_create(
    name: str = typer.Argument(..., help="Channel name (with or without #)."),
    member: list[str] = typer.Option(
        [], "--member", "-m", help="An agent id or a person (repeat)."
    ),
    private: bool = typer.Option(False, "--private", help="Only members may post and be heard."),
) -> None:
    """Create a channel (or add members to it)."""

    async def work(ws: Workspace) -> tuple[Channel, list[tuple[str, str]], list[str]]:
        channel = await ws.channels.create(name, private=private, members=member)
        members = await ws.app.store.channels.members(channel.id)
        return channel, members, [agent.id for agent in ws.app.agents]

    channel, members, agents = with_workspace(work)
    people = {m for m, kind in members if kind != "agent"}
    for name_given in dict.fromkeys(member):  # a person spelt like an agent: likely a typo
        near = difflib.get_close_matches(name_given, agents, n=1, cutoff=0.75)
        if name_given in people and near:
            err.print(
                f"[yellow]warning:[/] '{escape(name_given)}' is no agent, so it joined as a "
                f"person (did you mean '{escape(near[0])}'?)",
            )
    everyone = ", ".join(m if kind == "agent" else f"{m} (person)" for m, kind in members)
    out.print(
        f"[green]#{escape(channel.name)}[/] ({channel.kind}) with "
        f"{escape(everyone or 'no members')}"
    )


@channels_app.command("list")
def channels_list() -> None:
    """Every channel, with its kind and member count."""
    channels = with_workspace(lambda ws: ws.app.store.channels.all())
    listing(
        "Channels",
        [Column("name", whole=True), Column("kind", whole=True), Column("members", number=True)],
        [
            [
                escape(row["name"] if row["kind"] == "dm" else "#" + row["name"]),
                row["kind"],
                str(row["members"]),
            ]
            for row in channels
        ],
    )


@channels_app.command("show")
def channels_show(
    name: str = typer.Argument(..., help="Channel name."),
    limit: int = typer.Option(30, "--limit", help="How many recent messages."),
) -> None:
    """A channel's members and recent messages."""

    async def work(ws: Workspace) -> Any:
        channel = await ws.channels.channel(name)
        store = ws.app.store
        messages = await store.channels.after(channel.id, "", 10_000)
        return channel, await store.channels.members(channel.id), messages

    channel, members, messages = with_workspace(work)
    people = ", ".join(f"{m}{'' if k == 'agent' else ' (person)'}" for m, k in members)
    heading = f"[bold]#{escape(channel.name)}[/] [dim]· {channel.kind}"
    out.print(f"{heading} · {escape(people) or 'no members'}[/]\n")
    if len(messages) > limit:
        out.print(f"[dim]… {len(messages) - limit} earlier message(s); --limit shows more[/]")
    for message in messages[-limit:] if limit > 0 else []:
        _print_message(message, channel)


def post(
    channel: str = typer.Argument(..., help="Channel name."),
    message: str = typer.Argument(..., help="What to say."),
    sender: str | None = typer.Option(
        None,
        "--as",
        help="Who is speaking: a person's name, never an agent's id "
        "(default: `person` in agentrunner.toml).",
    ),
    thread: str | None = typer.Option(
        None, "--thread", help="Reply in the thread of this message id."
    ),
    follow: bool = typer.Option(
        False, "--follow", "-f", help="Show the agents' replies as they arrive."
    ),
    attach: list[str] = typer.Option([], "--attach", metavar="PATH", help=ATTACH_HELP),
) -> None:
    """Post to a channel; the agents who should hear it reply (and are sent its files).

    With no worker running, this process serves the mailboxes until the conversation settles.
    """

    async def work(ws: Workspace) -> None:
        files = await attached(ws.runner, attach)
        target = await ws.channels.channel(channel)
        feed = await _feed_from_now(ws, target)
        posted = await ws.channels.post(
            target, sender, message, thread_root=thread, attachments=files
        )
        err.print(
            f"[dim]posted {posted.message.id} · {len(posted.run_ids)} agent(s) will read it[/]"
        )
        if await _settle(ws, target, posted, feed, follow):
            raise typer.Exit(130)

    with_workspace(work)


def dm(
    agent_id: str = typer.Argument(..., help="The agent to message."),
    message: str = typer.Argument(..., help="What to say."),
    sender: str | None = typer.Option(
        None,
        "--as",
        help="Who is speaking: a person's name, never an agent's id "
        "(default: `person` in agentrunner.toml).",
    ),
    attach: list[str] = typer.Option([], "--attach", metavar="PATH", help=ATTACH_HELP),
) -> None:
    """A direct message to an agent, with any files; its reply is printed."""

    async def work(ws: Workspace) -> None:
        files = await attached(ws.runner, attach)
        target = await ws.channels.dm_channel(agent_id, sender)
        feed = await _feed_from_now(ws, target)
        posted = await ws.channels.post(target, sender, message, attachments=files)
        if await _settle(ws, target, posted, feed, True):
            raise typer.Exit(130)
        await _raise_if_failed(ws, posted.run_ids)

    with_workspace(work)


async def attached(runner: AgentRunner, paths: list[str]) -> list[Attachment]:
    """The files of ``--attach``, each read and checked by ``runner.attach`` (off the event
    loop), before anything is posted; a file that fails is its ``attachment_refused``."""
    return [await runner.attach(path) for path in paths]


async def _raise_if_failed(ws: Workspace, run_ids: list[str]) -> None:
    """The agent's reply failed (its notice is printed above): fail the command with its error,
    unless a worker elsewhere is still on it; it waits for a person's decision (its notice says
    how to decide): exit 3, as ``run`` does."""
    from agentrunner.errors import AgentRunnerError, ErrorCode, code_info
    from agentrunner.interfaces.cli.run import WAITING_EXIT

    for run_id in run_ids:
        run = await ws.app.store.runs.get(run_id)
        if run is not None and run.status == "waiting":
            raise typer.Exit(WAITING_EXIT)
        if run is not None and run.status in ("failed", "cancelled"):
            code = ErrorCode(run.error_code or "cancelled")
            raise AgentRunnerError(
                code, run.error_message or "the reply was cancelled", hint=code_info(code).action
            )


def worker(
    concurrency: int | None = typer.Option(
        None, "--concurrency", "-c", help="Runs served at once."
    ),
) -> None:
    """Serve agents' mailboxes until SIGTERM or Ctrl-C (then drain: nothing is left running)."""

    async def work(ws: Workspace) -> None:
        serving = ws.worker(concurrency=concurrency, schedules=True)
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, serving.stop)
        loop.add_signal_handler(signal.SIGINT, _stopping, serving)
        err.print(
            f"[green]worker {escape(serving.id)}[/] serving with concurrency {serving.concurrency}"
        )
        schedule_lines(ws)
        served = await serving.run()
        err.print(f"[dim]stopped after {served} run(s)[/]")

    with_workspace(work, worker=concurrency or True)


def _stopping(serving: Worker) -> None:
    """Ctrl-C: the first drains (the runs in flight finish; nothing new is claimed), and says
    so; the next cancels what is still running, as SIGTERM's drain does once it runs out."""
    if serving.stopping:
        err.print("[yellow]cancelling the runs in flight[/]")
        serving.cancel("cancelled at Ctrl-C")
        return
    serving.stop()
    running = serving.in_flight
    if running:
        err.print(
            f"stopping: {running} run(s) in flight finish first "
            f"(up to {serving.drain_s:g} s); Ctrl-C again cancels them"
        )


def schedule_lines(ws: Workspace) -> None:
    """What a process that fires schedules says as it starts: which, and which it cannot."""
    scheduler = ws.schedules
    fired = sorted(scheduler.fired())
    if fired:
        err.print(f"firing {len(fired)} schedule(s): {escape(', '.join(fired))}")
    for name, problem in sorted(scheduler.problems.items()):
        err.print(f"[yellow]warning:[/] not firing schedule '{escape(name)}': {escape(problem)}")


def status(
    as_json: bool = typer.Option(False, "--json", help="Print it as JSON, for scripts."),
) -> None:
    """The agents down the org chart: state, current run, queued runs, today's spend; the runs
    that wait for a person's decision, and on what; live workers; the daily limits nearly or
    wholly used up."""
    from agentrunner.interfaces.cli.cost import floors_of, with_project_store
    from agentrunner.workspace.status import project_status

    async def work(project: Project, store: Store) -> ProjectStatus:
        floors = await floors_of(project, store)
        return await project_status(
            store, project.agents, project.config.budgets, floors=floors, config=project.config
        )

    report = with_project_store(work)
    if as_json:
        out.print_json(data=report.to_dict())
        return
    _print_status(report)


_STATE_COLORS = {
    "idle": "green",
    "working": "cyan",
    "waiting": "yellow",
    "error": "red",
    "disabled": "dim",
}


def _print_status(report: ProjectStatus) -> None:
    from agentrunner.interfaces.cli.cost import usd

    rows = []
    for branch, agent in zip(
        _branches([a.depth for a in report.agents]), report.agents, strict=True
    ):
        run = agent.run_id or (agent.last_run_id if agent.state == "error" else None)
        rows.append(
            [
                f"[dim]{branch}[/]{escape(agent.agent_id)}",
                f"[{_STATE_COLORS.get(agent.state, 'white')}]{agent.state}[/]",
                escape(run or "—"),
                str(agent.queued),
                usd(agent.spent_today.micros),
            ]
        )
    listing(
        "Org chart" if report.org_chart else "Agents",
        [
            Column("agent", whole=True),
            Column("state", whole=True),
            Column("run", whole=True, drop=2),
            Column("queued", number=True, drop=1),
            Column("today", number=True),
        ],
        rows,
    )
    if report.problems:
        out.print(
            f"[yellow]{report.problems} agent file(s) left out for their problems[/] "
            "[dim]· see `agentrunner agents validate`[/]"
        )
    if report.session is not None:
        s = report.session
        out.print(
            f"session [bold]{escape(s['id'])}[/] · {escape(s['root_agent'])} · "
            f"{usd(s['spent']['cost_micros'])} so far"
        )
    for job in report.jobs:
        where = "background" if job["background"] else "here"
        what = job["directive"] or job["kind"]
        out.print(
            f"[cyan]job[/] {escape(job['id'])} · {job['status']} · {where} · {escape(what[:60])}",
        )
    for waits in report.waiting:
        for request in waits["approvals"]:
            out.print(
                f"[yellow]waiting[/] {escape(waits['run_id'])} · {escape(waits['agent_id'])} · "
                f"[bold]{escape(request['tool'])}[/] ({escape(request['id'])}) [dim]· "
                f"agentrunner approve {escape(request['id'])}[/]"
            )
    _print_schedules(report)
    out.print(f"today (UTC): {usd(report.spent_today.micros)} spent")
    for use in report.warnings:
        color = "red" if use.state == "exceeded" else "yellow"
        out.print(f"[{color}]! {escape(use.message())}[/]")
    if report.workers:
        for w in report.workers:
            held = (
                "" if w.get("pool_size") is None else f" · up to {w['pool_size'] + 1} connections"
            )
            out.print(f"[green]worker[/] {escape(w['id'])} · concurrency {w['concurrency']}{held}")
    else:
        out.print("[dim]no live workers (post and dm serve the mailboxes themselves)[/]")
    if report.connections is not None:
        now, bound = report.connections
        out.print(f"database: {now} connection(s) open, of max_connections {bound}")


def _print_schedules(report: ProjectStatus) -> None:
    """A line per schedule: its state, next fire and last fire's outcome (a failure in red)."""
    from agentrunner.interfaces.cli.schedules import fire_words, moment

    for view in report.schedules:
        s = view.schedule
        line = f"[magenta]schedule[/] {escape(s.name)} · {escape(s.agent)} → {escape(s.target)}"
        if view.state != "active":
            line += f" · [dim]{view.state}[/]"
        else:
            line += f" · next {moment(view.next_tick)}"
        if view.last is not None:
            line += f" · last {moment(view.last.tick)} {fire_words(view.last)}"
        out.print(line)


def _branches(depths: list[int]) -> list[str]:
    """The tree's guide lines before each agent, from the depths of a depth-first listing:
    ``├── `` / ``└── `` before a report, ``│   `` under a manager with reports still to come."""
    last = []
    for i, depth in enumerate(depths):
        after = next((d for d in depths[i + 1 :] if d <= depth), None)
        last.append(after != depth)
    out: list[str] = []
    open_levels: list[bool] = []  # per depth above this one: whether a sibling follows there
    for depth, is_last in zip(depths, last, strict=True):
        del open_levels[depth:]
        if depth == 0:
            out.append("")
        else:
            guides = "".join("│   " if more else "    " for more in open_levels[1:depth])
            out.append(guides + ("└── " if is_last else "├── "))
        open_levels.extend([False] * (depth + 1 - len(open_levels)))
        open_levels[depth] = not is_last
    return out


async def _feed_from_now(ws: Workspace, channel: Channel) -> ChannelFeed:
    """The channel's feed from now on, taken before posting: the replies, and whatever else is
    posted meanwhile, are followed however their commits interleave with the post's."""
    from agentrunner.workspace.feeds import ChannelFeed

    feed = ChannelFeed(ws.app.store, channel.id, backlog=0)
    await feed.start()
    return feed


async def _settle(
    ws: Workspace, channel: Channel, posted: Posted, feed: ChannelFeed, follow: bool
) -> bool:
    """Serve in-process when no worker is alive; print replies while the cascade settles, and
    who is working meanwhile (with telemetry on, a ``wait`` span in the post's trace).

    Ctrl-C cancels the runs this process is serving (each leaves its notice, printed here) or,
    with a worker elsewhere, stops following. Returns whether the person pressed it."""
    serving = None if await ws.app.store.workers.alive() else ws.worker(concurrency=4)
    if serving is None and not follow:
        return False
    with ws.app.engine.tracing.wait(channel.label, posted.run_ids, posted.trace_context):
        return await _follow(ws, channel, feed, posted.message.id, serving)


async def _follow(
    ws: Workspace, channel: Channel, feed: ChannelFeed, own: str, serving: Worker | None
) -> bool:
    """Print what ``feed`` gives but the post ``own`` until the conversation settles."""
    from agentrunner.interfaces.cli.activity import ActivityDisplay
    from agentrunner.store.channels import ChannelMessage

    interrupted = asyncio.Event()
    loop = asyncio.get_running_loop()
    activity = ActivityDisplay()
    # Woken by a commit in the channel, Ctrl-C or the in-process worker's end; the timer for
    # runs elsewhere that keep the mailboxes busy.
    async with feed.watching():
        if serving is not None:
            served = asyncio.ensure_future(serving.run(until_idle=True))
            served.add_done_callback(lambda _: feed.wake())

        def stop() -> None:
            interrupted.set()
            feed.wake()

        loop.add_signal_handler(signal.SIGINT, stop)
        idle = False  # nothing was queued or running at the last look
        settled = False  # everything posted was read: what ended unanswered stayed silent
        try:
            while True:
                if interrupted.is_set() and serving is not None:
                    serving.cancel("Ctrl-C")
                # Idle twice in a row, a wake-up or _FOLLOW_S apart: a reply is posted just
                # after its run ends (woken by that end, the first look can come between).
                was_idle, idle = idle, serving is None and not await _busy(ws)
                done = serving is None and (interrupted.is_set() or (idle and was_idle))
                if serving is not None and served.done():
                    served.result()
                    done = True
                while read := await feed.read(100):
                    for _, item in read:
                        if not isinstance(item, ChannelMessage):
                            activity.show(item.type, item.payload)
                        elif item.id != own:
                            _print_message(item, channel)
                            activity.message(item)
                # rows that wait for an earlier transaction are shown once it ends
                if done and (not feed.waiting or interrupted.is_set()):
                    settled = not interrupted.is_set()
                    break
                await feed.wait(_FOLLOW_S)
        finally:
            activity.close(settled=settled)
            loop.remove_signal_handler(signal.SIGINT)
    if interrupted.is_set() and serving is None:
        err.print("[yellow]stopped following[/] [dim]· a worker is still serving the replies[/]")
    elif interrupted.is_set():
        queued = await _queued(ws)
        left = f" · {queued} queued run(s) wait for the next post or a worker" if queued else ""
        err.print(f"[yellow]cancelled[/][dim]{left}[/]")
    return interrupted.is_set()


async def _busy(ws: Workspace) -> bool:
    return await ws.app.store.mailbox.busy()


async def _queued(ws: Workspace) -> int:
    depths = await ws.app.store.mailbox.depths()
    return sum(d.get("created", 0) for d in depths.values())


def _print_message(message: ChannelMessage, channel: Channel) -> None:
    """One message; its id first, the one ``post --thread`` replies to."""
    ident = markup(f"[dim]{message.id}[/] ")
    if message.sender_kind == "notice":
        out.print(Text.assemble(ident, (f"! {message.content}", "yellow")))
        return
    color = "green" if message.sender_kind == "agent" else "blue"
    # a DM is one conversation: its replies being threaded under the message says nothing
    in_thread = message.thread_root_id and channel.kind != "dm"
    thread = f" [dim](in thread {message.thread_root_id})[/]" if in_thread else ""
    said = markup(f"[bold {color}]{escape(message.sender)}[/]{thread}: ")
    out.print(Text.assemble(ident, said, message.content))
    if message.attachments:
        from agentrunner.interfaces.cli.threads_runs import print_files

        print_files(message.attachments)
