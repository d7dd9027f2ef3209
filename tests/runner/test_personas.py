"""Personas (seed 002): built-in presets and the project's `personas/NAME.md`, chosen by
`[persona] preset` with per-agent overrides; what names nothing is a warning, never silent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentrunner.agents.spec import PERSONA_PRESETS
from agentrunner.errors import AgentRunnerError
from agentrunner.runtime.compose import open_runner
from agentrunner.testing import MockProvider, MockProviderServer, Reply
from tests.runner.conftest import CONFIG

AGENT = "---\nname: {id}\n{front}---\nYou are {id}.\n"


@pytest.fixture
def root(tmp_path: Path, mock_server: MockProviderServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    (root / "agents").mkdir(parents=True)
    monkeypatch.setenv("MOCK_KEY", "sk-mock-key")
    monkeypatch.chdir(root)
    return root


def configure(root: Path, mock_server: MockProviderServer, extra: str, **agents: str) -> None:
    (root / "agentrunner.toml").write_text(
        CONFIG.format(
            openai=mock_server.openai_url, anthropic=mock_server.anthropic_url, extra=extra
        )
    )
    for agent_id, front in agents.items():
        (root / "agents" / f"{agent_id}.md").write_text(AGENT.format(id=agent_id, front=front))


async def system_prompt(root: Path, mock: MockProvider, agent_id: str) -> str:
    """The system message the provider received for one run of ``agent_id``."""
    mock.queue(Reply(text="ok"))
    runner = await open_runner(root)
    try:
        await runner.run_agent(agent_id, f"t-{agent_id}-{len(mock.requests)}", "hello")
    finally:
        await runner.close()
    message = mock.requests[-1].body["messages"][0]
    assert message["role"] == "system"
    return str(message["content"])


async def test_the_project_preset_decides_the_tone_sent(
    root: Path, mock_server: MockProviderServer, mock: MockProvider
) -> None:
    configure(root, mock_server, '[persona]\npreset = "friendly"\n', ceo="")
    friendly = await system_prompt(root, mock, "ceo")
    configure(root, mock_server, '[persona]\npreset = "academic"\n')
    academic = await system_prompt(root, mock, "ceo")
    assert PERSONA_PRESETS["friendly"] in friendly and PERSONA_PRESETS["academic"] not in friendly
    assert PERSONA_PRESETS["academic"] in academic and PERSONA_PRESETS["friendly"] not in academic
    assert friendly.startswith("You are ceo.") and academic.startswith("You are ceo.")


async def test_a_project_persona_file_and_overrides(
    root: Path, mock_server: MockProviderServer, mock: MockProvider
) -> None:
    (root / "personas").mkdir()
    (root / "personas" / "pirate.md").write_text("Speak like a pirate, matey.\n")
    (root / "personas" / "concise.md").write_text("Our own concise: one line.\n")
    configure(
        root,
        mock_server,
        '[persona]\npreset = "pirate"\n[persona.overrides]\ncto = "concise"\n',
        ceo="",
        cto="persona: friendly\n",  # the config's override wins over the file's own
        cmo="persona: academic\n",
    )
    ceo, cto, cmo = [await system_prompt(root, mock, a) for a in ("ceo", "cto", "cmo")]
    assert "## Tone\nSpeak like a pirate, matey." in ceo
    # a project file named like a preset replaces it
    assert "## Tone\nOur own concise: one line." in cto and "pirate" not in cto
    assert PERSONA_PRESETS["academic"] in cmo and "pirate" not in cmo


async def test_the_older_defaults_persona_still_works_and_may_not_disagree(
    root: Path, mock_server: MockProviderServer, mock: MockProvider
) -> None:
    configure(root, mock_server, "", ceo="")
    toml = root / "agentrunner.toml"
    toml.write_text(toml.read_text().replace("[defaults]\n", '[defaults]\npersona = "concise"\n'))
    assert PERSONA_PRESETS["concise"] in await system_prompt(root, mock, "ceo")
    toml.write_text(toml.read_text() + '[persona]\npreset = "friendly"\n')
    with pytest.raises(AgentRunnerError) as info:
        await open_runner(root)
    assert info.value.code == "invalid_specification"
    assert (
        "disagree" in info.value.message
        and info.value.hint
        and "[persona] preset" in (info.value.hint)
    )


def validate(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrunner", "agents", "validate"],
        cwd=root,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_unknown_preset_and_override_for_a_missing_agent_are_reported(
    root: Path, mock_server: MockProviderServer
) -> None:
    configure(root, mock_server, "", ceo="", cto="")
    clean = validate(root)
    assert clean.returncode == 0 and "warning" not in clean.stderr, clean.stderr
    configure(
        root,
        mock_server,
        '[persona]\npreset = "frendly"\n[persona.overrides]\ncfo = "concise"\ncto = "nope"\n',
    )
    done = validate(root)
    assert done.returncode == 0, done.stderr  # warnings: the agents still run
    lines = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert any("preset 'frendly' is not a persona (did you mean 'friendly'?)" in x for x in lines)
    assert any("names agent 'cfo', which does not exist" in x for x in lines)
    assert any("cto = 'nope' is not a persona" in x for x in lines)
    assert len(lines) == 3, done.stderr


def test_a_run_warns_about_an_unknown_preset(
    root: Path, mock_server: MockProviderServer, mock: MockProvider
) -> None:
    configure(root, mock_server, '[persona]\npreset = "frendly"\n', ceo="")
    mock.queue(Reply(text="fine"))
    done = subprocess.run(
        [sys.executable, "-m", "agentrunner", "run", "ceo", "hi"],
        cwd=root,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "fine" in done.stdout
    assert "[persona] preset 'frendly' is not a persona" in done.stderr
    assert "## Tone" not in mock.requests[-1].body["messages"][0]["content"]


def test_an_agent_file_may_name_a_project_persona(
    root: Path, mock_server: MockProviderServer
) -> None:
    configure(root, mock_server, "", ceo="persona: pirate\n")
    done = validate(root)
    assert done.returncode == 1 and "unknown persona preset 'pirate'" in done.stderr
    (root / "personas").mkdir()
    (root / "personas" / "pirate.md").write_text("Arr.\n")
    assert validate(root).returncode == 0


def test_agents_show_says_which_persona_and_why(
    root: Path, mock_server: MockProviderServer
) -> None:
    (root / "personas").mkdir()
    (root / "personas" / "pirate.md").write_text("Arr.\n")
    configure(
        root,
        mock_server,
        '[persona]\npreset = "concise"\n[persona.overrides]\ncto = "pirate"\n',
        ceo="",
        cto="",
        cmo="persona: academic\n",
    )
    shown = {}
    for agent_id in ("ceo", "cto", "cmo"):
        done = subprocess.run(
            [sys.executable, "-m", "agentrunner", "agents", "show", agent_id],
            cwd=root,
            env={**os.environ, "COLUMNS": "200"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        shown[agent_id] = next(line for line in done.stdout.splitlines() if " persona " in line)
    assert "concise (project default; built-in)" in shown["ceo"]
    assert "pirate ([persona.overrides]; personas/pirate.md)" in shown["cto"]
    assert "academic (agent file; built-in)" in shown["cmo"]
