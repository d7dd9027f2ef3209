"""A channel's feed as its streams read it (issue 39, item 11): a client that reconnects with
the last id it saw gets every item it has not seen, exactly once, whatever order the items'
transactions committed in; a fresh stream starts at a bounded point, not the channel's start."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentrunner.core.ids import new_id
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.store import Store
from agentrunner.store.channels import ChannelMessage
from agentrunner.store.drivers import Op
from agentrunner.workspace.feeds import ChannelFeed, FeedItem, FeedPosition

postgres_only = pytest.mark.parametrize("store_url", ["postgres"], indirect=True)


async def _channel(store: Store) -> str:
    channel = new_id("ch_")
    await store.channels.create(channel, channel, "public", [("you", "person")])
    return channel


async def _read(feed: ChannelFeed, limit: int = 200) -> list[tuple[str, FeedItem]]:
    """What ``feed`` gives now, once the transactions that began before its rows' have ended:
    on PostgreSQL another's may be under way a moment (autovacuum's ANALYZE has one)."""
    read = await feed.read(limit)
    while feed.waiting and len(read) < limit:
        await asyncio.sleep(0.01)
        read += await feed.read(limit - len(read))
    return read


def _item(store: Store, channel: str, item_id: str) -> Op:
    """The row of a message (``m_…``) or an activity event (``a_…``) of ``channel``."""
    if item_id.startswith("m_"):
        message = ChannelMessage(channel, item_id, None, "you", "person", item_id, 0, None, 1.0)
        return store.channels.message_op(message)
    payload = {"agent_id": "ann", "run_id": "run_1", "thread_id": None}
    return store.channels.activity_op(channel, item_id, "run_1", "agent.working", payload, 1.0)


async def test_a_client_reconnecting_with_its_last_id_gets_a_row_committed_late_before_it(
    store: Store,
) -> None:
    """A run's working row waits a few milliseconds to be written; a later message may commit
    first and reach the client, which then goes away: on reconnecting it gets the working row
    (and only it)."""
    channel = await _channel(store)
    early, later = new_id("a_"), new_id("m_")
    feed = ChannelFeed(store, channel)
    assert await _read(feed) == []
    await store.batch([_item(store, channel, later)])
    [(position, item)] = await _read(feed)
    assert item.id == later
    await store.batch([_item(store, channel, early)])  # the client is gone meanwhile
    resumed = ChannelFeed(store, channel, after=position)
    assert [item.id for _, item in await _read(resumed)] == [early]
    assert await _read(resumed) == []
    [(_, again)] = await _read(feed)  # a client that stayed gets it too, once
    assert again.id == early and await _read(feed) == []


@postgres_only
async def test_a_row_of_a_transaction_that_commits_after_a_later_one_reaches_a_resumed_client(
    store: Store, store_url: str
) -> None:
    """Two processes: one writes a row and has not committed; the other writes a row with a
    later id and commits, and a client reads. The later row waits for the earlier
    transaction, so a client that reconnects with its last id gets both once it commits."""
    channel = await _channel(store)
    feed = ChannelFeed(store, channel)
    assert await _read(feed) == []
    first, second = new_id("m_"), new_id("m_")
    async with await psycopg.AsyncConnection.connect(store_url) as other:
        _, sql, params = _item(store, channel, first)
        await other.execute(sql, params)  # written, not committed
        await store.batch([_item(store, channel, second)])
        assert await feed.read() == [] and feed.waiting  # second waits for first's transaction
        await other.commit()
    assert feed.position is not None
    resumed = ChannelFeed(store, channel, after=str(feed.position))
    assert [item.id for _, item in await _read(resumed)] == [first, second]
    assert not resumed.waiting and await _read(resumed) == []


async def test_a_page_of_messages_and_the_stream_from_its_position_show_each_once(
    store: Store, store_url: str
) -> None:
    """The dashboard's live page: it shows the messages settled in the feed, and its stream
    starts at the key they are settled below, so it gives what the page could not show — on
    PostgreSQL a message committed while an earlier transaction was still writing, once that
    transaction ends — and nothing the page showed."""
    channel = await _channel(store)
    shown, held, later = new_id("m_"), new_id("m_"), new_id("m_")
    await store.batch([_item(store, channel, shown)])
    other = None
    if store_url.startswith("postgresql"):
        other = await psycopg.AsyncConnection.connect(store_url)
        _, sql, params = _item(store, channel, held)
        await other.execute(sql, params)  # written, not committed
    else:
        await store.batch([_item(store, channel, held)])
    await store.batch([_item(store, channel, later)])
    page, settled = await store.channels.settled_page(channel, None, 50)
    if other is not None:
        assert [m.id for m in page] == [shown]  # later waits for held's transaction
        await other.commit()
        await other.close()
    else:
        assert [m.id for m in page] == [shown, held, later]
    feed = ChannelFeed(store, channel, after=str(FeedPosition(settled)))
    newest = new_id("m_")
    await store.batch([_item(store, channel, newest)])
    streamed = [item.id for _, item in await _read(feed)]
    assert [m.id for m in page] + streamed == [shown, held, later, newest]


async def test_a_fresh_feed_starts_with_the_newest_items_not_the_channels_first(
    store: Store,
) -> None:
    """A stream opened without a position replays the newest ``BACKLOG`` items, whatever the
    channel holds; with a position, everything after it."""
    from agentrunner.workspace.feeds import BACKLOG

    channel = await _channel(store)
    items = [new_id("m_" if n % 3 else "a_") for n in range(BACKLOG + 7)]
    for item in items:
        await store.batch([_item(store, channel, item)])
    fresh = ChannelFeed(store, channel)
    got = [item.id for _, item in await _read(fresh)]
    assert got == items[-BACKLOG:]
    few = await _channel(store)
    for item in items[:3]:
        await store.batch([_item(store, few, item)])
    assert [item.id for _, item in await _read(ChannelFeed(store, few))] == items[:3]


async def test_the_feed_pages_in_commit_order_and_resumes_after_a_position_or_an_item(
    store: Store,
) -> None:
    channel = await _channel(store)
    feed = ChannelFeed(store, channel)
    assert await _read(feed) == []
    items = [new_id("a_" if n % 2 else "m_") for n in range(7)]  # interleaved in time
    for item in reversed(items):  # committed newest first: the feed's order is the commits'
        await store.batch([_item(store, channel, item)])
    got = []
    while read := await _read(feed, limit=2):  # pages smaller than what there is
        got += read
    assert [item.id for _, item in got] == items[::-1]
    positions = [position for position, _ in got]
    assert len(set(positions)) == len(positions)
    assert all(p.endswith("." + item.id) for p, (_, item) in zip(positions, got, strict=True))
    resumed = ChannelFeed(store, channel, after=positions[2])
    assert [item.id for _, item in await _read(resumed)] == items[::-1][3:]
    after_item = ChannelFeed(store, channel, after=items[2])  # an item's id: after it
    assert [item.id for _, item in await _read(after_item)] == items[::-1][5:]


@pytest.mark.parametrize(
    ("after", "problem"),
    [
        ("not-a-position", "is not a position in a channel's feed"),
        ("12.x_1", "is not a position in a channel's feed"),
        ("99999999999999999999.", "is not a position in a channel's feed"),
        ("m_0000000000000000000000", "is no message or event of this channel"),
    ],
)
async def test_a_position_that_is_none_is_refused_naming_the_field(
    store: Store, after: str, problem: str
) -> None:
    channel = await _channel(store)
    with pytest.raises(AgentRunnerError) as refused:
        await ChannelFeed(store, channel, after=after, field="Last-Event-ID").start()
    assert refused.value.code is ErrorCode.VALIDATION
    assert problem in str(refused.value) and "Last-Event-ID" in str(refused.value)
    assert refused.value.hint


# -- every interleaving -------------------------------------------------------------------------

# What happens next: items are made (their ids, in order) before any is committed; then each
# step commits some of them (on PostgreSQL possibly in a transaction left open across reads and
# committed later), reads, or reconnects with the last id read.
_STEP = st.sampled_from(["commit", "open", "close", "read", "reconnect"])


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(kinds=st.lists(st.sampled_from("ma"), min_size=1, max_size=8), data=st.data())
async def test_every_item_reaches_a_reconnecting_client_exactly_once(
    store: Store, store_url: str, kinds: list[str], data: Any
) -> None:
    channel = await _channel(store)
    items = [new_id(f"{kind}_") for kind in kinds]
    waiting = data.draw(st.permutations(items))  # the order their rows are written in
    feed = ChannelFeed(store, channel)
    assert await feed.read() == []
    received: list[str] = []
    position: str | None = None
    held: list[tuple[psycopg.AsyncConnection[Any], list[str]]] = []
    postgres = store_url.startswith("postgresql")
    try:
        while waiting or held:
            step = data.draw(_STEP)
            if step in ("commit", "open") and waiting:
                count = data.draw(st.integers(1, len(waiting)))
                batch, waiting = waiting[:count], waiting[count:]
                if step == "open" and postgres:  # written in a transaction left open
                    conn = await psycopg.AsyncConnection.connect(store_url)
                    for item in batch:
                        _, sql, params = _item(store, channel, item)
                        await conn.execute(sql, params)
                    held.append((conn, batch))
                else:
                    await store.batch([_item(store, channel, item) for item in batch])
            elif (step == "close" or not waiting) and held:
                index = data.draw(st.integers(0, len(held) - 1))
                conn, _ = held.pop(index)
                await conn.commit()
                await conn.close()
            elif step == "read":
                for at, item in await feed.read(limit=data.draw(st.integers(1, 3))):
                    position = at
                    received.append(item.id)
            elif step == "reconnect" and position is not None:
                feed = ChannelFeed(store, channel, after=position)
    finally:
        for conn, _ in held:
            await conn.close()
    while read := await _read(feed):
        received += [item.id for _, item in read]
    assert Counter(received) == Counter(items)
