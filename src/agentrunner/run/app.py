"""The application: what a project's runner, its workspace and every interface share — its
configuration, its agents, its store and its engine — owned in one place. ``AgentRunner``
builds it from what the composition root (``compose``) opened, and closes it with itself.

Code that needs one of them asks the application (``runner.app``, ``workspace.app``), not the
runner: the runner runs agents; it is not where the store is kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentrunner.agents.registry import AgentRegistry
    from agentrunner.config import Config
    from agentrunner.engine.engine import Engine
    from agentrunner.store.store import Store

__all__ = ["App", "AppParts"]


@dataclass(frozen=True, slots=True)
class App:
    config: Config
    agents: AgentRegistry
    store: Store
    engine: Engine

    async def close(self) -> None:
        """Close the engine's connections, then the store."""
        await self.engine.aclose()
        await self.store.close()


class AppParts:
    """The application's parts, for a class built over one (``app``) whose users ask it for
    them (``runner.store``: the public API of ``AgentRunner`` and ``TaskRunner``)."""

    app: App

    @property
    def config(self) -> Config:
        return self.app.config

    @property
    def agents(self) -> AgentRegistry:
        return self.app.agents

    @property
    def store(self) -> Store:
        return self.app.store

    @property
    def engine(self) -> Engine:
        return self.app.engine
