"""``/ui/costs``: spend per agent and per model on each UTC day of the last ``days``, against the
``[budgets]`` limits — a chart drawn in HTML and CSS (each bar says its amount in words), and
a table of the same numbers. Every figure is ``spend.spend_report``'s, as ``agentrunner cost``
prints them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from agentrunner.errors import AgentRunnerError
from agentrunner.interfaces.server.dashboard.money import money
from agentrunner.interfaces.server.dashboard.templating import page, problem
from agentrunner.run.budgets import usd_to_micros
from agentrunner.run.spend import MAX_DAYS, Spend, SpendReport, check_days, spend_report
from agentrunner.workspace.workspace import Workspace

__all__ = ["Bar", "DayChart", "chart", "router"]

router = APIRouter()
DEFAULT_DAYS = 7
_MIN_WIDTH = 0.6  # a bar of a spend above nothing stays visible


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar: how much of its track it fills, in percent, and what it says in words (so that
    neither color nor length is needed to read it). A bar with a limit is drawn against it —
    the whole track is the limit, and past it the bar is full and marked over; one without
    (a model's) against the day's spend."""

    kind: str  # "day", "agent" or "model"
    name: str
    micros: int
    width: float
    limit: int | None = None
    day_micros: int = 0  # the day's spend, what a bar without a limit is a share of
    unknown: int = 0  # requests of unknown price (not counted)

    @property
    def over(self) -> bool:
        return self.limit is not None and self.micros >= self.limit

    @property
    def words(self) -> str:
        said = money(self.micros)
        if self.unknown:
            said += f" + {self.unknown} request{'s' if self.unknown != 1 else ''} of unknown price"
        if self.limit is None:
            share = self.micros * 100 / self.day_micros if self.day_micros else 0.0
            return f"{said} ({share:.0f}% of the day's spend)"
        percent = self.micros * 100 / self.limit if self.limit else 100.0
        limit = money(self.limit, trim=True)
        if self.over:
            return f"{said}: over the {limit} daily limit ({percent:.0f}%)"
        return f"{said} ({percent:.0f}% of the {limit} daily limit)"


@dataclass(slots=True)
class DayChart:
    """A day's part of the chart; ``first``: the oldest of a run of days with nothing spent
    that this part stands for (None: one day)."""

    day: str
    total: Spend
    bars: list[Bar] = field(default_factory=list)
    first: str | None = None


@router.get("/ui/costs")
async def costs(request: Request, days: str = str(DEFAULT_DAYS)) -> Response:
    try:
        count = check_days(_whole(days), "days")
    except AgentRunnerError as exc:
        back = (f"/ui/costs?days={DEFAULT_DAYS}", f"Back to the last {DEFAULT_DAYS} days' costs")
        return problem(
            request, 422, str(exc.code), exc.message, exc.hint, active="costs", back=back
        )
    return page(request, "costs.html", {"active": "costs", **await _report(request, count)})


async def _report(request: Request, days: int) -> dict[str, Any]:
    from agentrunner.engine.pricing import PriceBook
    from agentrunner.workspace.company.session import active, spent

    ws: Workspace = request.app.state.workspace
    runner = ws.runner
    store, config = runner.app.store, runner.app.config
    # As `agentrunner cost` asks for it, so that the figures are the same.
    report = await spend_report(
        store,
        config.budgets,
        days=days,
        agents=runner.app.agents.ids(),
        prices=PriceBook(config.prices),
        floors=await runner.smallest_requests(),
    )
    current = await active(store)
    session = await spent(store, current) if current is not None else None
    agent_limit = config.budgets.per_agent_daily_usd
    global_limit = config.budgets.global_daily_usd
    return {
        "money": money,
        "report": report,
        "days": days,
        "max_days": MAX_DAYS,
        "session": session,
        "chart": chart(
            report,
            agent_limit=None if agent_limit is None else usd_to_micros(agent_limit),
            global_limit=None if global_limit is None else usd_to_micros(global_limit),
        ),
        "day_rows": _day_rows(report),
    }


def _whole(text: str) -> int | str:
    try:
        return int(text.strip())
    except ValueError:
        return text


def chart(
    report: SpendReport, *, agent_limit: int | None, global_limit: int | None
) -> list[DayChart]:
    """Each day of the report, newest first (a run of days with nothing spent as one part):
    the day's total against the global daily limit, each agent's against the per-agent one,
    each model's as its share of the day's spend."""

    def bar(kind: str, name: str, spend: Spend, limit: int | None, day: int) -> Bar:
        scale = limit if limit is not None else day
        width = min(100.0, spend.micros * 100 / scale) if scale else (100.0 if limit == 0 else 0)
        if spend.micros and width < _MIN_WIDTH:
            width = _MIN_WIDTH
        return Bar(kind, name, spend.micros, width, limit, day, spend.unknown)

    days: list[DayChart] = []
    for day in _days(report.since, report.until):
        total = report.by_day.get(day, Spend())
        if not total.requests:
            if days and not days[-1].bars:  # the run of empty days goes on, back in time
                days[-1].first = day
            else:
                days.append(DayChart(day, total))
            continue
        drawn = DayChart(day, total)
        drawn.bars.append(bar("day", "all agents", total, global_limit, total.micros))
        for (when, agent_id), spend in sorted(report.by_day_agent.items()):
            if when == day:
                drawn.bars.append(bar("agent", agent_id, spend, agent_limit, total.micros))
        for (when, model), spend in sorted(report.by_day_model.items()):
            if when == day:
                drawn.bars.append(bar("model", model, spend, None, total.micros))
        days.append(drawn)
    return days


def _days(since: str, until: str) -> list[str]:
    first = datetime.strptime(since, "%Y-%m-%d")
    last = datetime.strptime(until, "%Y-%m-%d")
    count = (last - first).days + 1
    return [(last - timedelta(days=n)).strftime("%Y-%m-%d") for n in range(count)]


def _day_rows(report: SpendReport) -> list[tuple[str, list[tuple[str, str, Spend]]]]:
    """The table's body: each day that has spend, newest first, with a row per agent and per
    model."""
    out = []
    for day in sorted(report.by_day, reverse=True):
        rows = [
            (kind, name, spend)
            for kind, parts in (("agent", report.by_day_agent), ("model", report.by_day_model))
            for (when, name), spend in sorted(parts.items())
            if when == day
        ]
        out.append((day, rows))
    return out
