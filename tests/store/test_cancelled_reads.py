"""A reader that goes away mid-query — an SSE client disconnecting while its stream reads the
store — leaves the pool as it was (issue 39, item 11): on PostgreSQL the query finishes on
its connection, which goes back to the pool, instead of being cancelled and the connection
closed and replaced (psycopg's "query cancellation interrupted … closing connection")."""

from __future__ import annotations

import asyncio
import logging

import anyio
import psycopg
import pytest

from agentrunner.store import Store, detach_reads
from agentrunner.store.drivers import PostgresDriver

postgres_only = pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
_SLOW = "SELECT pg_sleep(0.2) AS slept, %(n)s::int AS n"


async def _running(store_url: str, n: int) -> None:
    """Until the slow read numbered ``n`` is under way on the server."""
    async with await psycopg.AsyncConnection.connect(store_url, autocommit=True) as conn:
        while True:
            cursor = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                "AND query LIKE 'SELECT pg_sleep(0.2)%%' AND pid <> pg_backend_pid()"
            )
            row = await cursor.fetchone()
            if row and row[0]:
                return
            await asyncio.sleep(0.01)


async def _idle(driver: PostgresDriver) -> None:
    """Until every connection of the pool is back in it (the read of a reader that left may
    still be finishing)."""
    while (stats := driver.pool.get_stats())["pool_available"] < stats["pool_size"]:
        await asyncio.sleep(0.01)


@postgres_only
async def test_readers_cancelled_mid_query_leave_the_pools_connections_in_place(
    store: Store, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    driver = store.driver
    assert isinstance(driver, PostgresDriver)
    await driver.fetch_all("SELECT 1 AS one", {})  # the pool's first connection is made
    made = driver.pool.get_stats().get("connections_num", 0)
    caplog.set_level(logging.WARNING)

    async def stream(n: int) -> None:  # a stream's reads, detached as server/ detaches them
        detach_reads()
        await driver.fetch_all(_SLOW, {"n": n})

    for n in range(4):
        # As sse-starlette ends a stream whose client went away: its task group's cancel
        # scope, which cancels every await inside it again until it is left.
        async with anyio.create_task_group() as group:
            group.start_soon(stream, n)
            await _running(store_url, n)
            group.cancel_scope.cancel()
        await _idle(driver)
    assert await driver.fetch_all("SELECT 2 AS two", {}) == [{"two": 2}]
    stats = driver.pool.get_stats()
    assert stats.get("returns_bad", 0) == 0
    assert stats.get("connections_lost", 0) == 0
    assert stats.get("connections_num", 0) == made  # no connection closed and made again
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
