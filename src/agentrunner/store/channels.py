"""Channels, members and channel messages: every database operation of
``agentrunner.workspace.channels``.

A message's files are references in its row (``attachments``, NULL for none); their bytes are
rows of ``attachments`` (``store/attachments``), written with the message, and the message's
use of each a row of ``attachment_uses`` under the message's id, so that deleting an agent's
thread that was sent the file leaves it for the channel that still shows it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from agentrunner.engine.messages import Attachment
from agentrunner.store.attachments import attachment_ops
from agentrunner.store.changes import channel_key
from agentrunner.store.drivers import Op
from agentrunner.store.records import from_json, to_json
from agentrunner.store.repositories import Repository

__all__ = [
    "Channel",
    "ChannelActivityRow",
    "ChannelMessage",
    "ChannelSummary",
    "Channels",
    "FeedPage",
]


@dataclass(frozen=True, slots=True)
class Channel:
    id: str
    name: str
    kind: str  # public | private | dm
    created_at: float

    @property
    def label(self) -> str:
        """``#name``; a direct conversation's name (``dm:a:b``) as it is."""
        return self.name if self.kind == "dm" else f"#{self.name}"


@dataclass(frozen=True, slots=True)
class ChannelMessage:
    channel_id: str
    id: str
    thread_root_id: str | None
    sender: str
    sender_kind: str  # agent | person | notice (about an agent's run, for people: never routed)
    content: str
    depth: int
    run_id: str | None
    created_at: float
    # its files, as references (their bytes only while it is being posted); none for most
    attachments: tuple[Attachment, ...] = ()

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ChannelMessage:
        """The message of a row of ``channel_messages`` (its other columns left out)."""
        files = from_json(row["attachments"]) if row["attachments"] is not None else None
        return cls(
            row["channel_id"],
            row["id"],
            row["thread_root_id"],
            row["sender"],
            row["sender_kind"],
            row["content"],
            row["depth"],
            row["run_id"],
            row["created_at"],
            tuple(Attachment.from_dict(a) for a in files) if files else (),
        )

    def without_bytes(self) -> ChannelMessage:
        """The message as it is read back: its files as references."""
        if all(a.data is None for a in self.attachments):
            return self
        return replace(self, attachments=tuple(replace(a, data=None) for a in self.attachments))


@dataclass(frozen=True, slots=True)
class ChannelSummary:
    """A channel as a list of them shows it: its members (name and kind) and when its newest
    message came (None: none yet)."""

    id: str
    name: str
    kind: str
    created_at: float
    members: list[tuple[str, str]]
    last_message_at: float | None


@dataclass(frozen=True, slots=True)
class ChannelActivityRow:
    """An activity event of a member's run (``agent.working``, ``agent.failed``,
    ``agent.idle``) as the channel's feed keeps it."""

    channel_id: str
    id: str  # time-ordered, as a message's: ``a_…``
    run_id: str
    type: str
    payload: dict[str, Any]
    created_at: float


@dataclass(frozen=True, slots=True)
class FeedPage:
    """Rows of a channel's feed after a position, in its order, each with its feed key; and
    the key below which every row is settled (committed, or never to be): a row at or above
    it waits for an earlier transaction (sql/schema.sql, migration 17)."""

    rows: list[tuple[int, ChannelMessage | ChannelActivityRow]]
    settled: int


class Channels(Repository):
    async def by_name(self, name: str) -> Channel | None:
        row = await self.db.fetch_one(self.sql["channel_by_name"], {"name": name})
        return Channel(**row) if row else None

    async def by_id(self, channel_id: str) -> Channel | None:
        row = await self.db.fetch_one(self.sql["channel_by_id"], {"id": channel_id})
        return Channel(**row) if row else None

    async def create(
        self, channel_id: str, name: str, kind: str, members: list[tuple[str, str]]
    ) -> None:
        now = time.time()
        await self.db.batch(
            [
                self.op("channel_insert", id=channel_id, name=name, kind=kind, now=now),
                *(
                    self.op("member_add", channel_id=channel_id, member=m, member_kind=k)
                    for m, k in members
                ),
            ]
        )

    async def add_members(self, channel_id: str, members: list[tuple[str, str]]) -> None:
        await self.db.batch(
            [
                self.op("member_add", channel_id=channel_id, member=m, member_kind=k)
                for m, k in members
            ]
        )

    async def all(self) -> list[dict[str, Any]]:
        return await self.db.fetch_all(self.sql["channel_list"], {})

    async def overview(self) -> list[ChannelSummary]:
        """Every channel and DM with its members and the time of its newest message, in two
        reads whatever the number of channels."""
        rows = await self.db.fetch_all(self.sql["channel_overview"], {})
        members: dict[str, list[tuple[str, str]]] = {}
        for m in await self.db.fetch_all(self.sql["channel_members_all"], {}):
            members.setdefault(m["channel_id"], []).append((m["member"], m["member_kind"]))
        return [
            ChannelSummary(
                r["id"],
                r["name"],
                r["kind"],
                r["created_at"],
                members.get(r["id"], []),
                r["last_message_at"],
            )
            for r in rows
        ]

    async def members(self, channel_id: str) -> list[tuple[str, str]]:
        rows = await self.db.fetch_all(self.sql["member_list"], {"channel_id": channel_id})
        return [(r["member"], r["member_kind"]) for r in rows]

    def message_ops(self, message: ChannelMessage) -> list[Op]:
        """The message's row, its files (the bytes of those it carries kept once, and its use
        of each: seq 0 under the message's id, as a thread's messages are numbered from 1),
        and word of it to the channel's readers (``store/changes``)."""
        return [
            self.message_op(message),
            *attachment_ops(self, message.id, 0, message.attachments),
            self.changed_op(channel_key(message.channel_id)),
        ]

    def message_op(self, message: ChannelMessage) -> Op:
        return self.op(
            "channel_message_insert",
            channel_id=message.channel_id,
            id=message.id,
            thread_root_id=message.thread_root_id,
            sender=message.sender,
            sender_kind=message.sender_kind,
            content=message.content,
            depth=message.depth,
            run_id=message.run_id,
            now=message.created_at,
            attachments=to_json([a.to_dict() for a in message.attachments])
            if message.attachments
            else None,
        )

    async def message(self, channel_id: str, message_id: str) -> ChannelMessage | None:
        row = await self.db.fetch_one(
            self.sql["channel_message_get"], {"channel_id": channel_id, "id": message_id}
        )
        return ChannelMessage.from_row(row) if row else None

    async def before(self, channel_id: str, message_id: str, limit: int) -> list[ChannelMessage]:
        """The ``limit`` messages before ``message_id``, oldest first."""
        rows = await self.db.fetch_all(
            self.sql["channel_messages_before"],
            {"channel_id": channel_id, "before": message_id, "limit": limit},
        )
        return [ChannelMessage.from_row(r) for r in reversed(rows)]

    async def page_before(
        self, channel_id: str, before: str | None, limit: int
    ) -> list[ChannelMessage]:
        """The ``limit`` messages before ``before`` (None: the newest), oldest first, as people
        read them: notices included, unlike ``before``."""
        if before is None:
            query, params = "channel_messages_newest", {"channel_id": channel_id, "limit": limit}
        else:
            query = "channel_messages_page_before"
            params = {"channel_id": channel_id, "before": before, "limit": limit}
        rows = await self.db.fetch_all(self.sql[query], params)
        return [ChannelMessage.from_row(r) for r in reversed(rows)]

    async def replies(
        self, channel_id: str, root_id: str, after: str = "", limit: int = 100
    ) -> list[ChannelMessage]:
        """The replies in ``root_id``'s thread after ``after``, oldest first."""
        rows = await self.db.fetch_all(
            self.sql["channel_thread_replies"],
            {"channel_id": channel_id, "root": root_id, "after": after, "limit": limit},
        )
        return [ChannelMessage.from_row(r) for r in rows]

    async def replies_before(
        self, channel_id: str, root_id: str, before: str | None, limit: int
    ) -> list[ChannelMessage]:
        """The ``limit`` replies in ``root_id``'s thread before ``before`` (None: the newest),
        oldest first: a long thread read from its newest end."""
        params = {"channel_id": channel_id, "root": root_id, "limit": limit}
        if before is None:
            query = "channel_thread_replies_newest"
        else:
            query, params = "channel_thread_replies_before", {**params, "before": before}
        rows = await self.db.fetch_all(self.sql[query], params)
        return [ChannelMessage.from_row(r) for r in reversed(rows)]

    async def reply_counts(self, channel_id: str, first: str, last: str) -> dict[str, int]:
        """How many replies each message with an id from ``first`` to ``last`` has (those
        with none left out): the threads begun on a page of messages."""
        rows = await self.db.fetch_all(
            self.sql["channel_reply_counts"],
            {"channel_id": channel_id, "first": first, "last": last},
        )
        return {r["root"]: int(r["replies"]) for r in rows}

    async def after(
        self, channel_id: str, after: str = "", limit: int = 100
    ) -> list[ChannelMessage]:
        rows = await self.db.fetch_all(
            self.sql["channel_messages_after"],
            {"channel_id": channel_id, "after": after, "limit": limit},
        )
        return [ChannelMessage.from_row(r) for r in rows]

    async def settled_page(
        self, channel_id: str, after: str | None, limit: int
    ) -> tuple[list[ChannelMessage], int]:
        """The newest ``limit`` messages (or those after ``after``), oldest first, of those
        settled in the channel's feed, and the key they are settled below: a stream from that
        key gives exactly what the page could not show."""
        params: dict[str, Any]
        if after is None:
            query, params = "channel_messages_settled_newest", {"limit": limit}
        else:
            query = "channel_messages_settled_after"
            params = {"after": after, "limit": limit}
        rows = await self.db.fetch_all(self.sql[query], {"channel_id": channel_id, **params})
        settled = int(rows[0]["settled"])
        messages = [ChannelMessage.from_row(r) for r in rows if r["id"] is not None]
        return (messages[::-1] if after is None else messages), settled

    async def feed_after(self, channel_id: str, key: int, item_id: str, limit: int) -> FeedPage:
        """The channel's feed after the position (``key``, ``item_id``): up to ``limit`` rows."""
        moment = item_id[2:]
        rows = await self.db.fetch_all(
            self.sql["channel_feed_after"],
            {
                "channel_id": channel_id,
                "key": key,
                "message_after": "m_" + moment if moment else "",
                "activity_after": "a_" + moment if moment else "",
                "limit": limit,
            },
        )
        if not rows:
            return FeedPage([], 0)
        read: list[tuple[int, ChannelMessage | ChannelActivityRow]] = []
        for r in rows:
            if r["id"].startswith("m_"):
                item: ChannelMessage | ChannelActivityRow = ChannelMessage.from_row(
                    {**r, "channel_id": channel_id}
                )
            else:
                item = ChannelActivityRow(
                    channel_id,
                    r["id"],
                    r["run_id"],
                    r["type"],
                    from_json(r["payload"]),
                    r["created_at"],
                )
            read.append((int(r["feed_key"]), item))
        return FeedPage(read, int(rows[0]["settled"]))

    async def feed_start(self, channel_id: str, backlog: int) -> tuple[int, str]:
        """The position before the channel's newest ``backlog`` settled rows (before them all
        when it has fewer); with 0, after every settled row."""
        row = await self.db.fetch_one(
            self.sql["channel_feed_start"], {"channel_id": channel_id, "backlog": backlog}
        )
        if row is None:
            return 0, ""
        if row["feed_key"] is None:
            return int(row["settled"]), ""
        return int(row["feed_key"]), str(row["id"])

    async def feed_key(self, channel_id: str, item_id: str) -> int | None:
        """The feed key of a message or an activity row of the channel (None: none such)."""
        row = await self.db.fetch_one(
            self.sql["channel_feed_key"], {"channel_id": channel_id, "id": item_id}
        )
        return None if row is None else int(row["feed_key"])

    async def thread_senders(self, channel_id: str, root_id: str) -> list[tuple[str, str]]:
        rows = await self.db.fetch_all(
            self.sql["thread_senders"], {"channel_id": channel_id, "root": root_id}
        )
        return [(r["sender"], r["sender_kind"]) for r in rows]

    def activity_op(
        self, channel_id: str, activity_id: str, run_id: str, kind: str, payload: Any, now: float
    ) -> Op:
        return self.op(
            "channel_activity_insert",
            channel_id=channel_id,
            id=activity_id,
            run_id=run_id,
            type=kind,
            payload=to_json(payload),
            now=now,
        )

    async def activity_after(
        self, channel_id: str, after: str = "", limit: int = 100
    ) -> list[ChannelActivityRow]:
        rows = await self.db.fetch_all(
            self.sql["channel_activity_after"],
            {"channel_id": channel_id, "after": after, "limit": limit},
        )
        return [ChannelActivityRow(**{**r, "payload": from_json(r["payload"])}) for r in rows]
