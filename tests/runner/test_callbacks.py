"""The Python caller's callbacks (seed 000, issue 46 item 3): each fires, in the order the run
did what it says, with its payload — on both wire formats, against the mock provider;
``on_assistant_message`` is the answer (text said beside tool calls is not one) — and
``on_error`` fires for the caller's own run failing, never for a delegation's failure its
caller recovered from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentRunner, AgentRunnerCallbacks, RunAgentOverrides
from agentrunner.errors import AgentRunnerError
from agentrunner.testing import Fault, MockProvider, Reply
from tests.runner.conftest import Agent


def _recording() -> tuple[AgentRunnerCallbacks, list[tuple[Any, ...]]]:
    heard: list[tuple[Any, ...]] = []
    callbacks = AgentRunnerCallbacks(
        on_thinking=lambda: heard.append(("thinking",)),
        on_assistant_message=lambda text: heard.append(("message", text)),
        on_tool_use=lambda name, args, summary: heard.append(("tool", name, args, summary)),
        on_tool_use_summary=lambda summary: heard.append(("done", summary)),
        on_response=lambda agent, thread, text: heard.append(("response", agent, thread, text)),
        on_error=lambda agent, thread, message: heard.append(("error", agent, thread, message)),
        on_file_send=lambda agent, thread, path, caption, kind: heard.append(
            ("file", agent, thread, Path(path).name, caption, kind)
        ),
    )
    return callbacks, heard


@pytest.mark.parametrize("model", ["mockai:gpt-mock", "mockant:claude-mock"])
async def test_each_callback_fires_in_order_with_its_payload(
    agent: Agent, open_runner: Any, mock: MockProvider, model: str
) -> None:
    agent("clerk", "capabilities: [files]\ntrust: workspace")
    mock.queue(
        Reply(
            thinking="Where to put it?",
            tool_calls=[("write_file", {"path": "a.txt", "content": "hi"})],
        ),
        Reply(
            text="Sending it.", tool_calls=[("send_file", {"path": "a.txt", "caption": "yours"})]
        ),
        Reply(text="Done: a.txt is yours."),
        model=model.split(":")[1],
    )
    runner: AgentRunner = await open_runner()
    callbacks, heard = _recording()
    result = await runner.run_agent(
        "clerk", "t1", "write it", callbacks, RunAgentOverrides(model=model)
    )
    assert result.text == "Done: a.txt is yours."
    assert heard == [
        ("thinking",),
        (
            "tool",
            "write_file",
            {"path": "a.txt", "content": "hi"},
            'write_file("path": "a.txt", "content": "hi")',
        ),
        ("done", "write_file done: wrote 2 characters to a.txt"),
        (
            "tool",
            "send_file",
            {"path": "a.txt", "caption": "yours"},
            'send_file("path": "a.txt", "caption": "yours")',
        ),
        ("file", "clerk", "t1", "a.txt", "yours", "text"),
        ("done", "send_file done: sent a.txt"),
        ("message", "Done: a.txt is yours."),
        ("response", "clerk", "t1", "Done: a.txt is yours."),
    ]
    # a second, different run: what differs, differs
    mock.queue(Reply(text="Nothing to do."), model=model.split(":")[1])
    callbacks, heard = _recording()
    await runner.run_agent("clerk", "t2", "rest", callbacks, RunAgentOverrides(model=model))
    assert heard == [
        ("message", "Nothing to do."),
        ("response", "clerk", "t2", "Nothing to do."),
    ]


async def test_on_error_is_the_caller_s_run_s_not_a_recovered_delegation_s(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("boss", "capabilities: [agents]\nmodel: mockai:gpt-mock")
    agent("helper", "model: mockant:claude-mock\nretry: {max: 1}")
    mock.queue(Reply(fault=Fault.http(400)), model="claude-mock")  # the helper fails
    mock.queue(
        Reply(tool_calls=[("ask_agent", {"agent": "helper", "message": "help"})]),
        Reply(text="I did it myself."),
        model="gpt-mock",
    )
    runner: AgentRunner = await open_runner()
    callbacks, heard = _recording()
    result = await runner.run_agent("boss", "t", "go", callbacks)
    assert result.text == "I did it myself."
    assert [h[0] for h in heard if h[0] in ("error", "response")] == ["response"]
    failed = [h for h in heard if h[0] == "done" and "ask_agent failed" in h[1]]
    assert failed  # the boss heard of it as its tool's result, and went on
    # the caller's own run failing: on_error, with its message, then raised
    mock.queue(Reply(fault=Fault.http(400)), model="gpt-mock")
    callbacks, heard = _recording()
    with pytest.raises(AgentRunnerError) as failed_run:
        await runner.run_agent("boss", "t", "again", callbacks)
    assert heard == [("error", "boss", "t", failed_run.value.message)]
