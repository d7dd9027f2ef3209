"""Waiting for queued runs on PostgreSQL: ``LISTEN`` on a connection of its own."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

__all__ = ["PostgresListener"]


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
