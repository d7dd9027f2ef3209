"""The SQLite driver's write path: batches grouped per statement, and a WAL that is rewound
under steady writes instead of growing without end."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentrunner.store import drivers
from agentrunner.store.drivers import SQLiteDriver

PAGE = 4096


async def _steady_writes(path: Path, commits: int) -> tuple[int, int]:
    """(the WAL's largest size, the frames written) over ``commits`` commits back to back, as
    under load: the writer is never idle long enough for a background checkpoint to catch up
    with it."""
    driver = SQLiteDriver(str(path))
    wal = Path(f"{path}-wal")
    largest = 0
    try:
        await driver.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)", {})
        for n in range(commits):
            await driver.batch([("INSERT INTO t (v) VALUES (:v)", {"v": "x" * 3000})])
            if n % 50 == 0:
                largest = max(largest, wal.stat().st_size)
        return max(largest, wal.stat().st_size), commits
    finally:
        await driver.close()


async def test_wal_is_rewound_under_steady_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(drivers, "_RESTART_FRAMES", 64)
    monkeypatch.setattr(drivers._Checkpointer.__init__, "__defaults__", (0.005,))
    largest, commits = await _steady_writes(tmp_path / "db.sqlite", 12_000)
    # Every commit writes at least one new frame: an unrewound WAL holds them all.
    assert largest < commits * PAGE / 2


async def test_without_the_rewind_the_wal_keeps_growing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: what the rewind is for (a background checkpoint alone never rewinds)."""
    monkeypatch.setattr(drivers, "_RESTART_FRAMES", 64)
    monkeypatch.setattr(drivers._Checkpointer.__init__, "__defaults__", (0.005,))
    monkeypatch.setattr(SQLiteDriver, "_restart_wal", lambda self: None)
    largest, commits = await _steady_writes(tmp_path / "db.sqlite", 12_000)
    assert largest >= commits * PAGE


def test_a_batch_writes_referenced_rows_first_whatever_their_comments() -> None:
    """Rows go in grouped by statement; statements others reference (threads, runs, steps)
    come first even when they open with a comment, as the documented ones in queries.sql do."""
    step = "-- a step written once\nINSERT INTO run_steps (id) VALUES (:id)"
    message = "INSERT INTO run_messages (id, step_id) VALUES (:id, :step_id)"
    ops = [(message, {"id": "m1", "step_id": None}), (step, {"id": "s1"})]
    ops.append((message, {"id": "m2", "step_id": "s1"}))
    assert drivers._grouped(ops) == [
        (step, [{"id": "s1"}]),
        (message, [{"id": "m1", "step_id": None}, {"id": "m2", "step_id": "s1"}]),
    ]


async def _table(tmp_path: Path) -> SQLiteDriver:
    driver = SQLiteDriver(str(tmp_path / "db.sqlite"))
    await driver.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)", {})
    return driver


INSERT = "INSERT INTO t (k, v) VALUES (:k, :v)"


async def test_batches_waiting_together_share_a_transaction_and_keep_their_order(
    tmp_path: Path,
) -> None:
    driver = await _table(tmp_path)
    try:
        first = driver.submit([(INSERT, {"k": 1, "v": "a"})])
        second = driver.submit([(INSERT, {"k": 2, "v": "b"})])
        # A batch with others waiting goes after them, not ahead: a run's durable point never
        # overtakes its own write-behind rows.
        await driver.batch([("UPDATE t SET v = v || '!' WHERE k <= 2", {})])
        assert first.done() and second.done()
        rows = await driver.fetch_all("SELECT k, v FROM t ORDER BY k", {})
        assert rows == [{"k": 1, "v": "a!"}, {"k": 2, "v": "b!"}]
    finally:
        await driver.close()


async def test_a_failing_batch_fails_only_its_own_caller(tmp_path: Path) -> None:
    driver = await _table(tmp_path)
    try:
        good = driver.submit([(INSERT, {"k": 1, "v": "a"})])
        bad = driver.submit([(INSERT, {"k": 2, "v": None})])  # NOT NULL
        also_good = driver.submit([(INSERT, {"k": 3, "v": "c"})])
        await good
        await also_good
        with pytest.raises(sqlite3.IntegrityError):
            await bad
        rows = await driver.fetch_all("SELECT k FROM t ORDER BY k", {})
        assert [r["k"] for r in rows] == [1, 3]
        with pytest.raises(sqlite3.IntegrityError):  # at once, with nothing waiting
            await driver.batch([(INSERT, {"k": 4, "v": "d"}), (INSERT, {"k": 5, "v": None})])
        assert await driver.fetch_one("SELECT k FROM t WHERE k = 4", {}) is None  # no half
    finally:
        await driver.close()
