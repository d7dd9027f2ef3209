"""The schedules' fires as their stream reads them (``feeds.ScheduleFeed``, issue 44): a client
that reconnects with the last id it saw gets every fire it has not seen, once, whatever order
the fires' transactions committed in; a fresh reader starts with the fires written from then
on; a position that is none is refused naming its field."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.runtime.compose import open_workspace
from agentrunner.store import Store
from agentrunner.store.drivers import Op
from agentrunner.store.schedules import Fire
from agentrunner.workspace.feeds import FirePosition, ScheduleFeed
from tests.runner.conftest import Agent

postgres_only = pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
T0 = 1_800_000_000.0


def _fire(store: Store, schedule: str, tick: float, outcome: str = "skipped") -> Op:
    return store.schedules.fire_op(
        schedule, tick, outcome, reason=f"{schedule} at {tick}", now=tick
    )


async def _read(feed: ScheduleFeed) -> list[tuple[str, Fire]]:
    """What ``feed`` gives now, once the transactions that began before its fires' have ended
    (on PostgreSQL another's may be under way a moment)."""
    read = await feed.read()
    while feed.waiting:
        await asyncio.sleep(0.01)
        read += await feed.read()
    return read


def _ticks(read: list[tuple[str, Fire]]) -> list[tuple[str, float]]:
    return [(fire.schedule, fire.tick) for _, fire in read]


async def test_a_fresh_reader_starts_now_and_a_position_resumes_exactly(store: Store) -> None:
    await store.batch([_fire(store, "old", T0)])
    feed = ScheduleFeed(store)
    await feed.start()
    assert await _read(feed) == []  # what was written before it started is not given
    await store.batch([_fire(store, "ping", T0 + 10), _fire(store, "ping", T0 + 20)])
    await store.batch([_fire(store, "digest", T0 + 5)])  # a later commit, an earlier tick
    read = await _read(feed)
    assert _ticks(read) == [("ping", T0 + 10), ("ping", T0 + 20), ("digest", T0 + 5)]
    assert [fire.reason for _, fire in read][-1] == f"digest at {T0 + 5}"
    assert len({position for position, _ in read}) == 3
    for n, (position, _) in enumerate(read):  # each id resumes after its own fire, exactly
        resumed = ScheduleFeed(store, position)
        assert _ticks(await _read(resumed)) == _ticks(read)[n + 1 :]
    await store.batch([_fire(store, "ping", T0 + 30)])
    assert _ticks(await _read(feed)) == [("ping", T0 + 30)] and await _read(feed) == []


async def test_a_position_that_is_none_is_refused_naming_its_field(store: Store) -> None:
    for wrong in ("", "abc", "12", "12.x.ping", "1.-1.ping", "-3.5.ping"):
        if not wrong:
            assert ScheduleFeed(store, wrong).position is None  # none: from now on
            continue
        with pytest.raises(AgentRunnerError) as refused:
            ScheduleFeed(store, wrong, field="Last-Event-ID")
        assert refused.value.code is ErrorCode.VALIDATION
        assert "Last-Event-ID" in refused.value.message and wrong in refused.value.message
    assert str(FirePosition.parse("7.1800000010000.ping", "after")) == "7.1800000010000.ping"
    assert FirePosition.parse("7.5.a.b", "after") == FirePosition(7, "a.b", 5)  # names with dots


async def test_a_position_past_every_fire_is_refused_not_waited_on(store: Store) -> None:
    """A made-up id far ahead would have its reader wait, silently, for fires that came
    before it: refused, naming the field; the stream's own ids are taken."""
    await store.batch([_fire(store, "ping", T0 + 10)])
    feed = ScheduleFeed(store, "0.-1")
    (given, _), *_ = await _read(feed)
    assert (await ScheduleFeed(store, given).start()) == FirePosition.parse(given, "after")
    for ahead in ("999999.1.ping", "999999999.-1"):
        with pytest.raises(AgentRunnerError) as refused:
            await ScheduleFeed(store, ahead, field="Last-Event-ID").start()
        assert refused.value.code is ErrorCode.VALIDATION
        assert "past every fire" in refused.value.message
        assert "Last-Event-ID" in refused.value.message


@postgres_only
async def test_a_fire_of_a_transaction_that_commits_after_a_later_one_is_not_lost(
    store: Store, store_url: str
) -> None:
    """Two processes: one writes a fire and has not committed; the other writes one and
    commits. The later waits for the earlier transaction, so a reader that resumes from what
    it got gets both, once."""
    feed = ScheduleFeed(store)
    await feed.start()
    async with await psycopg.AsyncConnection.connect(store_url) as other:
        _, sql, params = _fire(store, "early", T0)
        await other.execute(sql, params)  # written, not committed
        await store.batch([_fire(store, "late", T0 + 10)])
        assert await feed.read() == [] and feed.waiting  # late waits for early's transaction
        await other.commit()
    resumed = ScheduleFeed(store, str(feed.position))
    assert _ticks(await _read(resumed)) == [("early", T0), ("late", T0 + 10)]
    assert _ticks(await _read(feed)) == [("early", T0), ("late", T0 + 10)]


async def test_a_fire_as_the_scheduler_answers_it_is_the_fire_stored(
    project: Path, agent: Agent
) -> None:
    """What ``fire_due`` and ``run_now`` return (what ``run-now`` and the API answer) says
    what the stored fire says: a queued run is ``queued`` on its thread, not ``deleted``."""
    agent("bot")
    with (project / "agentrunner.toml").open("a") as config:
        config.write('\n[schedules.ping]\nagent = "bot"\nevery = "10s"\nmessage = "ping"\n')
    now = [T0]
    ws = await open_workspace(project)
    try:
        ws.schedules.clock = lambda: now[0]
        feed = ScheduleFeed(ws.app.store)
        await feed.start()
        await ws.schedules.fire_due()
        now[0] = T0 + 10
        answered = await ws.schedules.fire_due()
        now[0] = T0 + 13
        answered.append(await ws.schedules.run_now("ping"))
        stored = [fire for _, fire in await _read(feed)]
        assert [f.to_dict()["outcome"] for f in answered] == ["queued", "queued"]
        assert all(f.thread_id and f.thread_id.startswith("bot-") for f in answered)
        fields = ("schedule", "tick", "outcome", "reason", "run_id", "missed", "thread_id")
        assert [{k: f.to_dict()[k] for k in fields} for f in answered] == [
            {k: f.to_dict()[k] for k in fields} for f in stored
        ]
    finally:
        await ws.close()
