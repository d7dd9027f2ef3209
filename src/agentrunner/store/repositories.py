"""Repositories: one per aggregate, every database operation of agentrunner, no SQL outside.

Each method runs one named query (or one transaction of them) through the driver, so the same
code serves SQLite and PostgreSQL. This module holds what they share, ``Repository``; each
group lives in a module of its own — ``threads`` (threads and their messages), ``runs`` (runs
and their events), ``costs`` (spend and budget holds), ``agents`` (each agent's memory, notes,
task cache and state), and ``channels``, ``company``, ``mailbox``, ``idempotency``.
"""

from __future__ import annotations

from typing import Any

from agentrunner.store.changes import payload
from agentrunner.store.drivers import Driver, Op
from agentrunner.store.sql import SqlSet

__all__ = ["FAR_FUTURE", "Repository"]

# The ``before`` of a listing that starts from the newest row.
FAR_FUTURE = 1e18


class Repository:
    def __init__(self, driver: Driver, sql: SqlSet) -> None:
        self.db = driver
        self.sql = sql

    def op(self, query: str, /, **params: Any) -> Op:
        return query, self.sql[query], params

    def changed_op(self, *keys: str) -> Op:
        """The row that tells the processes tailing the store what its batch changed, when it
        commits (``store/changes``): one per batch."""
        return self.op("changes_notify", keys=payload(keys))

    async def ids(self, query: str, /, **params: str | int) -> list[str]:
        """The ``id`` of each row ``query`` returns (ids by prefix or suffix, in order)."""
        rows = await self.db.fetch_all(self.sql[query], params)
        return [str(row["id"]) for row in rows]
