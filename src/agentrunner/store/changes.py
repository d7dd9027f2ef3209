"""Changes: readers tailing the store (event streams, a channel's feed, ``post --follow``,
``logs --follow``) woken when what they follow is committed, in whichever process.

A transaction that writes a run's events or a channel's rows carries one ``changes_notify`` row
naming what it changed by key — ``run:<id>`` (a run's events; a child run's name its parent
too), ``thread:<id>`` (the events of a run on the thread), ``channel:<id>`` (its messages and
activity), ``approvals`` (a request for a person's decision asked, decided or cancelled, in
any run) — one per transaction, never one per event. PostgreSQL sends it as a ``NOTIFY`` with
the commit; SQLite's driver sends it to the listening processes' sockets from a thread once the
commit is made (``store/wake``). Either way the writer does not wait for it to be delivered.

A process listens once (``Changes``: started by the first watch, closed a while after the last)
and fans each delivery out to the watches on its keys: a key nobody watches costs a dict
lookup. A watch waits for a wake-up or its fallback timer, whichever comes first, so a lost
wake-up (a full socket, a restart of the database) only delays what it reads, never loses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from types import TracebackType

from agentrunner.store.drivers import ChangeListener, Driver
from agentrunner.store.wake import ALL, SEPARATOR

__all__ = [
    "APPROVALS_KEY",
    "FALLBACK_S",
    "SCHEDULES_KEY",
    "Changes",
    "Watch",
    "channel_key",
    "payload",
    "run_key",
    "thread_key",
]

log = logging.getLogger(__name__)

# How long a watch waits with no wake-up before its reader looks anyway: what a lost wake-up
# costs.
FALLBACK_S = 1.0
# How long the listener outlives its last watch: a client reconnecting, or the next page's
# stream, finds it listening.
LINGER_S = 30.0
_MAX_PAYLOAD = 7_900  # bytes: PostgreSQL refuses a NOTIFY payload of 8,000


APPROVALS_KEY = "approvals"  # what waits for a person changed (docs/approvals.md)
SCHEDULES_KEY = "schedules"  # a schedule fired, skipped, paused or resumed (docs/schedules.md)


def run_key(run_id: str) -> str:
    return f"run:{run_id}"


def thread_key(thread_id: str) -> str:
    return f"thread:{thread_id}"


def channel_key(channel_id: str) -> str:
    return f"channel:{channel_id}"


def payload(keys: Iterable[str]) -> str:
    """The keys as a ``changes_notify`` row carries them; too many to send: every watch."""
    text = SEPARATOR.join(keys)
    return text if len(text.encode()) <= _MAX_PAYLOAD else ALL


class Watch:
    """What one reader follows: ``async with store.changes.watch(keys) as watch``, then read
    until nothing is new and ``await watch.wait()``. A commit made after the watch began and
    before the wait is not missed: the wait returns at once."""

    def __init__(self, changes: Changes, keys: Iterable[str]) -> None:
        self._changes = changes
        self.keys: set[str] = set()
        self._woken = asyncio.Event()
        self.add(*keys)

    def add(self, *keys: str) -> None:
        """Follow ``keys`` too (a reader that found more to follow: a job's new delegation)."""
        for key in keys:
            if key not in self.keys:
                self.keys.add(key)
                self._changes._watches.setdefault(key, set()).add(self)

    async def wait(self, timeout: float | None = None) -> bool:
        """Until a commit changed what this follows since the last wait (True), or ``timeout``
        (default ``FALLBACK_S``) passed (False)."""
        woken = self._woken
        if not woken.is_set():
            try:
                await asyncio.wait_for(woken.wait(), FALLBACK_S if timeout is None else timeout)
            except TimeoutError:
                return False
        woken.clear()
        return True

    def wake(self) -> None:
        self._woken.set()

    async def __aenter__(self) -> Watch:
        try:
            await self._changes._listen()
        except BaseException:  # cancelled while the listener starts: a reader that left
            self._changes._remove(self)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._changes._remove(self)


class Changes:
    """This process's listener for changes, and the watches it wakes."""

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._watches: dict[str, set[Watch]] = {}
        self._watching = 0
        self._listener: ChangeListener | None = None
        self._starting: asyncio.Future[None] | None = None
        self._linger: asyncio.TimerHandle | None = None
        self._closed = False

    @property
    def watching(self) -> int:
        """The watches open in this process now: a reader that went away leaves none behind."""
        return self._watching

    def listened(self) -> bool:
        """Whether any process (this one too) tails the store now, as last seen: never waits."""
        return self._driver.listened()

    def watch(self, *keys: str) -> Watch:
        self._watching += 1
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        return Watch(self, keys)

    def _deliver(self, keys: list[str]) -> None:
        watches = self._watches
        if ALL in keys:
            for found in list(watches.values()):
                for watch in found:
                    watch.wake()
            return
        for key in keys:
            if watching := watches.get(key):
                for watch in watching:
                    watch.wake()

    async def _listen(self) -> None:
        """Listening once this returns (concurrent callers share one start). A listener that
        cannot start (the database unreachable) leaves watches to their fallback timers; the
        next watch tries again."""
        if self._listener is not None or self._closed:
            return
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start())
        starting = self._starting
        try:
            await asyncio.shield(starting)
        except Exception as exc:
            log.debug("not listening for changes (%r); readers poll", exc)
        finally:
            if self._starting is starting and starting.done():
                self._starting = None

    async def _start(self) -> None:
        self._listener = await self._driver.changes(self._deliver)

    def _remove(self, watch: Watch) -> None:
        for key in watch.keys:
            found = self._watches.get(key)
            if found is not None:
                found.discard(watch)
                if not found:
                    del self._watches[key]
        self._watching -= 1
        if self._watching == 0 and self._listener is not None and not self._closed:
            loop = asyncio.get_running_loop()
            self._linger = loop.call_later(LINGER_S, self._stop_unwatched)

    def _stop_unwatched(self) -> None:
        self._linger = None
        if self._watching == 0:
            listener, self._listener = self._listener, None
            if listener is not None:
                _closing.add(task := asyncio.ensure_future(listener.close()))
                task.add_done_callback(_closing.discard)

    async def close(self) -> None:
        self._closed = True
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        starting, self._starting = self._starting, None
        if starting is not None:
            with contextlib.suppress(Exception):
                await starting
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.close()
        for found in list(self._watches.values()):
            for watch in found:
                watch.wake()  # readers left waiting look once more, and find the store closed


_closing: set[asyncio.Future[None]] = set()  # listeners being closed: kept from the collector
