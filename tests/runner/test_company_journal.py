"""A company session's memory (seed 002, issue 46 item 7): ``start`` begins with the journal's
recent entries in the root's first message; a journal that cannot be read is a warning, and the
session starts all the same, without them. Against the mock provider, on both back ends."""

from __future__ import annotations

from typing import Any

import pytest

from agentrunner import AgentRunner
from agentrunner.testing import MockProvider, Reply
from agentrunner.workspace.company import brief as company
from tests.runner.conftest import Agent


async def test_the_journal_is_the_first_message_s_and_a_broken_one_is_a_warning(
    agent: Agent, open_runner: Any, mock: MockProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent("ceo", "name: CEO\nmodel: mockai:gpt-mock")
    runner: AgentRunner = await open_runner()
    store = runner.app.store
    await store.company.add_entry(
        session_id="s0",
        run_id="run_0",
        directive="Plan Q3",
        summary="We chose to hire two engineers.",
        model="test",
        cost_micros=0,
    )
    mock.queue(Reply(text="Hello, team."))
    started = await company.start(runner)
    first = mock.requests[-1].body["messages"][-1]["content"]
    assert "We chose to hire two engineers." in first and started.warnings == []
    await company.session.end(store, started.session)

    async def broken(**_: Any) -> Any:
        raise ConnectionError("the journal's table is gone")

    monkeypatch.setattr(store.company, "entries", broken)
    mock.queue(Reply(text="Hello again."))
    again = await company.start(runner)
    assert again.result is not None and again.result.text == "Hello again."
    assert again.opened and len(again.warnings) == 1
    assert again.warnings[0].startswith("the journal could not be loaded: ConnectionError")
    assert "hire two engineers" not in mock.requests[-1].body["messages"][-1]["content"]
