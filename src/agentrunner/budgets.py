"""The budgets that apply to a run (DESIGN decisions 5 and 9), named so an error can say which.

A run's own limit (the agent's ``max_budget_usd``, else ``[budgets] per_run_usd``) goes on its
cost tracker, where it also bounds the runs it starts through ``ask_agent``: their spend is
its spend. The day's budgets (``per_agent_daily_usd``, ``global_daily_usd``) are shared with
every other run on the store, in any process, so they are an ``ExternalBudget`` kept there:
each request holds its worst case before it is sent, and the hold goes with the cost rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from agentrunner.engine.budget import DAILY_BUDGET_HINT, Allowance

if TYPE_CHECKING:
    from agentrunner.agents.spec import AgentSpec
    from agentrunner.config import Budgets
    from agentrunner.store.drivers import Op
    from agentrunner.store.repositories import Costs

__all__ = [
    "GLOBAL_DAILY_LABEL",
    "DailyBudgets",
    "agent_daily_label",
    "binding_budget",
    "run_limit",
    "usd_to_micros",
]

GLOBAL_DAILY_LABEL = "the global daily budget"


def usd_to_micros(usd: float) -> int:
    return round(usd * 1_000_000)


def agent_daily_label(agent_id: str) -> str:
    return f"the daily budget of agent '{agent_id}'"


def run_limit(agent: AgentSpec, budgets: Budgets) -> tuple[int, str] | None:
    """The run's own limit in micro-dollars and its name, or None."""
    if agent.limits.max_budget_usd is not None:
        return usd_to_micros(agent.limits.max_budget_usd), f"max_budget_usd of agent '{agent.id}'"
    if budgets.per_run_usd is not None:
        return usd_to_micros(budgets.per_run_usd), "the per-run budget"
    return None


def binding_budget(agent: AgentSpec | None, budgets: Budgets) -> str | None:
    """The name of a budget every run of ``agent`` (None: of any agent) is under — its own
    limit, else its day's, else everyone's day — or None when no budget applies."""
    if agent is not None:
        own = run_limit(agent, budgets)
        if own is not None:
            return own[1]
    elif budgets.per_run_usd is not None:
        return "the per-run budget"
    if budgets.per_agent_daily_usd is not None:
        return agent_daily_label(agent.id) if agent is not None else "each agent's daily budget"
    if budgets.global_daily_usd is not None:
        return GLOBAL_DAILY_LABEL
    return None


class DailyBudgets:
    """Today's (UTC) budgets for one run: its agent's and everyone's, over the store.

    ``write`` queues a release with the run's next write — the one that records the request's
    cost — so spend and holds never both miss a request, even for a moment."""

    def __init__(
        self,
        costs: Costs,
        agent_id: str,
        run_id: str,
        budgets: Budgets,
        write: Callable[[list[Op]], None],
    ) -> None:
        self._costs = costs
        self._agent_id = agent_id
        self._run_id = run_id
        self._write = write
        self._agent_limit = _micros(budgets.per_agent_daily_usd)
        self._all_limit = _micros(budgets.global_daily_usd)

    @classmethod
    def applying(
        cls,
        costs: Costs,
        agent_id: str,
        run_id: str,
        budgets: Budgets,
        write: Callable[[list[Op]], None],
    ) -> DailyBudgets | None:
        if budgets.per_agent_daily_usd is None and budgets.global_daily_usd is None:
            return None
        return cls(costs, agent_id, run_id, budgets, write)

    async def allowance(self) -> Allowance | None:
        agent_spent, agent_held, all_spent, all_held = await self._costs.spent_and_held(
            self._agent_id
        )
        options = []
        if self._agent_limit is not None:
            label = agent_daily_label(self._agent_id)
            options.append(
                Allowance(label, self._agent_limit, agent_spent, agent_held, DAILY_BUDGET_HINT)
            )
        if self._all_limit is not None:
            label = GLOBAL_DAILY_LABEL
            options.append(
                Allowance(label, self._all_limit, all_spent, all_held, DAILY_BUDGET_HINT)
            )
        return min(options, key=lambda a: a.left, default=None)

    async def hold(self, micros: int) -> object | None:
        return await self._costs.hold(
            self._agent_id,
            self._run_id,
            micros,
            agent_limit=self._agent_limit,
            all_limit=self._all_limit,
        )

    def release(self, hold: object) -> None:
        assert isinstance(hold, tuple)
        self._write([self._costs.release_op(hold)])


def _micros(usd: float | None) -> int | None:
    return None if usd is None else usd_to_micros(usd)
