"""An agent whose file says ``enabled: false`` is listed but never run: every way in refuses it
with ``agent_disabled`` (naming the file and what to set) and writes nothing; channels route
nothing to it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.runtime.compose import open_task_runner, open_workspace
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent


@pytest.fixture
def office(project: Path, agent: Agent) -> Path:
    agent("on", "name: Ada")
    agent("off", "name: Bo\nenabled: false")
    return project


def cli(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrunner", *args],
        cwd=project,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def refused(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 1, done.stdout + done.stderr
    assert "agents/off.md:3: agent_disabled: agent 'off' is disabled" in done.stderr
    assert "Set `enabled: true` in agents/off.md" in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("run", "off", "hello"),
        ("exec", "off", "--input", "{}"),
        ("dm", "off", "hello"),
    ],
    ids=["run", "exec", "dm"],
)
def test_the_cli_refuses_a_disabled_agent(
    office: Path, mock: MockProvider, args: tuple[str, ...]
) -> None:
    refused(cli(office, *args))
    assert mock.requests == []
    listed = cli(office, "runs", "list")
    assert "off" not in listed.stdout


async def test_library_entry_points_refuse_and_write_nothing(
    office: Path, mock: MockProvider
) -> None:
    ws = await open_workspace(office)
    try:
        with pytest.raises(AgentRunnerError) as queued:
            await ws.runs.queue("off", "t-off", "hello")
        with pytest.raises(AgentRunnerError) as dm:
            await ws.channels.dm_channel("off", "you")
        assert queued.value.code is dm.value.code is ErrorCode.AGENT_DISABLED
        channel = await ws.channels.create("general", members=["on", "off", "you"])
        mock.queue(Reply(text="hi from on"))
        posted = await ws.channels.post(channel, "you", "hello all")
        assert len(posted.run_ids) == 1  # on only
        await ws.worker().run(until_idle=True)
        runs = await ws.runner.store.runs.list(limit=20)
        assert [r.agent_id for r in runs] == ["on"]
        assert await ws.runner.store.threads.list(agent_id="off") == []
    finally:
        await ws.close()
    async with await open_task_runner(office) as tasks:
        outcome = await tasks.execute("off", {})
    assert outcome.status == "failed" and outcome.error is not None
    assert outcome.error["code"] == "agent_disabled"
    assert len(mock.requests) == 1  # on's reply: nothing of off's reached a model
