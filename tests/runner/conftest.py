from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from agentrunner import AgentRunner
from agentrunner.compose import open_runner as open_project_runner
from agentrunner.testing import MockProviderServer

CONFIG = """\
[project]
agents_dir = "agents"

[defaults]
model = "mockai:gpt-mock"
title_model = "test"

[providers.mockai]
kind = "openai"
base_url = "{openai}"
api_key_env = "MOCK_KEY"

[providers.mockant]
kind = "anthropic"
base_url = "{anthropic}"
api_key_env = "MOCK_KEY"

[prices."mockai:gpt-mock"]
input_per_mtok = 1.0
output_per_mtok = 2.0

[prices."mockant:claude-mock"]
input_per_mtok = 1.0
output_per_mtok = 2.0
{extra}
"""

AGENT = "---\n{front}\n---\n{body}\n"
Agent = Callable[..., Path]


@pytest.fixture
def project(
    tmp_path: Path, mock_server: MockProviderServer, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> Path:
    root = tmp_path / "proj"
    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text(
        CONFIG.format(openai=mock_server.openai_url, anthropic=mock_server.anthropic_url, extra="")
    )
    monkeypatch.setenv("MOCK_KEY", "sk-mock-key")
    monkeypatch.setenv("AGENTRUNNER_DATABASE_URL", store_url)
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def agent(project: Path) -> Agent:
    def write(agent_id: str, front: str = "", body: str = "You are a helpful agent.") -> Path:
        path = project / "agents" / f"{agent_id}.md"
        path.write_text(AGENT.format(front=front or "name: " + agent_id, body=body))
        return path

    return write


@pytest.fixture
async def open_runner(project: Path) -> AsyncIterator[Callable[[], object]]:
    opened: list[AgentRunner] = []

    async def make() -> AgentRunner:
        runner = await open_project_runner(project)
        opened.append(runner)
        return runner

    yield make  # type: ignore[misc]
    for runner in opened:
        await runner.close()
