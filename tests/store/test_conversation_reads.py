"""The reads the dashboard's conversation pages make, on SQLite and PostgreSQL: a page of a
thread or a channel from its newest end backwards, a message's thread, the reply counts of a
page, the channels with their members — each at the cost of its page, not of the history."""

from __future__ import annotations

import time

import pytest

from agentrunner.core.ids import new_id
from agentrunner.engine import AssistantMessage, UserMessage
from agentrunner.engine.messages import Message
from agentrunner.store import Store
from agentrunner.store.channels import ChannelMessage

BEYOND = 2**62


def _text(message: Message) -> str:
    assert isinstance(message, UserMessage | AssistantMessage)
    return message.content if isinstance(message, UserMessage) else message.text


async def _thread(store: Store, thread_id: str, texts: list[str]) -> None:
    await store.threads.open(thread_id, "a")
    said = [UserMessage(t) if n % 2 == 0 else AssistantMessage(t) for n, t in enumerate(texts)]
    await store.batch(store.messages.append_ops(thread_id, 1, said, f"run-{thread_id}"))


async def test_a_threads_pages_from_its_newest_end_backwards(store: Store) -> None:
    await _thread(store, "long", [f"long {n}" for n in range(1, 121)])
    await _thread(store, "other", [f"other {n}" for n in range(1, 6)])

    newest = await store.messages.page_before("long", BEYOND, 50)
    assert [seq for seq, *_ in newest] == list(range(71, 121))
    assert [_text(m) for _, m, *_ in newest][-1] == "long 120"
    older = await store.messages.page_before("long", newest[0][0], 50)
    assert [seq for seq, *_ in older] == list(range(21, 71))
    oldest = await store.messages.page_before("long", older[0][0], 50)
    assert [seq for seq, *_ in oldest] == list(range(1, 21))
    assert await store.messages.page_before("long", 1, 50) == []
    # the other thread's messages are its own; what page() gives, page_before() gives alike
    other = await store.messages.page_before("other", BEYOND, 50)
    assert [_text(m) for _, m, *_ in other] == [f"other {n}" for n in range(1, 6)]
    assert other == await store.messages.page("other", after=0, limit=50)
    assert {run_id for _, _, run_id, _ in other} == {"run-other"}
    assert await store.messages.page_before("none", BEYOND, 50) == []


async def _said(
    store: Store,
    channel_id: str,
    sender: str,
    text: str,
    *,
    kind: str = "person",
    root: str | None = None,
) -> ChannelMessage:
    message = ChannelMessage(
        channel_id, new_id("m_"), root, sender, kind, text, 0, None, time.time()
    )
    await store.batch([store.channels.message_op(message)])
    return message


async def test_a_channels_pages_replies_and_reply_counts(store: Store) -> None:
    await store.channels.create("ch_1", "general", "public", [("you", "person"), ("ceo", "agent")])
    await store.channels.create("ch_2", "ops", "private", [("cfo", "agent")])
    said = [await _said(store, "ch_1", "you", f"general {n}") for n in range(30)]
    notice = await _said(store, "ch_1", "ceo", "ceo could not reply", kind="notice")
    first_reply = await _said(store, "ch_1", "ceo", "on it", kind="agent", root=said[28].id)
    second_reply = await _said(store, "ch_1", "you", "thanks", root=said[28].id)
    elsewhere = await _said(store, "ch_2", "cfo", "ops 0", kind="agent")
    await _said(store, "ch_2", "cfo", "reply elsewhere", kind="agent", root=elsewhere.id)

    newest = await store.channels.page_before("ch_1", None, 10)
    ids = [m.id for m in newest]
    assert ids == [m.id for m in said[23:]] + [notice.id, first_reply.id, second_reply.id]
    # people see notices; an agent's transcript (before) does not
    assert notice.id in ids
    transcript = await store.channels.before("ch_1", second_reply.id, 10)
    assert notice.id not in [m.id for m in transcript]
    older = await store.channels.page_before("ch_1", newest[0].id, 10)
    assert [m.id for m in older] == [m.id for m in said[13:23]]
    assert await store.channels.page_before("ch_1", said[0].id, 10) == []
    assert [m.content for m in await store.channels.page_before("ch_2", None, 10)] == [
        "ops 0",
        "reply elsewhere",
    ]

    thread = await store.channels.replies("ch_1", said[28].id)
    assert [m.id for m in thread] == [first_reply.id, second_reply.id]
    assert [m.id for m in await store.channels.replies("ch_1", said[28].id, first_reply.id)] == [
        second_reply.id
    ]
    assert await store.channels.replies("ch_1", said[27].id) == []
    assert await store.channels.replies("ch_2", said[28].id) == []  # another channel's root

    # from the newest end, a page at a time, oldest first in each page
    more = [await _said(store, "ch_1", "you", f"r{n}", root=said[28].id) for n in range(3)]
    whole = [first_reply.id, second_reply.id, *(m.id for m in more)]
    last_two = await store.channels.replies_before("ch_1", said[28].id, None, 2)
    assert [m.id for m in last_two] == whole[-2:]
    before = await store.channels.replies_before("ch_1", said[28].id, last_two[0].id, 2)
    assert [m.id for m in before] == whole[1:3]
    every = await store.channels.replies_before("ch_1", said[28].id, None, 9)
    assert [m.id for m in every] == whole
    assert await store.channels.replies_before("ch_1", said[28].id, whole[0], 9) == []
    assert await store.channels.replies_before("ch_2", said[28].id, None, 9) == []

    assert await store.channels.reply_counts("ch_1", newest[0].id, newest[-1].id) == {
        said[28].id: 5
    }
    assert await store.channels.reply_counts("ch_1", older[0].id, older[-1].id) == {}
    assert await store.channels.reply_counts("ch_2", elsewhere.id, elsewhere.id) == {
        elsewhere.id: 1
    }

    await store.channels.create("ch_3", "dm:ceo:you", "dm", [("ceo", "agent"), ("you", "person")])
    overview = {c.name: c for c in await store.channels.overview()}
    assert [c.name for c in await store.channels.overview()] == ["dm:ceo:you", "ops", "general"]
    assert overview["general"].members == [("ceo", "agent"), ("you", "person")]
    assert overview["ops"].members == [("cfo", "agent")]
    assert (overview["general"].kind, overview["ops"].kind) == ("public", "private")
    assert overview["general"].last_message_at == pytest.approx(second_reply.created_at)
    assert overview["ops"].last_message_at != overview["general"].last_message_at
    assert overview["dm:ceo:you"].last_message_at is None


async def test_the_page_reads_walk_their_index_not_the_table(store: Store) -> None:
    if store.dialect != "sqlite":
        pytest.skip("PostgreSQL plans by its statistics; the SQLite plan is fixed")
    # each read walks the index named, for its page only (never the channel's every message)
    reads = {
        "messages_page_before": (
            {"thread_id": "t", "before": 9, "limit": 50},
            "messages USING PRIMARY KEY (thread_id=? AND seq<?)",
        ),
        "channel_messages_newest": (
            {"channel_id": "c", "limit": 50},
            "channel_messages USING PRIMARY KEY (channel_id=?)",
        ),
        "channel_messages_page_before": (
            {"channel_id": "c", "before": "m_1", "limit": 50},
            "channel_messages USING PRIMARY KEY (channel_id=? AND id<?)",
        ),
        "channel_thread_replies": (
            {"channel_id": "c", "root": "m_1", "after": "", "limit": 50},
            "channel_messages USING INDEX channel_messages_thread (thread_root_id=? AND id>?)",
        ),
        "channel_thread_replies_newest": (
            {"channel_id": "c", "root": "m_1", "limit": 50},
            "channel_messages USING INDEX channel_messages_thread (thread_root_id=?)",
        ),
        "channel_thread_replies_before": (
            {"channel_id": "c", "root": "m_1", "before": "m_9", "limit": 50},
            "channel_messages USING INDEX channel_messages_thread (thread_root_id=? AND id<?)",
        ),
        "channel_reply_counts": (
            {"channel_id": "c", "first": "m_1", "last": "m_2"},
            "channel_messages USING COVERING INDEX channel_messages_thread (thread_root_id>? AND "
            "thread_root_id<?)",
        ),
    }
    await store.channels.create("c", "general", "public", [])
    await store.batch(
        [
            store.channels.message_op(
                ChannelMessage("c", new_id("m_"), None, "you", "person", "x", 0, None, 0.0)
            )
            for _ in range(200)
        ]
    )
    for query, (params, search) in reads.items():
        plan = await store.driver.fetch_all(f"EXPLAIN QUERY PLAN {store.sql[query]}", params)
        details = [row["detail"] for row in plan]
        assert details[0] == f"SEARCH {search}", (query, details)
        assert not any("TEMP B-TREE" in d for d in details), (query, details)
