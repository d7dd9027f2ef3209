"""A run killed (kill -9) in the middle of a tool call leaves its thread usable."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentrunner import AgentRunner
from agentrunner.engine import AssistantMessage, ToolResult
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent

# The child process runs the agent with a notes tool that never returns, so it is killed while
# the tool call is in flight (recorded, not answered).
CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from agentrunner import open_runner
    from agentrunner.run.capabilities import builtin

    real = builtin.notes_tools

    def slow_notes(ctx):
        tools = real(ctx)
        for t in tools:
            if t.name == "note_create":
                async def hang(args, call):
                    print("TOOL-STARTED", flush=True)
                    await asyncio.sleep(3600)
                t.fn = hang
        return tools

    builtin.notes_tools = slow_notes

    async def main():
        runner = await open_runner()
        await runner.run_agent("worker", "crashy", "write it down")

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("model", ["mockai:gpt-mock", "mockant:claude-mock"])
async def test_killed_mid_tool_call_then_the_thread_works(
    agent: Agent, open_runner: object, mock: MockProvider, project: Path, model: str
) -> None:
    agent("worker", f"model: {model}\ncapabilities: [notes]")
    mock.queue(Reply(tool_calls=[("note_create", {"title": "x", "body": "y"})]))
    with subprocess.Popen(
        [sys.executable, "-c", CHILD],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=os.environ.copy(),
    ) as child:
        try:
            assert child.stdout is not None
            line = await asyncio.wait_for(asyncio.to_thread(child.stdout.readline), 30)
            assert b"TOOL-STARTED" in line, child.stderr.read() if child.stderr else b""
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()

    runner: AgentRunner = await open_runner()  # type: ignore[operator]
    [dead] = await runner.store.runs.list(thread_id="crashy")
    assert dead.status == "running"  # the truthful partial record: it died mid-run
    calls = [
        m
        for m in await runner.store.runs.messages(dead.id)
        if m.message_type == "tool_call_message"
    ]
    assert len(calls) == 1 and calls[0].tool_call_id  # recorded before it executed

    started = time.monotonic()
    result = await runner.run_agent("worker", "crashy", "are you there?")
    assert time.monotonic() - started < 5  # the dead process's lock did not hold us up
    assert result.text == "Echo: are you there?"
    history = [m for _, m, _, _ in await runner.store.messages.page("crashy")]
    assert isinstance(history[1], AssistantMessage) and history[1].tool_calls
    repaired = history[2]
    assert (
        isinstance(repaired, ToolResult)
        and repaired.is_error
        and "not run again" in repaired.content
    )
    assert (await runner.store.runs.get(dead.id)).status == "failed"  # type: ignore[union-attr]
    # The provider (which rejects unanswered calls) accepted the repaired history.
    assert "not run again" in json.dumps(mock.requests[-1].body)
