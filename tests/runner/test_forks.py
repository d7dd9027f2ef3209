"""Trying again from a point (issue 45, docs/threads.md): a fork begins with its parent's first
messages and what its next run sends the model is the parent's history byte for byte, then the
new message; a rewind cuts a thread back in place. On SQLite and PostgreSQL (``project``).

Threads are seeded with turns that ask, call a tool, get its result and answer (4 messages
each: 1-4, 5-8, 9-12), so points fall on a user message, a tool call, a tool result and an
answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentRunner
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.runtime.compose import open_runner as open_project_runner
from agentrunner.store.records import ThreadSummary
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.runner.test_compaction import seed, turns


def sent(mock: MockProvider) -> list[str]:
    """The conversation of the last request, each message as the wire sent it (system first)."""
    return [json.dumps(m, sort_keys=True) for m in mock.requests[-1].body["messages"]]


async def stored(runner: AgentRunner, thread_id: str) -> list[tuple[int, str]]:
    page = await runner.store.messages.page(thread_id, limit=1000)
    return [(seq, json.dumps(m.to_dict(), sort_keys=True)) for seq, m, _, _ in page]


@pytest.fixture
async def runner(agent: Agent, project: Path) -> Any:
    agent("clerk", "model: mockai:gpt-mock")
    opened = await open_project_runner(project)
    await seed(opened.store, "t-main", "clerk", turns("p", 3))
    yield opened
    await opened.close()


@pytest.mark.parametrize(
    ("at", "kept"),
    [(8, 8), (9, 9), (7, 7), (6, 7), (0, 0)],
    ids=["an-answer", "a-user-message", "a-tool-result", "a-tool-call", "nothing"],
)
async def test_a_fork_sends_its_parents_history_byte_for_byte_then_the_new_message(
    runner: AgentRunner, mock: MockProvider, at: int, kept: int
) -> None:
    mock.queue(Reply(text="parent answer"), Reply(text="fork answer"))
    assert (await runner.run_agent("clerk", "t-main", "and tomorrow?")).text == "parent answer"
    parent_sent = sent(mock)  # system, messages 1-12, the new one
    parent_before = await stored(runner, "t-main")

    cut = await runner.store.forks.fork("t-main", at)
    assert (cut.at, cut.asked, cut.left_out) == (kept, at, 14 - kept)  # 12 seeded, 2 of the run
    fork = cut.thread
    assert fork.id != "t-main" and fork.agent_id == "clerk"
    assert (fork.forked_from, fork.forked_at, fork.message_count) == ("t-main", kept, kept)
    assert [seq for seq, _ in await stored(runner, fork.id)] == list(range(1, kept + 1))

    result = await runner.run_agent("clerk", fork.id, "and next week?")
    assert result.text == "fork answer"
    fork_sent = sent(mock)
    assert fork_sent[: 1 + kept] == parent_sent[: 1 + kept]  # the system prompt, then 1..kept
    assert json.loads(fork_sent[-1])["content"] == "and next week?"
    assert len(fork_sent) == 1 + kept + 1
    # the parent is as it was; the fork holds its prefix and its own run
    assert await stored(runner, "t-main") == parent_before
    assert (await stored(runner, fork.id))[:kept] == parent_before[:kept]
    parent = await runner.store.threads.get("t-main")
    assert parent is not None and parent.forked_from is None and parent.message_count == 14


async def test_a_fork_past_a_compaction_keeps_its_summary_and_one_before_it_does_not(
    runner: AgentRunner, mock: MockProvider
) -> None:
    summary = ThreadSummary("t-main", 4, "SUMMARY of turn 0", "gpt-summary", "r-0", 1, 10, 0.0)
    await runner.store.batch(runner.store.threads.summary_ops(summary))
    mock.queue(Reply(text="parent"), Reply(text="past"), Reply(text="before"))
    await runner.run_agent("clerk", "t-main", "again?")
    parent_sent = sent(mock)
    assert "SUMMARY of turn 0" in parent_sent[0] + parent_sent[1]  # sent, in place of 1-4
    assert not any("p question 0" in m for m in parent_sent)

    past = (await runner.store.forks.fork("t-main", 10)).thread  # 10: a call, moved to 11
    assert past.summary_through == 4 and past.forked_at == 11
    kept = await runner.store.threads.summary(past.id)
    assert kept is not None and kept.summary == "SUMMARY of turn 0"
    await runner.run_agent("clerk", past.id, "other?")
    past_sent = sent(mock)
    # the summary and messages 5-11 as the parent sent them, then the new message
    assert past_sent[:-1] == parent_sent[: len(past_sent) - 1]
    assert len(past_sent) == len(parent_sent) - 1 - 1 + 1  # 12 and the parent's new one cut

    before = (await runner.store.forks.fork("t-main", 3)).thread
    assert before.summary_through == 0 and await runner.store.threads.summary(before.id) is None
    await runner.run_agent("clerk", before.id, "other?")
    before_sent = sent(mock)
    assert not any("SUMMARY" in m for m in before_sent)
    assert [json.loads(m)["role"] for m in before_sent] == [
        "system",
        "user",
        "assistant",
        "tool",
        "user",
    ]


async def test_a_rewind_cuts_the_thread_in_place_and_the_runs_keep_what_was_cut(
    runner: AgentRunner, mock: MockProvider
) -> None:
    mock.queue(Reply(text="cut answer"), Reply(text="after the rewind"))
    cut_run = await runner.run_agent("clerk", "t-main", "this goes")
    before = await stored(runner, "t-main")

    cut = await runner.store.forks.rewind("t-main", 8)
    assert (cut.at, cut.left_out, cut.thread.id) == (8, 6, "t-main")
    assert cut.thread.message_count == 8 and cut.thread.forked_from is None
    assert await stored(runner, "t-main") == before[:8]
    # what was cut stays in the record of the run that wrote it
    record = await runner.store.runs.get(cut_run.run_id)
    assert record is not None and record.status == "completed"
    logged = [m.content for m in await runner.store.runs.messages(cut_run.run_id)]
    assert "this goes" in logged and "cut answer" in logged

    await runner.run_agent("clerk", "t-main", "instead")
    again = sent(mock)
    assert [json.loads(m).get("content") for m in again][-1] == "instead"
    assert len(again) == 1 + 8 + 1
    assert [seq for seq, _ in await stored(runner, "t-main")] == list(range(1, 11))


async def test_a_point_that_is_not_there_is_refused_naming_the_thread_and_its_range(
    runner: AgentRunner,
) -> None:
    for at in (13, -1):
        with pytest.raises(AgentRunnerError) as refused:
            await runner.store.forks.fork("t-main", at)
        assert refused.value.code is ErrorCode.VALIDATION
        assert "messages 1-12" in refused.value.message and f"message {at}" in refused.value.message
        assert "threads show t-main" in (refused.value.hint or "")
    with pytest.raises(AgentRunnerError) as missing:
        await runner.store.forks.rewind("t-nope", 1)
    assert missing.value.code is ErrorCode.THREAD_NOT_FOUND
    threads = await runner.store.threads.list(limit=100)
    assert [t.id for t in threads] == ["t-main"]  # nothing written
    assert (await runner.store.threads.get("t-main")).message_count == 12  # type: ignore[union-attr]


async def test_a_thread_with_a_waiting_run_is_forked_not_rewound(
    agent: Agent, runner: AgentRunner, mock: MockProvider
) -> None:
    agent(
        "clerk",
        "model: mockai:gpt-mock\ncapabilities: [notes]\napproval:\n  tools: [note_create]",
    )
    mock.queue(Reply(tool_calls=[("note_create", {"title": "x", "body": "y"})]))
    fresh = await open_project_runner(Path.cwd())
    try:
        waiting = await fresh.run_agent("clerk", "t-main", "note it")
        assert waiting.status == "waiting"
        with pytest.raises(AgentRunnerError) as held:
            await fresh.store.forks.rewind("t-main", 4)
        assert held.value.code is ErrorCode.VALIDATION
        assert waiting.run_id in held.value.message and "waiting" in held.value.message
        assert "threads fork t-main" in (held.value.hint or "")
        assert [seq for seq, _ in await stored(fresh, "t-main")] == list(range(1, 15))
        forked = await fresh.store.forks.fork("t-main", 12)
        assert forked.thread.message_count == 12 and forked.thread.waiting_run_id is None
        # 14 made a call that waits for a person: kept without its answer it would be
        # answered "interrupted" in the fork, so the fork ends before it
        before = await fresh.store.forks.fork("t-main", 14)
        assert (before.at, before.asked) == (13, 14)
        assert [seq for seq, _ in await stored(fresh, before.thread.id)] == list(range(1, 14))
    finally:
        await fresh.close()


async def test_files_go_with_a_fork_and_a_rewind_drops_those_only_the_cut_named(
    runner: AgentRunner, mock: MockProvider, project: Path
) -> None:
    from agentrunner.engine.messages import UserMessage
    from tests.engine.attachment_files import FIRST, SECOND

    await seed(runner.store, "t-main", "clerk", [UserMessage("kept", attachments=(FIRST[0],))])
    await seed(runner.store, "t-main", "clerk", [UserMessage("cut", attachments=(SECOND[0],))])
    fork = (await runner.store.forks.fork("t-main", 13)).thread
    [kept] = [m for _, m, _, _ in await runner.store.messages.page(fork.id, after=12)]
    assert [a.sha256 for a in kept.attachments] == [FIRST[0].sha256]
    files_before = (await runner.store.attachments.stats())[0]
    await runner.store.forks.rewind("t-main", 12)
    # SECOND was named only by message 14: dropped; FIRST is still the fork's
    assert (await runner.store.attachments.stats())[0] == files_before - 1
    assert await runner.store.attachments.get(FIRST[0].sha256) is not None
    assert await runner.store.attachments.get(SECOND[0].sha256) is None
    with (project / "agentrunner.toml").open("a") as config:
        config.write('\n[models."mockai:gpt-mock"]\ninput = ["text", "image", "pdf"]\n')
    seeing = await open_project_runner(project)
    try:
        mock.queue(Reply(text="seen"))
        await seeing.run_agent("clerk", fork.id, "what was in it?")
    finally:
        await seeing.close()
    assert any("image" in m for m in sent(mock))  # the fork's file is sent with its message
