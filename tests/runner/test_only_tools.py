"""A caller narrows a run's tools (seed 001, issue 46 item 5): from Python
(``RunAgentOverrides.only_tools``), over HTTP (``tools`` in a queued run's body) and stdio
(``tools`` of ``run_agent``), the run is offered only those of its agent's tools, and the runs
it starts no more; a tool the agent is not granted is refused by name before a run is written
or queued (tests/server/test_only_tools_http.py: over HTTP). Against the mock provider, on
both back ends (``project``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentRunner, RunAgentOverrides
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.tasks.test_stdio import Client


def _offered(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools", [])}


async def test_a_run_is_offered_only_the_tools_its_caller_names(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("clerk", "capabilities: [notes, memory, agents]")
    agent("helper", "capabilities: [notes]")
    runner: AgentRunner = await open_runner()
    for only, offered in (
        (
            None,
            {
                "note_create",
                "note_read",
                "note_list",
                "note_share",
                "memory_append",
                "memory_replace",
                "set_task",
                "ask_agent",
            },
        ),
        (("note_read", "note_list"), {"note_read", "note_list"}),
        (("memory_append",), {"memory_append"}),
        ((), set()),
    ):
        mock.queue(Reply(text="ok"))
        overrides = RunAgentOverrides(only_tools=only) if only is not None else None
        await runner.run_agent("clerk", f"t-{len(mock.requests)}", "hi", overrides=overrides)
        assert _offered(mock.requests[-1].body) == offered, only

    # the runs it starts are bounded by it too
    mock.queue(
        Reply(tool_calls=[("ask_agent", {"agent": "helper", "message": "list them"})]),
        Reply(text="helper answers"),
        Reply(text="done"),
    )
    narrowed = RunAgentOverrides(only_tools=("ask_agent", "note_list"))
    await runner.run_agent("clerk", "t-child", "ask", overrides=narrowed)
    assert _offered(mock.requests[-2].body) == {"note_list"}  # the helper's request

    # a widening, refused by name before anything is written or sent
    before = (len(mock.requests), len(await runner.store.runs.list(limit=100)))
    wider = RunAgentOverrides(only_tools=("note_read", "write_file"))
    with pytest.raises(AgentRunnerError) as refused:
        await runner.run_agent("clerk", "t-wide", "hi", overrides=wider)
    assert refused.value.code is ErrorCode.VALIDATION
    assert "'write_file' is not one of the tools of agent 'clerk'" in refused.value.message
    assert "note_read" in (refused.value.hint or "")
    assert (len(mock.requests), len(await runner.store.runs.list(limit=100))) == before
    assert await runner.store.threads.get("t-wide") is None  # not even its thread opened
    with pytest.raises(AgentRunnerError, match="a list of tool names"):
        RunAgentOverrides(only_tools="note_read")  # type: ignore[arg-type]


def test_stdio_run_agent_takes_the_tools_it_may_use(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text("")
    (root / "agents" / "clerk.md").write_text(
        "---\nmodel: test\ncapabilities: [notes]\n---\nYou keep notes.\n"
    )
    client = Client(root)
    try:
        assert client.lines.get(timeout=30)["event"] == "ready"
        client.request("a", "run_agent", agent="clerk", message="go", tools=["note_list"])
        client.request("b", "run_agent", agent="clerk", message="go", new=True)
        client.request(
            "c", "run_agent", agent="clerk", message="go", new=True, tools=["write_file"]
        )
        client.request("d", "run_agent", agent="clerk", message="go", tool=["note_list"])
        answered: dict[str, dict[str, Any]] = {}
        while len(answered) < 4:  # in the order they end, events between
            message = client.lines.get(timeout=60)
            if "event" not in message:
                answered[message["id"]] = message
        narrowed, whole, wide, misspelt = (answered[rid] for rid in "abcd")
    finally:
        client.close()
    # the test model calls each tool it is offered: one, then all the reading ones
    assert (
        "note_list" in narrowed["result"]["text"] and "note_read" not in narrowed["result"]["text"]
    )
    assert "note_read" in whole["result"]["text"]
    assert wide["error"]["code"] == "validation" and "'write_file'" in wide["error"]["message"]
    # a misspelt narrowing is refused, never run with every tool
    assert misspelt["error"]["code"] == "validation"
    assert "no `params.tool` (did you mean 'tools'?)" in misspelt["error"]["message"]
    # the refused `new` run opened no session thread: the agent's session is the one of "b"
    threads = asyncio.run(_threads(root))
    assert len(threads) == 2, threads


async def _threads(root: Path) -> list[str]:
    from agentrunner.runtime.compose import open_runner

    runner = await open_runner(root)
    try:
        return [t.id for t in await runner.store.threads.list(agent_id="clerk", limit=10)]
    finally:
        await runner.close()
