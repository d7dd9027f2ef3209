from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# Rich reads the width once; a wide fake terminal keeps CLI assertions free of wrapping.
os.environ["COLUMNS"] = "200"
os.environ.pop("AGENTRUNNER_DEBUG", None)

WriteAgent = Callable[[str, str], Path]
_KEEP = {"AGENTRUNNER_TEST_DATABASE_URL", "AGENTRUNNER_REQUIRE_POSTGRES"}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("AGENTRUNNER_") and name not in _KEEP:
            monkeypatch.delenv(name)


@pytest.fixture
def project_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty project (agentrunner.toml + agents/) that is also the working directory."""
    (tmp_path / "agentrunner.toml").write_text('[project]\nagents_dir = "agents"\n')
    (tmp_path / "agents").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def write_agent(project_dir: Path) -> WriteAgent:
    def write(agent_id: str, text: str) -> Path:
        path = project_dir / "agents" / f"{agent_id}.md"
        path.write_text(text)
        return path

    return write


# -- the mock provider server (real HTTP on 127.0.0.1) ---------------------------------------

from agentrunner.testing import MockProvider, MockProviderServer  # noqa: E402


@pytest.fixture(scope="session")
def mock_server() -> Iterator[MockProviderServer]:
    server = MockProviderServer().start()
    yield server
    server.stop()


@pytest.fixture
def mock(mock_server: MockProviderServer) -> Iterator[MockProvider]:
    mock_server.mock.reset()
    yield mock_server.mock
    mock_server.mock.reset()
