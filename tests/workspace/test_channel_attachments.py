"""Files in channel and DM messages (docs/attachments.md), on SQLite and PostgreSQL: a person's
post carries them to every member agent it reaches, kept once; the channel's rows and listings
name them; a message past its bounds is refused with nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentrunner.engine import UserMessage
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.runtime.compose import open_workspace
from agentrunner.store.records import from_json
from agentrunner.workspace.workspace import Workspace
from tests.attachment_files import image_attachment, pdf_attachment
from tests.runner.conftest import Agent


@pytest.fixture
async def workspace(agent: Agent, project: Path) -> Any:
    """ann and bob on the `test` model (it takes images and PDFs and names what it was
    given), in #team with you; their replies are not routed on (chain depth 0)."""
    toml = project / "agentrunner.toml"
    toml.write_text(toml.read_text().replace("[defaults]\n", "[defaults]\nchain_depth = 0\n"))
    for name in ("ann", "bob"):
        agent(name, f"name: {name}\nmodel: test")
    ws = await open_workspace(project)
    yield ws
    await ws.close()


async def _user_message(ws: Workspace, thread_id: str) -> UserMessage:
    """The last message a person sent on an agent's thread (what its run was sent)."""
    history, _ = await ws.app.store.messages.tail(thread_id, 10)
    [user, *_] = [m for m in reversed(history) if isinstance(m, UserMessage)]
    return user


async def _replies(ws: Workspace, channel_id: str, after: str) -> dict[str, str]:
    said = await ws.app.store.channels.after(channel_id, after, 100)
    return {m.sender: m.content for m in said if m.sender_kind == "agent"}


async def test_a_post_s_file_reaches_every_member_agent_stored_once(
    workspace: Workspace,
) -> None:
    store = workspace.app.store
    channel = await workspace.channels.create("team", members=["ann", "bob", "you"])
    shot = image_attachment("shot.png", 6, 4, "green")
    posted = await workspace.channels.post(channel, "you", "what is this?", attachments=[shot])
    assert len(posted.run_ids) == 2
    assert posted.message.attachments == (shot,) and posted.message.attachments[0].data is None
    assert await store.attachments.stats() == (1, shot.size)  # kept with the post, once
    await workspace.worker().run(until_idle=True)

    for agent_id in ("ann", "bob"):  # each run's user message carries it, by reference
        user = await _user_message(workspace, f"{agent_id}@team")
        assert [a.sha256 for a in user.attachments] == [shot.sha256]
        assert user.attachments[0].name == "shot.png" and "what is this?" in user.content
    replies = await _replies(workspace, channel.id, posted.message.id)
    assert set(replies) == {"ann", "bob"}
    assert all("(I was given: [image: shot.png, image/png, 6x4" in r for r in replies.values())
    assert await store.attachments.stats() == (1, shot.size)  # two agents, one copy
    # the channel names it: the post's own row, read back without its bytes
    read = await store.channels.message(channel.id, posted.message.id)
    assert read is not None
    assert read.attachments == (shot,) and read.attachments[0].data is None

    # a second post, with another file: each agent is sent the new one, not the first again
    report = pdf_attachment("report.pdf", pages=3)
    second = await workspace.channels.post(channel, "you", "and this?", attachments=[report])
    await workspace.worker().run(until_idle=True)
    replies = await _replies(workspace, channel.id, second.message.id)
    assert set(replies) == {"ann", "bob"}
    for reply in replies.values():
        given = reply.split("I was given:")[1]
        assert "report.pdf" in given and "3 pages" in given and "shot.png" not in given
    # ... but the transcript names the first one, as said before
    assert "[image: shot.png" in (await _user_message(workspace, "ann@team")).content
    assert await store.attachments.stats() == (2, shot.size + report.size)


async def test_a_dm_s_file_reaches_its_agent(workspace: Workspace) -> None:
    dm = await workspace.channels.dm_channel("ann")
    report = pdf_attachment("notes.pdf", pages=2)
    posted = await workspace.channels.post(dm, None, "summarise", attachments=[report])
    await workspace.worker().run(until_idle=True)
    replies = await _replies(workspace, dm.id, posted.message.id)
    assert list(replies) == ["ann"] and "notes.pdf" in replies["ann"]
    assert "2 pages" in replies["ann"]
    run = await workspace.app.store.runs.get(posted.run_ids[0])
    assert run is not None and run.status == "completed"
    user = await _user_message(workspace, run.thread_id or "")
    assert [a.name for a in user.attachments] == ["notes.pdf"]


async def test_text_only_and_agents_messages_carry_no_files(workspace: Workspace) -> None:
    store = workspace.app.store
    channel = await workspace.channels.create("team", members=["ann", "you"])
    plain = await workspace.channels.post(channel, "you", "just words")
    await workspace.worker().run(until_idle=True)
    rows = await store.messages.db.fetch_all(
        "SELECT sender, attachments FROM channel_messages ORDER BY id", {}
    )
    assert [(r["sender"], r["attachments"]) for r in rows] == [("you", None), ("ann", None)]
    assert plain.message.attachments == ()

    # an agent's answer to a post with a file keeps none of it
    await workspace.channels.post(channel, "you", "look", attachments=[image_attachment()])
    await workspace.worker().run(until_idle=True)
    rows = await store.messages.db.fetch_all(
        "SELECT sender, attachments FROM channel_messages ORDER BY id", {}
    )
    assert [r["sender"] for r in rows] == ["you", "ann", "you", "ann"]
    assert rows[3]["attachments"] is None
    [file] = from_json(rows[2]["attachments"])
    assert file["name"] == "a.png" and "data" not in file


@pytest.mark.parametrize(
    ("limit", "reason"), [("max_files = 1", "files"), ("max_message_mb = 0.00015", "message_size")]
)
async def test_a_message_past_its_bounds_is_refused_with_nothing_written(
    agent: Agent, project: Path, limit: str, reason: str
) -> None:
    toml = project / "agentrunner.toml"
    toml.write_text(toml.read_text() + f"\n[attachments]\n{limit}\n")
    agent("ann", "name: ann\nmodel: test")
    ws = await open_workspace(project)
    try:
        channel = await ws.channels.create("team", members=["ann", "you"])
        files = [image_attachment("one.png", 30, 30), image_attachment("two.png", 31, 30)]
        assert max(a.size for a in files) < 150 < sum(a.size for a in files)
        with pytest.raises(AgentRunnerError) as raised:
            await ws.channels.post(channel, "you", "two files", attachments=files)
        assert raised.value.code is ErrorCode.ATTACHMENT_REFUSED
        assert raised.value.details["reason"] == reason
        store = ws.app.store
        assert await store.channels.after(channel.id, "", 10) == []
        assert await store.runs.list() == []
        assert await store.attachments.stats() == (0, 0)
        # one of them is within the bounds
        one = await ws.channels.post(channel, "you", "one file", attachments=files[1:])
        assert len(one.run_ids) == 1 and await store.attachments.stats() == (1, files[1].size)
    finally:
        await ws.close()


async def test_deleting_an_agent_s_thread_leaves_the_channel_s_file(
    workspace: Workspace,
) -> None:
    """The channel still shows the file (and its dashboard's thumbnail still loads) after the
    thread of an agent that was sent it is deleted: the message's use of it is its own."""
    store = workspace.app.store
    channel = await workspace.channels.create("team", members=["ann", "you"])
    shot = image_attachment("kept.png")
    await workspace.channels.post(channel, "you", "keep this", attachments=[shot])
    await workspace.worker().run(until_idle=True)
    assert await store.attachments.uses(shot.sha256) == 2  # the post's and ann's thread's
    deleted, dropped = await store.threads.delete("ann@team", store.attachments)
    assert deleted == ["ann@team"] and dropped == 0
    assert await store.attachments.data(shot.sha256) == shot.data
