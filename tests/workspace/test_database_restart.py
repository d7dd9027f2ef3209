"""A PostgreSQL restart under a worker with queued runs and a server being read from: nothing
is lost, no new worker is needed, and no read fails."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest

from agentrunner.runtime.compose import open_workspace
from agentrunner.testing import MockProvider, Reply
from tests.server.conftest import ServerThread
from tests.workspace.test_workers import fleet, start_worker, stop, wait_for

__all__ = ["fleet"]

AUTH = {"authorization": "Bearer secret-token"}
SETTLED = ("completed", "failed", "cancelled")


@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
async def test_a_postgres_restart_loses_no_queued_run_and_fails_no_read(
    fleet: Path, mock: MockProvider, restart_postgres: Callable[[], None]
) -> None:
    from agentrunner.interfaces.server import create_app

    api = ServerThread(create_app(fleet, token="secret-token", worker=False))
    worker = start_worker(fleet, concurrency=1)
    ws = await open_workspace(fleet)
    store = ws.runner.store
    try:
        channel = await ws.channels.create("ops", members=["a0", "you"])
        mock.queue(Reply(text="in flight across the restart", delay_s=1.0), model="gpt-mock")
        queued = [await ws.channels.post(channel, "you", f"message {n}") for n in range(5)]
        run_ids = [p.run_ids[0] for p in queued]

        async def in_flight() -> bool:
            run = await store.runs.get(run_ids[0])
            return run is not None and run.status == "running" and len(mock.requests) >= 1

        await wait_for(in_flight, 30)
        reads: list[tuple[str, int | str]] = []
        restarted = asyncio.Event()

        async def read_throughout() -> None:
            """Reads as a client makes them, none retried, until the restart is over."""
            paths = [f"/runs/{run_ids[0]}", "/threads?limit=5", "/channels/ops/messages", "/costs"]
            async with httpx2.AsyncClient(base_url=api.url, headers=AUTH, timeout=60) as client:
                while not restarted.is_set() or len(reads) < 20:
                    for path in paths:
                        try:
                            reads.append((path, (await client.get(path)).status_code))
                        except httpx2.HTTPError as exc:  # the connection reset: as bad as a 500
                            reads.append((path, type(exc).__name__))
                    await asyncio.sleep(0.01)

        reader = asyncio.ensure_future(read_throughout())
        try:
            await asyncio.to_thread(restart_postgres)
        finally:
            restarted.set()
        await reader
        after = await ws.channels.post(channel, "you", "posted after the restart")  # LISTEN again

        async def all_served() -> bool:
            runs = [await store.runs.get(r) for r in [*run_ids, after.run_ids[0]]]
            return all(run is not None and run.status in SETTLED for run in runs)

        try:
            await wait_for(all_served, 60)
        finally:
            assert worker.poll() is None, "the worker did not live through the restart"
        runs = [await store.runs.get(r) for r in [*run_ids, after.run_ids[0]]]
    finally:
        exit_code = stop(worker)
        api.stop()
        await ws.close()
    assert exit_code == 0
    in_flight_run, *rest = runs
    assert in_flight_run is not None and in_flight_run.status in ("completed", "failed")
    assert all(run is not None and run.status == "completed" for run in rest), rest
    assert len({run.worker_id for run in runs if run is not None}) == 1  # no new worker
    assert [r for r in reads if r[1] != 200] == []
    assert len(reads) >= 20


async def test_a_database_away_past_the_retries_is_a_503_to_try_again(
    fleet: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the store could not serve within its retries is answered 503 with Retry-After —
    the client's cue to try again — not 500; other errors keep their statuses."""
    from agentrunner.interfaces.server import create_app
    from agentrunner.store.drivers import DatabaseUnavailable

    ws = await open_workspace(fleet)
    api = ServerThread(create_app(fleet, token="secret-token", worker=False, workspace=ws))
    try:

        async def away(run_id: str) -> None:
            raise DatabaseUnavailable("PostgreSQL could not be reached for 30 s (last error: X)")

        async with httpx2.AsyncClient(base_url=api.url, headers=AUTH, timeout=30) as client:
            missing = await client.get("/runs/run_nope")
            monkeypatch.setattr(ws.runner.store.runs, "get", away)
            unavailable = await client.get("/runs/run_nope")
    finally:
        api.stop()
        await ws.close()
    assert missing.status_code == 404
    assert unavailable.status_code == 503 and unavailable.headers["retry-after"] == "5"
    error = unavailable.json()["error"]
    assert error["code"] == "runner_io" and "could not be reached" in error["message"]
    assert "reconnects by itself" in error["hint"]
