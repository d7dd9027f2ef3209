"""The composition root: one function that builds a runner from a project's configuration."""

from __future__ import annotations

from pathlib import Path

from agentrunner.capabilities.builtin import builtin_capabilities
from agentrunner.effects import PostRunEffects
from agentrunner.engine.engine import Engine
from agentrunner.project import load_project
from agentrunner.prompt import PromptBuilder
from agentrunner.runner import AgentRunner
from agentrunner.store.store import open_store

__all__ = ["open_runner"]


async def open_runner(start: Path | None = None, *, database_url: str | None = None) -> AgentRunner:
    """Load the project at (or above) ``start`` and open its store (migrating it) and engine."""
    project = load_project(start)
    config = project.config
    store = await open_store(database_url or config.resolved_database_url)
    engine = Engine.from_config(config)
    return AgentRunner(
        config=config,
        agents=project.agents,
        store=store,
        engine=engine,
        prompt=PromptBuilder(default_persona=config.default_persona),
        capabilities=builtin_capabilities(),
        effects=PostRunEffects(engine, store, title_model=config.title_model),
    )
