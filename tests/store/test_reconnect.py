"""The store outlives a database restart: PostgreSQL's ``pg_ctl restart -m fast`` cuts every
connection, and the store's reads, writes and LISTEN carry on once the server is back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from agentrunner.store import RunLog, Store, changes
from agentrunner.store.changes import run_key
from agentrunner.store.drivers import DatabaseUnavailable, PostgresDriver, is_unavailable
from agentrunner.store.mailbox import NewRun

postgres_only = pytest.mark.parametrize("store_url", ["postgres"], indirect=True)


@postgres_only
async def test_reads_writes_and_listening_go_on_after_a_restart(
    store: Store, restart_postgres: Callable[[], None]
) -> None:
    await store.threads.open("t", "ceo")
    await store.mailbox.enqueue([NewRun(f"run_{n}", "ceo", "t", {"kind": "x"}) for n in range(3)])
    listener = await store.run_listener()
    try:
        await asyncio.to_thread(restart_postgres)  # every connection the store held is cut
        thread = await store.threads.get("t")  # a read
        assert thread is not None and thread.agent_id == "ceo"
        claimed = await store.mailbox.claim("w:1", lease_s=30.0)  # a write transaction
        assert claimed is not None and claimed.id == "run_0"
        assert await store.mailbox.renew("run_0", "w:1", 30.0)  # a single statement
        await store.batch([store.runs.finish_op("run_0", status="completed", stop_reason="x")])
        run = await store.runs.get("run_0")
        assert run is not None and run.status == "completed"
        # LISTEN again: the first wait after the loss wakes the waiter (what was sent while it
        # was gone is lost), the next one hears a NOTIFY sent now.
        for _ in range(5):
            if not await listener.wait(0.5):
                break
        else:
            raise AssertionError("the listener kept waking with nothing sent")
        await store.mailbox.enqueue([NewRun("run_3", "ceo", "t", {"kind": "x"})])  # NOTIFY
        assert await listener.wait(10)
    finally:
        await listener.close()


@postgres_only
async def test_readers_are_woken_after_a_restart(
    store: Store, restart_postgres: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listener for changes listens again once the server is back, and wakes every reader
    then (what was committed meanwhile went unheard); from then on a commit's NOTIFY wakes its
    readers. The fallback timer is an hour: neither wake-up is its."""
    monkeypatch.setattr(changes, "FALLBACK_S", 3600.0)
    await store.threads.open("t", "ceo")
    await store.batch(
        [store.runs.insert_op(run_id="r1", agent_id="ceo", thread_id="t", status="running")]
    )
    async with store.changes.watch(run_key("r1")) as watch:
        await asyncio.to_thread(restart_postgres)
        assert await asyncio.wait_for(watch.wait(), 60)  # listening again: every reader woken
        log = RunLog(store, "r1", "ceo")
        log.emit("step.started", {"step": 1, "model": "x:m"})
        await log.flush()
        assert await asyncio.wait_for(watch.wait(), 60)
        assert [e.type for e in await store.events.list("r1")] == ["step.started"]


@postgres_only
async def test_what_is_asked_while_the_server_restarts_waits_for_it(
    store: Store, restart_postgres: Callable[[], None]
) -> None:
    """Reads and writes issued while the server is going down and coming back are answered
    when it is back, none of them failing."""
    await store.threads.open("t", "ceo")
    restarting = asyncio.ensure_future(asyncio.to_thread(restart_postgres))
    answered = 0
    while not restarting.done() or answered < 5:
        thread = await store.threads.get("t")
        assert thread is not None and thread.agent_id == "ceo"
        await store.memory.set("ceo", "count", str(answered))
        answered += 1
        await asyncio.sleep(0.01)
    await restarting
    assert await store.memory.blocks("ceo") == {"count": str(answered - 1)}


async def test_a_server_that_stays_away_is_reported_unavailable(pg_database: str) -> None:
    """Past ``reconnect_s`` the store gives up with a clear, retryable error that names no
    address; workers recognise it as the database being away (and wait), as they do SQLite's
    ``database is locked``."""
    import sqlite3

    port = pg_database.rsplit(":", 1)[1].split("/", 1)[0]
    driver = PostgresDriver(pg_database.replace(f":{port}/", ":1/"), reconnect_s=0.5)
    await driver.pool.open()  # without waiting for a first connection, which never comes
    try:
        with pytest.raises(DatabaseUnavailable) as info:
            await driver.fetch_all("SELECT 1", {})
    finally:
        await driver.close()
    error = info.value
    assert error.code == "runner_io" and error.retryable
    assert "could not be reached for 0.5 s" in error.message and "127.0.0.1" not in error.message
    assert is_unavailable(error)
    conn = sqlite3.connect(":memory:")
    with pytest.raises(sqlite3.OperationalError) as wrong:
        conn.execute("SELECT * FROM nowhere")
    conn.close()
    assert not is_unavailable(wrong.value)  # a wrong statement is not an outage


async def test_a_closed_store_fails_at_once_and_is_not_taken_for_a_server_away(
    pg_database: str,
) -> None:
    """A store that was closed (its process shutting down, a cache flushed after it) is not a
    server gone away: what is asked of it fails at once with the pool's own error, rather than
    being retried for ``reconnect_s`` and then reported as ``DatabaseUnavailable`` — psycopg's
    ``PoolClosed`` is an ``OperationalError`` without a SQLSTATE, as a lost connection's is."""
    import psycopg_pool

    driver = PostgresDriver(pg_database, reconnect_s=0.3)
    await driver.pool.open(wait=True)
    assert await driver.fetch_all("SELECT 1 AS one", {}) == [{"one": 1}]
    await driver.close()
    for _ in range(2):  # a read and a write alike
        with pytest.raises(psycopg_pool.PoolClosed):
            await driver.fetch_all("SELECT 1 AS one", {})
        with pytest.raises(psycopg_pool.PoolClosed):
            await driver.execute("SELECT 1", {})
