"""An agent's model in agentrunner.toml (seed 002, issue 46 item 7): ``[agents.NAME] model`` is
the agent's model when its file names none — over ``[defaults] model`` — and the file's own
``model:`` wins (``agents validate`` says so); a name that is no agent's, a misspelt key or a
value that is no table is an error at its line. Against the mock provider."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentRunner
from agentrunner.errors import AgentRunnerError
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.runner.test_cli_run import cli


def _toml(project: Path, text: str) -> None:
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write("\n" + text)


async def test_an_agent_s_model_from_the_project_file_and_the_file_s_own_wins(
    agent: Agent, project: Path, open_runner: Any, mock: MockProvider
) -> None:
    agent("clerk", "name: clerk")  # no model: [agents.clerk]'s
    agent("scribe", "name: scribe\nmodel: mockant:claude-mock")  # its own wins
    agent("plain", "name: plain")  # neither: [defaults] model, mockai:gpt-mock
    _toml(
        project,
        '[agents.clerk]\nmodel = "mockai:gpt-other"\n\n[agents.scribe]\nmodel = "mockai:gpt-x"\n',
    )
    mock.queue(Reply(text="clerk here"), model="gpt-other")
    mock.queue(Reply(text="scribe here"), model="claude-mock")
    mock.queue(Reply(text="plain here"), model="gpt-mock")
    runner: AgentRunner = await open_runner()
    answered = {
        name: (await runner.run_agent(name, f"t-{name}", "hi")).model
        for name in ("clerk", "scribe", "plain")
    }
    assert answered == {
        "clerk": "mockai:gpt-other",
        "scribe": "mockant:claude-mock",
        "plain": "mockai:gpt-mock",
    }


def test_validate_names_an_unknown_agent_and_the_setting_a_file_overrides(
    agent: Agent, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("clerk", "name: clerk\nmodel: mockai:gpt-mock")
    _toml(project, '[agents.clerk]\nmodel = "mockai:gpt-other"\n\n[agents.clerc]\nmodel = "test"\n')
    code, _, err = cli(capsys, "agents", "validate")
    lines = (project / "agentrunner.toml").read_text().splitlines()
    at = lines.index("[agents.clerc]") + 2  # its model line
    assert code == 1
    assert f"agentrunner.toml:{at}: " in err and "[agents.clerc] names no agent" in err
    assert "did you mean 'clerk'?" in err
    assert "[agents.clerk] model = 'mockai:gpt-other' is not used" in err


def test_a_wrong_project_model_is_said_at_its_toml_line(
    agent: Agent, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("clerk", "name: clerk")  # its file names no model: the project's is the culprit
    _toml(project, '[agents.clerk]\nmodel = "nope:foo"\n')
    code, _, err = cli(capsys, "agents", "validate")
    lines = (project / "agentrunner.toml").read_text().splitlines()
    at = lines.index('model = "nope:foo"') + 1
    assert code == 1 and f"agentrunner.toml:{at}: model_not_found" in err, err
    assert "agents/clerk.md" not in err


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[agents.clerk]\nmodle = "test"\n', "unknown key 'agents.clerk.modle'"),
        ('[agents]\nclerk = "test"\n', "[agents.clerk] must be a table"),
        ("[agents.clerk]\nmodel = 3\n", "agents.clerk.model"),
    ],
)
def test_a_wrong_agents_table_is_an_error_at_its_line(
    agent: Agent, project: Path, capsys: pytest.CaptureFixture[str], text: str, said: str
) -> None:
    agent("clerk", "name: clerk")
    _toml(project, text)
    code, _, err = cli(capsys, "agents", "validate")
    assert code == 1 and said in err and "agentrunner.toml:" in err and "Traceback" not in err


async def test_a_version_of_a_file_without_a_model_takes_the_project_s(
    agent: Agent, project: Path, open_runner: Any
) -> None:
    agent("clerk", "name: clerk")
    _toml(project, '[agents.clerk]\nmodel = "mockai:gpt-other"\n')
    runner: AgentRunner = await open_runner()
    version = runner.agents.version("clerk", "---\nname: clerk\n---\nOld.\n", "clerk.md@v1")
    assert version.model == "mockai:gpt-other"
    with pytest.raises(AgentRunnerError):
        runner.agents.get("clerc")
