"""Clients that leave ``serve``'s streams in the middle of a read (issue 39, item 11): on
PostgreSQL the read ends on its connection, which goes back to the pool, instead of being
cancelled and the connection closed and replaced ("query cancellation interrupted … closing
connection", a WARNING each)."""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest

from agentrunner.store import open_store
from agentrunner.store.drivers import PostgresDriver
from tests.server.conftest import ServerThread

postgres_only = pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
AUTH = {"authorization": "Bearer secret-token"}
CLIENTS = 3


def _until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def _blocked(store_url: str) -> int:
    """The queries waiting for a lock on the server."""
    with psycopg.connect(store_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def _ended(caplog: pytest.LogCaptureFixture) -> list[str]:
    said = (r.getMessage() for r in caplog.records)
    return [m for m in said if "caller went away" in m or "query cancellation" in m]


@postgres_only
def test_clients_leaving_streams_mid_read_leave_the_pool_as_it_was(
    project: Path, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    from agentrunner.interfaces.server import create_app

    async def thread() -> None:
        store = await open_store(store_url)
        await store.threads.open("t-1", "ceo")
        await store.close()

    asyncio.run(thread())
    app = create_app(project, token="secret-token", worker=False)
    api = ServerThread(app)
    caplog.set_level(logging.WARNING)
    caplog.set_level(logging.DEBUG, logger="agentrunner.store.drivers.postgres")
    try:
        assert httpx2.get(f"{api.url}/threads/t-1", headers=AUTH).status_code == 200
        driver = app.state.workspace.runner.store.driver
        assert isinstance(driver, PostgresDriver)
        # Each stream's first read of the thread's runs waits for this lock: a read under way.
        with psycopg.connect(store_url) as lock:
            lock.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
            with ExitStack() as clients:
                for _ in range(CLIENTS):
                    response = clients.enter_context(
                        httpx2.stream("GET", f"{api.url}/threads/t-1/events", headers=AUTH)
                    )
                    assert response.status_code == 200
                _until(lambda: _blocked(store_url) == CLIENTS, "every stream reading")
            # The clients are gone: serve notices and ends their streams, mid-read (psycopg
            # says so at WARNING where it cancels the query, the store at DEBUG where not).
            _until(lambda: len(_ended(caplog)) == CLIENTS, "every stream ended")
            lock.rollback()
        _until(lambda: _blocked(store_url) == 0, "every read done")
        _until(
            lambda: (stats := driver.pool.get_stats())["pool_available"] == stats["pool_size"],
            "every connection back in the pool",
        )
        stats = driver.pool.get_stats()
        assert stats.get("returns_bad", 0) == stats.get("connections_lost", 0) == 0
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
        assert httpx2.get(f"{api.url}/threads/t-1", headers=AUTH).status_code == 200
    finally:
        api.stop()
