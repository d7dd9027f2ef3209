"""The SQLite driver (stdlib ``sqlite3``).

Statements run directly on the event loop's thread — an append costs tens of microseconds,
less than a hop to a worker thread would — in WAL mode, with ``synchronous=NORMAL`` (durable
across a process crash; a power loss may drop the last transactions) and a busy timeout for
other processes' writes. Batches submitted during one turn of the loop share a transaction
(group commit); checkpoints run on a thread of their own (``sqlite_wal``). A batch's
``changes_notify`` rows are not statements: once it commits, their keys are sent to the processes
listening for changes (``store/wake``), from a thread.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterable, Sequence, Set
from pathlib import Path
from typing import Any

from agentrunner.store.drivers.contract import (
    MIGRATIONS_TABLE,
    ChangeListener,
    Deliver,
    Listener,
    Op,
    Params,
)
from agentrunner.store.drivers.errors import GuardRefused
from agentrunner.store.drivers.sqlite_statements import bind, bind_many, grouped
from agentrunner.store.drivers.sqlite_wal import WAL_KEEP_BYTES, Checkpointer
from agentrunner.store.sql import TABLE_EXISTS, SqlSet
from agentrunner.store.wake import (
    SEPARATOR,
    ChangeSocket,
    SocketListener,
    listened,
    notify_changes,
    notify_sockets,
)

__all__ = ["SQLiteDriver"]

_SOCKET_DIR_MAX = 72  # a socket's own name ("<pid>-<id>.sock") needs the rest of 107 bytes
CHANGES = "changes_notify"  # a batch's row naming what it changed, for listeners (store/changes)


def _null(value: None) -> None:
    return None


def _bind_none_and_bool_directly() -> None:
    """Adapters for ``None`` and ``bool`` that give sqlite3 what it binds without them (NULL,
    the integer). sqlite3 binds only exact ints, floats and strings directly; any other value
    is looked up as an adapter, then as ``PrepareProtocol.__adapt__``, a miss that formats an
    ``AttributeError`` each time (Python 3.11): ~0.5 us a parameter, some 30 of a durable
    turn's parameters. Adapters are process-wide: one already registered is left alone."""
    if (type(None), sqlite3.PrepareProtocol) not in sqlite3.adapters:
        sqlite3.register_adapter(type(None), _null)
    if (bool, sqlite3.PrepareProtocol) not in sqlite3.adapters:
        sqlite3.register_adapter(bool, int)


_bind_none_and_bool_directly()


class SQLiteDriver:
    dialect = "sqlite"

    def __init__(self, path: str) -> None:
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.guarded: Set[str] = frozenset()
        # Thread locks' byte locks (store/locks), beside the database like its -wal and -shm.
        self.lock_file = None if path == ":memory:" else f"{path}-locks"
        self._conn = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, cached_statements=512, timeout=10
        )
        self._waiting: list[tuple[Sequence[Op], asyncio.Future[None]]] = []
        self._changes_dir: Path | None = None
        self._deliver: Deliver | None = None  # an in-memory database's one listener
        self._checkpointer: Checkpointer | None = None
        try:
            self._conn.row_factory = sqlite3.Row
            # One cursor for every statement: ``Connection.execute`` makes a cursor per call
            # (~1 us, some 20 statements a durable turn). Results are always read whole before
            # the next.
            self._cursor = self._conn.cursor()
            for pragma in (
                # For a new database (an existing one keeps its size). A turn writes a few small
                # rows into a dozen B-trees, twice; every commit writes each touched page whole,
                # so 2 KiB pages write less: a durable turn ~30 us (6%) cheaper than with 4 KiB,
                # while 8 KiB pages cost 25% more.
                "page_size=2048",
                "journal_mode=WAL",
                "synchronous=NORMAL",
                "foreign_keys=ON",
                "busy_timeout=10000",
            ):
                self._conn.execute(f"PRAGMA {pragma}")
            if path != ":memory:":
                self._conn.execute("PRAGMA wal_autocheckpoint=0")
                self._conn.execute(f"PRAGMA journal_size_limit={WAL_KEEP_BYTES}")
                self._checkpointer = Checkpointer(path)
        except BaseException:  # a file that is no database, a locked one: refused, closed
            self._conn.close()
            raise

    async def fetch_all(self, sql: str, params: Params) -> list[dict[str, Any]]:
        return [dict(row) for row in self._cursor.execute(*bind(sql, params)).fetchall()]

    async def fetch_one(self, sql: str, params: Params) -> dict[str, Any] | None:
        # fetchall, not fetchone: a RETURNING statement must run to completion to commit.
        rows = self._cursor.execute(*bind(sql, params)).fetchall()
        return dict(rows[0]) if rows else None

    async def execute(self, sql: str, params: Params) -> int:
        return self._cursor.execute(*bind(sql, params)).rowcount

    async def fetch_stamped(self, sql: str, params: Params) -> list[dict[str, Any]]:
        """Run a write with ``:now`` set once this connection holds the write lock."""
        cursor = self._cursor
        cursor.execute("BEGIN IMMEDIATE")
        try:
            rows = cursor.execute(*bind(sql, {**params, "now": time.time()})).fetchall()
        except BaseException:
            cursor.execute("ROLLBACK")
            raise
        cursor.execute("COMMIT")
        return [dict(row) for row in rows]

    async def fetch_in_transaction(self, ops: Sequence[Op]) -> list[dict[str, Any]]:
        """Commit ``ops`` as ``batch`` does (guarded statements, the changes row), after the
        batches submitted before them, in one write transaction begun holding the write lock
        (so every read in it sees every earlier commit); the rows of the last statement run."""
        if self._waiting:
            self._commit_waiting()
        cursor = self._cursor
        guarded = self.guarded
        changed = None
        cursor.execute("BEGIN IMMEDIATE")
        try:
            rows: list[Any] = []
            for name, sql, params in ops:
                if name == CHANGES:
                    changed = params["keys"].split(SEPARATOR)
                    continue
                found = cursor.execute(*bind(sql, params))
                if name in guarded and found.rowcount == 0:
                    raise GuardRefused(name, params)
                rows = found.fetchall()
        except BaseException:
            cursor.execute("ROLLBACK")
            raise
        cursor.execute("COMMIT")
        if changed:
            self._publish(changed)
        self._after_commit()
        return [dict(row) for row in rows]

    async def batch(self, ops: Sequence[Op]) -> None:
        """Commit ``ops`` in one transaction, at once when no other batch is waiting, else
        after those (group commit: batches submitted during one turn of the event loop share
        a transaction; if it fails, each is retried alone, so an error reaches only the caller
        that caused it). Committing at once spares a durable point the hop to the loop's next
        turn (~20 us, twice a run); sharing saved little once a commit cost tens of us."""
        if not ops:
            return
        if self._waiting:
            await self.submit(ops)
            return
        changed = self._transaction(ops)
        if changed:
            self._publish(changed)
        self._after_commit()

    def submit(self, ops: Sequence[Op]) -> asyncio.Future[None]:
        """Queue ``ops`` for the next group commit (on this thread, at the loop's next turn) and
        return at once; batches commit in the order they were submitted."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._waiting.append((ops, future))
        if len(self._waiting) == 1:
            loop.call_soon(self._commit_waiting)
        return future

    def _commit_waiting(self) -> None:
        waiting, self._waiting = self._waiting, []
        if not waiting:  # committed already, by close
            return
        try:
            changed = self._transaction([op for ops, _ in waiting for op in ops])
        except Exception:
            for ops, future in waiting:
                try:
                    changed = self._transaction(ops)
                except Exception as exc:
                    _settle(future, exc)
                else:
                    if changed:
                        self._publish(changed)
                    _settle(future, None)
            return
        for _, future in waiting:
            _settle(future, None)
        if changed:
            self._publish(changed)
        self._after_commit()

    def _after_commit(self) -> None:
        checkpointer = self._checkpointer
        if checkpointer is not None and checkpointer.restart_due:
            checkpointer.rewind(self._conn)

    def _transaction(self, ops: Sequence[Op]) -> list[str] | None:
        """Commit ``ops``; the keys its ``changes_notify`` rows name, for after the commit."""
        cursor = self._cursor
        guarded = self.guarded
        changed = None
        cursor.execute("BEGIN IMMEDIATE")
        try:
            # Each statement's rows go through one executemany (a burst of events is one call).
            for name, sql, rows in grouped(ops):
                if name == CHANGES:
                    changed = [key for row in rows for key in row["keys"].split(SEPARATOR)]
                elif name in guarded:  # row by row, so a refusal names its row
                    for row in rows:
                        if cursor.execute(*bind(sql, row)).rowcount == 0:
                            raise GuardRefused(name, row)
                elif len(rows) == 1:
                    cursor.execute(*bind(sql, rows[0]))
                else:
                    cursor.executemany(*bind_many(sql, rows))
        except BaseException:
            cursor.execute("ROLLBACK")
            raise
        cursor.execute("COMMIT")
        return changed

    def _publish(self, keys: Iterable[str]) -> None:
        """Tell the processes listening for changes (this one's own, in memory) what a commit
        changed; nothing here waits for them."""
        deliver = self._deliver
        if self.path == ":memory:":
            if deliver is not None:
                asyncio.get_running_loop().call_soon(deliver, list(keys))
            return
        notify_changes(self.changes_dir, keys)

    async def migrate(self, sql: SqlSet) -> list[int]:
        conn = self._conn
        conn.execute(MIGRATIONS_TABLE)
        conn.execute("BEGIN IMMEDIATE")
        try:
            done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
            applied = []
            for version, statements in sql.migrations:
                if version in done:
                    continue
                for statement in statements:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                    (version, time.time()),
                )
                applied.append(version)
            exists = TABLE_EXISTS["sqlite"]
            for name, statements, _owner in sql.tables:  # extensions' tables, once each
                if conn.execute(exists, (name,)).fetchone() is None:
                    for statement in statements:
                        conn.execute(statement)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return applied

    async def listener(self, channel: str) -> Listener:
        return SocketListener(self.wake_dir)

    def notify(self) -> None:
        """Wake this machine's idle workers (SQLite has no NOTIFY)."""
        notify_sockets(self.wake_dir)

    async def changes(self, deliver: Deliver) -> ChangeListener:
        """This process's socket for changes; an in-memory database delivers in-process."""
        if self.path == ":memory:":
            self._deliver = deliver
            return _InMemory(self)
        return ChangeSocket(self.changes_dir, deliver)

    @property
    def pool_size(self) -> int | None:
        return None  # one connection, and a file

    def listened(self) -> bool:
        """Whether a process tails this database (it has a socket for changes): one ``stat``."""
        if self.path == ":memory:":
            return self._deliver is not None
        return listened(self.changes_dir)

    @property
    def wake_dir(self) -> Path:
        """Where this database's workers listen: beside it, unless that path is too long for a
        Unix socket's address (108 bytes on Linux), then in the temporary directory under a
        name derived from the database's path — the same for every process that opens it."""
        return self._socket_dir("wake")

    @property
    def changes_dir(self) -> Path:
        """Where processes tailing this database listen for changes (as ``wake_dir``)."""
        if self._changes_dir is None:
            self._changes_dir = self._socket_dir("changes")
        return self._changes_dir

    def _socket_dir(self, kind: str) -> Path:
        beside = Path(f"{self.path}.{kind}")
        if len(os.fsencode(beside.absolute())) <= _SOCKET_DIR_MAX:
            return beside
        digest = hashlib.sha256(os.fsencode(Path(self.path).absolute())).hexdigest()[:20]
        return Path(tempfile.gettempdir()) / f"agentrunner-{kind}-{digest}"

    async def close(self) -> None:
        """Commit what was submitted (a batch the database refuses is failed), then close. What
        may take long happens off the event loop: the checkpointer's last round, and closing
        the connection (the last one to close copies the WAL back and removes it)."""
        self._commit_waiting()
        checkpointer, self._checkpointer = self._checkpointer, None
        try:
            if checkpointer is not None:
                await checkpointer.stop()
        finally:
            self._commit_waiting()  # submitted while the checkpointer finished
            await asyncio.to_thread(self._conn.close)


def _settle(future: asyncio.Future[None], exc: Exception | None) -> None:
    if future.done():
        return
    if exc is None:
        future.set_result(None)
    else:
        future.set_exception(exc)


class _InMemory:
    """An in-memory database's listener: its commits deliver to it directly."""

    def __init__(self, driver: SQLiteDriver) -> None:
        self._driver = driver

    async def close(self) -> None:
        self._driver._deliver = None
