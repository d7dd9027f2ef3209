"""The SQLite driver's write path: batches grouped per statement, named parameters bound by
position, and a WAL that is rewound under steady writes instead of growing without end."""

from __future__ import annotations

import sqlite3
import struct
import warnings
from pathlib import Path
from typing import NamedTuple

import pytest

from agentrunner.store.drivers import Op, SQLiteDriver, sqlite_statements, sqlite_wal
from agentrunner.store.drivers.sqlite_wal import Checkpointer


class WalStory(NamedTuple):
    largest: int  # the WAL file's largest size seen
    unrewound: int  # the least an unrewound WAL would hold: a new page per commit
    rewinds: int  # how often the WAL started over (its header's checkpoint sequence)


def _checkpoint_sequence(wal: Path) -> int:
    return int(struct.unpack(">I", wal.read_bytes()[12:16])[0])


async def _steady_writes(path: Path, commits: int, *, until_rewinds: int = 0) -> WalStory:
    """Commits back to back, as under load: the writer is never idle long enough for a
    background checkpoint to catch up with it. With ``until_rewinds``, up to ten times as
    many commits while the WAL has been rewound fewer times (a busy machine is slower)."""
    driver = SQLiteDriver(str(path))
    wal = Path(f"{path}-wal")
    largest = 0
    try:
        await driver.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)", {})
        first = _checkpoint_sequence(wal)
        n = 0
        while n < commits or (
            n < 10 * commits and _checkpoint_sequence(wal) - first < until_rewinds
        ):
            await driver.batch([("t_insert", "INSERT INTO t (v) VALUES (:v)", {"v": "x" * 3000})])
            if n % 50 == 0:
                largest = max(largest, wal.stat().st_size)
            n += 1
        row = await driver.fetch_one("PRAGMA page_size", {})
        assert row is not None
        return WalStory(
            max(largest, wal.stat().st_size),
            n * int(row["page_size"]),
            _checkpoint_sequence(wal) - first,
        )
    finally:
        await driver.close()


@pytest.fixture
def small_wal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_wal, "_RESTART_FRAMES", 64)
    monkeypatch.setattr(Checkpointer.__init__, "__defaults__", (0.005,))


@pytest.mark.usefixtures("small_wal")
async def test_wal_is_rewound_under_steady_writes(tmp_path: Path) -> None:
    story = await _steady_writes(tmp_path / "db.sqlite", 4_000, until_rewinds=3)
    assert story.rewinds >= 3  # ~30 per 12,000 commits on a quiet 2-core machine


@pytest.mark.usefixtures("small_wal")
async def test_without_the_rewind_the_wal_keeps_growing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: what the hand-over is for (a background checkpoint alone never sees the
    WAL fully copied, so SQLite never rewinds it)."""
    monkeypatch.setattr(
        Checkpointer, "rewind", lambda self, writer: setattr(self, "restart_due", False)
    )
    story = await _steady_writes(tmp_path / "db.sqlite", 12_000)
    assert story.largest >= story.unrewound / 4


def test_a_batch_writes_referenced_rows_first_known_by_their_names() -> None:
    """Rows go in grouped by statement; the statements others reference (threads, runs, steps)
    come first, known by their blocks' names whatever their text; the rest keep their order,
    and two blocks of one text stay two groups."""
    step = "INSERT INTO run_steps (id) VALUES (:id)"
    message = "INSERT INTO run_messages (id, step_id) VALUES (:id, :step_id)"
    ops: list[Op] = [
        ("run_message_insert", message, {"id": "m1", "step_id": None}),
        ("step_insert", step, {"id": "s1"}),
        ("run_message_insert", message, {"id": "m2", "step_id": "s1"}),
        ("run_message_copy", message, {"id": "m3", "step_id": "s1"}),
        ("thread_create", "INSERT INTO threads (id) VALUES (:id)", {"id": "t"}),
    ]
    assert sqlite_statements.grouped(ops) == [
        ("thread_create", "INSERT INTO threads (id) VALUES (:id)", [{"id": "t"}]),
        ("step_insert", step, [{"id": "s1"}]),
        (
            "run_message_insert",
            message,
            [{"id": "m1", "step_id": None}, {"id": "m2", "step_id": "s1"}],
        ),
        ("run_message_copy", message, [{"id": "m3", "step_id": "s1"}]),
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
        first = driver.submit([("t_insert", INSERT, {"k": 1, "v": "a"})])
        second = driver.submit([("t_insert", INSERT, {"k": 2, "v": "b"})])
        # A batch with others waiting goes after them, not ahead: a run's durable point never
        # overtakes its own write-behind rows.
        await driver.batch([("t_mark", "UPDATE t SET v = v || '!' WHERE k <= 2", {})])
        assert first.done() and second.done()
        rows = await driver.fetch_all("SELECT k, v FROM t ORDER BY k", {})
        assert rows == [{"k": 1, "v": "a!"}, {"k": 2, "v": "b!"}]
    finally:
        await driver.close()


async def test_a_failing_batch_fails_only_its_own_caller(tmp_path: Path) -> None:
    driver = await _table(tmp_path)
    try:
        good = driver.submit([("t_insert", INSERT, {"k": 1, "v": "a"})])
        bad = driver.submit([("t_insert", INSERT, {"k": 2, "v": None})])  # NOT NULL
        also_good = driver.submit([("t_insert", INSERT, {"k": 3, "v": "c"})])
        await good
        await also_good
        with pytest.raises(sqlite3.IntegrityError):
            await bad
        rows = await driver.fetch_all("SELECT k FROM t ORDER BY k", {})
        assert [r["k"] for r in rows] == [1, 3]
        with pytest.raises(sqlite3.IntegrityError):  # at once, with nothing waiting
            await driver.batch(
                [
                    ("t_insert", INSERT, {"k": 4, "v": "d"}),
                    ("t_insert", INSERT, {"k": 5, "v": None}),
                ]
            )
        assert await driver.fetch_one("SELECT k FROM t WHERE k = 4", {}) is None  # no half
    finally:
        await driver.close()


async def test_named_parameters_bind_by_name_wherever_they_appear(tmp_path: Path) -> None:
    # The driver binds parameters by position (sqlite_statements.bind): a name used twice, one in a
    # string literal, a quoted name or a comment, and extra keys must all mean what they
    # would with sqlite3's own named binding.
    driver = await _table(tmp_path)
    try:
        await driver.batch(
            [
                (
                    "t_insert_odd",
                    "-- :v in a comment is text\n"
                    "INSERT INTO t (k, v) VALUES (:k, :v || ':v' || \":k\" || :v)",
                    {"k": 1, "v": "a", "unused": 9},
                ),
                ("t_insert", INSERT, {"k": 2, "v": "b"}),
                ("t_insert", INSERT, {"k": 3, "v": "c"}),
            ]
        )
        rows = await driver.fetch_all("SELECT k, v FROM t WHERE k >= :low ORDER BY k", {"low": 1})
        # "…" around a name that is no column is a string in SQLite: the literal text.
        assert rows == [{"k": 1, "v": "a:v:ka"}, {"k": 2, "v": "b"}, {"k": 3, "v": "c"}]
        assert await driver.execute("UPDATE t SET v = :v WHERE k = :k", {"k": 2, "v": "B"}) == 1
        assert await driver.fetch_one("SELECT v FROM t WHERE k = :k", {"k": 2}) == {"v": "B"}
    finally:
        await driver.close()


async def test_parameters_bind_without_deprecated_numbered_placeholders(tmp_path: Path) -> None:
    # sqlite3 warns from Python 3.12 on (and refuses from 3.14 on) when placeholders that have a
    # name, ``?1`` included, are bound to a sequence: every statement of the store must bind
    # under warnings-as-errors, a name used twice and a single parameter among them.
    driver = await _table(tmp_path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            await driver.batch(
                [
                    ("t_insert", INSERT, {"k": 1, "v": "a"}),
                    ("t_insert", INSERT, {"k": 2, "v": "b"}),
                    ("t_twice", "INSERT INTO t (k, v) VALUES (:k, :v || :v)", {"k": 3, "v": "c"}),
                ]
            )
            assert await driver.execute("UPDATE t SET v = :v WHERE k = :k", {"k": 2, "v": "B"}) == 1
            one = await driver.fetch_one("SELECT v FROM t WHERE k = :k", {"k": 3})
            rows = await driver.fetch_all("SELECT k, v FROM t WHERE k < :k + :k", {"k": 1})
        assert one == {"v": "cc"}
        assert rows == [{"k": 1, "v": "a"}]
    finally:
        await driver.close()


async def test_a_missing_parameter_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    driver = await _table(tmp_path)
    try:
        for batch in (
            [
                ("t_insert", INSERT, {"k": 1, "v": "a"}),
                ("t_insert", INSERT, {"k": 2}),
            ],  # one row of a group
            [
                ("t_insert", INSERT, {"k": 1, "v": "a"}),
                ("t_set", "UPDATE t SET v = :w", {}),
            ],  # a row alone
        ):
            with pytest.raises(sqlite3.ProgrammingError, match=r"\b[vw]\b"):
                await driver.batch(batch)
            assert await driver.fetch_all("SELECT k FROM t", {}) == []
        with pytest.raises(sqlite3.ProgrammingError, match="low"):
            await driver.fetch_all("SELECT k FROM t WHERE k >= :low", {})
    finally:
        await driver.close()
