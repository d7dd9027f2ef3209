"""Wake-ups across processes on SQLite, which has no LISTEN/NOTIFY.

Idle workers: every listening worker binds a Unix datagram socket in a directory beside the
database file (or, where that path is too long for a socket address, one in the temporary
directory named after the database); a process that queued runs sends one byte to each socket
there. Waiting workers wake at once; a socket whose worker is gone is removed by the next
sender. Workers still re-check on a timer, so a lost datagram only delays, never loses, work.

Changes (``store/changes``): a process tailing the store binds one socket in a directory of its
own, and a commit that wrote events or channel rows sends it the keys of what changed
(``notify_changes``) once it has committed. The datagrams go out at once from the committing
thread, on a non-blocking socket, when the directory is known (its listing read since it last
changed); reading the directory, and a socket whose queue is full (its process busy), are left
to the waker thread, which sends together the keys of the commits made meanwhile and a full
socket what it missed a moment later. A hop to that thread would wait for the committing loop
to let go of the GIL (up to 5 ms: 3.4 ms median against 0.4 ms, a writer busy 3 ms after each
commit). Nobody listening costs a commit one ``stat`` of that directory. One machine only — as
SQLite is.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

__all__ = [
    "ALL",
    "SEPARATOR",
    "ChangeSocket",
    "SocketListener",
    "listened",
    "notify_changes",
    "notify_sockets",
]

ALL = "*"  # a key that wakes every waiter: what changed was not kept (too many keys, or lost)
SEPARATOR = "\n"  # between keys in a datagram; ids have no control characters (inputs)
_MAX_PAYLOAD = 16_384  # bytes; more keys than this are sent as ALL
_RETRY_S = 0.002  # a full socket's missed keys are sent again after this
_RETRIES = 500  # ~1 s of them; then its process's fallback poll finds what changed


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
    _sender.cache_clear()
    _queued.clear()
    _changes.clear()
    _listings.clear()
    _owed.clear()


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


class ChangeSocket:
    """A process's socket for changes: ``deliver`` is called on the loop with the keys of each
    datagram (``[ALL]`` for one that kept none)."""

    def __init__(self, directory: Path, deliver: Callable[[list[str]], None]) -> None:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path = directory / f"{os.getpid()}-{id(self):x}.sock"
        self._deliver = deliver
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(str(self.path))
        self._sock.setblocking(False)
        asyncio.get_running_loop().add_reader(self._sock.fileno(), self._readable)

    def _readable(self) -> None:
        keys: list[str] = []
        with contextlib.suppress(OSError):
            while True:
                keys.extend(self._sock.recv(_MAX_PAYLOAD + 1024).decode().split(SEPARATOR))
        if keys:
            self._deliver(keys)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(self._sock.fileno())
        self._sock.close()
        self.path.unlink(missing_ok=True)


def notify_changes(directory: Path, keys: Iterable[str]) -> None:
    """Send ``keys`` to every process listening for changes, never waiting: at once where the
    directory is known, else on the waker thread. A directory seen empty and unchanged since
    costs one ``stat``."""
    try:
        modified = os.stat(directory).st_mtime_ns
    except OSError:
        return  # nobody ever listened here
    listing = _listings.get(directory)
    if listing is not None and listing.current(modified):
        if not listing.paths:
            return
        if directory not in _changes and _sent(listing.paths, keys):
            return
    with _lock:
        pending = _changes.get(directory)
        if pending is not None:  # a send not yet begun takes these too
            pending.update(keys)
            return
        _changes[directory] = set(keys)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        _send_changes(directory)
        return
    _waker().submit(_send_changes, directory)


def listened(directory: Path) -> bool:
    """Whether a process listens for changes in ``directory``, as last read (one ``stat``; a
    directory changed since is read again by the next commit's send): True when unsure."""
    try:
        modified = os.stat(directory).st_mtime_ns
    except OSError:
        return False
    listing = _listings.get(directory)
    return listing is None or not listing.current(modified) or bool(listing.paths)


def _sent(paths: list[Path], keys: Iterable[str]) -> bool:
    """Whether ``keys`` went to every socket of ``paths`` (False: one was full or gone, for
    the waker thread to see to)."""
    payload = SEPARATOR.join(dict.fromkeys(keys)).encode()
    if len(payload) > _MAX_PAYLOAD:
        payload = ALL.encode()
    sender = _sender()
    try:
        for path in paths:
            sender.sendto(payload, str(path))
    except OSError:
        return False
    return True


@functools.cache
def _sender() -> socket.socket:
    sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sender.setblocking(False)  # a full socket is an error, never a wait
    return sender


class _Listing:
    """A directory's sockets as last read, and the modification time they were read at."""

    __slots__ = ("modified", "paths", "read_at")

    def __init__(self, modified: int, paths: list[Path], read_at: float) -> None:
        self.modified = modified
        self.paths = paths
        self.read_at = read_at

    def current(self, modified: int) -> bool:
        """The directory is unchanged since: on a file system whose times are coarse, a socket
        bound in the second it was read leaves the time as it was, so only a reading made 2 s
        after the last change is trusted."""
        return modified == self.modified and self.read_at - modified / 1e9 > 2

    def trusted_empty(self, modified: int) -> bool:
        return not self.paths and self.current(modified)


_lock = threading.Lock()
_changes: dict[Path, set[str]] = {}  # directory → keys waiting for the next send
_listings: dict[Path, _Listing] = {}
_owed: dict[Path, tuple[set[str], int]] = {}  # a full socket → keys it missed, tries so far


def _send_changes(directory: Path) -> None:
    with _lock:
        keys = _changes.pop(directory, set())
    try:
        paths = _sockets(directory)
    except OSError:
        return
    retry = False
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
        sender.setblocking(False)
        for path in paths:
            owed, tries = _owed.pop(path, (set(), 0))
            if not keys and not owed:
                continue
            missed = keys | owed if owed else keys
            payload = SEPARATOR.join(sorted(missed)).encode()
            if len(payload) > _MAX_PAYLOAD:
                payload = ALL.encode()
            try:
                sender.sendto(payload, str(path))
            except (ConnectionRefusedError, FileNotFoundError):
                path.unlink(missing_ok=True)  # its process is gone
            except OSError:  # its queue is full: that process is busy; try again shortly
                if tries < _RETRIES:
                    _owed[path] = (missed if len(missed) < 1000 else {ALL}, tries + 1)
                    retry = True
    if retry:
        time.sleep(_RETRY_S)
        _waker().submit(_send_changes, directory)


def _sockets(directory: Path) -> list[Path]:
    """The directory's sockets, read again only when it changed."""
    modified = os.stat(directory).st_mtime_ns
    listing = _listings.get(directory)
    if listing is None or not listing.current(modified):
        paths = [directory / name for name in os.listdir(directory) if name.endswith(".sock")]
        listing = _Listing(modified, paths, time.time())
        _listings[directory] = listing
    return listing.paths
