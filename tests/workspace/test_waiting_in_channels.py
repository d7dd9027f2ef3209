"""A run answering a post or a DM that waits for a person (issue 41): the channel shows a
notice naming the agent, the tool and how to decide, written with the run's pause; the run
stays `waiting` (not "no_tool_call"); `dm` and `post --follow` say it waits, not that it
failed; once decided, the reply comes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agentrunner.runtime.compose import open_workspace
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent

CLERK = "model: mockai:gpt-mock\ncapabilities: [notes]\napproval:\n  tools: [note_create]"


async def test_a_waiting_channel_run_leaves_a_notice_with_its_pause(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", CLERK)
    agent("filer", CLERK.replace("note_create", "note_*"))
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "plan", "body": "x"})]),
        Reply(text="Noted the plan."),
    )
    ws = await open_workspace(project)
    try:
        store = ws.app.store
        channel = await ws.channels.create("ops", members=["clerk", "you"])
        posted = await ws.channels.post(channel, "you", "please write the plan down")
        await ws.worker(concurrency=1).run(until_idle=True)
        [run_id] = posted.run_ids
        run = await store.runs.get(run_id)
        assert run is not None and run.status == "waiting"
        assert run.stop_reason != "no_tool_call"  # it did not answer yet: it waits
        [request] = await store.approvals.of_run(run_id)
        messages = await store.channels.after(channel.id, "", 100)
        [notice] = [m for m in messages if m.sender_kind == "notice"]
        assert notice.run_id == run_id and notice.sender == "clerk"
        assert notice.content.startswith("clerk waits for a person's decision to run note_create")
        assert f"agentrunner approve {request.id}" in notice.content
        assert notice.thread_root_id == posted.message.thread_root_id

        await ws.runner.waits.decide(request.id, approve=True, by="ana")
        await ws.worker(concurrency=1).run(until_idle=True)
        run = await store.runs.get(run_id)
        assert run is not None and run.status == "completed"
        said = [m.content for m in await store.channels.after(channel.id, "", 100)]
        assert said[-1] == "Noted the plan."  # the reply came, after the notice
        assert sum("waits for a person's decision" in text for text in said) == 1

        # another agent, another tool: its own notice names them
        mock.queue(Reply(tool_calls=[("note_list", {})]))
        dm = await ws.channels.dm_channel("filer", "you")
        other = await ws.channels.post(dm, "you", "what do we have?")
        await ws.worker(concurrency=1).run(until_idle=True)
        [asked] = await store.approvals.of_run(other.run_ids[0])
        [second] = [
            m for m in await store.channels.after(dm.id, "", 100) if m.sender_kind == "notice"
        ]
        assert second.content.startswith("filer waits for a person's decision to run note_list")
        assert f"agentrunner approve {asked.id}" in second.content
    finally:
        await ws.close()


def test_dm_says_the_reply_waits_for_a_decision(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", CLERK)
    mock.queue(Reply(tool_calls=[("note_create", {"title": "plan", "body": "x"})]))
    done = subprocess.run(
        [sys.executable, "-m", "agentrunner", "dm", "clerk", "write the plan down"],
        cwd=project,
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 3, done.stderr  # as `run` exits when its run waits
    assert "clerk waits for a decision" in done.stderr
    assert "failed" not in done.stderr and "Traceback" not in done.stderr
    [notice] = done.stdout.splitlines()
    assert "! clerk waits for a person's decision to run note_create" in notice
    assert "agentrunner approve ap_" in notice


async def test_a_run_that_spoke_before_its_pause_is_not_made_to_speak_again(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    """It sent its message with the step that paused: once decided, its final words are not
    delivered as a second message (it spoke by the tool, as a run that never waited would)."""
    agent("clerk", CLERK)
    mock.queue(
        Reply(
            tool_calls=[
                ("send_message", {"text": "On it: writing the plan down."}),
                ("note_create", {"title": "plan", "body": "x"}),
            ]
        ),
        Reply(text="(the plan is written)"),
        Reply(text="Noted."),  # a second post, which never spoke: its words are delivered
    )
    ws = await open_workspace(project)
    try:
        store = ws.app.store
        channel = await ws.channels.create("ops", members=["clerk", "you"])
        posted = await ws.channels.post(channel, "you", "please write the plan down")
        await ws.worker(concurrency=1).run(until_idle=True)
        [request] = await store.approvals.of_run(posted.run_ids[0])
        await ws.runner.waits.decide(request.id, approve=True, by="ana")
        await ws.worker(concurrency=1).run(until_idle=True)
        run = await store.runs.get(posted.run_ids[0])
        assert run is not None and run.status == "completed"
        said = [m.content for m in await store.channels.after(channel.id, "", 100)]
        assert said[1] == "On it: writing the plan down."
        assert "(the plan is written)" not in said

        await ws.channels.post(channel, "you", "and the budget?")
        await ws.worker(concurrency=1).run(until_idle=True)
        said = [m.content for m in await store.channels.after(channel.id, "", 100)]
        assert said[-1] == "Noted."
    finally:
        await ws.close()
