"""What has been spent, against which limit: ``agentrunner cost``, ``status`` and the budget
check before a brief all read it here, so they always agree; and what one run has spent so far
(``run_spend``), which every place that shows a run or a job says.

Every figure comes from the store's cost rows (one per model request, integer micro-dollars,
each on the UTC day it was made): each day's totals of them per agent and model, added to in
the transaction that writes each row (``Costs.summary``), or a run's own (``Costs.of_run``);
a run that has ended has its own total, written as it ended from the same requests. The daily
limits are ``[budgets]`` of ``agentrunner.toml`` (DESIGN decision 5): ``per_agent_daily_usd``
for each agent and ``global_daily_usd`` for all; ``per_run_usd`` bounds
each run and is shown, not compared with a day's spend. Enforcement is the runtime's
(``budgets``, before every model request); this module only reports, and ``preflight`` refuses
to start work once a daily limit is used up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from agentrunner.engine.budget import DAILY_BUDGET_HINT
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.run.budgets import GLOBAL_DAILY_LABEL, agent_daily_label, usd_to_micros
from agentrunner.store.costs import today

if TYPE_CHECKING:
    from agentrunner.config import Budgets
    from agentrunner.engine.pricing import PriceBook
    from agentrunner.store.records import RunRecord
    from agentrunner.store.store import Store

__all__ = [
    "MAX_DAYS",
    "WARN_PERCENT",
    "CacheSpend",
    "LimitUse",
    "RunSpend",
    "Spend",
    "SpendReport",
    "check_days",
    "limit_uses",
    "preflight",
    "run_spend",
    "spend_report",
    "with_spend",
]

WARN_PERCENT = 80  # a daily limit this much used is warned about; used up, work is refused
MAX_DAYS = 366  # as far back as a report goes (the HTTP API's /costs allows as much)

LimitState = Literal["ok", "warning", "exceeded"]


@dataclass(slots=True)
class Spend:
    """Money and requests over some cost rows. ``unknown``: requests whose price was unknown
    (counted in ``requests``, not in ``micros``)."""

    micros: int = 0
    requests: int = 0
    input_tokens: int = 0  # prompt-cache reads and writes included
    output_tokens: int = 0
    unknown: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def add(self, row: Mapping[str, Any]) -> None:
        self.micros += int(row["cost_micros"])
        self.requests += int(row["requests"])
        self.input_tokens += int(row["input_tokens"] or 0)
        self.output_tokens += int(row["output_tokens"] or 0)
        self.unknown += int(row["unknown"] or 0)
        self.cache_read_tokens += int(row.get("cache_read_tokens") or 0)
        self.cache_write_tokens += int(row.get("cache_write_tokens") or 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cost_micros": self.micros,
            "cost_usd": self.micros / 1e6,
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "unknown": self.unknown,
        }


@dataclass(slots=True)
class CacheSpend:
    """The prompt cache over some requests: the input tokens read from it and written to it,
    what those cost, and what they saved against the same tokens sent as plain input
    (negative where writes cost more than reads saved). The money is None where a model's
    price is unknown; it is priced from the tokens (``PriceBook.cache_cost``), since a cost
    row keeps one total per request."""

    read_tokens: int = 0
    write_tokens: int = 0
    read_micros: int | None = 0
    write_micros: int | None = 0
    saved_micros: int | None = 0
    unpriced_tokens: int = 0  # of requests whose price was unknown when made: not priced now

    def add(
        self,
        model: str,
        read: int,
        written: int,
        requests: int,
        prices: PriceBook | None,
        *,
        priced: tuple[int, int] | None = None,
    ) -> None:
        """``read`` and ``written`` tokens of ``requests`` requests to ``model``
        (``provider:model``), priced by ``prices`` (None: the money is unknown). ``priced``:
        the part of them in requests that had a price when made (their cost rows'), the only
        part priced — a price added later does not make earlier requests cost."""
        self.read_tokens += read
        self.write_tokens += written
        if priced is not None:
            self.unpriced_tokens += read + written - sum(priced)
            read, written = priced
        if not read and not written:
            return
        provider, _, name = model.partition(":")
        cost = (
            None if prices is None else prices.cache_cost(provider, name, read, written, requests)
        )
        if cost is None or self.read_micros is None:
            self.read_micros = self.write_micros = self.saved_micros = None
            return
        self.read_micros += cost.read_micros
        self.write_micros = (self.write_micros or 0) + cost.write_micros
        self.saved_micros = (self.saved_micros or 0) + cost.saved_micros

    @property
    def used(self) -> bool:
        return bool(self.read_tokens or self.write_tokens)

    def to_dict(self) -> dict[str, Any]:
        return {
            "read_tokens": self.read_tokens,
            "write_tokens": self.write_tokens,
            "read_micros": self.read_micros,
            "write_micros": self.write_micros,
            "saved_micros": self.saved_micros,
            "unpriced_tokens": self.unpriced_tokens,
        }


@dataclass(frozen=True, slots=True)
class LimitUse:
    """One configured limit and today's spend against it (``spent`` is None for the per-run
    limit, which bounds each run, not a day). ``key`` is its name in ``[budgets]``.

    ``floor``: what the smallest request it must pay for costs (``budgets.request_floors``),
    of agent ``floor_agent``: its own agent's for a per-agent limit, the cheapest agent's for
    the global one. A limit with less than that left is exhausted, however little of it is
    spent: no request of that agent can be sent."""

    key: str
    label: str
    limit: int
    spent: int | None = None
    agent_id: str | None = None
    floor: int | None = None
    floor_agent: str | None = None

    @property
    def percent(self) -> float | None:
        if self.spent is None:
            return None
        return 100.0 if self.limit <= 0 else self.spent * 100 / self.limit

    @property
    def left(self) -> int | None:
        return None if self.spent is None else self.limit - self.spent

    def pays(self, request: int) -> bool:
        """Whether what is left today pays for a request costing ``request`` micro-dollars
        (a per-run limit always does: it is not a day's)."""
        left = self.left
        return left is None or (left > 0 and left >= request)

    @property
    def state(self) -> LimitState:
        if self.spent is None:
            return "ok"
        if not self.pays(self.floor or 0):
            return "exceeded"
        # In whole micro-dollars: 80 % is 80 %, not a float's 79.99999.
        return "warning" if self.spent * 100 >= self.limit * WARN_PERCENT else "ok"

    def message(self) -> str:
        """What a person is told about it: the limit named, with its value and the spend."""
        spent = _usd(self.spent or 0)
        limit = f"{self.label} of {_usd(self.limit)}"
        if self.state == "exceeded" and self.spent is not None and self.spent < self.limit:
            request = (
                "its smallest request"
                if self.floor_agent == self.agent_id
                else f"the smallest request of agent '{self.floor_agent}'"
            )
            return (
                f"{limit} cannot pay for {request} ({_usd(self.floor or 0)}): "
                f"{_usd(self.left or 0)} left, {spent} spent today (UTC)"
            )
        if self.state == "exceeded":
            return f"{limit} is used up: {spent} spent today (UTC)"
        return f"{limit} is {self.percent:.0f}% used: {spent} spent today (UTC)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "agent_id": self.agent_id,
            "limit_micros": self.limit,
            "limit_usd": self.limit / 1e6,
            "spent_micros": self.spent,
            "left_micros": self.left,
            "percent": None if self.percent is None else round(self.percent, 1),
            "state": self.state,
            "smallest_request_micros": self.floor,
            "smallest_request_agent": self.floor_agent,
        }


@dataclass(slots=True)
class SpendReport:
    """Spend over ``days`` UTC days ending today (``since`` … ``until``), of one ``agent`` or
    all, split per agent, per model and per day; and today's spend against each limit."""

    since: str
    until: str
    days: int
    agent: str | None
    total: Spend = field(default_factory=Spend)
    by_agent: dict[str, Spend] = field(default_factory=dict)
    by_model: dict[str, Spend] = field(default_factory=dict)
    by_day: dict[str, Spend] = field(default_factory=dict)
    # Each day's split, (day, agent) and (day, model): what a chart of the days draws.
    by_day_agent: dict[tuple[str, str], Spend] = field(default_factory=dict)
    by_day_model: dict[tuple[str, str], Spend] = field(default_factory=dict)
    today: dict[str, Spend] = field(default_factory=dict)  # today's, per agent
    limits: list[LimitUse] = field(default_factory=list)
    # The active company session's spend, where one is open: filled by the session layer
    # (``company``), which knows the session's runs; None otherwise.
    session: Spend | None = None
    # The prompt cache over these days (priced when ``spend_report`` was given the prices).
    cache: CacheSpend = field(default_factory=CacheSpend)

    @property
    def warnings(self) -> list[LimitUse]:
        return [use for use in self.limits if use.state != "ok"]

    def to_dict(self) -> dict[str, Any]:
        def each(key: str, parts: dict[str, Spend]) -> list[dict[str, Any]]:
            return [{key: name, **spend.to_dict()} for name, spend in parts.items()]

        return {
            "since": self.since,
            "until": self.until,
            "days": self.days,
            "agent": self.agent,
            "total": self.total.to_dict(),
            "by_agent": each("agent_id", self.by_agent),
            "by_model": each("model", self.by_model),
            "by_day": each("day", self.by_day),
            "limits": [use.to_dict() for use in self.limits],
            "session": None if self.session is None else self.session.to_dict(),
            "cache": self.cache.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class RunSpend:
    """What a run and the runs it started (its delegations, at any depth) have spent:
    ``micros`` (requests of unknown price count as nothing, and make ``known`` false);
    ``settled``: the run has ended, and these are its own figures. Where its cost rows were
    read (``split``, or while it runs): their ``tokens`` in and out, and what they cost per
    agent and per model where asked for."""

    micros: int
    known: bool
    settled: bool
    tokens: int = 0
    by_agent: dict[str, int] = field(default_factory=dict)
    by_model: dict[str, int] = field(default_factory=dict)


async def run_spend(store: Store, run: RunRecord, *, split: bool = False) -> RunSpend:
    """What ``run`` and its delegations have spent: the cost rows each of them made until it
    ended — a request still waiting on its model has none yet; a title or journal entry paid
    for once a run has ended is in ``agentrunner cost``, not in the run's spend. Once ``run``
    has ended this is its own total (written as it ended, from the same requests), read from
    its record unless ``split``: per agent and per model too. Runs, jobs, the API and the
    dashboard all show this, so a running run never reads $0 and its figure does not jump as
    it ends."""
    if run.settled and not split:
        return RunSpend(run.cost_micros, run.cost_known, True)
    micros = tokens = unknown = 0
    by_agent: dict[str, int] = {}
    by_model: dict[str, int] = {}
    for row in await store.costs.of_run(run):
        cost = int(row["cost_micros"])
        micros += cost
        tokens += int(row["tokens"] or 0)
        unknown += int(row["unknown"] or 0)
        if split:
            by_agent[row["agent_id"]] = by_agent.get(row["agent_id"], 0) + cost
            by_model[row["model"]] = by_model.get(row["model"], 0) + cost
    if run.settled:
        micros, known = run.cost_micros, run.cost_known
    else:
        known = not unknown
    return RunSpend(micros, known, run.settled, tokens, by_agent, by_model)


async def with_spend(store: Store, run: RunRecord) -> RunRecord:
    """``run`` as it is shown (``runs list``, ``runs show``, ``GET /runs/{id}``, jobs, the
    dashboard): its cost what it has spent so far (``run_spend``). A run that has ended is
    returned as it is."""
    if run.settled:
        return run
    spent = await run_spend(store, run)
    return replace(run, cost_micros=spent.micros, cost_known=spent.known)


async def spend_report(
    store: Store,
    budgets: Budgets,
    *,
    days: int = 1,
    agent: str | None = None,
    agents: Iterable[str] = (),
    now: float | None = None,
    prices: PriceBook | None = None,
    floors: Mapping[str, int] | None = None,
) -> SpendReport:
    """Spend over the last ``days`` UTC days (1: today), of ``agent`` or everyone, and today's
    spend against the limits: the global daily one, and the per-agent daily one for ``agent``,
    or else for each of ``agents`` and each agent that spent today. With ``prices`` (the
    project's), the prompt cache's tokens are priced too (``cache``); with ``floors`` (each
    agent's smallest request, ``budgets.request_floors``) a limit that cannot pay for one is
    exhausted (``LimitUse``).

    ``days`` outside 1 … ``MAX_DAYS`` is a ``validation`` error."""
    check_days(days)
    day = today(now)  # the day the cost rows are stamped with
    since = (datetime.strptime(day, "%Y-%m-%d") - timedelta(days=days - 1)).strftime("%Y-%m-%d")
    report = SpendReport(since=since, until=day, days=days, agent=agent)
    for row in await store.costs.summary(since=since, agent_id=agent):
        if row["day"] > day:  # written by a clock ahead of this one: not in these days
            continue
        report.total.add(row)
        for key, parts in (
            (row["agent_id"], report.by_agent),
            (row["model"], report.by_model),
            (row["day"], report.by_day),
        ):
            parts.setdefault(key, Spend()).add(row)
        for pair, split in (
            ((row["day"], row["agent_id"]), report.by_day_agent),
            ((row["day"], row["model"]), report.by_day_model),
        ):
            split.setdefault(pair, Spend()).add(row)
        if row["day"] == day:
            report.today.setdefault(row["agent_id"], Spend()).add(row)
        report.cache.add(
            row["model"],
            int(row["cache_read_tokens"] or 0),
            int(row["cache_write_tokens"] or 0),
            int(row["requests"]) - int(row["unknown"] or 0),
            prices,
            priced=(
                int(row["priced_cache_read_tokens"] or 0),
                int(row["priced_cache_write_tokens"] or 0),
            ),
        )
    everyone_today = report.today if agent is None else await _today_by_agent(store, day)
    watched = [agent] if agent is not None else [*agents, *report.today]
    report.limits = limit_uses(budgets, everyone_today, watched, floors or {})
    return report


def check_days(days: object, name: str = "days") -> int:
    """``days`` as a report's number of days; else a ``validation`` error naming ``name``."""
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"{name} must be a whole number from 1 to {MAX_DAYS}, got {days!r}",
            hint=f"{name} 1 is today (UTC); {name} 7 is today and the six days before.",
        )
    return days


def limit_uses(
    budgets: Budgets,
    today: Mapping[str, Spend],
    agents: Iterable[str],
    floors: Mapping[str, int] | None = None,
) -> list[LimitUse]:
    """Each configured limit with today's spend against it (``today``: every agent's spend
    today): per run (no spend), global daily, then per agent daily for each of ``agents``,
    each daily one with the smallest request it must pay for (of ``floors``: the agent's own,
    or for the global limit the cheapest of ``agents``')."""
    floors = floors or {}
    watched = list(dict.fromkeys(agents))  # each once, in order
    uses: list[LimitUse] = []
    if budgets.per_run_usd is not None:
        uses.append(
            LimitUse("per_run_usd", "the per-run budget", usd_to_micros(budgets.per_run_usd))
        )
    if budgets.global_daily_usd is not None:
        cheapest = min((a for a in watched if a in floors), key=floors.__getitem__, default=None)
        uses.append(
            LimitUse(
                "global_daily_usd",
                GLOBAL_DAILY_LABEL,
                usd_to_micros(budgets.global_daily_usd),
                sum(spend.micros for spend in today.values()),
                floor=None if cheapest is None else floors[cheapest],
                floor_agent=cheapest,
            )
        )
    if budgets.per_agent_daily_usd is not None:
        limit = usd_to_micros(budgets.per_agent_daily_usd)
        for agent_id in watched:
            spent = today[agent_id].micros if agent_id in today else 0
            uses.append(
                LimitUse(
                    "per_agent_daily_usd",
                    agent_daily_label(agent_id),
                    limit,
                    spent,
                    agent_id,
                    floor=floors.get(agent_id),
                    floor_agent=agent_id if agent_id in floors else None,
                )
            )
    return uses


async def preflight(
    store: Store,
    budgets: Budgets,
    agent_id: str,
    *,
    team: Iterable[str] = (),
    now: float | None = None,
    floors: Mapping[str, int] | None = None,
) -> list[LimitUse]:
    """The budget check before work for ``agent_id`` starts (a brief to the company's root).

    Raises ``budget_exceeded`` naming the limit and its value when what is left today of the
    global daily limit or of ``agent_id``'s own cannot pay for ``agent_id``'s smallest request
    (``floors``, from ``budgets.request_floors``; without its figure, when nothing is left).
    Returns the warnings: the limits at ``WARN_PERCENT`` % or more or exhausted, ``team``'s
    own daily limits included (an agent of the team whose limit is exhausted cannot take
    delegated work; the brief can still go ahead without it). Read ``message()`` of each."""
    floors = floors or {}
    report = await spend_report(store, budgets, agents=[agent_id, *team], now=now, floors=floors)
    for use in report.limits:
        if use.agent_id not in (None, agent_id) or use.spent is None:
            continue
        if use.agent_id is None and agent_id in floors:  # the global: for this agent's request
            use = replace(use, floor=floors[agent_id], floor_agent=agent_id)
        if use.state == "exceeded":
            raise AgentRunnerError(
                ErrorCode.BUDGET_EXCEEDED,
                f"{use.message()}; nothing was started",
                hint=f"{DAILY_BUDGET_HINT} See today's spend with `agentrunner cost`.",
            )
    return report.warnings


async def _today_by_agent(store: Store, day: str) -> dict[str, Spend]:
    everyone: dict[str, Spend] = {}
    for row in await store.costs.summary(since=day):
        if row["day"] == day:
            everyone.setdefault(row["agent_id"], Spend()).add(row)
    return everyone


def _usd(micros: int) -> str:
    return f"${micros / 1_000_000:.4f}"
