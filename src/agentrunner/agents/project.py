"""A project: its config and its agents, loaded together (the composition root's first half)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agentrunner.agents.personas import Personas
from agentrunner.agents.registry import AgentRegistry
from agentrunner.config import CONFIG_FILE, Config, load_config
from agentrunner.core.paths import display_path

__all__ = ["Project", "load_project", "read_agents"]


@dataclass(frozen=True, slots=True)
class Project:
    config: Config
    agents: AgentRegistry
    personas: Personas = field(default_factory=Personas)


def load_project(start: Path | None = None, *, strict: bool = True) -> Project:
    """Load ``agentrunner.toml`` (walking up from ``start``) and the agents it points at.

    Raises ``invalid_specification`` / ``AgentFileErrors`` for bad files (strict), or keeps the
    problems on ``project.agents.problems`` (``strict=False``). What the persona configuration
    names that does not exist is logged as a warning (``agents validate`` lists it).
    """
    config = load_config(start)
    agents, personas = read_agents(config, strict=strict)
    ids = {*agents.ids(), *agents.partial}
    personas.log_warnings(ids, display_path(config.path) if config.path else CONFIG_FILE)
    return Project(config, agents, personas)


def read_agents(config: Config, *, strict: bool = True) -> tuple[AgentRegistry, Personas]:
    """The agent files and personas ``config`` points at (file system work: off the event
    loop); ``strict`` as ``load_project``'s."""
    personas = Personas.load(
        config.root, preset=config.default_persona, overrides=config.persona_overrides
    )
    agents = AgentRegistry.load(
        config.agents_dir,
        default_model=config.default_model,
        strict=strict,
        personas=personas.names(),
        approval=config.approval,
        agent_models=config.agent_models,
    )
    return agents, personas
