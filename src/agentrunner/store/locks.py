"""Thread locks that hold across processes, granted in arrival order.

Each waiter takes a ticket (a row); the lowest live ticket of a thread holds the lock. Tickets
carry a lease that their owner renews; a ticket whose lease expired, or whose owner process on
this host is gone (kill -9), is removed by the next waiter, so a dead process never leaves a
thread locked. Within one process an asyncio lock per thread queues callers first, so they do
not poll the database against each other.

On SQLite (one machine) a thread is also a byte of a lock file, locked with an open-file-
description lock (Linux): the kernel arbitrates, and drops the lock when its process dies. A
caller that gets the byte and finds no tickets queued holds the thread without writing a row —
the common case, and it spares a durable turn a commit of its own (30-80 us measured). A
caller that finds the byte taken, or others queued, takes a ticket and waits its turn as above,
then takes the byte too, so both kinds of holder exclude each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import itertools
import os
import socket
import struct
import sys
import time
from collections.abc import AsyncIterator

from agentrunner.store.drivers import Driver, Op
from agentrunner.store.sql import SqlSet

__all__ = ["HeldLock", "ThreadLocks"]

_HOST = socket.gethostname()
_owners = itertools.count(1)  # tells apart the tickets of one process


class ThreadLocks:
    def __init__(
        self,
        driver: Driver,
        sql: SqlSet,
        *,
        lease_s: float = 30.0,
        poll_s: float = 0.01,
        lock_file: str | None = None,
    ) -> None:
        self.db = driver
        self.sql = sql
        self.lease_s = lease_s
        self.poll_s = poll_s
        self._local: dict[str, tuple[asyncio.Lock, int]] = {}
        self._bytes = _ByteLocks(lock_file) if lock_file and _OFD_LOCKS else None

    def close(self) -> None:
        if self._bytes is not None:
            self._bytes.close()
            self._bytes = None

    @contextlib.asynccontextmanager
    async def hold(self, thread_id: str) -> AsyncIterator[HeldLock]:
        """Hold ``thread_id``'s lock for the body of the ``async with``.

        The body may put ``held.release_ops()`` into its last transaction, so the release
        commits with the run's final rows; otherwise the lock is released on exit.
        """
        lock, users = self._local.get(thread_id, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._local[thread_id] = (lock, users + 1)
        try:
            async with lock:
                held = await self._acquire(thread_id)
                if held.ticket is not None:
                    # A timer, not a task: most runs end long before the first renewal is due.
                    held.timer = asyncio.get_running_loop().call_later(
                        self.lease_s / 3, self._renew_soon, held
                    )
                try:
                    yield held
                except BaseException:
                    # The batch that carried the release may be what failed (a settle refused,
                    # the database lost): release again, as the ticket is gone if it committed.
                    if held.ticket is not None:
                        with contextlib.suppress(Exception):  # else its lease frees it
                            for _, sql, params in held.release_ops():
                                await self.db.execute(sql, params)
                    raise
                finally:
                    if held.timer is not None:
                        held.timer.cancel()
                    try:
                        if not held.released:
                            for _, sql, params in held.release_ops():
                                await self.db.execute(sql, params)
                    finally:
                        if held.byte is not None and self._bytes is not None:
                            self._bytes.unlock(held.byte)
        finally:
            lock, users = self._local[thread_id]
            if users <= 1:
                del self._local[thread_id]
            else:
                self._local[thread_id] = (lock, users - 1)

    async def _acquire(self, thread_id: str) -> HeldLock:
        byte = None
        if self._bytes is not None:
            byte = _byte_of(thread_id)
            if self._bytes.try_lock(byte):
                try:
                    head = await self.db.fetch_one(self.sql["lock_queue"], {"thread_id": thread_id})
                except BaseException:
                    self._bytes.unlock(byte)
                    raise
                if head is None:  # the common case: nobody else wants this thread
                    return HeldLock(thread_id, None, byte, self.sql["lock_drop"])
                self._bytes.unlock(byte)  # others wait for it: queue behind them
        ticket = await self._queue(thread_id, byte)
        return HeldLock(thread_id, ticket, byte, self.sql["lock_drop"])

    def _take_byte(self, byte: int | None) -> bool:
        return byte is None or self._bytes is None or self._bytes.try_lock(byte)

    async def _queue(self, thread_id: str, byte: int | None) -> int:
        """Wait for the thread with a ticket; its ticket once it heads the queue (and, on
        SQLite, holds the thread's byte: a caller that took the fast way may still hold it)."""
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
            if (ahead is None or int(ahead) > ticket) and self._take_byte(byte):
                return ticket  # nobody queued ahead
            while True:
                now = time.time()
                await self.db.execute(self.sql["lock_expire"], {"thread_id": thread_id, "now": now})
                head = await self.db.fetch_one(self.sql["lock_queue"], {"thread_id": thread_id})
                if head is None:  # our own ticket expired while we waited: queue again
                    return await self._queue(thread_id, byte)
                if int(head["ticket"]) == ticket:
                    if self._take_byte(byte):
                        return ticket
                elif _owner_is_dead(str(head["owner"])):
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
        if held.released or held.ticket is None:
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
    """A held thread lock; ``release_ops`` lets the caller release it inside its own batch.

    ``ticket`` is None when the lock was had without queueing (its byte alone holds it)."""

    __slots__ = ("_sql", "byte", "released", "thread_id", "ticket", "timer")

    def __init__(self, thread_id: str, ticket: int | None, byte: int | None, drop_sql: str):
        self.thread_id = thread_id
        self.ticket = ticket
        self.byte = byte
        self.released = False
        self.timer: asyncio.TimerHandle | None = None
        self._sql = drop_sql

    def release_ops(self) -> list[Op]:
        """The statements that release the lock (the byte, if any, is let go on exit, once
        they have committed)."""
        self.released = True
        if self.ticket is None:
            return []
        return [("lock_drop", self._sql, {"thread_id": self.thread_id, "ticket": self.ticket})]


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


# Open-file-description locks: owned by the open file, not the process, so two stores in one
# process exclude each other like two processes do. Linux on a 64-bit machine, where ``struct
# flock`` is laid out as below; elsewhere every lock takes a ticket.
_OFD_LOCKS = sys.platform == "linux" and struct.calcsize("P") == 8
if _OFD_LOCKS:
    import fcntl

_FLOCK = struct.Struct("@hhqqi4x")  # l_type, l_whence, l_start, l_len, l_pid


def _byte_of(thread_id: str) -> int:
    """The thread's byte in the lock file: 62 bits of a hash, so two threads share one only by
    a chance that costs a wait, never correctness."""
    digest = hashlib.blake2b(thread_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest) >> 2


class _ByteLocks:
    """Exclusive locks on single bytes of one file, taken without waiting."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def try_lock(self, byte: int) -> bool:
        try:
            fcntl.fcntl(self.fd, fcntl.F_OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, 0, byte, 1, 0))
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise
        return True

    def unlock(self, byte: int) -> None:
        fcntl.fcntl(self.fd, fcntl.F_OFD_SETLK, _FLOCK.pack(fcntl.F_UNLCK, 0, byte, 1, 0))

    def close(self) -> None:
        os.close(self.fd)
