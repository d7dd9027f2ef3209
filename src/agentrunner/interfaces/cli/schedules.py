"""``agentrunner schedules``: agents that run on their own — listed with their next and last
fires, one schedule's recent fires, paused, resumed and fired now (docs/schedules.md)."""

from __future__ import annotations

import asyncio
import signal
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from agentrunner.interfaces.cli.console import Column, err, listing, out
from agentrunner.interfaces.cli.workspace import with_workspace

if TYPE_CHECKING:
    from agentrunner.store.schedules import Fire
    from agentrunner.workspace.project_schedules import ScheduleView
    from agentrunner.workspace.workspace import Workspace

__all__ = ["app", "fire_words", "moment"]

app = typer.Typer(
    help="Schedules: agents that run on their own (docs/schedules.md).",
    invoke_without_command=True,
)

_OUTCOME_COLORS = {
    "completed": "green",
    "queued": "cyan",
    "running": "cyan",
    "waiting": "yellow",
    "skipped": "yellow",
    "failed": "red",
    "cancelled": "dim",
}


def moment(t: float | None, now: float | None = None) -> str:
    """A fire's time as people read it: local, to the second, with how far it is from now."""
    if t is None:
        return "—"
    now = time.time() if now is None else now
    local = datetime.fromtimestamp(t)
    shown = local.strftime(
        "%H:%M:%S" if local.date() == datetime.now().date() else "%Y-%m-%d %H:%M"
    )
    away = t - now
    span = _span(abs(away))
    return f"{shown} ({'in ' + span if away >= 0 else span + ' ago'})"


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def fire_words(fire: Fire) -> str:
    """A fire's outcome in color, with its reason when it was skipped or stood for missed ticks."""
    result = fire.result
    shown = f"[{_OUTCOME_COLORS.get(result, 'white')}]{result}[/]"
    if fire.error_code and fire.error_code != result:
        shown += f" ({escape(fire.error_code)})"
    if fire.reason:
        shown += f" [dim]· {escape(fire.reason)}[/]"
    return shown


@app.callback()
def schedules(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print them as JSON, for scripts."),
) -> None:
    """Every schedule: its agent, when it fires, where its runs go, its state, next fire and
    last fire with its outcome."""
    if ctx.invoked_subcommand is not None:
        return
    listed(as_json)


@app.command("list")
def listed(
    as_json: bool = typer.Option(False, "--json", help="Print them as JSON, for scripts."),
) -> None:
    """Every schedule (what `agentrunner schedules` alone prints)."""

    async def work(ws: Workspace) -> tuple[list[ScheduleView], bool]:
        return await ws.schedules.overview(), bool(await ws.app.store.workers.alive())

    views, served = with_workspace(work)
    if as_json:
        out.print_json(data={"schedules": [view.to_dict() for view in views]})
        return
    if not views:
        out.print(
            "No schedules yet. Add one to agentrunner.toml, e.g.\n\n"
            '  [schedules.digest]\n  agent = "assistant"\n  cron = "0 9 * * 1-5"\n'
            '  message = "Post the morning digest."\n  channel = "general"\n\n'
            "[dim]then run `agentrunner worker`: it fires them (docs/schedules.md).[/]"
        )
        return
    listing("Schedules", _COLUMNS, [_row(view) for view in views])
    if not served:
        out.print("[dim]no live workers: schedules fire while `agentrunner worker` runs[/]")


_COLUMNS = [  # in a narrow terminal the agent goes first, then where, then the next fire
    Column("name", whole=True),
    Column("agent", whole=True, drop=4),
    Column("when", drop=1),
    Column("to", whole=True, drop=3),
    Column("state", whole=True),
    Column("next", drop=2),
    Column("last"),
]


def _row(view: ScheduleView) -> list[str]:
    s = view.schedule
    state = {
        "active": "[green]active[/]",
        "paused": "[yellow]paused[/]",
        "invalid": f"[red]invalid[/] [dim]· {escape(view.problem or '')}[/]",
    }.get(view.state, f"[dim]{view.state}[/]")
    last = "—" if view.last is None else f"{moment(view.last.tick)} {fire_words(view.last)}"
    return [
        escape(s.name),
        escape(s.agent),
        escape(s.ticks.describe()),
        escape(s.target),
        state,
        moment(view.next_tick) if view.state == "active" else "—",
        last,
    ]


@app.command("show")
def show(
    name: str = typer.Argument(..., help="The schedule's name."),
    limit: int = typer.Option(20, "--limit", min=1, max=1000, help="How many recent fires."),
    as_json: bool = typer.Option(False, "--json", help="Print it as JSON, for scripts."),
) -> None:
    """A schedule and its recent fires: each tick, what it queued (its run) or why it was
    skipped, and what came of it."""

    async def work(ws: Workspace) -> tuple[ScheduleView, list[Fire]]:
        return await ws.schedules.view(name), await ws.schedules.fires(name, limit)

    view, fires = with_workspace(work)
    if as_json:
        out.print_json(data={**view.to_dict(), "recent": [fire.to_dict() for fire in fires]})
        return
    s = view.schedule
    out.print(
        f"[bold]{escape(s.name)}[/] · {escape(s.agent)} · {escape(s.ticks.describe())} → "
        f"{escape(s.target)} · {view.state} [dim]· missed = {s.missed}, overlap = {s.overlap}[/]"
    )
    if view.state == "active":
        out.print(f"next fire {moment(view.next_tick)}")
    listing(
        "Recent fires",
        [Column("tick"), Column("run", whole=True, drop=1), Column("outcome")],
        [[moment(f.tick), escape(f.run_id or "—"), fire_words(f)] for f in fires],
    )
    if not fires:
        out.print("[dim]no fires yet: a running `agentrunner worker` fires it[/]")


@app.command("pause")
def pause(name: str = typer.Argument(..., help="The schedule's name.")) -> None:
    """Stop firing it, in every process, until resumed (its ticks meanwhile are not run)."""
    with_workspace(lambda ws: ws.schedules.pause(name))
    out.print(f"[yellow]paused[/] {escape(name)} [dim]· agentrunner schedules resume {name}[/]")


@app.command("resume")
def resume(name: str = typer.Argument(..., help="The schedule's name.")) -> None:
    """Fire it again from its next tick (those that passed while paused are not run)."""

    async def work(ws: Workspace) -> ScheduleView:
        await ws.schedules.resume(name)
        return await ws.schedules.view(name)

    view = with_workspace(work)
    out.print(f"[green]resumed[/] {escape(name)} · next fire {moment(view.next_tick)}")


@app.command("run-now")
def run_now(name: str = typer.Argument(..., help="The schedule's name.")) -> None:
    """Fire it once now, whatever its ticks: its run queued (served here when no worker is
    running) — or skipped, and why (its agent disabled, a daily budget spent)."""

    async def work(ws: Workspace) -> tuple[Fire, Any]:
        fire = await ws.schedules.run_now(name)
        if fire.run_id is None or await ws.app.store.workers.alive():
            return fire, None
        serving = ws.worker(concurrency=1)  # as `post` serves a laptop with no worker
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, serving.cancel, "cancelled at Ctrl-C")
        try:
            await serving.run(until_idle=True)
        finally:
            loop.remove_signal_handler(signal.SIGINT)
        return fire, await ws.app.store.runs.get(fire.run_id)

    fire, run = with_workspace(work)
    if fire.run_id is None:
        err.print(f"[yellow]skipped[/] {escape(name)}: {escape(fire.reason or '')}")
        raise typer.Exit(1)
    if run is None:
        out.print(f"queued run {escape(fire.run_id)} · a worker serves it")
        return
    color = _OUTCOME_COLORS.get(run.status, "white")
    out.print(f"run {escape(fire.run_id)} [{color}]{run.status}[/]")
    if run.status == "cancelled":
        raise typer.Exit(130)  # as `run` exits at Ctrl-C
    if run.status == "failed":
        err.print(f"[red]{escape(run.error_code or '')}[/]: {escape(run.error_message or '')}")
        raise typer.Exit(1)
