"""A worker stops a run only when the run was taken from it (issue 47 item 2): a channel run
goes on after its own settle — it posts its reply — and a lease renewal landing in between
found the run no longer running and logged "settled elsewhere (its lease ran out)", aborting
it, 19 times in a 20-minute soak, though no lease had run out. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from agentrunner.runtime.compose import open_workspace
from agentrunner.testing import MockProvider, Reply
from agentrunner.workspace.channels.service import ChannelService
from tests.runner.conftest import Agent


async def test_a_renewal_after_the_run_s_own_settle_is_no_lost_lease(
    agent: Agent,
    project: Path,
    mock: MockProvider,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write("\n[workers]\nlease_s = 0.3\n")  # a renewal every 0.1 s
    agent("ann")
    speak = ChannelService._speak

    async def slowly(self: ChannelService, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.5)  # settled, not yet replied: renewals land in between
        return await speak(self, *args, **kwargs)

    monkeypatch.setattr(ChannelService, "_speak", slowly)
    workspace = await open_workspace(project)
    try:
        channel = await workspace.channels.create("general", members=["ann", "you"])
        mock.queue(Reply(text="Here is my answer."))  # a plain answer: posted after the settle
        posted = await workspace.channels.post(channel, "you", "ann, answer please")
        with caplog.at_level(logging.WARNING, logger="agentrunner"):
            await workspace.worker().run(until_idle=True)
        [reply] = await workspace.runner.store.channels.after(channel.id, posted.message.id)
        run = await workspace.runner.store.runs.get(posted.run_ids[0])
    finally:
        await workspace.close()
    assert (reply.sender, reply.content) == ("ann", "Here is my answer.")
    assert run is not None and run.status == "completed"
    assert not [r for r in caplog.records if "settled elsewhere" in r.getMessage()]


async def test_a_run_failed_by_the_lease_rules_is_still_stopped_and_said(
    agent: Agent, project: Path, mock: MockProvider, caplog: pytest.LogCaptureFixture
) -> None:
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write("\n[workers]\nlease_s = 0.3\n")
    agent("ann")
    workspace = await open_workspace(project)
    try:
        store = workspace.runner.store
        channel = await workspace.channels.create("general", members=["ann", "you"])
        mock.queue(Reply(text="Too late.", delay_s=2.0))
        posted = await workspace.channels.post(channel, "you", "ann?")
        [run_id] = posted.run_ids
        worker = asyncio.ensure_future(workspace.worker().run(until_idle=True))
        with caplog.at_level(logging.WARNING, logger="agentrunner"):
            while (await store.runs.get(run_id)).status != "running":  # type: ignore[union-attr]
                await asyncio.sleep(0.02)
            # as if this worker had been paused past its lease: another process's upkeep. The
            # worker's own upkeep may renew the lease between the two statements, or fail the
            # run first (a CI run saw one of them): until the lease rules have failed it.
            expire = f"UPDATE runs SET lease_until = 0 WHERE id = '{run_id}'"  # an id we made
            deadline = time.monotonic() + 10
            while (await store.runs.get(run_id)).status == "running":  # type: ignore[union-attr]
                assert time.monotonic() < deadline
                await store.driver.execute(expire, {})
                await store.mailbox.fail_expired()
            await asyncio.wait_for(worker, timeout=30)
        run = await store.runs.get(run_id)
    finally:
        await workspace.close()
    assert run is not None and (run.status, run.error_code) == ("failed", "worker_lost")
    assert [r for r in caplog.records if "settled elsewhere" in r.getMessage()]
