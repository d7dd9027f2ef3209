"""``LISTEN`` on PostgreSQL, on a connection of its own: for queued runs (a worker waits), and
for changes (``store/changes``: the keys a commit's ``NOTIFY`` names)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from agentrunner.store.wake import ALL, SEPARATOR

__all__ = ["CHANGES_LISTENER", "PostgresChanges", "PostgresListener"]

# The application name of a connection listening for changes: how writers see that someone
# tails the database (PostgresDriver.listened).
CHANGES_LISTENER = "agentrunner-changes"


class PostgresListener:
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


class PostgresChanges:
    """LISTEN for changes on a connection of its own, in a task that hands each NOTIFY's
    payload (keys, one per line) to ``deliver``. A lost connection is made again, with a
    growing pause; NOTIFYs sent meanwhile were lost, so the next connection delivers ``[ALL]``
    first: every waiter looks for itself."""

    def __init__(self, url: str, channel: str, deliver: Callable[[list[str]], None]) -> None:
        self._url = url
        self._channel = channel
        self._deliver = deliver
        self._conn: Any = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Listening once this returns: a commit after it is delivered."""
        self._conn = await self._connect()
        self._task = asyncio.create_task(self._listen())

    async def _connect(self) -> Any:
        import psycopg

        conn = await psycopg.AsyncConnection.connect(
            self._url, autocommit=True, application_name=CHANGES_LISTENER
        )
        try:
            await conn.execute(f"LISTEN {self._channel}")
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _listen(self) -> None:
        import psycopg

        pause = 0.1
        while True:
            if self._conn is None:
                try:
                    self._conn = await self._connect()
                except psycopg.Error:
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, 5.0)
                    continue
                pause = 0.1
                self._deliver([ALL])
            try:
                async for notify in self._conn.notifies():
                    self._deliver(notify.payload.split(SEPARATOR))
            except psycopg.Error:  # the server went away (a restart): listen again
                conn, self._conn = self._conn, None
                with contextlib.suppress(Exception):
                    await conn.close()

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()
