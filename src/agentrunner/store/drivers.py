"""The two database drivers behind the store: SQLite (stdlib) and PostgreSQL (psycopg 3).

Both expose the same small async surface: fetch rows as dicts, execute a statement, run a batch
of statements in one transaction, apply migrations. The SQLite driver runs statements directly on
the event loop's thread — an append costs tens of microseconds, less than a hop to a worker
thread would — in WAL mode, with ``synchronous=NORMAL`` (durable across a process crash; a power
loss may drop the last transactions) and a busy timeout for other processes' writes.

Both refuse a batch in which a guarded statement (``SqlSet.guarded``) changes no row: the batch
is rolled back and ``GuardRefused`` raised. The PostgreSQL driver outlives its server's restarts:
an operation whose connection was lost before anything of it could have committed is run again
on a new connection, with backoff, for up to ``reconnect_s``; then ``DatabaseUnavailable``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import operator
import os
import select
import sqlite3
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.store.sql import SqlSet, replace_parameters
from agentrunner.store.wake import SocketListener, notify_sockets

__all__ = [
    "DatabaseUnavailable",
    "Driver",
    "GuardRefused",
    "PostgresDriver",
    "SQLiteDriver",
    "is_unavailable",
    "open_driver",
]

Params = Mapping[str, Any]
Op = tuple[str, Params]
T = TypeVar("T")


class GuardRefused(Exception):
    """A guarded statement changed no row (a run settled twice, say): its batch was rolled
    back. ``query`` names the statement's block, ``params`` are its parameters."""

    def __init__(self, query: str, params: Params) -> None:
        super().__init__(f"{query} changed no row")
        self.query = query
        self.params = params


class DatabaseUnavailable(AgentRunnerError):
    """The database could not be reached for longer than the store waits for it. Workers wait
    and try again; the HTTP API answers 503."""

    def __init__(self, message: str) -> None:
        super().__init__(
            ErrorCode.RUNNER_IO,
            message,
            hint="Check that the database server is running and reachable; agentrunner "
            "reconnects by itself once it is.",
            retryable=True,
            details={"unavailable": True, "retry_after_s": 5},
        )


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot be had for now — worth waiting for — rather
    than that an operation is wrong: PostgreSQL unreachable past the driver's retries, or
    SQLite locked by another process past its busy timeout."""
    if isinstance(exc, DatabaseUnavailable):
        return True
    code = getattr(exc, "sqlite_errorcode", None)
    return (
        isinstance(exc, sqlite3.OperationalError)
        and code is not None
        and (code & 0xFF)
        in (
            sqlite3.SQLITE_BUSY,
            sqlite3.SQLITE_LOCKED,
        )
    )


class Driver(Protocol):
    dialect: str
    lock_file: str | None  # a file for thread locks' byte locks, where all users share a machine
    guarded: Mapping[str, str]  # statements a batch must see change a row (SqlSet.guarded)

    async def fetch_all(self, sql: str, params: Params) -> list[dict[str, Any]]: ...

    async def fetch_one(self, sql: str, params: Params) -> dict[str, Any] | None: ...

    async def execute(self, sql: str, params: Params) -> int: ...

    async def fetch_stamped(self, sql: str, params: Params) -> list[dict[str, Any]]: ...

    async def fetch_in_transaction(self, ops: Sequence[Op]) -> list[dict[str, Any]]: ...

    async def batch(self, ops: Sequence[Op]) -> None: ...

    def submit(self, ops: Sequence[Op]) -> asyncio.Future[None]: ...

    async def migrate(self, sql: SqlSet) -> list[int]: ...

    async def listener(self, channel: str) -> Listener: ...

    def notify(self) -> None: ...

    async def close(self) -> None: ...


_MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations "
    "(version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
)


class SQLiteDriver:
    dialect = "sqlite"

    def __init__(self, path: str) -> None:
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.guarded: Mapping[str, str] = {}
        # Thread locks' byte locks (store/locks), beside the database like its -wal and -shm.
        self.lock_file = None if path == ":memory:" else f"{path}-locks"
        self._conn = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, cached_statements=512, timeout=10
        )
        self._conn.row_factory = sqlite3.Row
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
        self._waiting: list[tuple[Sequence[Op], asyncio.Future[None]]] = []
        self._checkpointer: _Checkpointer | None = None
        if path != ":memory:":
            # Checkpoints copy the WAL back into the database and fsync; done on a commit they
            # stall the event loop, so a background thread does them instead.
            self._conn.execute("PRAGMA wal_autocheckpoint=0")
            self._conn.execute(f"PRAGMA journal_size_limit={_WAL_KEEP_BYTES}")
            self._checkpointer = _Checkpointer(path)

    async def fetch_all(self, sql: str, params: Params) -> list[dict[str, Any]]:
        return [dict(row) for row in self._conn.execute(*_bind(sql, params)).fetchall()]

    async def fetch_one(self, sql: str, params: Params) -> dict[str, Any] | None:
        # fetchall, not fetchone: a RETURNING statement must run to completion to commit.
        rows = self._conn.execute(*_bind(sql, params)).fetchall()
        return dict(rows[0]) if rows else None

    async def execute(self, sql: str, params: Params) -> int:
        return self._conn.execute(*_bind(sql, params)).rowcount

    async def fetch_stamped(self, sql: str, params: Params) -> list[dict[str, Any]]:
        """Run a write with ``:now`` set once this connection holds the write lock."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            rows = conn.execute(*_bind(sql, {**params, "now": time.time()})).fetchall()
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return [dict(row) for row in rows]

    async def fetch_in_transaction(self, ops: Sequence[Op]) -> list[dict[str, Any]]:
        """Run ``ops`` in one write transaction, begun holding the write lock (so every read
        in it sees every earlier commit); the rows of the last."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            rows: list[Any] = []
            for sql, params in ops:
                rows = conn.execute(*_bind(sql, params)).fetchall()
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
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
        self._transaction(ops)
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
        try:
            self._transaction([op for ops, _ in waiting for op in ops])
        except Exception:
            for ops, future in waiting:
                try:
                    self._transaction(ops)
                except Exception as exc:
                    _settle(future, exc)
                else:
                    _settle(future, None)
            return
        for _, future in waiting:
            _settle(future, None)
        self._after_commit()

    def _after_commit(self) -> None:
        if self._checkpointer is not None and self._checkpointer.restart_due:
            self._restart_wal()

    def _restart_wal(self) -> None:
        """Let the WAL start over from its beginning.

        SQLite rewinds the WAL only when a write begins with every frame already copied back,
        which a background checkpoint never sees while this connection keeps committing: under
        steady load the WAL grew without end (a gigabyte in 5,000 turns) and every commit paid
        for growing a file. So once the background thread has caught up to within a few
        frames, this connection copies those itself — between two of its own transactions, a
        millisecond or two — and its next commit rewinds the WAL.
        """
        assert self._checkpointer is not None
        with contextlib.suppress(sqlite3.Error):  # busy: asked again after a later round
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        self._checkpointer.restart_due = False

    def _transaction(self, ops: Sequence[Op]) -> None:
        conn = self._conn
        guarded = self.guarded
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Each statement's rows go through one executemany (a burst of events is one call).
            for sql, rows in _grouped(ops):
                if sql in guarded:  # row by row, so a refusal names its row
                    for row in rows:
                        if conn.execute(*_bind(sql, row)).rowcount == 0:
                            raise GuardRefused(guarded[sql], row)
                elif len(rows) == 1:
                    conn.execute(*_bind(sql, rows[0]))
                else:
                    conn.executemany(*_bind_many(sql, rows))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    async def migrate(self, sql: SqlSet) -> list[int]:
        conn = self._conn
        conn.execute(_MIGRATIONS_TABLE)
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

    @property
    def wake_dir(self) -> Path:
        """Where this database's workers listen: beside it, unless that path is too long for a
        Unix socket's address (108 bytes on Linux), then in the temporary directory under a
        name derived from the database's path — the same for every process that opens it."""
        beside = Path(f"{self.path}.wake")
        if len(os.fsencode(beside.absolute())) <= _SOCKET_DIR_MAX:
            return beside
        digest = hashlib.sha256(os.fsencode(Path(self.path).absolute())).hexdigest()[:20]
        return Path(tempfile.gettempdir()) / f"agentrunner-wake-{digest}"

    async def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
        self._conn.close()


_SOCKET_DIR_MAX = 72  # a socket's own name ("<pid>-<id>.sock") needs the rest of 107 bytes
_WAL_KEEP_BYTES = 64 << 20  # a rewound WAL larger than this is truncated back to it
_RESTART_FRAMES = 16384  # rewind the WAL once it holds this many frames (32 MiB of 2 KiB pages)
_CAUGHT_UP_FRAMES = 64  # a catch-up round that copied no more than this: hand over


class _Checkpointer:
    """Copies the WAL back into the database on its own connection and thread: a passive
    checkpoint every ``interval_s`` (one with nothing to copy costs microseconds). Once the
    WAL is long, rounds follow each other until one finds little new to copy; then
    ``restart_due`` asks the writer to copy the rest and rewind (``SQLiteDriver._restart_wal``),
    and rounds pause until it has."""

    def __init__(self, path: str, interval_s: float = 0.1) -> None:
        self._path = path
        self._interval_s = interval_s
        self.restart_due = False
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name="agentrunner-checkpoint", daemon=True
        )
        self._thread.start()

    def _loop(self) -> None:
        conn = sqlite3.connect(self._path, timeout=10, check_same_thread=False)
        try:
            while not self._stopping.wait(self._interval_s):
                self._round(conn)
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            conn.close()

    def _round(self, conn: sqlite3.Connection) -> None:
        copied_before: int | None = None
        while not self.restart_due and not self._stopping.is_set():
            try:
                _, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            except sqlite3.Error:
                return  # busy: the next round tries again
            if frames < _RESTART_FRAMES:
                return
            if copied_before is not None and 0 <= copied - copied_before <= _CAUGHT_UP_FRAMES:
                self.restart_due = True
                return
            copied_before = copied

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=10)


_Args = Callable[[Params], Sequence[Any]]
_NUMBERED: dict[str, tuple[str, _Args]] = {}


def _bind(sql: str, params: Params) -> tuple[str, Sequence[Any] | Params]:
    """``sql`` with numbered parameters and its arguments in order.

    sqlite3 binds a named parameter by building a string from its name and looking it up in
    the dict, for every parameter of every row; numbered ones are taken from a tuple. A turn's
    two commits bind ~250 parameters: ~15 us of a durable turn (bench/store_writes.py)."""
    numbered, args = _numbered(sql)
    try:
        return numbered, args(params)
    except KeyError:  # a missing parameter: let sqlite3 name it in its error
        return sql, params


def _bind_many(sql: str, rows: list[Params]) -> tuple[str, list[Sequence[Any]] | list[Params]]:
    """``_bind`` for the rows of one ``executemany``; all bound before any runs."""
    numbered, args = _numbered(sql)
    try:
        return numbered, [args(row) for row in rows]
    except KeyError:
        return sql, rows


def _numbered(sql: str) -> tuple[str, _Args]:
    found = _NUMBERED.get(sql)
    if found is None:
        found = _number(sql)
        if len(_NUMBERED) < 4096:  # the store's statements; a caller's ad-hoc SQL is not kept
            _NUMBERED[sql] = found
    return found


def _number(sql: str) -> tuple[str, _Args]:
    names: dict[str, int] = {}
    numbered = replace_parameters(sql, lambda name: f"?{names.setdefault(name, len(names) + 1)}")
    if not names:
        return numbered, lambda params: ()
    if len(names) == 1:
        (only,) = names
        return numbered, lambda params: (params[only],)
    return numbered, cast(_Args, operator.itemgetter(*names))


def _settle(future: asyncio.Future[None], exc: Exception | None) -> None:
    if future.done():
        return
    if exc is None:
        future.set_result(None)
    else:
        future.set_exception(exc)


_PARENTS = ("INSERT INTO threads", "INSERT INTO runs ", "INSERT INTO run_steps")
_RANKS: dict[str, int] = {}


def _grouped(ops: Sequence[Op]) -> list[tuple[str, list[Params]]]:
    """The batch's rows grouped by statement: statements whose rows others reference (threads,
    runs, steps) first, the rest in the order they first appeared; rows keep their order."""
    groups: dict[str, list[Params]] = {}
    for sql, params in ops:
        rows = groups.get(sql)
        if rows is None:
            groups[sql] = [params]
        else:
            rows.append(params)
    for sql in groups:
        if sql not in _RANKS:
            _RANKS[sql] = _parent_rank(sql)
    # A stable sort: statements of equal rank keep the order they first appeared in.
    return sorted(groups.items(), key=lambda group: _RANKS[group[0]])


def _parent_rank(sql: str) -> int:
    statement = "\n".join(line for line in sql.splitlines() if not line.startswith("--"))
    for rank, prefix in enumerate(_PARENTS):
        if statement.startswith(prefix):
            return rank
    return len(_PARENTS)


class PostgresDriver:
    dialect = "postgres"
    lock_file: str | None = None

    def __init__(
        self, url: str, *, min_size: int = 1, max_size: int = 16, reconnect_s: float = 30.0
    ) -> None:
        try:
            from psycopg.rows import dict_row
            from psycopg_pool import AsyncConnectionPool
        except ImportError as exc:
            raise AgentRunnerError(
                ErrorCode.INTERNAL,
                "PostgreSQL support is not installed",
                hint='pip install "agentrunner[postgres]"',
            ) from exc
        self.url = url
        self.reconnect_s = reconnect_s
        self.guarded: Mapping[str, str] = {}
        self.pool = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=False,
            # A wait for a connection is one round of _run's retries, not all of them.
            timeout=min(10.0, reconnect_s),
            kwargs={"autocommit": True, "row_factory": dict_row, "prepare_threshold": 2},
        )

    async def open(self) -> None:
        import psycopg

        # One direct connection first: a wrong URL fails at once instead of after the pool's
        # retries run out.
        probe = await psycopg.AsyncConnection.connect(self.url, connect_timeout=10)
        await probe.close()
        await self.pool.open(wait=True, timeout=15)

    async def _run(self, operation: Callable[[Any], Awaitable[T]]) -> T:
        """``operation`` on a pooled connection. When the connection turns out lost (the
        server restarted or went away) before anything of the operation can have committed,
        it runs again on a new one — at once for an idle connection the server had closed,
        else after a growing pause — until ``reconnect_s`` have passed since the first loss.

        Every single statement the store runs alone is idempotent (reads, upserts, updates to
        a value, guarded transitions), so one lost in flight is run again too; a transaction
        is, unless its COMMIT was in flight (``_CommitInDoubt``: it may have committed)."""
        give_up: float | None = None
        pause = 0.05
        while True:
            try:
                async with self.pool.connection() as conn:
                    if _closed_by_server(conn):
                        await conn.close()  # the pool discards it and connects anew
                        raise _StaleConnection
                    return await operation(conn)
            except Exception as exc:
                if not _connection_lost(exc):
                    raise
                now = time.monotonic()
                if give_up is None:
                    give_up = now + self.reconnect_s
                if now >= give_up:  # the error's name only: its text may name the server
                    raise DatabaseUnavailable(
                        f"PostgreSQL could not be reached for {self.reconnect_s:g} s "
                        f"(last error: {type(exc).__name__})"
                    ) from exc
                if not isinstance(exc, _StaleConnection):
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, 1.0)

    async def fetch_all(self, sql: str, params: Params) -> list[dict[str, Any]]:
        async def fetch(conn: Any) -> list[dict[str, Any]]:
            cursor = await conn.execute(sql, params)
            return list(await cursor.fetchall())

        return await self._run(fetch)

    async def fetch_one(self, sql: str, params: Params) -> dict[str, Any] | None:
        async def fetch(conn: Any) -> dict[str, Any] | None:
            cursor = await conn.execute(sql, params)
            return cast(dict[str, Any] | None, await cursor.fetchone())

        return await self._run(fetch)

    async def execute(self, sql: str, params: Params) -> int:
        async def run(conn: Any) -> int:
            cursor = await conn.execute(sql, params)
            return int(cursor.rowcount)

        return await self._run(run)

    async def fetch_stamped(self, sql: str, params: Params) -> list[dict[str, Any]]:
        """A mailbox claim. Right after a burst of enqueues the planner's statistics say the
        queue is nearly empty, and it would sort every queued run (tens of ms per claim); with
        bitmap scans and sorts off for this one statement it walks the ordered index and stops
        at the first claimable run."""

        async def claim(conn: Any) -> list[dict[str, Any]]:
            await conn.execute("SET LOCAL enable_bitmapscan = off")
            await conn.execute("SET LOCAL enable_sort = off")
            cursor = await conn.execute(sql, {**params, "now": time.time()})
            return list(await cursor.fetchall())

        return await self._run(lambda conn: _in_transaction(conn, claim))

    async def fetch_in_transaction(self, ops: Sequence[Op]) -> list[dict[str, Any]]:
        async def run(conn: Any) -> list[dict[str, Any]]:
            cursor = None
            for sql, params in ops:
                cursor = await conn.execute(sql, params)
            if cursor is None or cursor.description is None:
                return []
            return list(await cursor.fetchall())

        return await self._run(lambda conn: _in_transaction(conn, run))

    def submit(self, ops: Sequence[Op]) -> asyncio.Future[None]:
        """Start committing ``ops`` and return at once (callers order their own batches)."""
        return asyncio.ensure_future(self.batch(ops))

    async def batch(self, ops: Sequence[Op]) -> None:
        if not ops:
            return
        guarded = self.guarded

        async def run(conn: Any) -> None:
            for sql, params in ops:
                cursor = await conn.execute(sql, params)
                if sql in guarded and cursor.rowcount == 0:
                    raise GuardRefused(guarded[sql], params)

        await self._run(lambda conn: _in_transaction(conn, run))

    async def migrate(self, sql: SqlSet) -> list[int]:
        async def run(conn: Any) -> list[int]:
            # One migrator at a time, whichever process gets there first.
            await conn.execute("SELECT pg_advisory_xact_lock(727274001)")
            await conn.execute(_MIGRATIONS_TABLE)
            cursor = await conn.execute("SELECT version FROM schema_migrations")
            done = {int(cast(dict[str, Any], row)["version"]) for row in await cursor.fetchall()}
            applied = []
            for version, statements in sql.migrations:
                if version in done:
                    continue
                for statement in statements:
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, applied_at) VALUES (%s, %s)",
                    (version, time.time()),
                )
                applied.append(version)
            return applied

        return await self._run(lambda conn: _in_transaction(conn, run))

    def notify(self) -> None:
        """Nothing to do: the NOTIFY went out with the transaction that queued the runs."""

    async def listener(self, channel: str) -> Listener:
        """A connection LISTENing on ``channel``; ``wait`` returns when a NOTIFY arrives."""
        listener = _PgListener(self.url, channel)
        await listener.connect()
        return listener

    async def close(self) -> None:
        await self.pool.close()


class Listener(Protocol):
    async def wait(self, timeout: float) -> bool: ...

    async def close(self) -> None: ...


class _PgListener:
    """LISTEN on its own connection. A lost connection is made again on the next ``wait``,
    which then returns True: NOTIFYs sent meanwhile were lost, so the waiter looks for itself."""

    def __init__(self, url: str, channel: str) -> None:
        self._url = url
        self._channel = channel
        self._conn: Any = None

    async def connect(self) -> None:
        import psycopg

        conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True)
        try:
            await conn.execute(f"LISTEN {self._channel}")
        except BaseException:
            await conn.close()
            raise
        self._conn = conn

    async def wait(self, timeout: float) -> bool:
        import psycopg

        if self._conn is None:
            try:
                await self.connect()
            except psycopg.Error:
                await asyncio.sleep(timeout)  # still down: the caller polls meanwhile
                return False
            return True
        try:
            async for _ in self._conn.notifies(timeout=timeout, stop_after=1):
                return True
        except psycopg.Error:  # the server went away (a restart): listen again next time
            await self._drop()
            return True
        return False

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        with contextlib.suppress(Exception):
            await conn.close()

    async def close(self) -> None:
        if self._conn is not None:
            await self._drop()


class _StaleConnection(Exception):
    """A pooled connection the server had closed while it sat idle."""


class _CommitInDoubt(DatabaseUnavailable):
    """The connection was lost while COMMIT was in flight: the transaction may have committed,
    so it is not run again. (A claim in doubt is a run nobody renews: the lease rules fail it.)"""


async def _in_transaction(conn: Any, body: Callable[[Any], Awaitable[T]]) -> T:
    committing = False
    try:
        async with conn.transaction():
            result = await body(conn)
            committing = True  # what fails from here on failed in COMMIT
    except Exception as exc:
        if committing and _connection_lost(exc):
            raise _CommitInDoubt(
                "the connection to PostgreSQL was lost while a transaction committed; it may "
                f"or may not have been written ({type(exc).__name__})"
            ) from exc
        raise
    return result


def _closed_by_server(conn: Any) -> bool:
    """Whether an idle pooled connection has anything to read — the server's goodbye on a
    restart (a FATAL, then EOF) — so it is not used: one poll, no round trip (psycopg-pool's
    ``check_connection`` is an empty query to the server on every checkout)."""
    poller = select.poll()
    poller.register(conn.pgconn.socket, select.POLLIN)
    return bool(poller.poll(0))


# SQLSTATEs of a server that is going away or not yet there: admin_shutdown, crash_shutdown,
# cannot_connect_now (class 08, connection exceptions, is matched whole).
_GONE = frozenset({"57P01", "57P02", "57P03"})


def _connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` is the connection failing, not the statement: worth another go."""
    import psycopg
    import psycopg_pool

    if isinstance(exc, _StaleConnection | psycopg_pool.PoolTimeout):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _GONE


async def open_driver(url: str) -> Driver:
    """``sqlite:///path`` (or a bare path) or ``postgresql://…``."""
    if url.startswith(("postgresql://", "postgres://")):
        driver = PostgresDriver(url)
        try:
            await driver.open()
        except Exception as exc:
            await driver.close()
            raise AgentRunnerError(
                ErrorCode.RUNNER_IO,
                f"cannot connect to PostgreSQL: {type(exc).__name__}",
                hint="Check AGENTRUNNER_DATABASE_URL and that the server is running.",
            ) from exc
        return driver
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
    elif url.startswith("sqlite://"):
        path = url[len("sqlite://") :]
    else:
        path = url
    try:
        return SQLiteDriver(path)
    except (sqlite3.Error, OSError) as exc:
        raise AgentRunnerError(
            ErrorCode.RUNNER_IO,
            f"cannot open the SQLite database {path}: {exc}",
            hint="Check that the directory exists and is writable, or set [database] url.",
        ) from exc
