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

from agentrunner.budgets import usd_to_micros
from agentrunner.compose import Workspace
from agentrunner.errors import AgentRunnerError
from agentrunner.server.dashboard.money import money
from agentrunner.server.dashboard.templating import page, problem
from agentrunner.spend import MAX_DAYS, Spend, SpendReport, check_days, spend_report

__all__ = ["Bar", "DayChart", "chart", "router"]

router = APIRouter()
DEFAULT_DAYS = 7
_MIN_WIDTH = 0.6  # a bar of a spend above nothing stays visible


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar: its width and its limit's mark in percent of the chart's scale, and what it
    says in words (so that neither color nor length is needed to read it)."""

    kind: str  # "day", "agent" or "model"
    name: str
    micros: int
    width: float
    limit_at: float | None = None  # where the limit's mark is drawn; None: beyond the scale
    limit: int | None = None
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
            return said
        percent = self.micros * 100 / self.limit if self.limit else 100.0
        if self.over:
            return f"{said}: over the {money(self.limit)} daily limit ({percent:.0f}%)"
        return f"{said} ({percent:.0f}% of the {money(self.limit)} daily limit)"


@dataclass(slots=True)
class DayChart:
    day: str
    total: Spend
    bars: list[Bar] = field(default_factory=list)


@router.get("/ui/costs")
async def costs(request: Request, days: str = str(DEFAULT_DAYS)) -> Response:
    try:
        count = check_days(_whole(days), "days")
    except AgentRunnerError as exc:
        return problem(request, 422, str(exc.code), exc.message, exc.hint)
    return page(request, "costs.html", {"active": "costs", **await _report(request, count)})


async def _report(request: Request, days: int) -> dict[str, Any]:
    from agentrunner.company.session import active, spent
    from agentrunner.engine.pricing import PriceBook

    ws: Workspace = request.app.state.workspace
    store, config = ws.runner.store, ws.runner.config
    # As `agentrunner cost` asks for it, so that the figures are the same.
    report = await spend_report(store, config.budgets, days=days, prices=PriceBook(config.prices))
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
    """Each day of the report, newest first (those with nothing spent too): the day's total
    against the global daily limit, each agent's against the per-agent one, each model's."""
    scale = max(
        [spend.micros for spend in report.by_day.values()]
        + [spend.micros for spend in report.by_day_agent.values()]
        + [1]
    )

    def bar(kind: str, name: str, spend: Spend, limit: int | None) -> Bar:
        width = min(100.0, spend.micros * 100 / scale)
        if spend.micros and width < _MIN_WIDTH:
            width = _MIN_WIDTH
        limit_at = None if limit is None or limit > scale else limit * 100 / scale
        return Bar(kind, name, spend.micros, width, limit_at, limit, spend.unknown)

    days = []
    for day in _days(report.since, report.until):
        total = report.by_day.get(day, Spend())
        drawn = DayChart(day, total)
        if total.requests:
            drawn.bars.append(bar("day", "all agents", total, global_limit))
            for (when, agent_id), spend in sorted(report.by_day_agent.items()):
                if when == day:
                    drawn.bars.append(bar("agent", agent_id, spend, agent_limit))
            for (when, model), spend in sorted(report.by_day_model.items()):
                if when == day:
                    drawn.bars.append(bar("model", model, spend, None))
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
