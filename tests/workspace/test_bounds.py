"""What the library refuses whichever interface it is called from: a full queue, and input
that cannot be stored — the same on SQLite and PostgreSQL, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.run.idempotency import IdempotencyKey
from agentrunner.runtime.compose import open_workspace
from agentrunner.workspace.workspace import Workspace
from tests.runner.conftest import Agent


@pytest.fixture
async def bounded(agent: Agent, project: Path) -> Any:
    with (project / "agentrunner.toml").open("a") as config:
        config.write("\n[workers]\nmax_queue = 2\n")
    for name in ("ann", "bob"):
        agent(name)
    ws = await open_workspace(project)
    yield ws
    await ws.close()


async def test_a_full_queue_refuses_runs_and_posts_and_writes_nothing(bounded: Workspace) -> None:
    ws = bounded
    store = ws.runner.store
    await store.threads.open("t1", "ann")
    await ws.runs.queue("ann", "t1", "one")
    await ws.runs.queue("ann", "t1", "two")
    with pytest.raises(AgentRunnerError) as info:
        await ws.runs.queue("ann", "t1", "three")
    error = info.value
    assert error.code is ErrorCode.QUEUE_FULL and error.retryable
    assert "'ann' already has 2 runs queued" in error.message and "max_queue" in (error.hint or "")
    assert error.details["retry_after_s"] > 0
    general = await ws.channels.create("general", members=["ann", "bob", "you"])
    with pytest.raises(AgentRunnerError) as posted:
        await ws.channels.post(general, "you", "hello both")  # bob has room, ann has none
    assert posted.value.code is ErrorCode.QUEUE_FULL
    assert await store.channels.after(general.id, "", 10) == []
    assert (await store.mailbox.depths()) == {"ann": {"created": 2}}
    # bob alone has room; an agent's reply inside a run is bounded by the chain depth instead.
    quiet = await ws.channels.create("quiet", members=["bob", "you"])
    assert len((await ws.channels.post(quiet, "you", "hi bob")).run_ids) == 1
    reply = await ws.channels._speak(
        general, "bob", "a reply", run_id="run_bob", thread_root=None, depth=1
    )
    assert reply.run_ids and (await store.mailbox.depths())["ann"]["created"] == 3


async def test_a_run_is_queued_only_on_a_thread_that_exists(bounded: Workspace) -> None:
    """Opening a thread is its own request: a run on an unknown id (or on the beginning of
    one: no guessing here) is ``thread_not_found``, and neither a thread nor a run appears."""
    ws = bounded
    store = ws.runner.store
    await store.threads.open("t-10", "bob")
    for agent_id, thread_id, hint in (
        ("ann", "t-new", "'ann' has no threads yet."),
        ("bob", "t-1", "Threads of 'bob', newest first: t-10."),
    ):
        with pytest.raises(AgentRunnerError) as info:
            await ws.runs.queue(agent_id, thread_id, "hello")
        error = info.value
        assert error.code is ErrorCode.THREAD_NOT_FOUND
        assert error.message == f"no thread '{thread_id}' of agent '{agent_id}'"
        assert error.hint and hint in error.hint and "Open one first" in error.hint
    assert [t.id for t in await store.threads.list()] == ["t-10"]
    assert await store.mailbox.depths() == {}
    await store.threads.open("t-new", "ann")
    queued = await ws.runs.queue("ann", "t-new", "hello")
    assert queued.thread_id == "t-new" and (await store.mailbox.depths()) == {"ann": {"created": 1}}


async def test_a_repeated_request_is_answered_before_the_bound(bounded: Workspace) -> None:
    ws = bounded
    await ws.runner.store.threads.open("t1", "ann")
    key = IdempotencyKey.of("test", "k", {"message": "one"})
    first = await ws.runs.queue("ann", "t1", "one", idempotency=key)
    await ws.runs.queue("ann", "t1", "two")
    again = await ws.runs.queue("ann", "t1", "one", idempotency=key)
    assert again.repeated and again.run_id == first.run_id and not first.repeated
    other = IdempotencyKey.of("test", "k", {"message": "changed"})
    with pytest.raises(AgentRunnerError) as info:
        await ws.runs.queue("ann", "t1", "changed", idempotency=other)
    assert info.value.details == {"invalid": "Idempotency-Key"}


async def test_the_post_command_says_the_queue_is_full(bounded: Workspace, project: Path) -> None:
    general = await bounded.channels.create("general", members=["ann", "you"])
    for text in ("one", "two"):
        await bounded.channels.post(general, "you", text)
    done = subprocess.run(
        [sys.executable, "-m", "agentrunner", "post", "general", "three"],
        cwd=project,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "error: queue_full: agent 'ann' already has 2 runs queued" in done.stderr
    assert "hint:" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda ws: ws.runner.run_agent("ann", "t\x00", "hi"), "thread_id"),
        (lambda ws: ws.runner.run_agent("ann", "t" * 601, "hi"), "thread_id"),
        (lambda ws: ws.runner.run_agent("ann", "t", "a\x00b"), "message"),
        (lambda ws: ws.runner.run_agent("ann", "t", "hi", input={"k": "\x00"}), "input"),
        (lambda ws: ws.runner.run_task("ann", "hi", input={"d": ["\ud800"]}), "input"),
        (lambda ws: ws.runs.queue("ann", "t", "hi", input={"k": "a" * 200_001}), "input"),
        (lambda ws: ws.runs.queue("ann", "t" * 201, "hi"), "thread_id"),
        (lambda ws: ws.channels.channel("gen\x00eral"), "channel"),
        (lambda ws: ws.channels.dm_channel("ann", "ada\n"), "sender"),
    ],
)
async def test_input_that_cannot_be_stored_is_refused_before_anything_is_written(
    bounded: Workspace, call: Any, field: str
) -> None:
    with pytest.raises(AgentRunnerError) as info:
        await call(bounded)
    assert info.value.code is ErrorCode.VALIDATION and info.value.details == {"invalid": field}
    store = bounded.runner.store
    assert await store.threads.list() == [] and await store.mailbox.depths() == {}


async def test_channel_posts_check_sender_text_and_reply_id(bounded: Workspace) -> None:
    general = await bounded.channels.create("general", members=["ann", "you"])
    for sender, text, reply_to, field in (
        ("you\x00", "hi", None, "sender"),
        ("you", "a\x00", None, "text"),
        ("you", "a" * 200_001, None, "text"),
        ("you", "hi", "m\x00", "thread"),
    ):
        with pytest.raises(AgentRunnerError) as info:
            await bounded.channels.post(general, sender, text, thread_root=reply_to)
        assert info.value.details == {"invalid": field}
    assert await bounded.runner.store.channels.after(general.id, "", 10) == []
