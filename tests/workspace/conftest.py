from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentrunner.runtime.compose import open_workspace
from tests.runner.conftest import Agent, agent, open_runner, project

__all__ = ["agent", "open_runner", "project", "team"]


@pytest.fixture
def team(project: Path, agent: Agent) -> Path:
    """ann and bob, each on a model of its own (so each one's replies can be scripted), in
    #team with you; an agent's reply is not routed on (chain depth 0), so a post is one run per
    agent."""
    toml = project / "agentrunner.toml"
    config = toml.read_text().replace("[defaults]\n", "[defaults]\nchain_depth = 0\n")
    for model in ("ann-mock", "bob-mock"):
        config += f'\n[prices."mockai:{model}"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n'
    toml.write_text(config)
    agent("ann", "name: Ann\nmodel: mockai:ann-mock")
    agent("bob", "name: Bob\nmodel: mockai:bob-mock")

    async def make() -> None:
        ws = await open_workspace(project)
        await ws.channels.create("team", members=["ann", "bob", "you"])
        await ws.close()

    asyncio.run(make())
    return project
