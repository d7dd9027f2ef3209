"""A channel as people follow it: its messages and its members' activity (``agent.working``,
``agent.failed``, ``agent.idle``) in the order they were committed, read from the store, so a
channel's stream works whichever process runs the runs.

Every row carries a feed key that orders the feed as its rows were committed (migration 17:
on PostgreSQL the id of the transaction that wrote it, on SQLite the channel's next number).
A row is given only once every row with a smaller key is settled — committed, or never to be:
on PostgreSQL a transaction that began writing earlier may commit later, and its rows wait
for it. So a position — the (key, id) of the last row given — is exact: reading on from it,
in this process or another, gives every row not given yet, once, however late it committed.
A position is written ``<key>.<id>`` (an SSE event's id; ``FeedPosition``).

A reader with no position starts before the channel's newest ``BACKLOG`` rows, not at its
first. A follower reads again when a commit says the channel changed (``store/changes``), or
after the fallback timer; when rows wait for an earlier transaction, again ``RETRY_S`` later
(doubling), since that transaction's commit need not name the channel.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentrunner.inputs import check_id, invalid
from agentrunner.store.changes import FALLBACK_S, channel_key
from agentrunner.store.channels import ChannelActivityRow, ChannelMessage

if TYPE_CHECKING:
    from agentrunner.store.store import Store

__all__ = ["BACKLOG", "RETRY_S", "ChannelFeed", "FeedItem", "FeedPosition"]

BACKLOG = 50  # the newest rows a reader with no position is given first
RETRY_S = 0.02  # rows wait for an earlier transaction: how soon to look again (then doubling)
_PAGE = 200
_MAX_KEY = 2**63 - 1
FeedItem = ChannelMessage | ChannelActivityRow
_ITEMS = ("m_", "a_")  # a message's id, an activity row's


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


class ChannelFeed:
    """Reads a channel's feed on from ``after``: a position (as an SSE event's id gives it),
    the id of a message or activity row of the channel (after that row), or None or "" (before
    the newest ``backlog`` rows). ``start`` settles where; ``read`` and ``follow`` do first."""

    def __init__(
        self,
        store: Store,
        channel_id: str,
        after: str | None = None,
        *,
        backlog: int = BACKLOG,
        field: str = "after",
    ) -> None:
        self.store = store
        self.channel_id = channel_id
        self.position: FeedPosition | None = None
        self.waiting = False  # the last read left rows waiting for an earlier transaction
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
        it (what a reader resumes from)."""
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
        return read

    async def follow(self) -> AsyncIterator[tuple[str, FeedItem]]:
        """Every item from here on as it comes, with the position after it; never ends (what a
        live stream of the channel sends, in whichever form)."""
        async with self.store.changes.watch(channel_key(self.channel_id)) as watch:
            retry = RETRY_S
            while True:
                read = await self.read()
                for entry in read:
                    yield entry
                if len(read) == _PAGE:
                    continue
                if self.waiting:
                    await watch.wait(retry)
                    retry = min(retry * 2, FALLBACK_S)
                else:
                    retry = RETRY_S
                    await watch.wait()
