"""The two database drivers behind the store, and what they share.

- ``contract``: the ``Driver`` protocol the store is written against, and ``Op``, a batched
  statement known by the name of its SQL block.
- ``errors``: ``GuardRefused`` (a guarded statement changed no row, its batch rolled back) and
  ``DatabaseUnavailable`` / ``is_unavailable`` (worth waiting for).
- ``sqlite`` (stdlib): statements on the event loop's thread, group commit;
  ``sqlite_statements`` groups a batch per statement and binds parameters by number;
  ``sqlite_wal`` checkpoints on a thread of its own and keeps the WAL from growing.
- ``postgres`` (psycopg 3): a connection pool; ``postgres_reconnect`` outlives the server's
  restarts; ``postgres_listener`` waits for NOTIFYs (queued runs, changes).
"""

from __future__ import annotations

import sqlite3

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.store.drivers.contract import (
    ChangeListener,
    Deliver,
    Driver,
    Listener,
    Op,
    Params,
)
from agentrunner.store.drivers.errors import DatabaseUnavailable, GuardRefused, is_unavailable
from agentrunner.store.drivers.postgres import DEFAULT_POOL_SIZE, PostgresDriver
from agentrunner.store.drivers.sqlite import SQLiteDriver

__all__ = [
    "ChangeListener",
    "DatabaseUnavailable",
    "Deliver",
    "Driver",
    "GuardRefused",
    "Listener",
    "Op",
    "Params",
    "PostgresDriver",
    "SQLiteDriver",
    "is_unavailable",
    "open_driver",
]


async def open_driver(
    url: str,
    *,
    pool_size: int | None = None,
    pooled: bool = False,
    listen_url: str | None = None,
) -> Driver:
    """``sqlite:///path`` (or a bare path) or ``postgresql://…``: a pool of at most
    ``pool_size`` connections (16 by default); ``pooled``, a transaction pooler's URL
    (PgBouncer's), whose LISTEN is on ``listen_url``, a direct connection."""
    if url.startswith(("postgresql://", "postgres://")):
        if pooled and not listen_url:
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                "[database] pooled: LISTEN needs a session of its own, which a transaction "
                "pooler does not keep, and no listen URL is set",
                hint="Set AGENTRUNNER_DATABASE_LISTEN_URL to a direct connection to "
                "PostgreSQL (not the pooler's).",
            )
        driver = PostgresDriver(
            url, max_size=pool_size or DEFAULT_POOL_SIZE, listen_url=listen_url, pooled=pooled
        )
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
