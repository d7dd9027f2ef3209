"""Readers woken by commits made in another process (``store/changes``), on both back ends: a
watch is woken by a commit that changed what it follows, and only by those; none of it waits
for the fallback timer, which these tests make an hour long, so a wake-up that never came
fails the test at its deadline instead of passing late."""

from __future__ import annotations

import asyncio
import sys

import pytest

from agentrunner.store import RunLog, Store, changes, run_log
from agentrunner.store.changes import channel_key, run_key, thread_key
from agentrunner.store.channels import ChannelMessage
from agentrunner.workspace.feeds import ChannelFeed

DEADLINE_S = 60.0  # far below the fallback timer's hour

# A run's log in a process of its own: events of run ARGV[2], in many transactions (a durable
# point every few, write-behind between), tokens among them.
WRITER = """
import asyncio, sys
from agentrunner.store import RunLog, open_store

async def main(url, run_id, count):
    store = await open_store(url)
    try:
        log = RunLog(store, run_id, "a", changed=["thread:t"])
        for n in range(int(count)):
            if n % 5 == 0:
                log.emit("step.started", {"step": n, "model": "x:m"})
            else:
                log.emit("agent.token", {"token": f"{n} ", "model": "x:m"})
            if n % 7 == 6:
                await log.flush()
            elif n % 3 == 0:
                await asyncio.sleep(0.001)
        await log.flush()
    finally:
        await store.close()

asyncio.run(main(*sys.argv[1:]))
"""

# A post to a channel from a process of its own.
POSTER = """
import asyncio, sys, time
from agentrunner.store import open_store
from agentrunner.store.channels import ChannelMessage

async def main(url, channel_id, message_id, text):
    store = await open_store(url)
    try:
        message = ChannelMessage(channel_id, message_id, None, "ada", "person", text, 0, None,
                                 time.time())
        await store.batch(store.channels.message_ops(message))
    finally:
        await store.close()

asyncio.run(main(*sys.argv[1:]))
"""


@pytest.fixture(autouse=True)
def no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(changes, "FALLBACK_S", 3600.0)


async def _run_in_process(script: str, *args: str) -> None:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, *args)
    assert await asyncio.wait_for(proc.wait(), DEADLINE_S) == 0


async def _runs(store: Store, *run_ids: str) -> None:
    await store.threads.open("t", "a")
    await store.batch(
        [
            store.runs.insert_op(run_id=run_id, agent_id="a", thread_id="t", status="running")
            for run_id in run_ids
        ]
    )


async def test_a_commit_in_another_process_wakes_the_watches_on_what_it_changed(
    store: Store, store_url: str
) -> None:
    await _runs(store, "r1", "r2")
    async with (
        store.changes.watch(run_key("r1")) as run_watch,
        store.changes.watch(thread_key("t")) as thread_watch,
        store.changes.watch(run_key("r2")) as other_run,
        store.changes.watch(channel_key("c1")) as channel_watch,
    ):
        writing = asyncio.ensure_future(_run_in_process(WRITER, store_url, "r1", "1"))
        assert await asyncio.wait_for(run_watch.wait(), DEADLINE_S)  # woken, not timed out
        await writing
        # the commit was made before the wake-up went out
        assert [e.type for e in await store.events.list("r1")] == ["step.started"]
        # the thread's watch was named by the same commit; the others were not
        assert await asyncio.wait_for(thread_watch.wait(), DEADLINE_S)
        assert not await other_run.wait(0)
        assert not await channel_watch.wait(0)
        # a wake-up is taken once: the next wait waits again
        assert not await run_watch.wait(0)


async def test_a_burst_of_commits_reaches_a_reader_in_another_process_whole_and_in_order(
    store: Store, store_url: str
) -> None:
    count = 400
    await _runs(store, "r1")
    read: list[tuple[int, str, dict[str, object]]] = []
    wakes = 0
    async with store.changes.watch(run_key("r1")) as watch:
        writing = asyncio.ensure_future(_run_in_process(WRITER, store_url, "r1", str(count)))
        while True:
            after = read[-1][0] if read else 0
            events = await store.events.list("r1", after=after)
            read.extend((e.seq, e.type, e.payload) for e in events)
            if events:
                continue
            if writing.done():  # every commit was made before it ended: one more read
                if not await store.events.list("r1", after=read[-1][0] if read else 0):
                    break
                continue
            woken = asyncio.ensure_future(watch.wait())
            await asyncio.wait([woken, writing], return_when=asyncio.FIRST_COMPLETED)
            if woken.done():
                wakes += woken.result()
            else:
                woken.cancel()
        await writing
    assert [seq for seq, _, _ in read] == list(range(1, len(read) + 1))  # no gap, no repeat
    steps = [payload["step"] for _, kind, payload in read if kind == "step.started"]
    assert steps == list(range(0, count, 5))
    tokens = "".join(str(payload["token"]) for _, kind, payload in read if kind == "agent.token")
    assert tokens == "".join(f"{n} " for n in range(count) if n % 5)
    assert wakes > 1  # it was woken as the writer went, not only at the end


async def test_a_channel_follower_is_woken_by_a_post_in_another_process(
    store: Store, store_url: str
) -> None:
    await store.channels.create("c1", "lobby", "public", [("ada", "person")])
    await store.channels.create("c2", "other", "public", [("ada", "person")])
    feed = ChannelFeed(store, "c1").follow()
    other = store.changes.watch(channel_key("c2"))
    async with other:
        following = asyncio.ensure_future(anext(feed))
        await asyncio.sleep(0.05)  # the follower is waiting (it found nothing)
        assert not following.done()
        await _run_in_process(POSTER, store_url, "c1", "m_0001", "hello")
        position, item = await asyncio.wait_for(following, DEADLINE_S)
        assert isinstance(item, ChannelMessage) and item.content == "hello"
        assert position.endswith(".m_0001")
        assert not await other.wait(0)  # another channel's readers were not woken
    await feed.aclose()


async def test_with_someone_listening_a_run_commits_its_first_event_at_once(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nobody tailing the store: events wait for the write-behind window (an hour here) or a
    durable point. Someone tailing it (any key, any process): the first event after a quiet
    moment commits at the loop's next turn, and those that follow within ``LIVE_DELAY_S``
    share the next commit, deltas still merged."""
    monkeypatch.setattr(run_log, "FLUSH_DELAY_S", 3600.0)
    await _runs(store, "r1")
    log = RunLog(store, "r1", "a")
    log.emit("step.started", {"step": 1, "model": "x:m"})
    await asyncio.sleep(0.05)
    assert await store.events.list("r1") == []  # waiting for the window: nobody listens
    await log.flush()
    async with (
        store.changes.watch(channel_key("elsewhere")),
        store.changes.watch(run_key("r1")) as watch,
    ):
        while not store.changes.listened():  # PostgreSQL: counted in the background
            await asyncio.sleep(0.01)
        await asyncio.sleep(run_log.LIVE_DELAY_S)  # a quiet moment since the flush
        log.emit("agent.token", {"token": "Hel", "model": "x:m"})
        log.emit("agent.token", {"token": "lo", "model": "x:m"})
        assert await asyncio.wait_for(watch.wait(), DEADLINE_S)
        events = await store.events.list("r1")
        assert [(e.seq, e.type, e.payload) for e in events] == [
            (1, "step.started", {"step": 1, "model": "x:m"}),
            (2, "agent.token", {"token": "Hello", "model": "x:m"}),
        ]
        log.emit("agent.message", {"text": "Hello", "model": "x:m"})  # right after: batched
        assert await asyncio.wait_for(watch.wait(), DEADLINE_S)
        assert [e.type for e in await store.events.list("r1", after=2)] == ["agent.message"]


# A job in a process of its own: its root run starts a delegation, whose events (naming the
# root: RunLog's ``changed``) come while the root waits; then the root ends.
JOB = """
import asyncio, sys
from agentrunner.store import RunLog, open_store

async def main(url):
    store = await open_store(url)
    try:
        root = RunLog(store, "root", "ceo")
        root.emit("step.started", {"step": 1, "model": "x:m"})
        await root.flush()
        await asyncio.to_thread(sys.stdin.readline)  # the follower has seen the root's
        child = RunLog(store, "child", "cto", changed=["run:root"])
        child.write([store.runs.insert_op(run_id="child", agent_id="cto", thread_id=None,
                                          status="running", parent_run_id="root", depth=1)])
        child.emit("agent.token", {"token": "from the child", "model": "x:m"})
        await child.flush_with([store.runs.finish_op("child", status="completed",
                                                     stop_reason="end_turn")])
        await asyncio.to_thread(sys.stdin.readline)  # the follower has seen the child's
        root.emit("agent.message", {"text": "done", "model": "x:m"})
        await root.flush_with([store.runs.finish_op("root", status="completed",
                                                    stop_reason="end_turn")])
    finally:
        await store.close()

asyncio.run(main(*sys.argv[1:]))
"""


async def test_a_job_followed_in_another_process_is_woken_by_it_and_its_delegations(
    store: Store, store_url: str
) -> None:
    from agentrunner.workspace.company.jobs import replay

    await store.batch(
        [store.runs.insert_op(run_id="root", agent_id="ceo", thread_id=None, status="running")]
    )
    seen: list[tuple[str, object]] = []
    following = asyncio.ensure_future(
        replay(store, "root", lambda kind, data: seen.append((kind, data)), follow=True)
    )
    job = await asyncio.create_subprocess_exec(
        sys.executable, "-c", JOB, store_url, stdin=asyncio.subprocess.PIPE
    )
    assert job.stdin is not None
    # Each commit of the job, the delegation's too, wakes the follower: the job goes on once
    # the follower has shown it.
    await _seen(seen, 1, following)
    await _go_on(job.stdin)
    await _seen(seen, 2, following)
    assert [kind for kind, _ in seen] == ["step.started", "agent.token"]
    assert isinstance(seen[1][1], dict) and seen[1][1]["token"] == "from the child"
    await _go_on(job.stdin)
    assert await asyncio.wait_for(job.wait(), DEADLINE_S) == 0
    ended = await asyncio.wait_for(following, DEADLINE_S)  # woken by the root's end
    assert ended.status == "completed"
    assert [kind for kind, _ in seen] == ["step.started", "agent.token", "agent.message"]


async def _seen(
    seen: list[tuple[str, object]], count: int, following: asyncio.Future[object]
) -> None:
    deadline = asyncio.get_running_loop().time() + DEADLINE_S
    while len(seen) < count:
        assert asyncio.get_running_loop().time() < deadline and not following.done()
        await asyncio.sleep(0.01)


async def _go_on(stdin: asyncio.StreamWriter) -> None:
    stdin.write(b"go on\n")
    await stdin.drain()


async def test_a_watch_cancelled_as_it_begins_leaves_nothing_behind(store: Store) -> None:
    """A reader that leaves while the listener is still starting (a browser closing a page at
    once, its stream cancelled) gives its watch back: none is left counted or woken."""

    async def follow() -> None:
        async with store.changes.watch(run_key("run_gone")):
            await asyncio.sleep(3600)

    left = asyncio.create_task(follow())
    await asyncio.sleep(0)  # begun: counted, waiting for the listener to start
    assert store.changes.watching == 1
    left.cancel()
    with pytest.raises(asyncio.CancelledError):
        await left
    assert store.changes.watching == 0
    async with store.changes.watch(run_key("run_stays")) as watch:  # the next is served
        assert store.changes.watching == 1
        watch.wake()
        assert await watch.wait(timeout=DEADLINE_S)
    assert store.changes.watching == 0
