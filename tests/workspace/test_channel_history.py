"""A channel agent keeps its own earlier work (seed 003, issue 46 item 8): its earlier turns in
the channel — its tool calls and their results among them — are its thread's history, bounded
as any thread's is; the transcript it is sent goes back only to the message its last run
answered, and never past the channel's last 20 messages. On SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentrunner.runtime.compose import open_workspace
from agentrunner.testing import MockProvider, Reply
from agentrunner.workspace.workspace import Workspace
from tests.runner.conftest import Agent


@pytest.fixture
async def workspace(agent: Agent, project: Path) -> Any:
    agent("ann", "name: ann\ncapabilities: [notes]")
    ws = await open_workspace(project)
    yield ws
    await ws.close()


def _sent(request: Any) -> tuple[list[dict[str, Any]], str]:
    """A request's messages after the system prompt, and its last user message's text."""
    messages = request.body["messages"][1:]
    return messages, messages[-1]["content"]


async def test_the_transcript_holds_the_last_20_messages_then_only_what_is_new(
    workspace: Workspace, mock: MockProvider
) -> None:
    channel = await workspace.channels.create("general", members=["you"])
    for n in range(1, 26):
        await workspace.channels.post(channel, "you", f"message {n:02}")
    await workspace.runner.store.channels.add_members(channel.id, [("ann", "agent")])
    mock.queue(Reply(tool_calls=[("send_message", {"text": "Read them all."})]), Reply(text=""))
    await workspace.channels.post(channel, "you", "ann, what did I say?")
    await workspace.worker().run(until_idle=True)
    _, first = _sent(mock.requests[0])
    said = [n for n in range(1, 26) if f"you: message {n:02}" in first]
    assert said == list(range(6, 26))  # the last 20, not the 5 before them

    mock.reset()
    mock.queue(Reply(tool_calls=[("do_nothing", {})]), Reply(text=""))
    await workspace.channels.post(channel, "you", "message 26")
    await workspace.worker().run(until_idle=True)
    history, second = _sent(mock.requests[0])
    assert "you: message 25" not in second  # its history holds it: not sent twice
    assert "ann: Read them all." in second  # what was said since its last run answered
    assert "message 26" in second
    earlier = [m for m in history[:-1] if m["role"] == "user"]
    assert len(earlier) == 1 and "you: message 25" in earlier[0]["content"]
    calls = [c["function"]["name"] for m in history for c in m.get("tool_calls") or []]
    assert calls == ["send_message"]  # its own earlier tool call, with its result
    assert any(m["role"] == "tool" for m in history)


async def test_its_own_tool_results_come_back_in_a_later_turn(
    workspace: Workspace, mock: MockProvider
) -> None:
    channel = await workspace.channels.create("general", members=["ann", "you"])
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "Plan", "body": "ship on friday"})]),
        Reply(tool_calls=[("send_message", {"text": "Noted."})]),
        Reply(text=""),
    )
    await workspace.channels.post(channel, "you", "ann, note the plan")
    await workspace.worker().run(until_idle=True)
    mock.reset()
    mock.queue(Reply(tool_calls=[("send_message", {"text": "Friday."})]), Reply(text=""))
    await workspace.channels.post(channel, "you", "ann, when do we ship?")
    await workspace.worker().run(until_idle=True)
    history, now = _sent(mock.requests[0])
    results = [m["content"] for m in history if m["role"] == "tool"]
    assert "plan" in results  # note_create's result: the slug it made
    assert "ann, note the plan" not in now and "when do we ship?" in now
    other = await workspace.channels.create("random", members=["ann", "you"])
    mock.reset()
    mock.queue(Reply(tool_calls=[("do_nothing", {})]), Reply(text=""))
    await workspace.channels.post(other, "you", "hello there")
    await workspace.worker().run(until_idle=True)
    history, _ = _sent(mock.requests[0])
    assert len(history) == 1  # another channel is another thread: nothing of #general's
