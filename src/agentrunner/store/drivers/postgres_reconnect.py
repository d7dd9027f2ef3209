"""Outliving a PostgreSQL server's restarts: an operation whose connection was lost before
anything of it could have committed runs again on a new connection, with backoff, for up to a
deadline; then ``DatabaseUnavailable``.

Every single statement the store runs alone is idempotent (reads, upserts, updates to a value,
guarded transitions), so one lost in flight is run again too; a transaction is, unless its
COMMIT was in flight (``CommitInDoubt``: it may have committed).
"""

from __future__ import annotations

import asyncio
import select
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from agentrunner.store.drivers.errors import DatabaseUnavailable

__all__ = ["CommitInDoubt", "in_transaction", "reconnecting"]

T = TypeVar("T")
# SQLSTATEs of a server that is going away or not yet there: admin_shutdown, crash_shutdown,
# cannot_connect_now (class 08, connection exceptions, is matched whole).
_GONE = frozenset({"57P01", "57P02", "57P03"})


class CommitInDoubt(DatabaseUnavailable):
    """The connection was lost while COMMIT was in flight: the transaction may have committed,
    so it is not run again. (A claim in doubt is a run nobody renews: the lease rules fail it.)"""


class _StaleConnection(Exception):
    """A pooled connection the server had closed while it sat idle."""


async def reconnecting(
    pool: Any, operation: Callable[[Any], Awaitable[T]], reconnect_s: float
) -> T:
    """``operation`` on a connection of ``pool``. When the connection turns out lost (the
    server restarted or went away) before anything of the operation can have committed, it
    runs again on a new one — at once for an idle connection the server had closed, else after
    a growing pause — until ``reconnect_s`` have passed since the first loss."""
    give_up: float | None = None
    pause = 0.05
    while True:
        try:
            async with pool.connection() as conn:
                if _closed_by_server(conn):
                    await conn.close()  # the pool discards it and connects anew
                    raise _StaleConnection
                return await operation(conn)
        except Exception as exc:
            if not _connection_lost(exc):
                raise
            now = time.monotonic()
            if give_up is None:
                give_up = now + reconnect_s
            if now >= give_up:  # the error's name only: its text may name the server
                raise DatabaseUnavailable(
                    f"PostgreSQL could not be reached for {reconnect_s:g} s "
                    f"(last error: {type(exc).__name__})"
                ) from exc
            if not isinstance(exc, _StaleConnection):
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)


async def in_transaction(conn: Any, body: Callable[[Any], Awaitable[T]]) -> T:
    """``body(conn)`` in a transaction; a connection lost during its COMMIT is
    ``CommitInDoubt``, never run again."""
    committing = False
    try:
        async with conn.transaction():
            result = await body(conn)
            committing = True  # what fails from here on failed in COMMIT
    except Exception as exc:
        if committing and _connection_lost(exc):
            raise CommitInDoubt(
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


def _connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` is the connection failing, not the statement: worth another go."""
    import psycopg
    import psycopg_pool

    if isinstance(exc, _StaleConnection | psycopg_pool.PoolTimeout):
        return True
    if isinstance(exc, psycopg_pool.PoolClosed):  # closed by us, not lost: no server to wait for
        return False
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _GONE
