"""Following a run and a thread (``feeds``, issue 40 item 5): what every reader of them reads —
the API's streams, ``logs --follow``, the dashboard's live pages. A run's feed gives its events
after a position, each once, a page at a time, and ends at the run's end; a job's gives its
delegations' too, down the tree, marked as theirs, woken by a grandchild's commits though they
name only its parent; a thread's gives its runs' events in the order the runs held the thread
and resumes exactly after any position. On both back ends (``store``); the fallback timer is an
hour, so a wake-up that never came fails at the deadline instead of passing late."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TypeVar

import pytest

from agentrunner.store import RunLog, Store, changes
from agentrunner.store.records import EventRecord
from agentrunner.workspace import feeds
from agentrunner.workspace.feeds import RunFeed, ThreadFeed

DEADLINE_S = 60.0  # far below the fallback timer's hour
T = TypeVar("T")


@pytest.fixture(autouse=True)
def no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(changes, "FALLBACK_S", 3600.0)


async def _run(
    store: Store,
    run_id: str,
    *,
    thread_id: str | None = None,
    parent: str | None = None,
    depth: int = 0,
) -> RunLog:
    """A running run: a delegation of run ``parent``, whose commits name that run too (not its
    parent's), or a run on ``thread_id``, whose commits name the thread."""
    changed = [f"run:{parent}"] if parent else [f"thread:{thread_id}"] if thread_id else []
    insert = store.runs.insert_op(
        run_id=run_id,
        agent_id=f"agent-{run_id}",
        thread_id=thread_id,
        status="running",
        parent_run_id=parent,
        depth=depth,
    )
    await store.batch([insert])
    return RunLog(store, run_id, f"agent-{run_id}", changed=changed)


async def _say(log: RunLog, *tokens: str) -> None:
    """An event a token, each in a transaction of its own (deltas written together merge)."""
    for token in tokens:
        log.emit("agent.token", {"token": token, "model": "x:m"})
        await log.flush()


async def _end(store: Store, log: RunLog, status: str = "completed") -> None:
    log.emit("agent.message", {"text": "done", "model": "x:m"})
    await log.flush_with([store.runs.finish_op(log.run_id, status=status, stop_reason=None)])


async def _next(items: AsyncIterator[T], count: int) -> list[T]:
    return [await asyncio.wait_for(anext(items), DEADLINE_S) for _ in range(count)]


async def _rest(items: AsyncIterator[T]) -> list[T]:
    async def drain() -> list[T]:
        return [item async for item in items]

    return await asyncio.wait_for(drain(), DEADLINE_S)


def _said(events: list[EventRecord]) -> list[str]:
    return [str(e.payload.get("token", e.payload.get("text"))) for e in events]


@pytest.mark.parametrize("page", [500, 2])  # 2: a run's events read a few at a time
async def test_a_run_feed_gives_each_event_after_its_position_once_and_ends_with_the_run(
    store: Store, monkeypatch: pytest.MonkeyPatch, page: int
) -> None:
    monkeypatch.setattr(feeds, "_RUN_EVENTS_READ", page)
    other = await _run(store, "r2")
    await _say(other, "x", "y")
    for after, status in ((0, "completed"), (2, "failed")):  # a run each way, resumed or not
        run_id = f"r{after}-{status}"
        log = await _run(store, run_id)
        await _say(log, "a", "b", "c")
        feed = RunFeed(store, run_id, after).follow()
        got = await _next(feed, 3 - after)  # what was there, then it waits for more
        await _say(log, "d")
        got += await _next(feed, 1)  # woken by the commit
        await _end(store, log, status)
        got += await _rest(feed)  # the last event, then the feed ends with the run
        assert _said(got) == ["a", "b", "c", "d", "done"][after:]
        assert [e.seq for e in got] == list(range(after + 1, 6))
        assert {e.run_id for e in got} == {run_id}
        # followed again now that it has ended: every event, however many pages, then the end
        again = await _rest(RunFeed(store, run_id).follow())
        assert [e.seq for e in again] == [1, 2, 3, 4, 5]

    ended = RunFeed(store, "r2", 1)  # another run's: only its own
    assert (_said(await ended.read()), ended.ended) == (["y"], False)
    await _end(store, other, "cancelled")
    assert (_said(await ended.read()), ended.ended) == (["done"], False)
    assert (await ended.read(), ended.ended) == ([], True)  # nothing after its end
    assert ended.run is not None and ended.run.status == "cancelled"
    missing = RunFeed(store, "nope")
    assert await missing.read() == [] and missing.ended and missing.run is None


@pytest.mark.parametrize("status", ["completed", "failed"])
async def test_a_run_feed_looks_once_more_after_the_end_it_sees(
    store: Store, monkeypatch: pytest.MonkeyPatch, status: str
) -> None:
    """The run's last events and its end committed between the read that found nothing and
    the read of the run: they are given all the same, before the feed ends."""
    log = await _run(store, "r1")
    await _say(log, "a")
    feed = RunFeed(store, "r1", 1)
    get = store.runs.get

    async def ends_meanwhile(run_id: str) -> object:
        monkeypatch.setattr(store.runs, "get", get)
        await _say(log, "b")
        await _end(store, log, status)
        return await get(run_id)

    monkeypatch.setattr(store.runs, "get", ends_meanwhile)
    got = await _rest(feed.follow())
    assert _said(got) == ["b", "done"]
    assert feed.run is not None and feed.run.status == status


async def test_a_job_feed_follows_its_delegations_down_the_tree_marked_as_theirs(
    store: Store,
) -> None:
    root = await _run(store, "root")
    await _say(root, "asking")
    feed = RunFeed(store, "root", delegations=True)
    items = feed.follow()
    assert _said(await _next(items, 1)) == ["asking"]
    child = await _run(store, "child", parent="root", depth=1)
    await _say(child, "asking too")  # names the root: wakes the feed
    [from_child] = await _next(items, 1)
    grandchild = await _run(store, "grandchild", parent="child", depth=2)
    await _say(grandchild, "answer")  # names only its parent, whom the feed follows now
    [from_grandchild] = await _next(items, 1)
    await _end(store, grandchild)
    await _end(store, child)
    await _end(store, root)
    rest = await _rest(items)
    assert from_child.payload == {
        "token": "asking too",
        "model": "x:m",
        "from_agent": "agent-child",
        "depth": 1,
    }
    assert from_grandchild.payload["from_agent"] == "agent-grandchild"
    assert from_grandchild.payload["depth"] == 2
    assert [(e.run_id, e.payload.get("from_agent")) for e in rest] == [
        ("grandchild", "agent-grandchild"),
        ("child", "agent-child"),
        ("root", None),
    ]
    assert feed.run is not None and feed.run.status == "completed"
    # read at once, the whole job in the order it happened
    whole = await RunFeed(store, "root", delegations=True).read()
    runs = ["root", "child", "grandchild", "grandchild", "child", "root"]
    assert [e.run_id for e in whole] == runs
    assert whole == sorted(whole, key=feeds.in_order)


@pytest.mark.parametrize(("events_read", "runs_read"), [(1000, 100), (2, 100), (1000, 2)])
async def test_a_thread_feed_walks_its_runs_in_the_order_they_held_the_thread(
    store: Store, monkeypatch: pytest.MonkeyPatch, events_read: int, runs_read: int
) -> None:
    monkeypatch.setattr(feeds, "_EVENTS_READ", events_read)
    monkeypatch.setattr(feeds, "_RUNS_READ", runs_read)
    await store.threads.open("t", "a")
    await store.threads.open("elsewhere", "a")
    queued = ["r_1", "r_2", "r_3"]  # queued in the order of their ids…
    await store.batch(
        [
            store.runs.insert_op(run_id=run_id, agent_id="a", thread_id="t", status="created")
            for run_id in queued
        ]
    )
    await _say(await _run(store, "r_0", thread_id="elsewhere"), "not this thread's")
    live = ThreadFeed(store, "t").follow()
    said = {"r_1": ["1a", "1b", "1c"], "r_2": ["2a"], "r_3": ["3a", "3b"]}
    got: list[tuple[str, EventRecord]] = []
    for run_id in ("r_3", "r_1", "r_2"):  # …and served in another
        await store.batch([store.runs.begin_op(run_id, None)])
        await _say(RunLog(store, run_id, "a", changed=["thread:t"]), *said[run_id])
        got += await _next(live, len(said[run_id]))  # woken by the run's commits
    await live.aclose()
    positions = [position for position, _ in got]
    assert positions == ["r_3/1", "r_3/2", "r_1/1", "r_1/2", "r_1/3", "r_2/1"]
    assert [e.payload["token"] for _, e in got] == ["3a", "3b", "1a", "1b", "1c", "2a"]
    # resumed after each position: exactly what came after it
    for n, position in enumerate(["", *positions]):
        rest = ThreadFeed(store, "t", position)
        read = await rest.read()
        while rest.more:
            read += await rest.read()
        assert [p for p, _ in read] == positions[n:]
    # a position of no run that began on the thread: from its first run
    assert [p for p, _ in await ThreadFeed(store, "t", "r_0/1").read()][:1] == ["r_3/1"]


async def test_a_feed_waits_only_while_it_watches(store: Store) -> None:
    feed = RunFeed(store, "r1")
    with pytest.raises(RuntimeError, match="watching"):
        await feed.wait()
    feed.wake()  # nothing to wake: no error
    async with feed.watching():
        assert store.changes.watching == 1
        feed.wake()
        assert await asyncio.wait_for(feed.wait(), DEADLINE_S)
    assert store.changes.watching == 0
