"""What the store asks of a database driver: rows as dicts, statements, batches of statements in
one transaction, migrations, a way to wait for queued runs. SQLite and PostgreSQL implement it,
and the same contract tests run against both.

A batch is a list of ``Op``: a statement of the store's SQL known by the name of its block
(``store/sql``). The driver goes by that name, never by the SQL's text, to know which
statements a batch must see change a row (``guarded``) and, where it groups a batch's rows per
statement, which rows others reference and so go first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence, Set
from contextvars import ContextVar
from typing import Any, Protocol

from agentrunner.store.sql import SqlSet

__all__ = [
    "DETACHED_READS",
    "MIGRATIONS_TABLE",
    "ChangeListener",
    "Deliver",
    "Driver",
    "Listener",
    "Op",
    "Params",
    "detach_reads",
]

Params = Mapping[str, Any]
# (the name of its SQL block, that block's SQL in the driver's dialect, its parameters)
Op = tuple[str, str, Params]

# Whether the current task's reads run to their end even when it is cancelled mid-read: set by
# a server-sent event stream, which its client may leave at any moment (``detach_reads``).
DETACHED_READS: ContextVar[bool] = ContextVar("agentrunner_detached_reads", default=False)


def detach_reads() -> None:
    """From here on, a read of the current task that it is cancelled in the middle of runs to
    its end on its connection, its rows dropped. On PostgreSQL such a read runs in a task of
    its own (tens of microseconds more), so only a task that may well be cancelled mid-read
    asks for it: psycopg cancels a query cancelled under it on the server, and an anyio cancel
    scope (a stream's, when its client goes away) cancels that too, and psycopg then closes
    the connection for the pool to replace. SQLite's reads are not interrupted anyway."""
    DETACHED_READS.set(True)


MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations "
    "(version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
)


class Listener(Protocol):
    async def wait(self, timeout: float) -> bool: ...

    async def close(self) -> None: ...


# Called on the loop with the keys of a commit's changes (store/changes), as they arrive.
Deliver = Callable[[list[str]], None]


class ChangeListener(Protocol):
    async def close(self) -> None: ...


class Driver(Protocol):
    dialect: str
    lock_file: str | None  # a file for thread locks' byte locks, where all users share a machine
    guarded: Set[str]  # names of statements a batch must see change a row (SqlSet.guarded)

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

    async def changes(self, deliver: Deliver) -> ChangeListener: ...

    def listened(self) -> bool: ...

    @property
    def pool_size(self) -> int | None:
        """The most connections its pool opens (None: it has none, a SQLite file)."""
        ...

    async def close(self) -> None: ...
