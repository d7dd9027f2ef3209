"""A project: its config and its agents, loaded together (the composition root's first half)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agentrunner.agents.registry import AgentRegistry
from agentrunner.config import Config, load_config

__all__ = ["Project", "load_project"]


@dataclass(frozen=True, slots=True)
class Project:
    config: Config
    agents: AgentRegistry


def load_project(start: Path | None = None, *, strict: bool = True) -> Project:
    """Load ``agentrunner.toml`` (walking up from ``start``) and the agents it points at.

    Raises ``invalid_specification`` / ``AgentFileErrors`` for bad files (strict), or keeps the
    problems on ``project.agents.problems`` (``strict=False``).
    """
    config = load_config(start)
    agents = AgentRegistry.load(
        config.agents_dir, default_model=config.default_model, strict=strict
    )
    return Project(config, agents)
