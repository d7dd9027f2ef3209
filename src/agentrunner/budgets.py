"""Budget arithmetic (DESIGN decision 5): the tightest of the limits that apply to one run."""

from __future__ import annotations

from dataclasses import dataclass

from agentrunner.agents.spec import AgentSpec
from agentrunner.config import Budgets

__all__ = ["RunBudget", "usd_to_micros"]


def usd_to_micros(usd: float) -> int:
    return round(usd * 1_000_000)


@dataclass(frozen=True, slots=True)
class RunBudget:
    micros: int | None
    label: str

    @classmethod
    def tightest(
        cls,
        agent: AgentSpec,
        budgets: Budgets,
        *,
        agent_spent_today: int = 0,
        all_spent_today: int = 0,
        parent_left: int | None = None,
    ) -> RunBudget:
        """The smallest applicable limit, named so an error can say which one it was."""
        options: list[tuple[int, str]] = []
        if agent.limits.max_budget_usd is not None:
            options.append(
                (usd_to_micros(agent.limits.max_budget_usd), f"agent '{agent.id}''s max_budget_usd")
            )
        elif budgets.per_run_usd is not None:
            options.append((usd_to_micros(budgets.per_run_usd), "the per-run budget"))
        if budgets.per_agent_daily_usd is not None:
            left = usd_to_micros(budgets.per_agent_daily_usd) - agent_spent_today
            options.append((max(left, 0), f"what is left of agent '{agent.id}''s daily budget"))
        if budgets.global_daily_usd is not None:
            left = usd_to_micros(budgets.global_daily_usd) - all_spent_today
            options.append((max(left, 0), "what is left of the global daily budget"))
        if parent_left is not None:
            options.append((max(parent_left, 0), "what is left of the calling run's budget"))
        if not options:
            return cls(None, "no budget")
        micros, label = min(options, key=lambda o: o[0])
        return cls(micros, label)
