"""A run's tools, assembled in one place (seed 000 steps 6 and 7).

A run of an agent is given its agent's grant — for a child run, within its caller's —, the
tools its capabilities build for the run from what they may use (``CapabilityContext``), the
tools of the agent's MCP servers (a child's only those its caller was granted) and the tools its
caller injects (a channel's ``send_message``). The grant that results, its MCP servers' tools
included, bounds the runs it starts. What a run is known to have before it starts serves a
``tool_choice`` refused before anything is written; what a run of an agent is built with serves
the price of its smallest request (``budgets.request_floors``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.events import EventSink, ignore
from agentrunner.run.callbacks import AgentRunnerCallbacks
from agentrunner.run.capabilities.registry import CapabilityContext, Recall

if TYPE_CHECKING:
    from agentrunner.agents.registry import AgentRegistry
    from agentrunner.agents.spec import AgentSpec, Trust
    from agentrunner.config import Config
    from agentrunner.engine.tools import Tool
    from agentrunner.run.capabilities.mcp import McpServers
    from agentrunner.run.capabilities.registry import CapabilityRegistry
    from agentrunner.run.capabilities.scope import RuntimeFiles
    from agentrunner.store.store import Store

__all__ = ["Caller", "RunToolset", "Toolsets", "capability_context", "delegates"]


@dataclass(frozen=True, slots=True)
class Caller:
    """The run that starts a child run (``ask_agent``, ``delegate``): what bounds the child's
    tools and trust, and how deep the caller is."""

    grant: frozenset[str]
    trust: Trust
    depth: int


@dataclass(slots=True)
class RunToolset:
    """A run's tools and what they may use; ``grant`` (its MCP servers' tools included)
    bounds the runs it starts."""

    context: CapabilityContext
    tools: list[Tool]
    grant: frozenset[str]


def delegates(agents: AgentRegistry, agent_id: str) -> list[AgentSpec]:
    """Whom ``agent_id`` may hand work to (``delegate``): its enabled direct reports."""
    return [a for a in agents.direct_reports(agent_id) if a.enabled]


def capability_context(
    agent: AgentSpec,
    *,
    agents: AgentRegistry,
    store: Store,
    config: Config,
    runtime_files: RuntimeFiles,
    run_id: str = "",
    thread_id: str | None = None,
    caller: Caller | None = None,
    max_depth: int = 3,
    callbacks: AgentRunnerCallbacks | None = None,
    emit: EventSink = ignore,
    recall: Recall | None = None,
) -> CapabilityContext:
    """What a capability's tools may use in a run of ``agent``: its trust, no higher than its
    ``caller``'s; one level deeper than its caller; the team it may ask and the reports it may
    delegate to."""
    return CapabilityContext(
        agent=agent,
        thread_id=thread_id,
        run_id=run_id,
        store=store,
        project_root=config.root,
        state_dir=config.state_dir,
        trust=agent.narrow_trust(caller.trust if caller else None),
        runtime_files=runtime_files,
        callbacks=callbacks or AgentRunnerCallbacks(),
        emit=emit,
        depth=caller.depth + 1 if caller else 0,
        max_depth=max_depth,
        team=agents.others(agent.id),
        reports=delegates(agents, agent.id),
        recall=recall,
    )


class Toolsets:
    """Assembles runs' tools from ``capabilities`` and the agents' MCP servers (``mcp``),
    for the project of ``config``, ``agents`` and ``store``; delegations at most
    ``max_depth`` deep."""

    def __init__(
        self,
        capabilities: CapabilityRegistry,
        mcp: McpServers,
        runtime_files: RuntimeFiles,
        *,
        config: Config,
        agents: AgentRegistry,
        store: Store,
        max_depth: int = 3,
        recall: Recall | None = None,
    ) -> None:
        self.capabilities = capabilities
        self.recall = recall
        self.mcp = mcp
        self.runtime_files = runtime_files
        self._config = config
        self._agents = agents
        self._store = store
        self.max_depth = max_depth

    def grant(self, agent: AgentSpec, caller: Caller | None) -> frozenset[str]:
        """Every tool name a run of ``agent`` may use: its own grant, within its caller's (a
        child never gets more than its caller). Raises what the registry's grant raises."""
        grant = self.capabilities.grant(agent)
        return grant if caller is None else grant & caller.grant

    def known(
        self,
        agent: AgentSpec,
        caller: Caller | None,
        injected: Sequence[Tool],
        only: Sequence[str] | None = None,
    ) -> tuple[frozenset[str], frozenset[str]] | None:
        """What a run of ``agent`` is known to have before it starts: the tool names it is
        granted (``injected`` too; of them, those ``only`` names: a widening is refused here,
        ``narrowed``), and those it is offered by name (a tool every agent is granted is
        offered only where the run calls for it, so it is left out). None while that is not
        known: its MCP servers' tools are known once they run, and a grant the run refuses is
        the run's to say."""
        if agent.mcp_servers:
            return None
        try:
            grant = self.grant(agent, caller)
        except AgentRunnerError:
            return None
        grant = self.narrowed(agent, grant, only)
        names = frozenset(tool.name for tool in injected)
        return grant | names, (grant & set(self.capabilities.tool_names)) | names

    def narrowed(
        self, agent: AgentSpec, grant: frozenset[str], only: Sequence[str] | None
    ) -> frozenset[str]:
        """``grant`` narrowed to the tools a run's caller allowed (``only``; None: all of
        them); ``validation`` naming a tool it allowed that ``agent`` is not granted, since a
        caller narrows a run's tools, never widens them."""
        if only is None:
            return grant
        wider = [name for name in only if name not in grant]
        if wider:
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"'{wider[0]}' is not one of the tools of agent '{agent.id}': a run's tools can be "
                "narrowed, not widened",
                hint=f"Its tools: {', '.join(sorted(grant)) or 'none'}.",
                details={"field": "tools"},
            )
        return grant & frozenset(only)

    async def assemble(
        self,
        agent: AgentSpec,
        *,
        run_id: str,
        thread_id: str | None,
        caller: Caller | None,
        callbacks: AgentRunnerCallbacks,
        emit: EventSink,
        injected: Sequence[Tool],
        only: Sequence[str] | None = None,
    ) -> RunToolset:
        """The tools of run ``run_id`` of ``agent``: its capabilities', its MCP servers' (of
        them, those ``only`` names when a caller narrowed them: ``narrowed``), then
        ``injected``."""
        grant = self.grant(agent, caller)
        context = capability_context(
            agent,
            agents=self._agents,
            store=self._store,
            config=self._config,
            runtime_files=self.runtime_files,
            run_id=run_id,
            thread_id=thread_id,
            caller=caller,
            max_depth=self.max_depth,
            callbacks=callbacks,
            emit=emit,
            recall=self.recall,
        )
        tools = self.capabilities.resolve(context, grant)  # 6. capabilities → tools
        if agent.mcp_servers:  # … and the agent's MCP servers'
            served = await self.mcp.tools(
                agent, taken=[t.name for t in tools], limits=self._config.attachments
            )
            if caller is not None:
                served = [t for t in served if t.name in caller.grant]
            tools += served
            grant = grant | {t.name for t in served}
        if only is not None:  # a caller's narrowing: what the runs it starts are bounded by too
            grant = self.narrowed(agent, grant, only)
            tools = [t for t in tools if t.name in grant]
        tools += injected  # 7. run-time injections
        return RunToolset(context, tools, grant)
