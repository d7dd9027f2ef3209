"""Closing a SQLite store: what was submitted is committed first, and the wait for the
background checkpointer's last round happens off the event loop."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.store import open_store
from agentrunner.store.drivers import SQLiteDriver
from agentrunner.store.drivers.sqlite_wal import Checkpointer


async def test_closing_waits_for_the_checkpointer_without_blocking_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpointer's last round is held until the loop has turned three times while
    ``close`` waits: a close that joined the thread on the loop would never let it turn."""
    release = threading.Event()
    finished: list[threading.Thread] = []
    loop_of_checkpointer = Checkpointer._loop

    def slow_to_finish(self: Checkpointer) -> None:
        try:
            loop_of_checkpointer(self)
        finally:
            release.wait(timeout=30)
            finished.append(threading.current_thread())

    monkeypatch.setattr(Checkpointer, "_loop", slow_to_finish)
    store = await open_store(f"sqlite:///{tmp_path / 'a.db'}")
    await store.threads.open("t", "ceo")
    turns = 0

    async def turn_the_loop() -> None:
        nonlocal turns
        while turns < 3:
            await asyncio.sleep(0)
            turns += 1
        release.set()

    ticking = asyncio.ensure_future(turn_the_loop())
    await store.close()
    turns_while_closing, ended_while_closing = turns, list(finished)
    await ticking
    assert turns_while_closing == 3 and len(ended_while_closing) == 1
    assert not ended_while_closing[0].is_alive()
    reopened = await open_store(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        assert await reopened.threads.get("t") is not None
    finally:
        await reopened.close()


class _SlowToClose:
    """A connection whose ``close`` (the last one copies the WAL back and removes it) waits for
    ``release``; everything else is the connection's own."""

    def __init__(self, conn: sqlite3.Connection, release: threading.Event) -> None:
        self._conn = conn
        self._release = release
        self.closed_on: threading.Thread | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def close(self) -> None:
        self._release.wait(timeout=30)
        self.closed_on = threading.current_thread()
        self._conn.close()


async def test_closing_the_connection_happens_off_the_loop(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'd.db'}")
    driver = store.driver
    assert isinstance(driver, SQLiteDriver)
    await store.threads.open("t", "ceo")
    release = threading.Event()
    slow = _SlowToClose(driver._conn, release)
    driver._conn = slow  # type: ignore[assignment]
    turns = 0

    async def turn_the_loop() -> None:
        nonlocal turns
        while turns < 3:
            await asyncio.sleep(0)
            turns += 1
        release.set()

    ticking = asyncio.ensure_future(turn_the_loop())
    await store.close()
    turns_while_closing = turns
    await ticking
    assert turns_while_closing == 3
    assert slow.closed_on is not None and slow.closed_on is not threading.main_thread()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        slow._conn.execute("SELECT 1")


async def test_what_was_submitted_is_committed_before_close_returns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    store = await open_store(url)
    submitted = [
        store.submit([store.threads.create_op(thread_id, "ceo")]) for thread_id in ("t1", "t2")
    ]
    await store.close()
    assert all(future.done() and future.exception() is None for future in submitted)
    reopened = await open_store(url)
    try:
        assert [t.id for t in await reopened.threads.list()] == ["t2", "t1"]
    finally:
        await reopened.close()


async def test_a_submitted_batch_that_fails_has_failed_when_close_returns(tmp_path: Path) -> None:
    """The bad path: a pending batch the database refuses is failed, not left pending, and
    the good one submitted beside it is still committed."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = await open_store(url)
    run = store.runs.insert_op(run_id="r", agent_id="a", thread_id=None, status="running")
    bad = store.submit([run, run])  # the same id twice
    good = store.submit([store.threads.create_op("t1", "ceo")])
    await store.close()
    assert bad.done() and good.done() and good.exception() is None
    assert "UNIQUE constraint failed: runs.id" in str(bad.exception())
    reopened = await open_store(url)
    try:
        assert [t.id for t in await reopened.threads.list()] == ["t1"]
        assert await reopened.runs.get("r") is None
    finally:
        await reopened.close()


def _open_files(path: Path) -> int:
    """How many of this process's file descriptors are open on ``path``."""
    fds = Path("/proc/self/fd")
    return sum(1 for fd in fds.iterdir() if os.path.realpath(fd) == str(path.resolve()))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/self/fd (Linux)")
@pytest.mark.parametrize(
    "content", [b"not a database, " * 512, b"SQLite format 3\x00" + b"\xff" * 84]
)
async def test_a_file_that_is_no_database_is_refused_and_left_closed(
    tmp_path: Path, content: bytes
) -> None:
    # Refused while the connection's pragmas are set: the driver closes what it opened before
    # it raises (Python 3.13 reports a connection left to the garbage collector).
    bad = tmp_path / "bad.db"
    bad.write_bytes(content)
    with pytest.raises(AgentRunnerError) as info:
        await open_store(f"sqlite:///{bad}")
    assert info.value.code is ErrorCode.RUNNER_IO and str(bad) in info.value.message
    assert _open_files(bad) == 0  # the refusal, its traceback included, holds no connection
    assert bad.read_bytes() == content  # nothing written
