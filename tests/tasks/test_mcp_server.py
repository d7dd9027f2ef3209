"""`agentrunner mcp` driven end to end by the official MCP client over stdio, as an IDE or a
desktop assistant would: the real server process, the mock provider over real HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult

from agentrunner.testing import MockProvider, MockProviderServer, Reply
from tests.tasks.test_stdio import CONFIG, HELPER


@pytest.fixture
def root(tmp_path: Path, mock_server: MockProviderServer) -> Path:
    root = tmp_path / "proj"
    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text(CONFIG.format(url=mock_server.openai_url))
    (root / "agents" / "helper.md").write_text(HELPER)
    return root


@contextlib.asynccontextmanager
async def connected(root: Path) -> AsyncIterator[ClientSession]:
    """A client session with a fresh server process. Not a fixture: the SDK's transports must
    be left by the task that entered them, and pytest-asyncio tears fixtures down in another."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "agentrunner", "mcp"],
        cwd=root,
        env={
            "MOCK_KEY": "sk-mock",
            "PATH": os.environ.get("PATH", ""),
            # this checkout's code, where an installed agentrunner is another's
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        },
    )
    with (root / "mcp-stderr.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as streams, ClientSession(*streams) as s:
            await s.initialize()
            yield s


def data(result: CallToolResult) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    """The tool error's text (the SDK puts "Error executing tool NAME: " before ours)."""
    assert result.is_error
    return " ".join(getattr(c, "text", "") for c in result.content)


async def test_tools_run_agents_and_read_what_they_recorded(root: Path, mock: MockProvider) -> None:
    async with connected(root) as session:
        tools = {t.name for t in (await session.list_tools()).tools}
        assert tools == {
            "list_agents",
            "run_agent",
            "execute_task",
            "list_threads",
            "read_thread",
            "get_run",
            "list_approvals",
            "decide_approval",
        }
        agents = data(await session.call_tool("list_agents", {}))["result"]
        assert [(a["id"], a["description"]) for a in agents] == [("helper", "Answers questions.")]

        progress: list[str | None] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append(message)

        mock.queue(Reply(text="Hello there."))
        called = await session.call_tool(
            "run_agent",
            {"agent": "helper", "message": "hi", "input": {"topic": "x"}},
            progress_callback=on_progress,
        )
        ran = data(called)
        assert json.loads(called.content[0].text) == ran  # the same JSON for text-only clients
        assert ran["text"] == "Hello there." and ran["status"] == "completed"
        assert ran["stop_reason"] == "end_turn" and ran["usage"]["requests"] == 1
        assert progress == ["step 1 (mockai:gpt-mock)"]

        run = data(await session.call_tool("get_run", {"run_id": ran["run_id"]}))
        assert run["status"] == "completed" and run["thread_id"] == ran["thread_id"]
        thread = data(await session.call_tool("read_thread", {"thread_id": ran["thread_id"]}))
        assert [(m["seq"], m["role"], m["run_id"]) for m in thread["messages"]] == [
            (1, "user", ran["run_id"]),
            (2, "assistant", ran["run_id"]),
        ]
        assert thread["messages"][1]["content"] == "Hello there."
        page = data(
            await session.call_tool("read_thread", {"thread_id": ran["thread_id"], "after": 1})
        )
        assert [m["seq"] for m in page["messages"]] == [2]

        mock.queue(Reply(text="Again."))
        again = data(await session.call_tool("run_agent", {"agent": "helper", "message": "more"}))
        assert again["thread_id"] == ran["thread_id"]  # the agent's session thread continues
        fresh = data(
            await session.call_tool(
                "run_agent", {"agent": "helper", "message": "new topic", "new_thread": True}
            )
        )
        assert fresh["thread_id"] != ran["thread_id"]
        listed = data(await session.call_tool("list_threads", {"agent": "helper"}))["result"]
        assert {t["id"] for t in listed} == {ran["thread_id"], fresh["thread_id"]}

        mock.queue(Reply(text="Tides rise."))
        args = {"agent": "helper", "input": {"topic": "t"}, "cache": True}
        task = data(await session.call_tool("execute_task", args))
        assert task["status"] == "completed" and task["output"] == "Tides rise."
        cached = data(await session.call_tool("execute_task", args))
        assert cached["cached"] is True


async def test_bad_calls_are_tool_errors_with_codes_and_the_server_keeps_serving(
    root: Path, mock: MockProvider
) -> None:
    async with connected(root) as session:
        unknown = error_text(
            await session.call_tool("run_agent", {"agent": "nobody", "message": "hi"})
        )
        assert unknown.startswith("Error executing tool run_agent: agent_not_found: ")
        assert "nobody" in unknown and "hint:" in unknown  # as docs/mcp.md says
        no_run = error_text(await session.call_tool("get_run", {"run_id": "run_nope"}))
        assert no_run.startswith("Error executing tool get_run: not_found: no run 'run_nope'")
        no_thread = error_text(await session.call_tool("read_thread", {"thread_id": "t-nope"}))
        assert "not_found: no thread 't-nope'" in no_thread
        foreign = error_text(
            await session.call_tool(
                "run_agent", {"agent": "helper", "message": "hi", "thread_id": "t-nope"}
            )
        )
        assert "thread_not_found: no thread 't-nope' of agent 'helper'" in foreign
        assert "list_threads" in no_thread
        no_agent = error_text(await session.call_tool("list_threads", {"agent": "nobody"}))
        assert "agent_not_found:" in no_agent
        missing = error_text(await session.call_tool("run_agent", {"agent": "helper"}))
        assert "message" in missing  # the SDK checks arguments against the tool's schema
        task = error_text(await session.call_tool("execute_task", {"agent": "nobody"}))
        assert "agent_not_found:" in task

        assert len(mock.requests) == 0  # no bad call reached the provider
        agents = data(await session.call_tool("list_agents", {}))["result"]
        assert [a["id"] for a in agents] == ["helper"]


async def test_cancelling_the_call_stops_the_run_and_records_it_cancelled(
    root: Path, mock: MockProvider
) -> None:
    async with connected(root) as session:
        started = asyncio.Event()

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            started.set()

        mock.queue(Reply(text="Too slow.", delay_s=20), model="gpt-mock")
        call = asyncio.ensure_future(
            session.call_tool(
                "run_agent",
                {"agent": "helper", "message": "take your time"},
                progress_callback=on_progress,
            )
        )
        await asyncio.wait_for(started.wait(), 30)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

        threads = data(await session.call_tool("list_threads", {"agent": "helper"}))["result"]
        thread_id = threads[0]["id"]
        for _ in range(200):  # the run records itself once the provider request is abandoned
            messages = data(await session.call_tool("read_thread", {"thread_id": thread_id}))
            if len(messages["messages"]) == 2:
                break
            await asyncio.sleep(0.05)
        last = messages["messages"][-1]
        assert last["role"] == "assistant" and last["interrupted"]
        run = data(await session.call_tool("get_run", {"run_id": last["run_id"]}))
        assert run["status"] == "cancelled" and run["stop_reason"] == "cancelled"

        mock.queue(Reply(text="Back."))
        back = data(await session.call_tool("run_agent", {"agent": "helper", "message": "again"}))
        assert back["text"] == "Back." and back["thread_id"] == thread_id


def test_without_the_mcp_extra_the_command_says_what_to_install(root: Path) -> None:
    script = (
        "import sys; sys.modules['mcp'] = None\n"
        "from agentrunner.interfaces.cli import main\nmain(['mcp'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert "MCP support is not installed" in done.stderr
    assert 'pip install "agentrunner[mcp]"' in done.stderr
    assert "Traceback" not in done.stderr


async def test_a_disabled_agent_is_refused_with_agent_disabled(
    root: Path, mock: MockProvider
) -> None:
    (root / "agents" / "off.md").write_text("---\nname: Bo\nenabled: false\n---\nYou help.\n")
    async with connected(root) as session:
        ran = error_text(await session.call_tool("run_agent", {"agent": "off", "message": "hi"}))
        assert ran.startswith("Error executing tool run_agent: agent_disabled: agent 'off'")
        assert "enabled: true" in ran
        task = error_text(await session.call_tool("execute_task", {"agent": "off"}))
        assert "agent_disabled:" in task
    assert len(mock.requests) == 0
