"""Waking idle workers on SQLite, which has no LISTEN/NOTIFY.

Every listening worker binds a Unix datagram socket in a directory beside the database file (or,
where that path is too long for a socket address, one in the temporary directory named after
the database); a process that queued runs sends one byte to each socket there. Waiting workers
wake at once; a socket whose worker is gone is removed by the next sender. Workers still
re-check on a timer, so a lost datagram only delays, never loses, work. One machine only — as
SQLite is.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

__all__ = ["SocketListener", "notify_sockets"]


class SocketListener:
    def __init__(self, directory: Path) -> None:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path = directory / f"{os.getpid()}-{id(self):x}.sock"
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(str(self.path))
        self._sock.setblocking(False)
        self._event = asyncio.Event()
        asyncio.get_running_loop().add_reader(self._sock.fileno(), self._readable)

    def _readable(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                self._sock.recv(64)
        self._event.set()

    async def wait(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            return False
        self._event.clear()
        return True

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(self._sock.fileno())
        self._sock.close()
        self.path.unlink(missing_ok=True)


def notify_sockets(directory: Path) -> None:
    """Send a wake-up to every listening worker (fire-and-forget). On an event loop the
    directory is read on a thread of its own, not the loop's: a post or a queued run returns
    without waiting for the file system."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        _notify(directory)
        return
    if directory in _queued:
        return  # a wake-up not yet begun goes out after this commit too: one is enough
    _queued.add(directory)
    _waker().submit(_notify, directory)


_queued: set[Path] = set()  # directories with a wake-up queued and not yet begun


@functools.cache
def _waker() -> ThreadPoolExecutor:
    # One thread, not the loop's executor: nobody awaits a wake-up, and one submitted as the
    # loop closes still goes out (the interpreter finishes queued work before it exits).
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentrunner-wake")


def _after_fork() -> None:  # a forked child has no waker thread, nor its queue
    _waker.cache_clear()
    _queued.clear()


os.register_at_fork(after_in_child=_after_fork)


def _notify(directory: Path) -> None:
    _queued.discard(directory)
    try:
        entries = list(directory.glob("*.sock"))
    except OSError:
        return
    if not entries:
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
        sender.setblocking(False)
        for path in entries:
            try:
                sender.sendto(b"!", str(path))
            except (ConnectionRefusedError, FileNotFoundError):
                path.unlink(missing_ok=True)  # its worker is gone
            except OSError:
                continue  # a full buffer: that worker is already awake
