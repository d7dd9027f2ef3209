"""``agentrunner cost``: what was spent, per agent, per model and per day, against each limit.

The figures are ``spend.spend_report``'s, the same that ``status`` and the budget check read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import typer
from rich.markup import escape

from agentrunner.interfaces.cli.console import Column, listing, out

if TYPE_CHECKING:
    from agentrunner.agents.project import Project
    from agentrunner.run.spend import CacheSpend, LimitUse, Spend, SpendReport
    from agentrunner.store.store import Store

__all__ = ["cache_line", "cost", "floors_of", "limit_lines", "usd", "with_project_store"]

T = TypeVar("T")


def with_project_store(work: Callable[[Project, Store], Awaitable[T]]) -> T:
    """The project (agent files read leniently: money is the database's, and a broken file
    must not hide it) and its store, for one piece of work."""
    from agentrunner.agents.project import load_project

    project = load_project(strict=False)  # before the loop: nothing to stall yet

    async def main() -> T:
        from agentrunner.store.store import open_project_store

        store = await open_project_store(project.config)
        try:
            return await work(project, store)
        finally:
            await store.close()

    return asyncio.run(main())


async def floors_of(project: Project, store: Store) -> dict[str, int]:
    """Each agent's smallest request (``budgets.request_floors``), for the project's limits."""
    from agentrunner.run.budgets import request_floors

    return await request_floors(project.config, project.agents, store, personas=project.personas)


def cost(
    days: str = typer.Option(
        "1", "--days", metavar="N", help="Today and the N-1 days before it (UTC); 1: today."
    ),
    agent: str | None = typer.Option(None, "--agent", help="Only this agent's spend."),
    as_json: bool = typer.Option(False, "--json", help="Print it as JSON, for scripts."),
) -> None:
    """Spend per agent, per model and per day, and today's spend against each limit."""
    from agentrunner.engine.pricing import PriceBook
    from agentrunner.run.spend import check_days, spend_report
    from agentrunner.workspace.company.session import active, spent

    count = check_days(_whole(days), "--days")

    async def work(project: Project, store: Store) -> SpendReport:
        config = project.config
        report = await spend_report(
            store,
            config.budgets,
            days=count,
            agent=agent,
            agents=project.agents.ids(),  # each agent's limit, spent or not
            prices=PriceBook(config.prices),
            floors=await floors_of(project, store),
        )
        current = await active(store)
        if current is not None and agent is None:
            report.session = await spent(store, current)
        if agent is not None and agent not in project.agents.ids() and not report.by_agent:
            project.agents.get(agent)  # agent_not_found, with the ids it may have meant
        return report

    report = with_project_store(work)
    if as_json:
        out.print_json(data=report.to_dict())
        return
    _print_report(report)


def _whole(text: str) -> int | str:
    try:
        return int(text.strip())
    except ValueError:
        return text


def _print_report(report: SpendReport) -> None:
    who = f" of agent '{escape(report.agent)}'" if report.agent else ""
    if report.days == 1:
        out.print(f"[bold]Spend today{who}[/] [dim]· {report.until} (UTC)[/]")
    else:
        out.print(
            f"[bold]Spend{who} over {report.days} days[/] "
            f"[dim]· {report.since} … {report.until} (UTC)[/]"
        )
    if not report.total.requests:
        out.print("[dim]nothing spent[/]")
    else:
        _spend_table("agent", report.by_agent)
        _spend_table("model", report.by_model)
        if report.days > 1:
            _spend_table("day", report.by_day)
        unknown = report.total.unknown
        note = f" · {unknown} of unknown price (not counted; * beside a spend)" if unknown else ""
        out.print(
            f"[bold]total {usd(report.total.micros)}[/] "
            f"[dim]· {report.total.requests} request(s){note}[/]"
        )
        line = cache_line(report.cache)
        if line:
            out.print(line)
    if report.session is not None:
        out.print(f"this session: {usd(report.session.micros)}")
    out.print()
    lines = limit_lines(report.limits)
    out.print(
        "[bold]Limits[/] [dim]· today (UTC)[/]"
        if lines
        else "[dim]no limits set (\\[budgets] in agentrunner.toml)[/]"
    )
    for line in lines:
        out.print(line)


def _spend_table(key: str, parts: dict[str, Spend]) -> None:
    cached = any(spend.cache_read_tokens for spend in parts.values())  # else no column
    listing(
        "",
        [
            Column(key, whole=True),
            Column("requests", number=True),
            Column("tokens in", number=True, drop=2),
            *([Column("cached", number=True, drop=3)] if cached else []),
            Column("tokens out", number=True, drop=1),
            Column("spend", number=True),
        ],
        [
            [
                escape(name),
                str(spend.requests),
                f"{spend.input_tokens:,}",
                *([f"{spend.cache_read_tokens:,}"] if cached else []),
                f"{spend.output_tokens:,}",
                usd(spend.micros) + ("*" if spend.unknown else ""),
            ]
            for name, spend in parts.items()
        ],
    )


def cache_line(cache: CacheSpend) -> str | None:
    """The prompt cache in one line (Rich markup): tokens read and written with their cost,
    and what that saved against plain input; None when it was not used."""
    if not cache.used:
        return None

    def money(micros: int | None) -> str:
        return "price unknown" if micros is None else usd(micros)

    saved = cache.saved_micros
    verdict = (
        ""
        if saved is None
        else f" · saved {usd(saved)}"
        if saved >= 0
        else f" · cost {usd(-saved)} more"
    )
    unpriced = (
        f" · {cache.unpriced_tokens:,} of them in requests of unknown price (not counted)"
        if cache.unpriced_tokens
        else ""
    )
    against = " [dim]against plain input[/]" if verdict else ""
    return (
        f"prompt cache: {cache.read_tokens:,} tokens read ({money(cache.read_micros)}) · "
        f"{cache.write_tokens:,} written ({money(cache.write_micros)}){verdict}{against}"
        f"{unpriced}"
    )


def limit_lines(limits: list[LimitUse]) -> list[str]:
    """One line per limit (Rich markup): its value and, for a daily one, today's use of it."""
    colors = {"ok": "green", "warning": "yellow", "exceeded": "red"}
    lines = []
    for use in limits:
        if use.spent is None:
            lines.append(f"  {escape(use.label)}: {usd(use.limit)} [dim]a run[/]")
            continue
        color = colors[use.state]
        short = ""
        if use.state == "exceeded" and use.spent < use.limit:  # what is left buys nothing
            whose = "" if use.floor_agent == use.agent_id else f" of {use.floor_agent}"
            short = (
                f" [{color}]exhausted: {usd(use.limit - use.spent)} left, less than the "
                f"smallest request{escape(whose)} ({usd(use.floor or 0)})[/]"
            )
        lines.append(
            f"  {escape(use.label)}: {usd(use.spent)} of {usd(use.limit)} "
            f"[{color}]({use.percent:.0f}%)[/]{short}"
        )
    return lines


def usd(micros: int) -> str:
    return f"${micros / 1_000_000:.4f}"
