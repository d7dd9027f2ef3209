"""Agents' MCP servers: a real server (``tests/runner/mcp_server.py``) over stdio and over
streamable HTTP, the mock provider calling its tools."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentRunner
from agentrunner.engine.tools import ToolContext
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent

SERVER = Path(__file__).with_name("mcp_server.py")


def stdio(name: str = "calc", env: str = "") -> str:
    spec = f'{{command: "{sys.executable}", args: ["{SERVER}"]{", env: " + env if env else ""}}}'
    return f"mcp_servers:\n  {name}: {spec}"


def tool_results(mock: MockProvider, request: int) -> list[str]:
    return [m["content"] for m in mock.requests[request].body["messages"] if m["role"] == "tool"]


async def test_an_agent_calls_its_mcp_servers_tools(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("calc", stdio())
    mock.queue(Reply(tool_calls=[("add", {"a": 2, "b": 3})]), Reply(text="2 + 3 = 5"))
    runner: AgentRunner = await open_runner()
    result = await runner.run_agent("calc", "t1", "add 2 and 3")
    assert result.text == "2 + 3 = 5"
    offered = {t["function"]["name"]: t["function"] for t in mock.requests[0].body["tools"]}
    assert set(offered) == {
        "add",
        "refuse",
        "strict",
        "whoami",
        "wipe",
        "stamp",
        "append_line",
        "append_then_hang",
        "crash",
        "picture",
        "report",
        "broken_picture",
    }
    assert offered["add"]["description"] == "Add two integers."
    assert offered["add"]["parameters"]["required"] == ["a", "b"]
    assert tool_results(mock, 1) == ["5"]
    messages = await runner.store.runs.messages(result.run_id)
    returned = [m for m in messages if m.message_type == "tool_return_message"]
    assert [(m.tool_name, m.content, m.is_error) for m in returned] == [("add", "5", False)]


async def test_a_tool_error_goes_back_to_the_model(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path
) -> None:
    agent("calc", stdio())
    mock.queue(Reply(tool_calls=[("refuse", {"reason": "no"})]), Reply(text="it refused"))
    runner: AgentRunner = await open_runner()
    result = await runner.run_agent("calc", "t1", "try")
    assert result.text == "it refused" and result.stop_reason == "end_turn"
    assert tool_results(mock, 1) == ["Error executing tool refuse"]  # the server's words
    messages = await runner.store.runs.messages(result.run_id)
    assert [m.is_error for m in messages if m.message_type == "tool_return_message"] == [True]
    await runner.close()  # the server's own logging went to its log, not to our stderr
    log = (project / ".agentrunner" / "logs" / "mcp-calc.log").read_text()
    assert "refused: no" in log


async def test_a_protocol_error_goes_back_to_the_model_and_keeps_the_server(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("calc", stdio())
    mock.queue(
        Reply(tool_calls=[("whoami", {})]),
        Reply(tool_calls=[("strict", {"n": 7})]),
        Reply(tool_calls=[("whoami", {})]),
        Reply(text="done"),
    )
    runner: AgentRunner = await open_runner()
    result = await runner.run_agent("calc", "t1", "try")
    assert result.text == "done"
    first, refused, second = tool_results(mock, 3)
    assert refused == "strict: n=7 is out of range"
    assert first == second  # the same server process before and after


async def test_one_server_process_serves_every_run_and_gets_its_env(
    agent: Agent, open_runner: Any, mock: MockProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CALC_SECRET", "s3cret")
    env = '{CALC_TOKEN: "tok-${CALC_SECRET}"}'
    agent("a", stdio(env=env))
    agent("b", stdio(env=env))
    for _ in range(3):
        mock.queue(Reply(tool_calls=[("whoami", {})]), Reply(text="ok"))
    runner: AgentRunner = await open_runner()
    for agent_id, thread in (("a", "t1"), ("a", "t1"), ("b", "t2")):
        await runner.run_agent(agent_id, thread, "who?")
    answers = {tool_results(mock, i)[-1] for i in (1, 3, 5)}
    assert len(answers) == 1  # the same process each time
    assert answers.pop().endswith("token=tok-s3cret")


async def test_an_unset_env_variable_is_named(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    path = agent("calc", stdio(env='{CALC_TOKEN: "${CALC_UNSET}"}'))
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as caught:
        await runner.run_agent("calc", "t1", "hi")
    assert caught.value.code is ErrorCode.VALIDATION
    assert "CALC_UNSET" in caught.value.message and caught.value.file == str(path)
    assert not mock.requests  # failed before any model request


async def test_a_server_that_does_not_start_fails_the_run_clearly(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path
) -> None:
    path = agent("calc", f'mcp_servers:\n  calc: {{command: "{sys.executable}", args: [gone.py]}}')
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as caught:
        await runner.run_agent("calc", "t1", "hi")
    error = caught.value
    assert error.code is ErrorCode.TOOL_FAILED
    assert "MCP server 'calc'" in error.message and "gone.py" in error.message
    assert "can't open file" in error.message  # the server's last words, from its log
    assert error.file == str(path) and error.line == 3
    assert error.hint and "mcp-calc.log" in error.hint
    thread = await runner.store.messages.page("t1")
    assert thread[-1][1].interrupted  # type: ignore[union-attr]  # recorded like any failed run
    [failed] = await runner.store.runs.list(thread_id="t1")
    assert failed.status == "failed" and failed.error_code == "tool_failed"
    # Fixed on disk, the next run connects: failures are not cached.
    (project / "gone.py").write_text(SERVER.read_text())
    mock.queue(Reply(tool_calls=[("add", {"a": 1, "b": 1})]), Reply(text="2"))
    assert (await runner.run_agent("calc", "t1", "again")).text == "2"


async def test_a_server_that_dies_mid_call_fails_that_run_only(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("calc", stdio())
    mock.queue(Reply(tool_calls=[("crash", {})]))
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as caught:
        await runner.run_agent("calc", "t1", "crash")
    assert caught.value.code is ErrorCode.TOOL_FAILED
    assert "MCP server 'calc'" in caught.value.message
    mock.queue(Reply(tool_calls=[("add", {"a": 20, "b": 22})]), Reply(text="42"))
    result = await runner.run_agent("calc", "t1", "again")  # a new server process
    assert result.text == "42" and tool_results(mock, -1)[-1] == "42"


async def test_tool_names_must_not_clash(agent: Agent, open_runner: Any) -> None:
    both = stdio("one") + "\n" + stdio("two").split("\n", 1)[1]
    agent("calc", both)
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as caught:
        await runner.run_agent("calc", "t1", "hi")
    assert caught.value.code is ErrorCode.VALIDATION
    assert "MCP server 'two' provides a tool named 'add', as does MCP server 'one'" in str(
        caught.value.message
    )


async def test_a_child_gets_only_the_mcp_tools_its_caller_has(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("boss", "capabilities: [agents]")
    agent("worker", stdio())
    mock.queue(
        Reply(tool_calls=[("ask_agent", {"agent": "worker", "message": "hi"})]),
        Reply(text="worker says hi"),
        Reply(text="boss done"),
    )
    runner: AgentRunner = await open_runner()
    await runner.run_agent("boss", "t", "delegate")
    assert "tools" not in mock.requests[1].body or not mock.requests[1].body["tools"]
    # Run directly, the worker has them.
    mock.queue(Reply(text="hello"))
    await runner.run_agent("worker", "w", "hi")
    assert {t["function"]["name"] for t in mock.requests[-1].body["tools"]} >= {"add"}


@pytest.fixture
def http_server() -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_a_server_over_streamable_http(
    agent: Agent, open_runner: Any, mock: MockProvider, http_server: str
) -> None:
    agent("calc", f'mcp_servers:\n  calc: {{url: "{http_server}"}}')
    mock.queue(Reply(tool_calls=[("add", {"a": 40, "b": 2})]), Reply(text="42"))
    runner: AgentRunner = await open_runner()
    result = await runner.run_agent("calc", "t1", "add")
    assert result.text == "42" and tool_results(mock, 1) == ["42"]
    assert json.dumps(mock.requests[0].body["tools"]).count('"name"') >= 5


async def test_without_the_mcp_extra_the_error_says_what_to_install(
    agent: Agent, open_runner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent("calc", stdio())
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if not installed
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as caught:
        await runner.run_agent("calc", "t1", "hi")
    assert caught.value.message == "MCP support is not installed"
    assert caught.value.hint == 'pip install "agentrunner[mcp]"'


async def test_a_servers_destructive_mark_and_the_agents_name_for_it_reach_its_tools(
    tmp_path: Path,
) -> None:
    """``destructiveHint: true`` is carried onto the tool; an unmarked tool or one marked
    false is not destructive. Two agents naming the same server differently share its process
    but each gets the tools under its own name for it, which approval rules match."""
    from agentrunner.agents import ApprovalRules, parse_agent_text
    from agentrunner.run.capabilities.mcp import McpServers

    def spec(agent_id: str, server: str) -> Any:
        text = f"---\nmodel: test\n{stdio(server)}\n---\nHi.\n"
        return parse_agent_text(text, agent_id=agent_id, file=f"agents/{agent_id}.md")

    servers = McpServers(tmp_path)
    try:
        calc = {t.name: t for t in await servers.tools(spec("a", "calc"))}
        maths = {t.name: t for t in await servers.tools(spec("b", "maths"))}
        pids = [await tools["whoami"].fn({}, ToolContext("c", "whoami")) for tools in (calc, maths)]
    finally:
        await servers.aclose()
    assert pids[0] == pids[1]  # one process
    assert {n for n, t in calc.items() if t.destructive} == {"wipe"}
    assert {t.server for t in calc.values()} == {"calc"}
    assert {t.server for t in maths.values()} == {"maths"}
    assert not calc["stamp"].destructive and not calc["add"].destructive

    rules = ApprovalRules(tools=("calc/*",), destructive=True)
    asked = {
        (t.server, t.name): rules.rule_for(t.name, destructive=t.destructive, server=t.server)
        for t in [*calc.values(), *maths.values()]
    }
    assert asked[("calc", "add")] == "approval.tools: calc/*"
    assert asked[("maths", "add")] is None  # the other agent's name for the server
    assert asked[("maths", "wipe")] == "approval.destructive"
    assert [k for k, v in asked.items() if v is not None and k[0] == "maths"] == [("maths", "wipe")]
