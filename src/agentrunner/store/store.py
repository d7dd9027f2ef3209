"""``Store``: agentrunner's persistence, one set of repositories over a ``Driver``.

Two drivers implement the same contract — SQLite (default, one file in ``.agentrunner/``) and
PostgreSQL (``AGENTRUNNER_DATABASE_URL``) — and the same contract tests run against both. The
schema's numbered migrations are applied when the store opens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.store.agents import AgentStates, Memory, Notes, TaskCacheRows
from agentrunner.store.approvals import Approvals
from agentrunner.store.attachments import Attachments
from agentrunner.store.changes import Changes
from agentrunner.store.channels import Channels
from agentrunner.store.company import Company
from agentrunner.store.costs import Costs
from agentrunner.store.drivers import Driver, GuardRefused, Listener, Op, open_driver
from agentrunner.store.embeddings import Embeddings
from agentrunner.store.evals import EvalRuns
from agentrunner.store.forks import Forks
from agentrunner.store.idempotency import IdempotencyKeys
from agentrunner.store.locks import ThreadLocks
from agentrunner.store.mailbox import Mailbox, Workers
from agentrunner.store.retention import RetentionRows
from agentrunner.store.runs import Events, Runs
from agentrunner.store.schedules import ScheduleRows
from agentrunner.store.sql import ExtensionTable, SqlSet, load_sql, with_tables
from agentrunner.store.threads import Messages, Threads

if TYPE_CHECKING:
    from agentrunner.config import Config

__all__ = ["Store", "open_project_store", "open_store"]


class Store:
    def __init__(self, driver: Driver, sql: SqlSet, *, lock_lease_s: float = 30.0) -> None:
        self.driver = driver
        self.sql = sql
        driver.guarded = sql.guarded
        # What a refused batch still commits: money spent is spent, settled or not.
        self._spent = frozenset(("cost_insert", "cost_total_add", "budget_release"))
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
        self.company = Company(driver, sql)
        self.approvals = Approvals(driver, sql)
        self.attachments = Attachments(driver, sql)
        self.forks = Forks(driver, sql, self.threads, self.messages, self.attachments)
        self.schedules = ScheduleRows(driver, sql)
        self.evals = EvalRuns(driver, sql)
        self.embeddings = Embeddings(driver, sql)
        self.retention = RetentionRows(driver, sql)
        self.changes = Changes(driver)  # readers woken by commits, in whichever process

    @property
    def dialect(self) -> str:
        return self.driver.dialect

    async def batch(self, ops: Sequence[Op]) -> None:
        """Run the operations (from repositories' ``*_op`` methods) in one transaction.

        A batch that would settle a run already settled (``run_finish`` of a run no longer
        ``running``: the lease rules failed it while its worker was paused) is refused whole
        — the thread and the run stay as they were — but for its cost rows, which are written
        on their own; then ``run_settled`` is raised."""
        try:
            await self.driver.batch(ops)
        except GuardRefused as refused:
            spent = [op for op in ops if op[0] in self._spent]
            if spent:
                await self.driver.batch(spent)
            raise await self._refusal(refused) from None

    async def _refusal(self, refused: GuardRefused) -> AgentRunnerError:
        if refused.query != "run_finish":
            return AgentRunnerError(ErrorCode.INTERNAL, f"refused: {refused}")
        run_id = str(refused.params["id"])
        run = await self.runs.get(run_id)
        if run is None:
            return AgentRunnerError(ErrorCode.INTERNAL, f"run {run_id} does not exist")
        why = f": {run.error_message}" if run.error_message else ""
        return AgentRunnerError(
            ErrorCode.RUN_SETTLED,
            f"run {run_id} was already {run.status} when its worker finished it{why}; "
            "the late result was not recorded",
            details={"run_id": run_id, "status": run.status},
        )

    def submit(self, ops: Sequence[Op]) -> asyncio.Future[None]:
        """Start committing ``ops`` in one transaction without waiting (see ``RunLog.submit``
        for ordering). A run's settle goes through ``batch``, never here."""
        return self.driver.submit(ops)

    def notify_runs(self) -> None:
        """After queueing runs: wake idle workers (PostgreSQL did so when the batch committed)."""
        self.driver.notify()

    async def run_listener(self) -> Listener:
        """Something to wait on for new queued runs: NOTIFY on PostgreSQL, a sleep on SQLite."""
        return await self.driver.listener("agentrunner_runs")

    async def close(self) -> None:
        self.locks.close()
        await self.changes.close()
        await self.driver.close()


async def open_project_store(
    config: Config,
    *,
    url: str | None = None,
    tables: Sequence[ExtensionTable] = (),
    worker: int | bool | None = None,
) -> Store:
    """The project's store, as ``config``'s ``[database]`` says to open it (``url`` over its
    URL): its pool (sized for a ``worker``: ``Config.pool_size``), a transaction pooler."""
    return await open_store(
        url or config.resolved_database_url,
        tables=tables,
        pool_size=config.pool_size(worker),
        pooled=config.database_pooled,
        listen_url=config.database_listen_url,
    )


async def open_store(
    url: str,
    *,
    lock_lease_s: float = 30.0,
    tables: Sequence[ExtensionTable] = (),
    pool_size: int | None = None,
    pooled: bool = False,
    listen_url: str | None = None,
) -> Store:
    """Open (creating and migrating as needed) the store at ``url``; ``tables``, extensions'
    tables, are created with the migrations when they do not exist yet. ``pool_size``: the
    most connections its pool opens on PostgreSQL (None: 16); ``pooled``: ``url`` is a
    transaction pooler's, and LISTEN goes to ``listen_url``."""
    driver = await open_driver(url, pool_size=pool_size, pooled=pooled, listen_url=listen_url)
    try:
        # The package's SQL files, read on a thread: a store opened by a running app stalls
        # nothing.
        sql = await asyncio.to_thread(
            load_sql, "postgres" if driver.dialect == "postgres" else "sqlite"
        )
        sql = with_tables(sql, tables)
    except BaseException:
        await driver.close()
        raise
    try:
        await driver.migrate(sql)
    except BaseException:
        await driver.close()
        raise
    return Store(driver, sql, lock_lease_s=lock_lease_s)
