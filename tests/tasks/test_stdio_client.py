"""The shipped Python client of ``agentrunner stdio`` (seed 004, issue 46 item 11): it runs
tasks and turns in a runner child process, raises an error answer as the ``AgentRunnerError``
it carries, and maps a runner that dies or writes what is not the protocol to ``runner_io``
(seed 004's ``PYTHON_RUNNER_ERROR``), for the request in flight and every later one."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from agentrunner import StdioClient
from agentrunner.errors import AgentRunnerError, ErrorCode

WRITER = """\
---
name: Writer
model: test
prompt_template: "Write about {{input.topic}}."
---
You write.
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text("")
    (root / "agents" / "writer.md").write_text(WRITER)
    return root


async def test_tasks_and_turns_run_in_the_child_and_an_error_answer_is_raised(root: Path) -> None:
    heard: list[str] = []
    async with StdioClient(root, on_event=lambda _, kind, __: heard.append(kind)) as runner:
        tides, waves = await asyncio.gather(
            runner.execute("writer", {"topic": "tides"}),
            runner.execute("writer", {"topic": "waves"}),
        )
        assert tides["status"] == waves["status"] == "completed"
        assert "tides" in tides["output"] and "waves" in waves["output"]
        assert "waves" not in tides["output"]
        turn = await runner.run_agent("writer", "Say hello.")
        assert turn["status"] == "completed" and turn["run_id"].startswith("run_")
        assert "agent.idle" in heard  # the turn's events, heard as they came
        assert [a["id"] for a in await runner.list_agents()] == ["writer"]
        with pytest.raises(AgentRunnerError) as refused:
            await runner.run_agent("writter", "hi")
        assert refused.value.code is ErrorCode.AGENT_NOT_FOUND
        assert "writer" in (refused.value.hint or "")
        with pytest.raises(AgentRunnerError, match=r"`params\.input` must be an object"):
            await runner.execute("writer", "tides")  # type: ignore[arg-type]
        with pytest.raises(AgentRunnerError, match="did you mean 'tools'"):
            await runner.run_agent("writer", "hi", tool=["note_list"])


@pytest.mark.parametrize(
    ("script", "said"),
    [
        (
            "import sys; sys.stderr.write('boom: no project here\\n'); sys.exit(3)",
            "it exited (3); it said: boom: no project here",
        ),
        (
            "import sys; print('hello, not json', flush=True); sys.stdin.read()",
            "it wrote a line that is not the protocol's: 'hello, not json'",
        ),
        (
            "import sys; sys.stdin.readline(); sys.exit(1)",  # dies on the first request
            "it exited (1)",
        ),
    ],
    ids=["dead", "garbled", "dies-mid-request"],
)
async def test_a_dead_or_garbled_runner_is_runner_io_for_now_and_later(
    root: Path, script: str, said: str
) -> None:
    async with StdioClient(root, command=(sys.executable, "-c", script)) as runner:
        for _ in range(2):  # the request in flight, then a later one
            with pytest.raises(AgentRunnerError) as failed:
                await asyncio.wait_for(runner.execute("writer", {"topic": "x"}), 60)
            assert failed.value.code is ErrorCode.RUNNER_IO
            assert failed.value.message.startswith("Failed to communicate with Python runner: ")
            assert said in failed.value.message, failed.value.message


async def test_a_runner_that_cannot_start_is_runner_io(root: Path) -> None:
    client = StdioClient(root, command=("agentrunner-no-such-program",))
    with pytest.raises(AgentRunnerError) as failed:
        await client.start()
    assert failed.value.code is ErrorCode.RUNNER_IO and "cannot start" in failed.value.message
