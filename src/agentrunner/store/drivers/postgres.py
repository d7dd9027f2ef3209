"""The PostgreSQL driver (psycopg 3 and its pool).

Statements run on pooled connections in autocommit mode; a batch is one transaction, its
statements sent in one pipeline (a settle's dozen rows: three round trips, not fourteen). The
driver outlives its server's restarts (``postgres_reconnect``): an operation whose connection
was lost before anything of it could have committed is run again on a new connection, with
backoff, for up to ``reconnect_s``; then ``DatabaseUnavailable``. A read of a task that asked
for it (``detach_reads``: a stream, which its client may leave) runs to its end on its
connection though the task is cancelled, so the connection goes back to the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence, Set
from typing import Any, TypeVar, cast

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.store.drivers.contract import (
    DETACHED_READS,
    MIGRATIONS_TABLE,
    ChangeListener,
    Deliver,
    Listener,
    Op,
    Params,
)
from agentrunner.store.drivers.errors import GuardRefused
from agentrunner.store.drivers.postgres_listener import (
    CHANGES_LISTENER,
    PostgresChanges,
    PostgresListener,
)
from agentrunner.store.drivers.postgres_reconnect import in_transaction, reconnecting
from agentrunner.store.sql import TABLE_EXISTS, SqlSet

__all__ = ["DEFAULT_POOL_SIZE", "PostgresDriver"]

T = TypeVar("T")
log = logging.getLogger(__name__)
# How old the count of the processes listening for changes may be (PostgresDriver.listened).
LISTENERS_TTL_S = 1.0
# A process's pool at most (its listeners are connections of their own): enough for a server's
# readers and runs at once; a worker's is sized to its concurrency (runtime/compose).
DEFAULT_POOL_SIZE = 16
# Every role sees every session in pg_stat_activity, with its application name (were that
# hidden, writers would keep the 20 ms window: later, never wrong).
_LISTENERS = (
    "SELECT count(*) AS listeners FROM pg_stat_activity "
    "WHERE application_name = %(name)s AND datname = current_database()"
)


class PostgresDriver:
    dialect = "postgres"
    lock_file: str | None = None

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = DEFAULT_POOL_SIZE,
        reconnect_s: float = 30.0,
        listen_url: str | None = None,
        pooled: bool = False,
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
        # LISTEN needs a session of its own: behind a transaction pooler (``pooled``) a
        # direct connection to PostgreSQL, which a pooler would hand to another client
        self.listen_url = listen_url or url
        self.reconnect_s = reconnect_s
        self.guarded: Set[str] = frozenset()
        self._listeners = 0  # processes listening for changes, as last counted
        self._counted_at = -LISTENERS_TTL_S
        self._counting: asyncio.Future[None] | None = None
        self._left: set[asyncio.Future[Any]] = set()  # reads whose callers went away
        self.pool = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=False,
            # A wait for a connection is one round of the reconnecting retries, not all of them.
            timeout=min(10.0, reconnect_s),
            # A transaction pooler runs each transaction on any of its server connections,
            # where a statement prepared on another is not: prepared only without one.
            kwargs={
                "autocommit": True,
                "row_factory": dict_row,
                "prepare_threshold": None if pooled else 2,
            },
        )

    @property
    def pool_size(self) -> int | None:
        """The most connections its pool opens (its listeners are more)."""
        return int(self.pool.max_size)

    async def open(self) -> None:
        import psycopg

        # One direct connection first: a wrong URL fails at once instead of after the pool's
        # retries run out.
        probe = await psycopg.AsyncConnection.connect(self.url, connect_timeout=10)
        await probe.close()
        await self.pool.open(wait=True, timeout=15)

    async def _run(self, operation: Callable[[Any], Awaitable[T]]) -> T:
        return await reconnecting(self.pool, operation, self.reconnect_s)

    async def _read(self, operation: Callable[[Any], Awaitable[T]]) -> T:
        """``operation``, a statement alone; for a task that detached its reads, run to its end
        on its connection whatever becomes of the task. A task cancelled meanwhile — a stream
        whose client went away, ended by its task group's cancel scope — is cancelled at once
        and the rows are dropped when they come. Cancelled inside the query, psycopg would
        cancel it on the server and wait for that; the cancel scope cancels that wait too, and
        psycopg then closes the connection ("query cancellation interrupted"), which the pool
        replaces: a new connection for each client that leaves mid-read."""
        if not DETACHED_READS.get():
            return await self._run(operation)
        read = asyncio.ensure_future(self._run(operation))
        try:
            return await asyncio.shield(read)
        except asyncio.CancelledError:
            if not read.done():  # shield marks its error retrieved; close waits for it
                log.debug("a read's caller went away: the read ends on its connection")
                self._left.add(read)
                read.add_done_callback(self._left.discard)
            raise

    async def fetch_all(self, sql: str, params: Params) -> list[dict[str, Any]]:
        async def fetch(conn: Any) -> list[dict[str, Any]]:
            cursor = await conn.execute(sql, params)
            return list(await cursor.fetchall())

        return await self._read(fetch)

    async def fetch_one(self, sql: str, params: Params) -> dict[str, Any] | None:
        async def fetch(conn: Any) -> dict[str, Any] | None:
            cursor = await conn.execute(sql, params)
            return cast(dict[str, Any] | None, await cursor.fetchone())

        return await self._read(fetch)

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

        return await self._run(lambda conn: in_transaction(conn, claim))

    async def fetch_in_transaction(self, ops: Sequence[Op]) -> list[dict[str, Any]]:
        """Commit ``ops`` as ``batch`` does (guarded statements), in one transaction; the rows
        of the last statement."""
        guarded = self.guarded

        async def run(conn: Any) -> list[dict[str, Any]]:
            cursor = None
            for name, sql, params in ops:
                cursor = await conn.execute(sql, params)
                if name in guarded and cursor.rowcount == 0:
                    raise GuardRefused(name, params)
            if cursor is None or cursor.description is None:
                return []
            return list(await cursor.fetchall())

        return await self._run(lambda conn: in_transaction(conn, run))

    def submit(self, ops: Sequence[Op]) -> asyncio.Future[None]:
        """Start committing ``ops`` and return at once (callers order their own batches)."""
        return asyncio.ensure_future(self.batch(ops))

    async def batch(self, ops: Sequence[Op]) -> None:
        if not ops:
            return
        guarded = self.guarded

        async def run(conn: Any) -> None:
            if len(ops) == 1:
                name, sql, params = ops[0]
                cursors = [await conn.execute(sql, params)]
            else:  # sent together, answered together: one round trip, not one a statement
                async with conn.pipeline() as pipeline:
                    cursors = [await conn.execute(sql, params) for _, sql, params in ops]
                    await pipeline.sync()
            for (name, _, params), cursor in zip(ops, cursors, strict=True):
                if name in guarded and cursor.rowcount == 0:
                    raise GuardRefused(name, params)

        await self._run(lambda conn: in_transaction(conn, run))

    async def migrate(self, sql: SqlSet) -> list[int]:
        async def run(conn: Any) -> list[int]:
            # One migrator at a time, whichever process gets there first.
            await conn.execute("SELECT pg_advisory_xact_lock(727274001)")
            await conn.execute(MIGRATIONS_TABLE)
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
            for name, statements, _owner in sql.tables:  # extensions' tables, once each
                cursor = await conn.execute(TABLE_EXISTS["postgres"], (name,))
                if await cursor.fetchone() is None:
                    for statement in statements:
                        await conn.execute(statement)
            return applied

        return await self._run(lambda conn: in_transaction(conn, run))

    def notify(self) -> None:
        """Nothing to do: the NOTIFY went out with the transaction that queued the runs."""

    async def listener(self, channel: str) -> Listener:
        """A connection LISTENing on ``channel``; ``wait`` returns when a NOTIFY arrives."""
        listener = PostgresListener(self.listen_url, channel)
        await listener.connect()
        return listener

    async def changes(self, deliver: Deliver) -> ChangeListener:
        """LISTEN for the ``NOTIFY`` a commit's ``changes_notify`` row sends as it commits."""
        listener = PostgresChanges(self.listen_url, "agentrunner_changes", deliver)
        await listener.start()
        return listener

    def listened(self) -> bool:
        """Whether a process tails this database (a connection listens for changes), as
        counted at most ``LISTENERS_TTL_S`` ago: a stale count is counted again in the
        background, never waited for."""
        if time.monotonic() - self._counted_at > LISTENERS_TTL_S and self._counting is None:
            self._counting = asyncio.ensure_future(self._count_listeners())
        return self._listeners > 0

    async def _count_listeners(self) -> None:
        try:
            row = await self.fetch_one(_LISTENERS, {"name": CHANGES_LISTENER})
            self._listeners = int(row["listeners"]) if row else 0
        except Exception:  # the database away: what was counted stands
            pass
        finally:
            self._counted_at = time.monotonic()
            self._counting = None

    async def close(self) -> None:
        counting, self._counting = self._counting, None
        if counting is not None:
            counting.cancel()
            with contextlib.suppress(BaseException):
                await counting
        if self._left:  # reads whose callers left: their connections come back first
            await asyncio.wait(self._left)
        await self.pool.close()
