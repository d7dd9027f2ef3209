"""``Store``: agentrunner's persistence, one set of repositories over a ``Driver``.

Two drivers implement the same contract — SQLite (default, one file in ``.agentrunner/``) and
PostgreSQL (``AGENTRUNNER_DATABASE_URL``) — and the same contract tests run against both. The
schema's numbered migrations are applied when the store opens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from agentrunner.store.channels import Channels
from agentrunner.store.drivers import Driver, Listener, Op, open_driver
from agentrunner.store.idempotency import IdempotencyKeys
from agentrunner.store.locks import ThreadLocks
from agentrunner.store.mailbox import Mailbox, Workers
from agentrunner.store.repositories import (
    AgentStates,
    Costs,
    Events,
    Memory,
    Messages,
    Notes,
    Runs,
    TaskCacheRows,
    Threads,
)
from agentrunner.store.sql import SqlSet, load_sql

__all__ = ["Store", "open_store"]


class Store:
    def __init__(self, driver: Driver, sql: SqlSet, *, lock_lease_s: float = 30.0) -> None:
        self.driver = driver
        self.sql = sql
        self.threads = Threads(driver, sql)
        self.messages = Messages(driver, sql)
        self.runs = Runs(driver, sql)
        self.events = Events(driver, sql)
        self.costs = Costs(driver, sql)
        self.memory = Memory(driver, sql)
        self.notes = Notes(driver, sql)
        self.agent_states = AgentStates(driver, sql)
        self.locks = ThreadLocks(driver, sql, lease_s=lock_lease_s, lock_file=driver.lock_file)
        self.mailbox = Mailbox(driver, sql)
        self.workers = Workers(driver, sql)
        self.channels = Channels(driver, sql)
        self.task_cache = TaskCacheRows(driver, sql)
        self.idempotency = IdempotencyKeys(driver, sql)

    @property
    def dialect(self) -> str:
        return self.driver.dialect

    async def batch(self, ops: Sequence[Op]) -> None:
        """Run the operations (from repositories' ``*_op`` methods) in one transaction."""
        await self.driver.batch(ops)

    def submit(self, ops: Sequence[Op]) -> asyncio.Future[None]:
        """Start committing ``ops`` in one transaction without waiting (see ``RunLog.submit``
        for ordering)."""
        return self.driver.submit(ops)

    def notify_runs(self) -> None:
        """After queueing runs: wake idle workers (PostgreSQL did so when the batch committed)."""
        self.driver.notify()

    async def run_listener(self) -> Listener:
        """Something to wait on for new queued runs: NOTIFY on PostgreSQL, a sleep on SQLite."""
        return await self.driver.listener("agentrunner_runs")

    async def close(self) -> None:
        self.locks.close()
        await self.driver.close()


async def open_store(url: str, *, lock_lease_s: float = 30.0) -> Store:
    """Open (creating and migrating as needed) the store at ``url``."""
    driver = await open_driver(url)
    sql = load_sql("postgres" if driver.dialect == "postgres" else "sqlite")
    try:
        await driver.migrate(sql)
    except BaseException:
        await driver.close()
        raise
    return Store(driver, sql, lock_lease_s=lock_lease_s)
