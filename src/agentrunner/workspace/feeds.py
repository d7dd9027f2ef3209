"""Following the store: a run's events (with its delegations', for a job's log), a thread's (its
runs' in the order they held it), a channel's feed and the schedules' fires, read from the
store, so a reader follows whichever process writes them.

Each is a feed: ``read`` gives what is new since its position, and ``follow`` every item as it
comes — until the run has ended, for a run; the others never end. A follower reads again when a
commit names what it reads (``store/changes``: the run, and each run it delegated to; the
thread; the channel; the schedules), or after the fallback timer. A reader with a loop of
its own (a page's live part, ``post --follow``) opens the feed's watch with ``watching`` and
waits for its next look with ``wait``. A position resumes exactly: a run's event's sequence
number (``RunFeed``), ``<run id>/<seq>`` on a thread (``ThreadFeed``), ``<key>.<id>`` in a
channel's feed (``FeedPosition``), ``<key>.<tick>.<schedule>`` in the fires (``FirePosition``)
— each an SSE event's id.

A run's events are written before its end, so a run's feed that finds nothing new reads the
run, and once it has ended looks once more: what that finds is all there is (a job's feed reads
the run first, then its tree's events). A thread's walks its runs in the order they held the
thread (``runs.thread_order``, each run numbered as it begins under the thread's lock, so a run
queued first but served later comes later), one run's events a page at a time before the next
run's. Both look again at once after a read that found something, before they wait: what was
committed meanwhile is read without waiting for its wake-up.

A channel's rows carry a feed key that orders the feed as its rows were committed (migration
17: on PostgreSQL the id of the transaction that wrote it, on SQLite the channel's next
number). A row is given only once every row with a smaller key is settled — committed, or
never to be: on PostgreSQL a transaction that began writing earlier may commit later, and its
rows wait for it. So a position — the (key, id) of the last row given — is exact: reading on
from it, in this process or another, gives every row not given yet, once, however late it
committed. A reader with no position starts before the channel's newest ``BACKLOG`` rows, not
at its first. While rows wait for an earlier transaction, a follower looks again ``RETRY_S``
later (doubling), since that transaction's commit need not name the channel. The schedules'
fires are one feed keyed the same way (migration 23: ``ScheduleFeed``); a reader with no
position starts with the fires committed from then on.
"""

from __future__ import annotations

import contextlib
import dataclasses
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from agentrunner.core.inputs import check_id, invalid
from agentrunner.events import EventData, from_child
from agentrunner.store.changes import (
    APPROVALS_KEY,
    FALLBACK_S,
    SCHEDULES_KEY,
    Watch,
    channel_key,
    run_key,
    thread_key,
)
from agentrunner.store.channels import ChannelActivityRow, ChannelMessage
from agentrunner.store.records import RUN_ENDED, EventRecord, RunRecord
from agentrunner.store.schedules import Fire, to_ms

if TYPE_CHECKING:
    from agentrunner.store.approvals import ApprovalRecord
    from agentrunner.store.store import Store

__all__ = [
    "BACKLOG",
    "RETRY_S",
    "ChannelFeed",
    "Feed",
    "FeedItem",
    "FeedPosition",
    "FirePosition",
    "PendingFeed",
    "RunFeed",
    "ScheduleFeed",
    "ThreadFeed",
    "descendants",
    "in_order",
]

BACKLOG = 50  # the newest rows a reader of a channel with no position is given first
RETRY_S = 0.02  # rows wait for an earlier transaction: how soon to look again (then doubling)
_PAGE = 200  # a channel's rows read at a time
_RUN_EVENTS_READ = 500  # a run's events read at a time
_EVENTS_READ = 1000  # a run's events read at a time by a thread's feed
_RUNS_READ = 100  # a thread's runs listed at a time
_MAX_KEY = 2**63 - 1
FeedItem = ChannelMessage | ChannelActivityRow
_ITEMS = ("m_", "a_")  # a message's id, an activity row's
T = TypeVar("T")


class Feed(ABC, Generic[T]):
    """What every feed shares: reading what is new (``read``) and following it (``follow``),
    woken by the commits that name what it reads. ``ended``: nothing more will come (a run
    that has ended, its every event read); ``more``: read again at once, before waiting (the
    last read stopped at a full page, or found what may be followed by more already);
    ``waiting``: rows wait for an earlier transaction."""

    def __init__(self, store: Store, key: str) -> None:
        self.store = store
        self.ended = False
        self.more = False
        self.waiting = False
        self._keys = [key]
        self._watch: Watch | None = None
        self._retry = RETRY_S

    @abstractmethod
    async def read(self) -> list[T]:
        """What is new since the last read, in order."""

    async def follow(self) -> AsyncGenerator[T, None]:
        """Every item from here on as it comes, until the feed has ended (a thread's and a
        channel's never do)."""
        async with self.watching():
            while True:
                for item in await self.read():
                    yield item
                if self.ended:
                    return
                if not self.more:
                    await self.wait()

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[None]:
        """While open, the commits that name what this feed reads wake ``wait``, in whichever
        process they are made."""
        async with self.store.changes.watch(*self._keys) as watch:
            self._watch = watch
            try:
                yield
            finally:
                self._watch = None

    async def wait(self, timeout: float | None = None) -> bool:
        """Inside ``watching``: until a commit named what this feed reads, or ``wake`` was
        called, since the last wait (True; at once if one did meanwhile), or a timer passed
        (False): ``timeout``, by default the fallback timer (``store/changes``); sooner while
        rows wait for an earlier transaction (``RETRY_S``, doubling)."""
        watch = self._watch
        if watch is None:
            raise RuntimeError("a feed waits only inside `async with feed.watching()`")
        if not self.waiting:
            self._retry = RETRY_S
            return await watch.wait(timeout)
        retry, self._retry = self._retry, min(self._retry * 2, FALLBACK_S)
        return await watch.wait(retry if timeout is None else min(retry, timeout))

    def wake(self) -> None:
        """Wake the wait (a reader's own reason to look: Ctrl-C, its worker's end)."""
        if self._watch is not None:
            self._watch.wake()

    def _follow_too(self, key: str) -> None:
        """Be woken by the commits that name ``key`` too (what a read found to follow)."""
        self._keys.append(key)
        if self._watch is not None:
            self._watch.add(key)


# -- runs and threads -------------------------------------------------------------------------


class RunFeed(Feed[EventRecord]):
    """A run's events after ``after`` (a sequence number: the id of the SSE event a reader got
    last), until the run has ended. With ``delegations``, the events of every run it delegated
    to as well, down the tree, marked as theirs (``events.from_child``, as a live caller gets
    them), each read in the order they happened (``in_order``). ``run``: the run as it was
    when last read (None: there is no such run, which ends the feed)."""

    def __init__(
        self, store: Store, run_id: str, after: int = 0, *, delegations: bool = False
    ) -> None:
        super().__init__(store, run_key(run_id))
        self.run_id = run_id
        self.run: RunRecord | None = None
        self.delegations = delegations
        self._after = {run_id: after}  # each run followed: the last of its events read
        self._marks: dict[str, tuple[str, int]] = {}  # a delegation: its agent and depth

    async def read(self) -> list[EventRecord]:
        """What is new since the last read. One run's: a page of its events, and once there
        are none, the run (``more``: some were read, so look again at once, before waiting).
        With ``delegations``: the run first, then every run's events, whole, so ``run`` is
        the run as it was before them (once it has ended, they are all)."""
        if self.delegations:
            return await self._read_tree()
        read = await self._events(self.run_id)
        if not read:  # nothing new: has it ended?
            self.run = await self.store.runs.get(self.run_id)
            if self.run is None or self.run.status in RUN_ENDED:
                read = await self._events(self.run_id)  # written before its end, read after
                self.ended = not read
        self.more = bool(read)
        return read

    async def _read_tree(self) -> list[EventRecord]:
        self.run = await self.store.runs.get(self.run_id)
        if self.run is None:
            self.ended = True
            return []
        for child in await descendants(self.store, self.run_id):
            if child.id not in self._after:
                self._after[child.id] = 0
                self._marks[child.id] = (child.agent_id, child.depth)
                self._follow_too(run_key(child.id))  # its own delegations' commits name it
        read: list[EventRecord] = []
        for run_id in self._after:
            while page := await self._events(run_id):
                read += page
                if len(page) < _RUN_EVENTS_READ:
                    break
        read.sort(key=in_order)
        self.ended = self.run.status in RUN_ENDED
        return read

    async def _events(self, run_id: str) -> list[EventRecord]:
        """A page of ``run_id``'s events after the last read, marked if it is a delegation."""
        page = await self.store.events.list(
            run_id, after=self._after[run_id], limit=_RUN_EVENTS_READ
        )
        if not page:
            return page
        self._after[run_id] = page[-1].seq
        mark = self._marks.get(run_id)
        return page if mark is None else [_marked(event, *mark) for event in page]


def in_order(event: EventRecord) -> tuple[float, int]:
    """The order in which the events of a run and its delegations happened."""
    return event.created_at, event.seq


def _marked(event: EventRecord, agent_id: str, depth: int) -> EventRecord:
    payload = from_child(cast("EventData", event.payload), agent_id, depth)
    return dataclasses.replace(event, payload=cast("dict[str, Any]", payload))


async def descendants(store: Store, run_id: str) -> list[RunRecord]:
    """Every run ``run_id`` delegated to, and theirs, down the tree."""
    found: list[RunRecord] = []
    frontier = [run_id]
    while frontier:
        children = await store.company.children(frontier.pop())
        found.extend(children)
        frontier.extend(child.id for child in children)
    return found


class ThreadFeed(Feed[tuple[str, EventRecord]]):
    """The events of a thread's runs after ``after`` (``<run id>/<seq>``, the id of the SSE
    event a reader got last; "", or a run that has not begun on the thread: from its first
    run), each with its position, the runs in the order they held the thread. Never ends."""

    def __init__(self, store: Store, thread_id: str, after: str = "") -> None:
        super().__init__(store, thread_key(thread_id))
        self.thread_id = thread_id
        run_id, _, seq = after.partition("/")
        self._run = run_id  # the position: the run of the last event read, and its seq
        self._seq = int(seq) if seq.isdigit() else 0
        self._order: int | None = None  # the run's place in the thread's order, once known

    async def read(self) -> list[tuple[str, EventRecord]]:
        """What is new since the last read: the events of the run read last, then the next
        runs', one run's a page at a time before the next's (``more``: some were read, so
        look again at once, before waiting)."""
        runs = self.store.runs
        if self._order is None:
            order = await runs.thread_order(self.thread_id, self._run) if self._run else None
            if order is None:  # from the thread's first run
                order, self._run, self._seq = -1, "", 0
            self._order = order
        rows = await runs.on_thread_from(self.thread_id, (self._order, self._run), _RUNS_READ)
        read: list[tuple[str, EventRecord]] = []
        for row in rows:
            run_id = row["id"]
            start = self._seq if run_id == self._run else 0
            page = await self.store.events.list(run_id, after=start, limit=_EVENTS_READ)
            if page:
                self._order, self._run, self._seq = int(row["thread_order"]), run_id, page[-1].seq
            read += [(f"{run_id}/{event.seq}", event) for event in page]
            if len(page) == _EVENTS_READ:  # the rest of this run's before the next's
                break
        self.more = bool(read)
        return read


class PendingFeed(Feed["ApprovalRecord"]):
    """What waits for a person's decision, in every run (docs/approvals.md): each ``read``
    gives the pending requests as they are now, oldest first, woken by every commit that asks,
    decides or cancels one (``store/changes``' ``APPROVALS_KEY``). Never ends."""

    def __init__(self, store: Store) -> None:
        super().__init__(store, APPROVALS_KEY)

    async def read(self) -> list[ApprovalRecord]:
        return await self.store.approvals.pending()


# -- schedules --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FirePosition:
    """Where a reader of the schedules' fires is: after the fire of ``schedule`` at ``tick_ms``
    of feed key ``key`` (after every fire below ``key`` when ``schedule`` is "")."""

    key: int
    schedule: str = ""
    tick_ms: int = -1

    def __str__(self) -> str:
        return f"{self.key}.{self.tick_ms}.{self.schedule}"

    @classmethod
    def parse(cls, text: str, field: str) -> FirePosition:
        """A position as ``str`` writes one; ``invalid`` naming ``field`` otherwise."""
        check_id(text, field)
        key, _, rest = text.partition(".")
        tick, _, schedule = rest.partition(".")
        tick_ok = tick.isdigit() or (tick == "-1" and not schedule)
        if key.isdigit() and int(key) <= _MAX_KEY and tick_ok and int(tick) <= _MAX_KEY:
            return cls(int(key), schedule, int(tick))
        raise invalid(
            field,
            f"'{text}' is not a position in the schedules' fires",
            "Send the id of the last event the stream sent (its SSE `id`), or none to start "
            "with the fires written from now on.",
        )


class ScheduleFeed(Feed[tuple[str, Fire]]):
    """Every schedule's fires (a tick queued or skipped, a run-now) in the order they were
    committed, each with its position, on from ``after``: a position (as an SSE event's id
    gives it), or None or "" (the fires committed from now on). Woken by every commit that
    writes a fire, pauses or resumes a schedule (``store/changes``' ``SCHEDULES_KEY``). As a
    channel's feed, a fire is given once every fire with a smaller feed key is settled, so a
    position is exact. ``start`` settles where; ``read`` and ``follow`` do first. Never
    ends."""

    def __init__(self, store: Store, after: str | None = None, *, field: str = "after") -> None:
        super().__init__(store, SCHEDULES_KEY)
        self.position = FirePosition.parse(after, field) if after else None
        self._field = field
        self._started = False

    async def start(self) -> FirePosition:
        """Where this reader starts: its position, or (at once, for a reader with none) after
        every fire settled now. ``invalid`` for a position past every fire settled, which no
        stream gave (a reader would wait there for fires that came before it)."""
        if self._started:
            assert self.position is not None
            return self.position
        settled = await self.store.schedules.feed_settled()
        if self.position is not None and self.position.key >= settled:
            raise invalid(
                self._field,
                f"'{self.position}' is past every fire written so far",
                "Send the id of the last event the stream sent (its SSE `id`), or none to "
                "start with the fires written from now on.",
            )
        self.position = self.position or FirePosition(settled)
        self._started = True
        return self.position

    async def read(self, limit: int = _PAGE) -> list[tuple[str, Fire]]:
        """What is new since the last read, in the order committed, each with the position
        after it; at most ``limit`` (``more``: that many)."""
        position = await self.start()
        rows, settled = await self.store.schedules.feed_after(
            position.key, position.schedule, position.tick_ms, limit
        )
        read = []
        for key, fire in rows:
            if key >= settled:  # it waits for an earlier transaction; so does what follows
                break
            position = FirePosition(key, fire.schedule, to_ms(fire.tick))
            read.append((str(position), fire))
        self.position = position
        self.waiting = len(read) < len(rows)
        self.more = len(read) == limit
        return read


# -- channels ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FeedPosition:
    """Where a reader of a channel's feed is: after the row ``item`` of feed key ``key`` (after
    every row below ``key`` when ``item`` is "")."""

    key: int
    item: str = ""

    def __str__(self) -> str:
        return f"{self.key}.{self.item}"

    @classmethod
    def parse(cls, text: str, field: str) -> FeedPosition | str:
        """A position written as ``str`` writes one, or the id of a message or an activity row
        (returned as it is: the position after that row, for a reader that names one);
        ``invalid`` naming ``field`` otherwise."""
        check_id(text, field)
        if text.startswith(_ITEMS):
            return text
        key, dot, item = text.partition(".")
        if dot and key.isdigit() and int(key) <= _MAX_KEY and (not item or item[:2] in _ITEMS):
            return cls(int(key), item)
        raise invalid(
            field,
            f"'{text}' is not a position in a channel's feed",
            "Send the id of the last event the stream sent (its SSE `id`), or none to start "
            f"with the channel's newest {BACKLOG} events.",
        )


class ChannelFeed(Feed[tuple[str, FeedItem]]):
    """A channel's messages and its members' activity (``agent.working``, ``agent.failed``,
    ``agent.idle``) in the order they were committed, each with its position, on from
    ``after``: a position (as an SSE event's id gives it), the id of a message or activity row
    of the channel (after that row), or None or "" (before the newest ``backlog`` rows).
    ``start`` settles where; ``read`` and ``follow`` do first. Never ends."""

    def __init__(
        self,
        store: Store,
        channel_id: str,
        after: str | None = None,
        *,
        backlog: int = BACKLOG,
        field: str = "after",
    ) -> None:
        super().__init__(store, channel_key(channel_id))
        self.channel_id = channel_id
        self.position: FeedPosition | None = None
        self._after = FeedPosition.parse(after, field) if after else None
        self._backlog = backlog
        self._field = field

    async def start(self) -> FeedPosition:
        """Where this reader starts (at once, for a reader with no position: before the
        channel's newest rows as they are now); ``invalid`` for a row the channel lacks."""
        if self.position is not None:
            return self.position
        after, channels = self._after, self.store.channels
        if isinstance(after, FeedPosition):
            self.position = after
        elif after is None:
            self.position = FeedPosition(*await channels.feed_start(self.channel_id, self._backlog))
        else:
            key = await channels.feed_key(self.channel_id, after)
            if key is None:
                raise invalid(
                    self._field,
                    f"'{after}' is no message or event of this channel",
                    "Send the id of the last event the stream sent, or none.",
                )
            self.position = FeedPosition(key, after)
        return self.position

    async def read(self, limit: int = _PAGE) -> list[tuple[str, FeedItem]]:
        """What is new since the last read, in the feed's order, each with the position after
        it (what a reader resumes from); at most ``limit`` (``more``: that many)."""
        position = await self.start()
        page = await self.store.channels.feed_after(
            self.channel_id, position.key, position.item, limit
        )
        read = []
        for key, item in page.rows:
            if key >= page.settled:  # it waits for an earlier transaction; so does what follows
                break
            position = FeedPosition(key, item.id)
            read.append((str(position), item))
        self.position = position
        self.waiting = len(read) < len(page.rows)
        self.more = len(read) == limit
        return read
