"""Capabilities → tools (seed 000's capability registry and run-time injections).

A capability is a named bundle of tools, built for one run from a ``CapabilityContext``. An
agent gets the tools of its ``capabilities`` plus the tools it names in ``tools`` (looked up in
every capability's bundle). A run may be granted fewer tools — never more: a child run started
by ``ask_agent`` or ``delegate`` gets at most the intersection of its own grant and its
caller's, and the lower of its own trust and its caller's (``CapabilityContext.trust``).

An *implicit* capability is in every agent's grant and named in no file: its resolver decides
from the run what to offer (``delegate``, offered where the org chart gives the agent reports).
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from agentrunner.core.paths import display_path
from agentrunner.engine.tools import Tool
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.events import Emit, EventSink, ignore
from agentrunner.run.callbacks import AgentRunnerCallbacks

if TYPE_CHECKING:
    from agentrunner.agents.spec import AgentSpec, Trust
    from agentrunner.run.capabilities.scope import RuntimeFiles
    from agentrunner.store.embeddings import Recalled
    from agentrunner.store.store import Store

__all__ = ["AskAgent", "CapabilityContext", "CapabilityRegistry", "Recall", "Resolver"]

# Runs ``agent`` on ``message`` as a child of the calling run; returns its answer.
AskAgent = Callable[[str, str], Awaitable[str]]
# An agent's own earlier messages nearest a query (agent, paying run, query, how many).
Recall = Callable[[str, str, str, int], Awaitable["list[Recalled]"]]


@dataclass(slots=True)
class CapabilityContext:
    """What a capability's tools may use during one run."""

    agent: AgentSpec
    thread_id: str | None  # None: a task, which runs on no thread
    run_id: str
    store: Store
    project_root: Path
    state_dir: Path
    # The run's trust: the agent's own, lowered to its caller's for a delegated run.
    trust: Trust
    runtime_files: RuntimeFiles  # outside every file scope below full trust
    callbacks: AgentRunnerCallbacks = field(default_factory=AgentRunnerCallbacks)
    # The run's event sink: what a tool produces for people (a notification, a file, a shared
    # note) is an event, stored with the run and carried to every interface.
    emit: EventSink = ignore
    depth: int = 0
    max_depth: int = 3
    ask_agent: AskAgent | None = None  # also what ``delegate`` runs its report with
    team: Sequence[AgentSpec] = ()  # whom ask_agent may ask: the enabled agents but this one
    reports: Sequence[AgentSpec] = ()  # whom delegate may hand work to: enabled direct reports
    recall: Recall | None = None  # None: no [embeddings] model, nothing to recall from
    _loop: asyncio.AbstractEventLoop | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        with contextlib.suppress(RuntimeError):  # built outside a loop: tell() runs inline
            self._loop = asyncio.get_running_loop()

    @property
    def tell(self) -> Emit:
        """Emit an event for the people following this run. From a sync tool's worker thread
        the event is handed to the run's loop, which owns the run log; it is emitted there
        before the tool's result, which reaches the loop after it."""
        loop = self._loop
        if loop is None or _running(loop):
            return self.emit
        emit = self.emit

        def handed(kind: Any, data: Any) -> None:
            loop.call_soon_threadsafe(emit, kind, data)

        return cast(Emit, handed)


def _running(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether this thread is running ``loop``."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


Resolver = Callable[[CapabilityContext], Sequence[Tool]]


class CapabilityRegistry:
    def __init__(self) -> None:
        self._resolvers: dict[str, Resolver] = {}
        self._provides: dict[str, str] = {}
        # Tool names in every grant, named in no file: what granting them depends on, said
        # to a file that names one ("{agent}" stands for its id).
        self._implicit: dict[str, str] = {}
        # Each agent's grant, with the spec it was worked out for (a spec is immutable; an
        # edited file is a new one): a run asks for its agent's every time.
        self._grants: dict[str, tuple[AgentSpec, frozenset[str]]] = {}

    def register(
        self,
        name: str,
        resolver: Resolver,
        tool_names: Sequence[str],
        *,
        implicit: str | None = None,
    ) -> None:
        """Add a capability; ``tool_names`` are the tools its resolver builds. An ``implicit``
        one is granted to every agent and may not be named in a file (``implicit`` says what
        grants it instead, the hint for a file that names it): its resolver offers its tools
        only where the run calls for them."""
        if name in self._resolvers:
            raise AgentRunnerError(
                ErrorCode.VALIDATION, f"capability '{name}' is already registered"
            )
        for tool_name in tool_names:
            if tool_name in self._provides:
                raise AgentRunnerError(
                    ErrorCode.VALIDATION,
                    f"tool '{tool_name}' is already provided by capability "
                    f"'{self._provides[tool_name]}'",
                )
        self._resolvers[name] = resolver
        self._provides.update(dict.fromkeys(tool_names, name))
        self._grants.clear()
        if implicit is not None:
            self._implicit.update(dict.fromkeys(tool_names, implicit))

    @property
    def tool_names(self) -> list[str]:
        """The tools a file may name (``tools:``)."""
        return sorted(t for t in self._provides if t not in self._implicit)

    @property
    def every_tool_name(self) -> list[str]:
        """Every tool the capabilities build, those granted to every agent included."""
        return sorted(self._provides)

    def grant(self, agent: AgentSpec) -> frozenset[str]:
        """Every tool name the agent may use. Raises the first of ``problems(agent)``."""
        known = self._grants.get(agent.id)
        if known is not None and known[0] is agent:
            return known[1]
        problems = self.problems(agent)
        if problems:
            raise problems[0]
        names = set(agent.tools) | set(self._implicit)
        for capability in agent.capabilities:
            names.update(t for t, c in self._provides.items() if c == capability)
        grant = frozenset(names)
        self._grants[agent.id] = (agent, grant)
        return grant

    def problems(self, agent: AgentSpec) -> list[AgentRunnerError]:
        """Every capability and tool the agent names that no capability provides, as
        ``invalid_specification`` errors at their file and line (what ``agents validate``
        lists, and what a run refuses)."""
        found = []
        for key, kind, names, known in (
            ("capabilities", "capability", agent.capabilities, sorted(self._resolvers)),
            ("tools", "tool", agent.tools, self.tool_names),
        ):
            for name in names:
                if name in known:
                    continue
                if name in self._implicit:
                    found.append(self._named_implicit(agent, name))
                    continue
                near = difflib.get_close_matches(name, known, n=1)
                found.append(
                    AgentRunnerError(
                        ErrorCode.INVALID_SPECIFICATION,
                        f"unknown {kind} '{name}'"
                        + (f" (did you mean '{near[0]}'?)" if near else ""),
                        hint=f"Known {key}: {', '.join(known)}.",
                        # only for a problem: display_path reads the working directory, and
                        # every run's grant comes through here
                        file=display_path(agent.path) if agent.path else None,
                        line=agent.line_of(key),
                    )
                )
        return found

    def _named_implicit(self, agent: AgentSpec, name: str) -> AgentRunnerError:
        return AgentRunnerError(
            ErrorCode.INVALID_SPECIFICATION,
            f"tool '{name}' cannot be granted in an agent file",
            hint=f"Remove it from `tools:`. {self._implicit[name].format(agent=agent.id)}",
            file=display_path(agent.path) if agent.path else None,
            line=agent.line_of("tools"),
        )

    def resolve(self, ctx: CapabilityContext, grant: frozenset[str]) -> list[Tool]:
        """Build the granted tools for one run, in a stable order."""
        needed = {self._provides[name] for name in grant}
        tools: list[Tool] = []
        for capability in sorted(needed):
            tools.extend(t for t in self._resolvers[capability](ctx) if t.name in grant)
        return tools
