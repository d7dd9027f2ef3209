"""Company sessions, journal entries and jobs: the same contract on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agentrunner.store import Store
from agentrunner.store.costs import today


async def test_one_active_session_at_a_time(store: Store) -> None:
    assert await store.company.active() is None
    first = await store.company.open_session("ceo", "ceo-t1")
    assert first is not None and (first.root_agent, first.thread_id) == ("ceo", "ceo-t1")
    assert first.ended_at is None
    assert await store.company.open_session("ceo", "ceo-t2") is None  # refused, nothing written
    assert await store.company.active() == first
    # two processes starting at once: one wins
    racing = await asyncio.gather(*(store.company.open_session("ceo", "x") for _ in range(3)))
    assert racing == [None, None, None]
    assert await store.company.end(first.id)
    assert not await store.company.end(first.id)  # ended once
    assert await store.company.active() is None
    ended = await store.company.get(first.id)
    assert ended is not None and ended.ended_at is not None
    second = await store.company.open_session("ceo", "ceo-t2")
    assert second is not None and second.id != first.id
    assert (await store.company.active()) == second


async def test_journal_entries_newest_first_one_per_brief_and_search(store: Store) -> None:
    session = await store.company.open_session("ceo", "ceo-t1")
    assert session is not None

    async def add(run_id: str, directive: str, summary: str) -> bool:
        return await store.company.add_entry(
            session_id=session.id,
            run_id=run_id,
            directive=directive,
            summary=summary,
            model="m",
            cost_micros=1200,
        )

    assert await add("run_1", "Plan the launch", "We planned a launch in May.")
    assert await add("run_2", "Hire 50% more", "Hiring_plan agreed: two engineers.")
    assert not await add("run_1", "again", "A second writer adds nothing.")
    entries = await store.company.entries(limit=10)
    assert [e.run_id for e in entries] == ["run_2", "run_1"]
    assert entries[1].summary == "We planned a launch in May."
    assert entries[1].to_dict()["cost_usd"] == 0.0012
    assert [e.run_id for e in await store.company.entries(limit=1)] == ["run_2"]
    assert [e.run_id for e in await store.company.entries(search="LAUNCH")] == ["run_1"]
    assert [e.run_id for e in await store.company.entries(search="50%")] == ["run_2"]
    assert await store.company.entries(search="5%0") == []  # % is literal
    assert [e.run_id for e in await store.company.entries(search="g_p")] == ["run_2"]
    assert await store.company.entries(search="gxp") == []  # _ is literal
    assert await store.company.entries(search="nothing like it") == []


async def test_jobs_are_root_runs_on_session_threads(store: Store) -> None:
    session = await store.company.open_session("ceo", "ceo-t1")
    assert session is not None
    await store.threads.open("ceo-t1", "ceo")
    request = {"kind": "direct", "message": "go", "company": {"kind": "brief"}}
    await store.batch(
        [
            store.company.brief_op(
                "run_a", agent_id="ceo", thread_id="ceo-t1", request=request, worker_id="h:1"
            ),
            store.runs.insert_op(
                run_id="run_child",
                agent_id="cto",
                thread_id="ceo-t1.cto",
                status="running",
                parent_run_id="run_a",
                depth=1,
            ),
            store.runs.insert_op(
                run_id="run_elsewhere", agent_id="ceo", thread_id="other", status="running"
            ),
        ]
    )
    jobs = await store.company.jobs()
    assert [(run.id, sid) for run, sid in jobs] == [("run_a", session.id)]
    assert jobs[0][0].worker_id == "h:1" and jobs[0][0].request == request
    assert jobs[0][0].status == "running"
    assert [row["id"] for row in await store.company.running_jobs()] == ["run_a"]
    assert [r.id for r in await store.company.children("run_a")] == ["run_child"]
    assert await store.company.children("run_child") == []
    assert await store.company.unjournaled(session.id) == []  # still running

    assert await store.company.fail_gone("run_a", "its process (pid 1) is gone")
    assert not await store.company.fail_gone("run_a", "again")
    failed = await store.runs.get("run_a")
    assert failed is not None and (failed.status, failed.error_code) == ("failed", "worker_lost")
    assert failed.error_message == "its process (pid 1) is gone"
    assert await store.company.running_jobs() == []

    await store.batch(
        [
            store.company.brief_op(
                "run_b", agent_id="ceo", thread_id="ceo-t1", request=request, worker_id="h:1"
            ),
            store.runs.finish_op("run_b", status="completed", stop_reason="end_turn"),
        ]
    )
    assert await store.company.unjournaled(session.id) == [("run_b", request)]
    await store.company.add_entry(
        session_id=session.id,
        run_id="run_b",
        directive="go",
        summary="s",
        model=None,
        cost_micros=0,
    )
    assert await store.company.unjournaled(session.id) == []


async def test_a_sessions_cost_is_its_briefs_and_their_delegations(store: Store) -> None:
    """The cost rows of the session's root runs and of their delegations at any depth; not
    another session's, not another thread's, not those of days before the session began."""
    from agentrunner.store.run_log import RunLog

    first = await store.company.open_session("ceo", "ceo-s1")
    assert first is not None
    day = today(first.started_at)
    tree = [
        ("run_1", "ceo", "ceo-s1", None, 1),
        ("run_1c", "cto", "ceo-s1.cto", "run_1", 1),
        ("run_1cc", "dev", "ceo-s1.cto.dev", "run_1c", 2),
        ("run_2", "ceo", "ceo-s1", None, 0),
        ("run_x", "ceo", "other", None, 0),
    ]
    for run_id, agent, thread, parent, depth in tree:
        await store.threads.open(thread, agent)
        await store.batch(
            [
                store.runs.insert_op(
                    run_id=run_id,
                    agent_id=agent,
                    thread_id=thread,
                    status="running",
                    parent_run_id=parent,
                    depth=depth,
                )
            ]
        )
    tokens = {"input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 0}
    tokens["cache_write_tokens"] = 0
    now = first.started_at
    for run_id, agent, micros in [
        ("run_1", "ceo", 100),
        ("run_1c", "cto", 20),
        ("run_1cc", "dev", 3),
        ("run_2", "ceo", 4000),
        ("run_x", "ceo", 900_000),
    ]:
        log = RunLog(store, run_id, agent)
        log.cost("x:m", tokens, micros, False, now)
        log.cost("x:m", tokens, None, False, now)  # a request of unknown price
        await log.flush()
    spent = await store.company.cost(first.id, day)
    assert (spent["requests"], spent["cost_micros"], spent["unknown"]) == (8, 4123, 4)
    assert (spent["input_tokens"], spent["output_tokens"]) == (80, 40)
    assert (await store.company.cost(first.id, "2999-01-01"))["requests"] == 0
    assert await store.company.end(first.id)
    second = await store.company.open_session("ceo", "ceo-s2")
    assert second is not None
    assert (await store.company.cost(second.id, day))["cost_micros"] == 0
    assert (await store.company.cost("no-such-session", day))["requests"] == 0


async def test_a_jobs_step_in_progress_is_not_a_cost_of_unknown_price(store: Store) -> None:
    """A running step has no cost yet: the job's cost is known so far. A finished step of
    unknown price makes it unknown."""
    from agentrunner.run.spend import run_spend
    from agentrunner.store.run_log import RunLog

    await store.threads.open("ceo-s1", "ceo")
    await store.batch(
        [store.runs.insert_op(run_id="run_1", agent_id="ceo", thread_id="ceo-s1", status="running")]
    )
    run = await store.runs.get("run_1")
    assert run is not None
    log = RunLog(store, "run_1", "ceo")
    usage = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }
    now = time.time()
    log.start_step(1, "x:m", now)
    log.cost("x:m", usage, 120, False, now)  # each request's cost row, as a run writes it
    log.finish_step("completed", "x:m", usage, 120, [], now)
    log.start_step(2, "x:m", now)
    await log.flush()
    running = await run_spend(store, run, split=True)
    assert (running.known, running.by_agent, running.tokens) == (True, {"ceo": 120}, 15)

    log.cost("x:m", usage, None, False, now)  # a model of unknown price
    log.finish_step("completed", "x:m", usage, None, [], now)
    await log.flush()
    finished = await run_spend(store, run, split=True)
    assert (finished.known, finished.by_agent, finished.tokens) == (False, {"ceo": 120}, 30)


async def test_what_a_run_spent_is_its_cost_rows_and_its_delegations_until_each_ended(
    store: Store,
) -> None:
    """``run_spend``: the cost rows of a run and of the runs it started (at any depth), no
    other run's, each made until its run ended — a title a delegation pays for once it has
    ended is not its caller's, before or after the caller ends; once the run has ended, its own
    total, and the split of its rows adds up to it."""
    from agentrunner.run.spend import run_spend, with_spend
    from agentrunner.store.run_log import RunLog

    usage = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }
    tree = [("boss", "run_b", None, 0), ("cto", "run_c", "run_b", 1), ("dev", "run_d", "run_c", 2)]
    await store.threads.open("t-boss", "boss")
    await store.threads.open("t-other", "other")
    await store.batch(
        [
            store.runs.insert_op(
                run_id=run_id,
                agent_id=agent_id,
                thread_id="t-boss",
                status="running",
                parent_run_id=parent,
                depth=depth,
            )
            for agent_id, run_id, parent, depth in tree
        ]
        + [
            store.runs.insert_op(
                run_id="run_o", agent_id="other", thread_id="t-other", status="running"
            )
        ]
    )

    async def charge(agent_id: str, run_id: str, model: str, *costs: int | None) -> None:
        log = RunLog(store, run_id, agent_id)
        for micros in costs:
            log.cost(model, usage, micros, False, time.time())
        await log.flush()

    async def of(run_id: str) -> Any:
        run = await store.runs.get(run_id)
        assert run is not None
        return run

    async def spent(run_id: str) -> int:
        return (await run_spend(store, await of(run_id))).micros

    await charge("boss", "run_b", "x:big", 100, 7)
    await charge("cto", "run_c", "x:small", 2_000)
    await charge("dev", "run_d", "x:big", 30_000)
    await charge("other", "run_o", "x:big", 400_000)
    assert [await spent(r) for r in ("run_b", "run_c", "run_o")] == [32_107, 32_000, 400_000]
    boss = await run_spend(store, await of("run_b"), split=True)
    assert boss.by_agent == {"boss": 107, "cto": 2_000, "dev": 30_000}  # as they first spent
    assert boss.by_model == {"x:big": 30_107, "x:small": 2_000}
    assert (boss.settled, boss.known, boss.tokens) == (False, True, 4 * 15)
    shown = await with_spend(store, await of("run_b"))
    assert (shown.cost_micros, shown.cost_known, shown.to_dict()["cost_usd"]) == (
        32_107,
        True,
        0.032107,
    )

    # the dev's run ends, then pays for its thread's title: not its callers' spend
    await store.batch([store.runs.finish_op("run_d", status="completed", stop_reason="end_turn")])
    await charge("dev", "run_d", "x:title", 5)
    assert [await spent(r) for r in ("run_b", "run_c")] == [32_107, 32_000]
    await charge("cto", "run_c", "x:big", None)  # a request of unknown price
    unknown = await run_spend(store, await of("run_b"))
    assert (unknown.micros, unknown.known) == (32_107, False)

    await store.batch(
        [
            store.runs.finish_op(
                "run_b",
                status="completed",
                stop_reason="end_turn",
                cost_micros=32_107,
                cost_known=False,
            )
        ]
    )
    await charge("boss", "run_b", "x:title", 9)  # its own title, once it has ended
    ended = await of("run_b")
    assert await with_spend(store, ended) is ended  # its own figures
    settled = await run_spend(store, ended, split=True)
    assert (settled.settled, settled.micros, settled.known) == (True, 32_107, False)
    assert sum(settled.by_agent.values()) == 32_107 and "x:title" not in settled.by_model
