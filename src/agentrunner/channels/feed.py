"""A channel as people follow it: its messages and its members' activity (``agent.working``,
``agent.failed``, ``agent.idle``) in the order they happened, read from the store, so a
channel's stream works whichever process runs the runs.

Messages (``m_…``) and activity (``a_…``) are keyed by time-ordered ids; a position in the feed
is the id of the last item read, and reading on gives both from after that moment. A row is
committed a little after its id is made — a run's events wait a few milliseconds to be written
with others, and another process's commit may come later still — so each read looks back
``LOOKBACK_S`` before the position and leaves out what it already gave: a row committed late
is given late, not lost. Resuming from a position (an SSE ``Last-Event-ID``) gives what came
after it. A follower reads again when a commit says the channel changed (``store/changes``),
``SETTLE_S`` later — two runs ending at once commit on connections of their own, in either
order, and a read between the two would give the earlier row late — or after the fallback
timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from agentrunner.store.changes import channel_key
from agentrunner.store.channels import ChannelActivityRow, ChannelMessage

if TYPE_CHECKING:
    from agentrunner.store.store import Store

__all__ = ["LOOKBACK_S", "SETTLE_S", "ChannelFeed", "FeedItem"]

LOOKBACK_S = 2.0
SETTLE_S = 0.02  # how long a woken follower lets the commits of the same moment land
FeedItem = ChannelMessage | ChannelActivityRow
_PREFIXES = ("m_", "a_")


class ChannelFeed:
    """Reads a channel's feed on from ``after`` (a position it gave, or "" for the beginning)."""

    def __init__(self, store: Store, channel_id: str, after: str = "") -> None:
        self.store = store
        self.channel_id = channel_id
        self.floor = _moment(after)  # nothing at or before where the reader said it was
        self.position = after if self.floor else ""
        self._given: dict[str, str] = {}  # id → its moment, for those within the look-back

    async def read(self, limit: int = 200) -> list[tuple[str, FeedItem]]:
        """What is new since the last read, oldest first, each with the position after it
        (what a reader resumes from)."""
        since = max(self.floor, _before(_moment(self.position), LOOKBACK_S))
        channels = self.store.channels
        messages, more_messages = await self._page(channels.after, "m_" + since, limit)
        activity, more_activity = await self._page(channels.activity_after, "a_" + since, limit)
        fresh = sorted([*messages, *activity], key=lambda item: item.id[2:])
        cut = [
            page[-1].id[2:]
            for page, more in ((messages, more_messages), (activity, more_activity))
            if more
        ]
        if cut:  # one kind has more to come: the other's later items wait for it, in order
            fresh = [item for item in fresh if item.id[2:] <= min(cut)]
        read = []
        for item in fresh:
            self._given[item.id] = item.id[2:]
            if item.id[2:] > _moment(self.position):
                self.position = item.id
            read.append((self.position, item))
        horizon = _before(_moment(self.position), LOOKBACK_S)
        self._given = {i: m for i, m in self._given.items() if m >= horizon}
        return read

    async def follow(self) -> AsyncIterator[tuple[str, FeedItem]]:
        """Every item from here on as it comes, with the position after it; never ends (what a
        live stream of the channel sends, in whichever form)."""
        async with self.store.changes.watch(channel_key(self.channel_id)) as watch:
            while True:
                read = await self.read()
                for entry in read:
                    yield entry
                if not read and await watch.wait():
                    await asyncio.sleep(SETTLE_S)

    async def _page(
        self,
        fetch: Callable[[str, str, int], Awaitable[Sequence[FeedItem]]],
        after: str,
        limit: int,
    ) -> tuple[list[FeedItem], bool]:
        """The items of one kind after ``after`` not given yet, and whether more may follow."""
        while True:
            rows = await fetch(self.channel_id, after, limit)
            new = [row for row in rows if row.id not in self._given]
            if new or len(rows) < limit:
                return new, len(rows) == limit
            after = rows[-1].id  # a page of what was given already: look past it


def _moment(position: str) -> str:
    """The time-ordered part of a feed id; "" for none (or a position that is not one)."""
    return position[2:] if position[:2] in _PREFIXES else ""


def _before(moment: str, seconds: float) -> str:
    """A key that sorts before every id made ``seconds`` before ``moment`` (ids begin with 12
    hex digits of milliseconds)."""
    if not moment:
        return ""
    ms = int(moment[:12], 16) - int(seconds * 1000)
    return f"{max(ms, 0):012x}"
