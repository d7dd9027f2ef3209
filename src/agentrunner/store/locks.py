"""Thread locks that hold across processes, granted in arrival order.

Each waiter takes a ticket (a row); the lowest live ticket of a thread holds the lock. Tickets
carry a lease that their owner renews; a ticket whose lease expired, or whose owner process on
this host is gone (kill -9), is removed by the next waiter, so a dead process never leaves a
thread locked. Within one process an asyncio lock per thread queues callers first, so they do
not poll the database against each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import socket
import time
from collections.abc import AsyncIterator

from agentrunner.store.drivers import Driver, Op
from agentrunner.store.sql import SqlSet

__all__ = ["HeldLock", "ThreadLocks"]

_HOST = socket.gethostname()
_owners = itertools.count(1)  # tells apart the tickets of one process


class ThreadLocks:
    def __init__(
        self, driver: Driver, sql: SqlSet, *, lease_s: float = 30.0, poll_s: float = 0.01
    ) -> None:
        self.db = driver
        self.sql = sql
        self.lease_s = lease_s
        self.poll_s = poll_s
        self._local: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, thread_id: str) -> AsyncIterator[HeldLock]:
        """Hold ``thread_id``'s lock for the body of the ``async with``.

        The body may put ``held.release_op()`` into its last transaction, so the release
        commits with the run's final rows; otherwise the lock is released on exit.
        """
        lock, users = self._local.get(thread_id, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._local[thread_id] = (lock, users + 1)
        try:
            async with lock:
                held = HeldLock(thread_id, await self._acquire(thread_id), self.sql["lock_drop"])
                # A timer, not a task: most runs end long before the first renewal is due.
                timer = asyncio.get_running_loop().call_later(
                    self.lease_s / 3, self._renew_soon, held
                )
                held.timer = timer
                try:
                    yield held
                finally:
                    if held.timer is not None:
                        held.timer.cancel()
                    if not held.released:
                        await self.db.execute(*held.release_op())
        finally:
            lock, users = self._local[thread_id]
            if users <= 1:
                del self._local[thread_id]
            else:
                self._local[thread_id] = (lock, users - 1)

    async def _acquire(self, thread_id: str) -> int:
        owner = f"{_HOST}:{os.getpid()}:{next(_owners):x}"
        ticket = _next_ticket()
        key = {"thread_id": thread_id, "ticket": ticket}
        row = await self.db.fetch_one(
            self.sql["lock_enqueue"],
            {**key, "owner": owner, "expires_at": time.time() + self.lease_s},
        )
        delay = self.poll_s
        try:
            ahead = row["ahead"] if row is not None else None
            if ahead is None or int(ahead) > ticket:
                return ticket  # the common case: nobody else wants this thread
            while True:
                now = time.time()
                await self.db.execute(self.sql["lock_expire"], {"thread_id": thread_id, "now": now})
                head = await self.db.fetch_one(self.sql["lock_queue"], {"thread_id": thread_id})
                if head is None:  # our own ticket expired while we waited: queue again
                    return await self._acquire(thread_id)
                if int(head["ticket"]) == ticket:
                    return ticket
                if _owner_is_dead(str(head["owner"])):
                    await self.db.execute(
                        self.sql["lock_drop"], {"thread_id": thread_id, "ticket": head["ticket"]}
                    )
                    continue
                await self.db.execute(
                    self.sql["lock_renew"], {**key, "expires_at": now + self.lease_s}
                )
                await asyncio.sleep(delay)
                delay = min(delay * 1.5, 0.2)
        except BaseException:
            with contextlib.suppress(Exception):
                await self.db.execute(self.sql["lock_drop"], key)
            raise

    def _renew_soon(self, held: HeldLock) -> None:
        if held.released:
            return
        task = asyncio.ensure_future(self._renew(held))
        _RENEWALS.add(task)
        task.add_done_callback(_RENEWALS.discard)
        held.timer = asyncio.get_running_loop().call_later(self.lease_s / 3, self._renew_soon, held)

    async def _renew(self, held: HeldLock) -> None:
        with contextlib.suppress(Exception):  # a missed renewal is retried; the lease is long
            await self.db.execute(
                self.sql["lock_renew"],
                {
                    "thread_id": held.thread_id,
                    "ticket": held.ticket,
                    "expires_at": time.time() + self.lease_s,
                },
            )


_RENEWALS: set[asyncio.Task[None]] = set()


class HeldLock:
    """A held thread lock; ``release_op`` lets the caller release it inside its own batch."""

    __slots__ = ("_sql", "released", "thread_id", "ticket", "timer")

    def __init__(self, thread_id: str, ticket: int, drop_sql: str) -> None:
        self.thread_id = thread_id
        self.ticket = ticket
        self.released = False
        self.timer: asyncio.TimerHandle | None = None
        self._sql = drop_sql

    def release_op(self) -> Op:
        self.released = True
        return self._sql, {"thread_id": self.thread_id, "ticket": self.ticket}


_last_ticket = 0


def _next_ticket() -> int:
    """Increasing across processes on a machine (nanosecond clock), and within a process."""
    global _last_ticket
    _last_ticket = max(time.time_ns(), _last_ticket + 1)
    return _last_ticket


def _owner_is_dead(owner: str) -> bool:
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != _HOST or not pid_text.isdigit():
        return False  # another machine: only its lease can tell
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
