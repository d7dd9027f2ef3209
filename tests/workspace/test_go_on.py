"""A decided run gone on with (``workspace.approvals.go_on``, what ``approve`` and the inline
decisions share): served here when no worker is alive, followed when one is, its events passed
on from where it paused until it ends or waits again; Ctrl-C's stop cancels what is served
here and only stops following what is served elsewhere."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentrunner.runtime.compose import open_workspace
from agentrunner.testing import MockProvider, Reply
from agentrunner.workspace.approvals import go_on, paused_at, waiting_on
from agentrunner.workspace.workspace import Workspace
from tests.runner.conftest import Agent

CLERK = "model: mockai:gpt-mock\ncapabilities: [notes]\napproval:\n  tools: [note_create]"


async def _waiting(ws: Workspace, thread: str) -> tuple[str, int]:
    """A run of clerk's on ``thread`` that waits, decided (approved): its id, and where it
    paused."""
    result = await ws.runner.run_agent("clerk", thread, "write the plan down")
    assert result.status == "waiting"
    after = await paused_at(ws.app.store, result.run_id)
    assert after > 0
    [request] = await waiting_on(ws.app.store, result.run_id)
    await ws.runner.waits.decide(request.id, approve=True, by="ana")
    return result.run_id, after


async def test_served_here_or_followed_from_a_worker_elsewhere(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", CLERK)
    ws = await open_workspace(project)
    elsewhere = ws.worker(concurrency=1)
    serving: asyncio.Future[int] | None = None
    try:
        for answer in ("Noted here.", "Noted elsewhere."):
            mock.queue(
                Reply(tool_calls=[("note_create", {"title": answer, "body": "x"})]),
                Reply(text=answer),
            )
        run_id, after = await _waiting(ws, "t1")
        seen: list[tuple[str, Any]] = []
        gone = await go_on(ws, run_id, lambda kind, data: seen.append((kind, data)), after=after)
        assert gone.served_here and not gone.stopped
        assert gone.run is not None and gone.run.status == "completed"
        kinds = [kind for kind, _ in seen]
        assert kinds[0] == "approval.decided"  # nothing from before its pause
        assert kinds[-1] == "agent.idle" and "agent.tool_result" in kinds
        assert [d["text"] for k, d in seen if k == "agent.message"] == ["Noted here."]

        serving = asyncio.ensure_future(elsewhere.run())  # a live worker: it serves the run
        while not await ws.app.store.workers.alive():
            await asyncio.sleep(0.05)
        run_id, after = await _waiting(ws, "t2")
        seen.clear()
        gone = await go_on(ws, run_id, lambda kind, data: seen.append((kind, data)), after=after)
        assert not gone.served_here and gone.run is not None and gone.run.status == "completed"
        assert [d["text"] for k, d in seen if k == "agent.message"] == ["Noted elsewhere."]
        assert elsewhere.served == 1
    finally:
        elsewhere.stop()
        if serving is not None:
            await serving
        await ws.close()


async def test_stop_cancels_what_is_served_here_and_leaves_a_worker_elsewhere_to_it(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", CLERK)
    ws = await open_workspace(project)
    elsewhere = ws.worker(concurrency=1)
    serving: asyncio.Future[int] | None = None
    try:
        for answer in ("Too slow.", "Done anyway."):
            mock.queue(
                Reply(tool_calls=[("note_create", {"title": answer, "body": "x"})]),
                Reply(text=answer, chunk_delay_s=0.05),
            )
        stop = asyncio.Event()

        def until_it_works(kind: str, data: Any) -> None:
            if kind == "agent.working":  # it went on: Ctrl-C now
                stop.set()

        run_id, after = await _waiting(ws, "t1")
        gone = await go_on(ws, run_id, until_it_works, after=after, stop=stop)
        assert gone.served_here and gone.stopped
        assert gone.run is not None and gone.run.status == "cancelled"

        serving = asyncio.ensure_future(elsewhere.run())
        while not await ws.app.store.workers.alive():
            await asyncio.sleep(0.05)
        stop = asyncio.Event()
        run_id, after = await _waiting(ws, "t2")
        gone = await go_on(ws, run_id, until_it_works, after=after, stop=stop)
        assert gone.stopped and not gone.served_here
        assert gone.run is not None and gone.run.status != "cancelled"  # it goes on there
        while (run := await ws.app.store.runs.get(run_id)) is not None and not run.settled:
            await asyncio.sleep(0.05)
        assert run is not None and run.status == "completed"
    finally:
        elsewhere.stop()
        if serving is not None:
            await serving
        await ws.close()
