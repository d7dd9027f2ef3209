"""The budgets that apply to a run (DESIGN decisions 5 and 9), named so an error can say which.

A run's own limit (the agent's ``max_budget_usd``, else ``[budgets] per_run_usd``) goes on its
cost tracker, where it also bounds the runs it starts through ``ask_agent``: their spend is
its spend. The day's budgets (``per_agent_daily_usd``, ``global_daily_usd``) are shared with
every other run on the store, in any process, so they are an ``ExternalBudget`` kept there:
each request holds its worst case before it is sent, and the hold goes with the cost rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from agentrunner.engine.budget import DAILY_BUDGET_HINT, MIN_REPLY_TOKENS, Allowance
from agentrunner.errors import AgentRunnerError

if TYPE_CHECKING:
    from agentrunner.agents.personas import Personas
    from agentrunner.agents.registry import AgentRegistry
    from agentrunner.agents.spec import AgentSpec
    from agentrunner.config import Budgets, Config
    from agentrunner.engine.models import ModelRegistry
    from agentrunner.run.capabilities.registry import CapabilityRegistry
    from agentrunner.store.costs import Costs
    from agentrunner.store.drivers import Op
    from agentrunner.store.store import Store

__all__ = [
    "GLOBAL_DAILY_LABEL",
    "DailyBudgets",
    "agent_daily_label",
    "binding_budget",
    "request_floors",
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
        if not budgets.daily:
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


async def request_floors(
    config: Config,
    agents: AgentRegistry,
    store: Store,
    *,
    only: Iterable[str] | None = None,
    personas: Personas | None = None,
    capabilities: CapabilityRegistry | None = None,
    models: ModelRegistry | None = None,
) -> dict[str, int]:
    """What the smallest request of each agent (of ``only``) costs, in micro-dollars: the
    least a daily limit must have left for the agent to make any request at all. Used where a
    daily limit is shown or checked (``spend``): a limit with less left is exhausted for it.

    The smallest request is the agent's system prompt as a run builds it (its body, with the
    input's defaults and its other placeholders empty; its tone, the memory its file seeds,
    the tool guidance — not what context providers add), the definitions of the tools its
    capabilities give it (not its MCP servers', known only once they run), a one-character
    message and a minimal reply, priced as a budget prices a request
    (``engine.budget.smallest_request_micros``) at the agent's first model's prices. So it is
    never more than a request of the agent needs. Agents that cannot run (disabled, a broken
    file, an unknown model) and models of unknown price are left out; free ones cost 0.
    Empty when no daily limit is set (nothing is imported or built then)."""
    if not config.budgets.daily:
        return {}
    from agentrunner.engine.budget import smallest_request_micros
    from agentrunner.engine.models import ModelRegistry
    from agentrunner.run.capabilities.builtin import builtin_capabilities
    from agentrunner.run.capabilities.scope import RuntimeFiles
    from agentrunner.run.capabilities.toolset import capability_context
    from agentrunner.run.prompt import PromptBuilder, PromptContext

    models = models or ModelRegistry.from_config(config)
    capabilities = capabilities or builtin_capabilities()
    prompt = PromptBuilder(personas=personas)  # no context providers: only what is authored
    # The tools are built to be measured, never run: no file scope is needed.
    unscoped = RuntimeFiles((), config.state_dir / "workspaces")
    floors: dict[str, int] = {}
    for agent_id in agents.ids() if only is None else dict.fromkeys(only):
        try:
            agent = agents.runnable(agent_id)
            model = models.resolve(agent.model_refs(config.default_model or "test")[0][1])
            rates = models.prices.rates(model.provider.name, model.name)
            if rates is None:
                continue
            system = await prompt.build(
                PromptContext(agent, input=_unfilled(agent)), memory=agent.memory
            )
            context = capability_context(
                agent, agents=agents, store=store, config=config, runtime_files=unscoped
            )
            tools = capabilities.resolve(context, capabilities.grant(agent))
        except AgentRunnerError:
            continue  # it cannot run: no request of it to price
        reply = min(MIN_REPLY_TOKENS, agent.limits.max_output_tokens or MIN_REPLY_TOKENS)
        floors[agent_id] = smallest_request_micros(
            rates, system, [t.definition for t in tools], agent.output_schema, reply
        )
    return floors


def _unfilled(agent: AgentSpec) -> dict[str, Any]:
    """An input giving each placeholder of the agent's body that has no default an empty
    value: the body as short as a run could render it."""
    defaults = agent.input_defaults()
    values: dict[str, Any] = {}
    for placeholder in agent.system.placeholders:
        if not placeholder.path or placeholder.path[0] in defaults:
            continue
        node = values
        for key in placeholder.path[:-1]:
            inner = node.get(key)
            node = node.setdefault(key, {}) if isinstance(inner, dict) or inner is None else {}
        node.setdefault(placeholder.path[-1], "")
    return values
