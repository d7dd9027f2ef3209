"""A run sent again (issue 45, item 5): the replay's first request is the original's — the
history byte for byte, the prompt the original logged (whatever the agent file says now), its
message, tools and model settings — on the same model or another, as a new run on a fork beside
it; the original and its thread are left as they were; a run that cannot be replayed is refused
naming why. On SQLite and PostgreSQL (``project``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentRunner, replay_run
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.runtime.compose import open_runner as open_project_runner
from agentrunner.runtime.compose import open_workspace
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.runner.test_compaction import seed, turns

CLERK = "model: mockai:gpt-mock\ncapabilities: [notes]"


def _request(mock: MockProvider, n: int) -> dict[str, Any]:
    body = dict(mock.requests[n].body)
    return {k: json.dumps(body.get(k), sort_keys=True) for k in ("messages", "tools", "model")}


@pytest.fixture
async def runner(agent: Agent, project: Path) -> Any:
    agent("clerk", CLERK, body="You are the clerk of {{input.office}}.")
    opened = await open_project_runner(project)
    await seed(opened.store, "t-main", "clerk", turns("p", 2))  # messages 1-8
    yield opened
    await opened.close()


async def test_a_replay_sends_the_originals_first_request_again_beside_it(
    agent: Agent, runner: AgentRunner, mock: MockProvider, project: Path
) -> None:
    mock.queue(
        Reply(tool_calls=[("note_list", {})]),
        Reply(text="No notes."),
        Reply(text="Still none."),
        Reply(text="None at all."),
    )
    first = await runner.run_agent("clerk", "t-main", "Any notes?", input={"office": "Lyon"})
    assert first.text == "No notes."
    original = _request(mock, 0)
    before = await runner.store.messages.page("t-main", limit=100)

    again = await replay_run(runner, first.run_id)
    assert again.result.text == "Still none." and again.original.id == first.run_id
    assert _request(mock, 2) == original  # the same model, history, prompt and tools
    assert again.fork.thread.forked_from == "t-main" and again.fork.at == 8
    replayed = await runner.store.runs.get(again.result.run_id)
    assert replayed is not None and replayed.thread_id == again.fork.thread.id
    assert replayed.model == "mockai:gpt-mock" and replayed.status == "completed"
    assert await runner.store.messages.page("t-main", limit=100) == before  # left as it was

    # the agent file says something else now: a replay sends the prompt the run logged
    agent("clerk", CLERK, body="You are a pirate.")
    other = await replay_run(runner, first.run_id[-8:], model="mockai:gpt-mini")
    sent = _request(mock, 3)
    assert sent["messages"] == original["messages"] and sent["tools"] == original["tools"]
    assert json.loads(sent["model"]) == "gpt-mini"
    assert "clerk of Lyon" in sent["messages"] and "pirate" not in sent["messages"]
    assert other.result.text == "None at all." and other.fork.thread.id != again.fork.thread.id


async def test_two_runs_each_replay_their_own_message(
    runner: AgentRunner, mock: MockProvider
) -> None:
    mock.queue(Reply(text="One."), Reply(text="Two."), Reply(text="One again."))
    one = await runner.run_agent("clerk", "t-main", "First?", input={"office": "Lyon"})
    two = await runner.run_agent("clerk", "t-main", "Second?", input={"office": "Lyon"})
    assert two.text == "Two."
    again = await replay_run(runner, one.run_id)
    last = mock.requests[-1].body["messages"]
    assert last[-1]["content"] == "First?" and "Second?" not in json.dumps(last)
    assert again.fork.at == 8 and again.result.text == "One again."
    mock.queue(Reply(text="Two again."))
    second = await replay_run(runner, two.run_id)
    last = mock.requests[-1].body["messages"]
    assert last[-1]["content"] == "Second?" and "One." in json.dumps(last)
    assert second.fork.at == 10  # after the first run's message and answer


async def test_the_model_settings_a_run_was_queued_with_are_sent_again(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", "model: mockai:gpt-mock")
    ws = await open_workspace(project)
    try:
        await ws.runner.store.threads.open("t-1", "clerk")
        queued = await ws.runs.queue(
            "clerk", "t-1", "Be brief.", model_settings={"temperature": 0.3, "seed": 7}
        )
        mock.queue(Reply(text="Brief."), Reply(text="Brief again."))
        await ws.worker(concurrency=1).run(until_idle=True)
        sent = mock.requests[-1].body
        assert (sent["temperature"], sent["seed"]) == (0.3, 7)
        await replay_run(ws.runner, queued.run_id)
        again = mock.requests[-1].body
        assert (again["temperature"], again["seed"]) == (0.3, 7)
        assert again["messages"] == sent["messages"]
    finally:
        await ws.close()


async def test_what_cannot_be_replayed_is_refused_naming_why_and_nothing_is_written(
    runner: AgentRunner, mock: MockProvider
) -> None:
    mock.queue(Reply(text="Kept."), Reply(text="Hello."), Reply(text="Kept again."))
    done = await runner.run_agent("clerk", "t-main", "Keep this?", input={"office": "Lyon"})
    with pytest.raises(AgentRunnerError) as unknown:
        await replay_run(runner, "run_nope")
    assert unknown.value.code is ErrorCode.NOT_FOUND
    gone = await runner.run_agent("clerk", "t-other", "hi", input={"office": "Lyon"})
    await runner.store.forks.rewind("t-other", 0)  # its message cut from its thread
    threads = len(await runner.store.threads.list(limit=100))
    with pytest.raises(AgentRunnerError) as cut:
        await replay_run(runner, gone.run_id)
    assert cut.value.code is ErrorCode.VALIDATION
    assert f"run {gone.run_id} cannot be replayed" in cut.value.message
    assert "left no message in thread t-other" in cut.value.message
    assert len(await runner.store.threads.list(limit=100)) == threads  # no fork made
    assert (await replay_run(runner, done.run_id)).original.id == done.run_id  # the control


async def test_a_replay_to_a_model_without_its_key_is_refused_before_the_fork(
    runner: AgentRunner, mock: MockProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    mock.queue(Reply(text="Kept."))
    done = await runner.run_agent("clerk", "t-main", "Keep this?", input={"office": "Lyon"})
    threads = len(await runner.store.threads.list(limit=100))
    runs = len(await runner.store.runs.list(limit=100))
    with pytest.raises(AgentRunnerError) as refused:
        await replay_run(runner, done.run_id, model="openai:gpt-4.1-mini")
    assert refused.value.code is ErrorCode.PROVIDER_AUTH
    assert "OPENAI_API_KEY" in refused.value.message
    assert len(await runner.store.threads.list(limit=100)) == threads  # no fork
    assert len(await runner.store.runs.list(limit=100)) == runs  # no run
