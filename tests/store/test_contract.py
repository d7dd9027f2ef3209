"""The store contract: the same tests on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agentrunner.engine import AssistantMessage, ToolCall, ToolResult, UserMessage
from agentrunner.run.run_rows import RunRows
from agentrunner.store import RunLog, Store, open_store
from agentrunner.store.costs import today
from agentrunner.store.mailbox import NewRun


async def test_migrations_are_idempotent(store: Store, store_url: str) -> None:
    again = await open_store(store_url)
    await again.close()
    assert await store.threads.get("nope") is None


async def test_threads(store: Store) -> None:
    thread = await store.threads.open("t1", "ceo")
    assert (thread.id, thread.agent_id, thread.message_count, thread.title) == (
        "t1",
        "ceo",
        0,
        None,
    )
    assert (await store.threads.open("t1", "other")).agent_id == "ceo"
    assert await store.threads.set_title("t1", "Launch plan")
    assert not await store.threads.set_title("t1", "Overwritten?")
    assert (await store.threads.get("t1")).title == "Launch plan"  # type: ignore[union-attr]
    await store.threads.open("t2", "cto")
    assert [t.id for t in await store.threads.list(agent_id="cto")] == ["t2"]
    assert {t.id for t in await store.threads.list()} == {"t1", "t2"}


async def test_a_thread_opened_with_a_history_is_opened_once(store: Store) -> None:
    """Two requests opening one thread with a client's conversation at once (the
    OpenAI-compatible endpoint): one writes the history, the other finds the thread and writes
    nothing; a thread that exists keeps its own history."""
    said = [UserMessage("Draft a plan."), AssistantMessage(text="Plan: ship.")]
    other = [UserMessage("Something else."), AssistantMessage(text="Else.")]
    opened = await asyncio.gather(
        *(store.threads.open_with_history("t-ada", "ceo", said) for _ in range(5))
    )
    assert sorted(opened) == [False, False, False, False, True]
    assert not await store.threads.open_with_history("t-ada", "ceo", other)
    thread = await store.threads.get("t-ada")
    assert thread is not None and (thread.agent_id, thread.message_count) == ("ceo", 2)
    kept = [m.to_dict() for _, m, _, _ in await store.messages.page("t-ada")]
    assert kept == [{"role": "user", "content": "Draft a plan."}, said[1].to_dict()]
    assert await store.threads.open_with_history("t-bo", "cto", other)
    assert [m.to_dict() for _, m, _, _ in await store.messages.page("t-bo")] == [
        m.to_dict() for m in other
    ]


async def test_ids_starting_with_a_prefix(store: Store) -> None:
    """Prefixes are literal (no LIKE wildcards), results limited; runs the same as threads."""
    for thread_id in ("a_b1", "a%b", "axb", "a_b2", "ab", "é_1", "b"):
        await store.threads.open(thread_id, "ceo")
    starting = store.threads.ids_starting
    assert await starting("a_", 5) == ["a_b1", "a_b2"]
    assert await starting("a%", 5) == ["a%b"]
    assert await starting("a_b1", 5) == ["a_b1"]
    two = await starting("a", 2)  # which two depends on the database's collation
    assert len(two) == 2 and set(two) <= {"a_b1", "a%b", "axb", "a_b2", "ab"}
    assert await starting("é", 5) == ["é_1"]
    assert await starting("c", 5) == []
    await store.batch(
        [
            store.runs.insert_op(run_id=run_id, agent_id="ceo", thread_id="ab", status="running")
            for run_id in ("run_1a", "run_1b", "run_2")
        ]
    )
    assert await store.runs.ids_starting("run_1", 5) == ["run_1a", "run_1b"]
    assert await store.runs.ids_starting("run_2", 5) == ["run_2"]


async def test_ids_ending_with_a_suffix(store: Store) -> None:
    """What pages show of a run id is its end: ends are literal too, results limited."""
    await store.threads.open("t", "ceo")
    await store.batch(
        [
            store.runs.insert_op(run_id=run_id, agent_id="ceo", thread_id="t", status="running")
            for run_id in ("run_1a2b3c", "run_2a2b3c", "run_3%_b3c", "run_9zz", "é_b3c")
        ]
    )
    ending = store.runs.ids_ending
    assert await ending("a2b3c", 5) == ["run_1a2b3c", "run_2a2b3c"]
    assert await ending("1a2b3c", 5) == ["run_1a2b3c"]
    assert await ending("%_b3c", 5) == ["run_3%_b3c"]
    assert await ending("_b3c", 5) == ["run_3%_b3c", "é_b3c"]
    assert len(await ending("b3c", 2)) == 2
    assert await ending("9zz", 5) == ["run_9zz"]
    assert await ending("run_9zz", 5) == ["run_9zz"]  # the whole id is its own end
    assert await ending("xrun_9zz", 5) == []  # longer than any id
    assert await ending("zz9", 5) == []


async def test_listing_an_agents_threads_finds_them_beyond_the_recent_ones(store: Store) -> None:
    """A listing by agent looks among the most recently updated threads first; an agent whose
    threads are all older than those still gets its newest, in order, page by page."""
    for n in range(3):
        await store.threads.open(f"quiet{n}", "quiet")
    for n in range(25):  # more than a one-thread page's recent scan
        await store.threads.open(f"busy{n}", "busy")
    assert [t.id for t in await store.threads.list(agent_id="quiet", limit=1)] == ["quiet2"]
    page = await store.threads.list(agent_id="quiet", limit=2)
    assert [t.id for t in page] == ["quiet2", "quiet1"]
    rest = await store.threads.list(agent_id="quiet", before=page[-1].updated_at, limit=2)
    assert [t.id for t in rest] == ["quiet0"]
    assert [t.id for t in await store.threads.list(agent_id="busy", limit=2)] == [
        "busy24",
        "busy23",
    ]
    assert await store.threads.list(agent_id="nobody", limit=1) == []
    assert len(await store.threads.list(limit=100)) == 28


async def test_listing_an_agents_threads_never_reads_every_thread(store: Store) -> None:
    """The recent scan walks threads_updated and stops; the fallback reads the agent's own."""
    if store.dialect != "sqlite":
        pytest.skip("PostgreSQL plans by its statistics; the SQLite plan is fixed")
    params = {"agent_id": "a", "before": 1e12, "limit": 50, "scan": 1000}
    for query, index in (
        ("thread_list_agent_recent", "threads_updated"),
        ("thread_list_agent", "threads_agent"),
    ):
        plan = await store.driver.fetch_all(f"EXPLAIN QUERY PLAN {store.sql[query]}", params)
        details = [row["detail"] for row in plan]
        assert not any(d.startswith("SCAN threads") for d in details), (query, details)
        assert any(d.startswith(f"SEARCH threads USING INDEX {index}") for d in details), details


async def test_what_summarises_history_reads_an_index_or_a_total(store: Store) -> None:
    """The team page and the costs page grew with history (issue 47: the team page 35 to 129
    ms over a 20-minute soak) where a query read every run or every cost row: each now reads a
    running total or an index, however much history is held."""
    if store.dialect != "sqlite":
        pytest.skip("PostgreSQL plans by its statistics; the SQLite plan is fixed")
    params = {
        "agent_id": "a",
        "day": "2030-01-01",
        "since": "2030-01-01",
        "now": 0.0,
        "limit": 50,
        "id": "x",
        "run_id": "r",
        "micros": 1,
        "expires_at": 1.0,
        "agent_limit": 1,
        "all_limit": 1,
    }
    for query in (
        "cost_summary",
        "cost_spent",
        "budget_spent",
        "budget_hold",
        "agent_last_run",
        "company_jobs",
        "mailbox_depths",
        "schedule_fires_last",
    ):
        plan = await store.driver.fetch_all(f"EXPLAIN QUERY PLAN {store.sql[query]}", params)
        details = [row["detail"] for row in plan]
        scans = r"SCAN (runs|costs|r|cost_totals|f|schedule_fires)\b"
        assert not any(re.match(scans, d) for d in details), (query, details)
        assert not any(" costs " in f" {d} " for d in details), (query, details)
    # [retention] walks the settled runs in the order they settled, from where it stopped
    plan = await store.driver.fetch_all(
        f"EXPLAIN QUERY PLAN {store.sql['retention_runs']}",
        {"after_at": 0.0, "after_id": "", "until": 1e12, "batch": 200},
    )
    assert plan[0]["detail"].startswith("SEARCH r USING INDEX runs_settled"), plan
    assert not any("TEMP B-TREE" in row["detail"] for row in plan), plan
    # an index read of one row per status, not every run of the agent sorted
    plan = await store.driver.fetch_all(f"EXPLAIN QUERY PLAN {store.sql['agent_last_run']}", params)
    searches = [row["detail"] for row in plan if row["detail"].startswith("SEARCH runs")]
    assert len(searches) == 4, searches


async def test_an_agents_last_run_is_its_running_one_else_its_newest(store: Store) -> None:
    """``AgentStates.get``: working while a run of it runs (even an older one), else what its
    newest settled run came to, whichever the status."""
    await store.threads.open("t", "a")
    made = time.time()
    for n, (run_id, status) in enumerate(
        (("r1", "completed"), ("r2", "failed"), ("r3", "cancelled"), ("r4", "completed"))
    ):
        await store.batch(
            [store.runs.insert_op(run_id=run_id, agent_id="a", thread_id="t", status="running")]
        )
        await store.driver.execute(
            f"UPDATE runs SET created_at = {made + n} WHERE id = '{run_id}'", {}
        )
        await store.batch([store.runs.finish_op(run_id, status=status, stop_reason="end_turn")])
    state = await store.agent_states.get("a")
    assert (state.status, state.last_run_id) == ("idle", "r4")
    await store.driver.execute(f"UPDATE runs SET created_at = {made + 9} WHERE id = 'r2'", {})
    state = await store.agent_states.get("a")
    assert (state.status, state.last_run_id) == ("error", "r2")
    await store.driver.execute("UPDATE runs SET status = 'running' WHERE id = 'r1'", {})
    state = await store.agent_states.get("a")
    assert (state.status, state.current_run_id) == ("working", "r1")
    assert (await store.agent_states.get("b")).status == "idle"


async def test_messages_round_trip_and_recent_window(store: Store) -> None:
    await store.threads.open("t", "a")
    history = [
        UserMessage("hi"),
        AssistantMessage(
            tool_calls=[ToolCall("c1", "get_weather", {"city": "Paris"})], model="m", provider="p"
        ),
        ToolResult("c1", "get_weather", "Sunny", is_error=False),
        AssistantMessage("It is sunny."),
    ]
    await store.batch(
        [
            *store.messages.append_ops("t", 1, history, "r1"),
            store.threads.manifest_op("t", message_count=4, session_run_id="r1"),
        ]
    )
    assert (await store.messages.tail("t", 10))[0] == history
    assert (await store.messages.tail("t", 2))[0] == history[2:]
    assert await store.messages.tail("t", 2) == (history[2:], 4)
    assert await store.messages.tail("t", 0) == ([], 4)
    assert await store.messages.tail("empty", 5) == ([], 0)
    page = await store.messages.page("t", after=1, limit=2)
    assert [seq for seq, *_ in page] == [2, 3]
    thread = await store.threads.get("t")
    assert thread is not None and thread.message_count == 4 and thread.session_run_id == "r1"


async def test_a_threads_summary_and_the_messages_after_it(store: Store) -> None:
    """Compaction's rows: each summary kept, the newest the thread's; the messages after a
    summary point read newest first, and the pages before them."""
    from agentrunner.store.records import ThreadSummary

    await store.threads.open("t", "a")
    await store.threads.open("other", "a")
    said = [UserMessage(f"message {n}") for n in range(1, 11)]
    await store.batch(store.messages.append_ops("t", 1, said, "r1"))
    assert await store.threads.summary("t") is None
    assert (await store.threads.get("t")).summary_through == 0  # type: ignore[union-attr]

    first = ThreadSummary("t", 4, "Four messages.", "x:m", "r2", 1, 120, 1000.0)
    await store.batch(store.threads.summary_ops(first))
    assert await store.threads.summary("t") == first
    assert [t.summary_through for t in await store.threads.list()] in ([4, 0], [0, 4])
    assert await store.messages.tail("t", 3, after=4) == (said[7:], 10)
    assert await store.messages.tail("t", 100, after=4) == (said[4:], 10)
    assert await store.messages.tail("t", 100, after=10) == ([], 10)  # none after: its last
    assert await store.messages.before("t", 8, 2, after=4) == said[5:7]
    assert await store.messages.before("t", 7, 100, after=4) == said[4:6]
    assert await store.messages.before("t", 5, 100, after=4) == []

    second = ThreadSummary("t", 8, "Eight messages.", "x:m", "r3", 2, None, 1001.0)
    await store.batch(store.threads.summary_ops(second))
    stale = ThreadSummary("t", 6, "Older, written late.", "x:m", "r4", 1, 5, 1002.0)
    await store.batch(store.threads.summary_ops(stale))
    assert await store.threads.summary("t") == second  # the newest is the one furthest on
    assert (await store.threads.get("t")).summary_through == 8  # type: ignore[union-attr]
    assert await store.threads.summary("other") is None
    assert second.to_dict() == {
        "through_seq": 8,
        "summary": "Eight messages.",
        "model": "x:m",
        "run_id": "r3",
        "requests": 2,
        "cost_usd": None,
        "created_at": 1001.0,
    }
    await store.driver.execute("DELETE FROM threads WHERE id = 't'", {})
    assert await store.threads.summary("t") is None  # kept with the thread, gone with it


def run_log(store: Store, run_id: str, agent_id: str, forward: Any = None) -> RunLog:
    """A run's log whose events imply their rows, as a run's are (``RunRows``)."""
    return RunRows(store, run_id, agent_id, forward).log


def _cost(
    model: str, micros: int | None, attempt: int = 1, input_tokens: int = 1, output_tokens: int = 1
) -> dict[str, object]:
    return {
        "model": model,
        "attempt": attempt,
        "outcome": "ok",
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "cost_micros": micros,
        "cost_known": micros is not None,
        "estimated": False,
        "cumulative_cost_micros": micros or 0,
    }


async def test_run_log_records_the_whole_story(store: Store) -> None:
    await store.threads.open("t", "a")
    await store.batch(
        [store.runs.insert_op(run_id="r1", agent_id="a", thread_id="t", status="running")]
    )
    forwarded: list[str] = []
    log = run_log(store, "r1", "a", lambda kind, data: forwarded.append(kind))
    log.message("system_message", "You are helpful.")
    log.message("user_message", "Weather?")
    log.emit("step.started", {"step": 1, "model": "x:m"})
    log.emit("agent.token", {"token": "hm", "model": "x:m"})
    log.emit("cost.updated", _cost("x:m", 30, input_tokens=10, output_tokens=5))
    log.emit(
        "agent.tool_call",
        {"call_id": "c1", "name": "get_weather", "input": {"city": "Oslo"}, "model": "x:m"},
    )
    await log.flush()  # durable before the tool runs
    assert [m.message_type for m in await store.runs.messages("r1")][-1] == "tool_call_message"
    log.emit(
        "agent.tool_result",
        {
            "call_id": "c1",
            "name": "get_weather",
            "success": True,
            "is_error": False,
            "output_summary": "Cold",
            "output": "Cold",
        },
    )
    log.emit("step.started", {"step": 2, "model": "x:m"})
    log.emit("cost.updated", _cost("x:m", None, attempt=2, input_tokens=20, output_tokens=3))
    log.emit("agent.message", {"text": "Cold in Oslo.", "model": "x:m"})
    await log.flush()
    await store.batch(
        [
            store.runs.finish_op(
                "r1",
                status="completed",
                stop_reason="end_turn",
                model="x:m",
                usage={"input_tokens": 30},
                cost_micros=30,
                cost_known=False,
            )
        ]
    )
    run = await store.runs.get("r1")
    assert run is not None and (run.status, run.stop_reason, run.cost_known) == (
        "completed",
        "end_turn",
        False,
    )
    steps = await store.runs.steps("r1")
    assert [(s.step_number, s.status, s.cost_micros) for s in steps] == [
        (1, "completed", 30),
        (2, "completed", None),
    ]
    kinds = [m.message_type for m in await store.runs.messages("r1")]
    assert kinds == [
        "system_message",
        "user_message",
        "tool_call_message",
        "tool_return_message",
        "assistant_message",
    ]
    call = (await store.runs.messages("r1"))[2]
    assert (
        call.tool_input == {"city": "Oslo"}
        and call.tool_call_id == "c1"
        and call.step_id == steps[0].id
    )
    events = await store.events.list("r1")
    assert [e.seq for e in events] == list(range(1, 9))
    assert [e.type for e in await store.events.list("r1", after=6)] == [
        "cost.updated",
        "agent.message",
    ]
    assert forwarded[0] == "step.started" and len(forwarded) == 8
    assert await store.costs.spent_today("a") == 30
    assert await store.costs.spent_today() == 30
    [summary] = await store.costs.summary(since="2000-01-01")
    assert (summary["agent_id"], summary["requests"], summary["unknown"]) == ("a", 2, 1)
    # Integers on both back ends (PostgreSQL's SUM of a BIGINT is a numeric: Decimal).
    counts = ("requests", "input_tokens", "output_tokens", "cost_micros", "unknown")
    assert {key: type(summary[key]) for key in counts} == dict.fromkeys(counts, int)
    assert summary["cost_micros"] == 30


async def test_a_run_log_records_events_and_does_not_interpret_them(store: Store) -> None:
    """What an event means for the run's other rows is its reader's to say (``RunRows``): a
    bare log writes the events, and only the rows it is told to."""
    await store.threads.open("t", "a")
    await store.batch(
        [store.runs.insert_op(run_id="r1", agent_id="a", thread_id="t", status="running")]
    )
    log = RunLog(store, "r1", "a")
    log.emit("step.started", {"step": 1, "model": "x:m"})
    log.emit("cost.updated", _cost("x:m", 30))
    log.emit("agent.tool_call", {"call_id": "c1", "name": "f", "input": {}, "model": "x:m"})
    log.emit("agent.message", {"text": "Done.", "model": "x:m"})
    await log.flush()
    assert [e.type for e in await store.events.list("r1")] == [
        "step.started",
        "cost.updated",
        "agent.tool_call",
        "agent.message",
    ]
    assert await store.runs.steps("r1") == []
    assert await store.runs.messages("r1") == []
    assert await store.costs.spent_today("a") == 0
    log.start_step(1, "x:m", time.time())  # told: the rows are written
    log.run_message("assistant_message", "Done.", time.time())
    tokens = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    log.cost("x:m", dict.fromkeys(tokens, 1), 30, False, time.time())
    await log.flush()
    [step] = await store.runs.steps("r1")
    assert (step.step_number, step.status, step.model_id) == (1, "running", "x:m")
    [message] = await store.runs.messages("r1")
    assert (message.message_type, message.content, message.step_id) == (
        "assistant_message",
        "Done.",
        step.id,
    )
    assert await store.costs.spent_today("a") == 30


async def test_deltas_are_stored_merged_and_forwarded_one_by_one(store: Store) -> None:
    await store.threads.open("t", "a")
    await store.batch(
        [store.runs.insert_op(run_id="r1", agent_id="a", thread_id="t", status="running")]
    )
    forwarded: list[tuple[str, dict[str, object]]] = []
    log = RunLog(store, "r1", "a", lambda kind, data: forwarded.append((kind, data)))
    for text in ("Let ", "me ", "think."):
        log.emit("agent.thinking", {"text": text, "model": "x:m"})
    for token in ("It ", "is "):
        log.emit("agent.token", {"token": token, "model": "x:m"})
    log.emit("agent.token", {"token": "cold", "model": "x:other"})  # a fallback model's stream
    await log.flush()
    log.emit("agent.token", {"token": ".", "model": "x:other"})  # after a write: a new row
    log.emit("agent.message", {"text": "It is cold.", "model": "x:other"})
    await log.flush()
    events = await store.events.list("r1")
    assert [(e.seq, e.type, e.payload) for e in events] == [
        (1, "agent.thinking", {"text": "Let me think.", "model": "x:m"}),
        (2, "agent.token", {"token": "It is ", "model": "x:m"}),
        (3, "agent.token", {"token": "cold", "model": "x:other"}),
        (4, "agent.token", {"token": ".", "model": "x:other"}),
        (5, "agent.message", {"text": "It is cold.", "model": "x:other"}),
    ]
    assert [kind for kind, _ in forwarded].count("agent.token") == 4
    assert forwarded[0] == ("agent.thinking", {"text": "Let ", "model": "x:m"})


async def test_daily_spend_is_kept_per_agent_and_day(store: Store, store_url: str) -> None:
    await store.threads.open("t", "a")
    for run_id, agent_id in (("r1", "a"), ("r2", "b")):
        await store.batch(
            [
                store.runs.insert_op(
                    run_id=run_id, agent_id=agent_id, thread_id="t", status="running"
                )
            ]
        )
    a, b = run_log(store, "r1", "a"), run_log(store, "r2", "b")
    a.emit("cost.updated", _cost("x:m", 30))
    a.emit("cost.updated", _cost("x:m", None, attempt=2))  # unknown: counted as nothing
    b.emit("cost.updated", _cost("x:m", 0))
    await a.flush()
    await b.flush()
    b.emit("cost.updated", _cost("x:n", 12))
    a.emit("cost.updated", _cost("x:m", 5))
    await b.flush()
    await a.flush()
    assert await store.costs.spent_today("a") == 35
    assert await store.costs.spent_today("b") == 12
    assert await store.costs.spent_today("c") == 0
    assert await store.costs.spent_today() == 47
    # A database from before the totals existed gets them from its cost rows.
    summary = await store.costs.summary(since=today())
    await store.driver.execute("DROP TABLE cost_totals", {})
    await store.driver.execute("CREATE TABLE cost_days (day TEXT, agent_id TEXT)", {})
    await store.driver.execute("DELETE FROM schema_migrations WHERE version = 28", {})
    migrated = await open_store(store_url)
    try:
        assert await migrated.costs.spent_today("a") == 35
        assert await migrated.costs.spent_today() == 47
        assert await migrated.costs.summary(since=today()) == summary
    finally:
        await migrated.close()


async def test_the_day_totals_are_the_sums_of_the_cost_rows(store: Store) -> None:
    """Every report reads the running totals (cost_totals), never the cost rows: over many
    requests of several agents, models and days, priced, free and of unknown price, with
    prompt-cache tokens, each total is what summing the rows gives, and a budget check's
    figure the day's money."""
    import random

    chance = random.Random(47)
    await store.threads.open("t", "a")
    logs = {}
    for agent_id in ("a", "b", "c"):
        run_id = f"r_{agent_id}"
        await store.batch(
            [
                store.runs.insert_op(
                    run_id=run_id, agent_id=agent_id, thread_id="t", status="running"
                )
            ]
        )
        logs[agent_id] = RunLog(store, run_id, agent_id)
    midnight = datetime(2030, 5, 2, tzinfo=UTC).timestamp()
    for n in range(600):
        log = logs[chance.choice("abc")]
        usage = {
            "input_tokens": chance.randrange(5000),
            "output_tokens": chance.randrange(900),
            "cache_read_tokens": chance.randrange(3) * chance.randrange(2000),
            "cache_write_tokens": chance.randrange(2) * chance.randrange(500),
        }
        micros = chance.choice([None, 0, chance.randrange(1, 90_000)])
        when = midnight + chance.uniform(-3 * 86_400, 86_400)
        log.cost(chance.choice(["x:m", "x:n", "y:o"]), usage, micros, n % 7 == 0, when)
        if n % 50 == 49:
            await log.flush()
    for log in logs.values():
        await log.flush()
    raw = await store.driver.fetch_all(
        "SELECT day, agent_id, model, input_tokens, output_tokens, cache_read_tokens, "
        "cache_write_tokens, cost_micros FROM costs",
        {},
    )
    assert len(raw) == 600
    expected: dict[tuple[str, str, str], dict[str, int]] = {}
    for row in raw:
        total = expected.setdefault(
            (row["day"], row["agent_id"], row["model"]),
            dict.fromkeys(
                (
                    "requests",
                    "input_tokens",
                    "output_tokens",
                    "cache_read_tokens",
                    "cache_write_tokens",
                    "cost_micros",
                    "unknown",
                    "priced_cache_read_tokens",
                    "priced_cache_write_tokens",
                ),
                0,
            ),
        )
        priced = row["cost_micros"] is not None
        total["requests"] += 1
        for key in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
            total[key] += int(row[key])
        total["cost_micros"] += int(row["cost_micros"] or 0)
        total["unknown"] += 0 if priced else 1
        total["priced_cache_read_tokens"] += int(row["cache_read_tokens"]) if priced else 0
        total["priced_cache_write_tokens"] += int(row["cache_write_tokens"]) if priced else 0
    found = {
        (r["day"], r["agent_id"], r["model"]): {
            key: r[key] for key in next(iter(expected.values()))
        }
        for r in await store.costs.summary(since="2030-01-01")
    }
    assert found == expected
    assert len({day for day, _, _ in found}) == 4  # the days apart, not one sum
    day = "2030-05-01"
    assert await store.driver.fetch_one(
        store.sql["budget_spent"], {"day": day, "agent_id": "b", "now": 0.0}
    ) == {
        "agent_spent": sum(
            t["cost_micros"] for (d, a, _), t in expected.items() if (d, a) == (day, "b")
        ),
        "agent_held": 0,
        "all_spent": sum(t["cost_micros"] for (d, _, _), t in expected.items() if d == day),
        "all_held": 0,
    }


async def test_cost_summary_splits_days_at_utc_midnight_per_agent_and_model(
    store: Store,
) -> None:
    """``Costs.summary``, which every spend figure is read from: per UTC day, agent and model,
    from a day on, of one agent or all; a request a millisecond before midnight (UTC) is the
    day before's, one at midnight the new day's."""
    midnight = datetime(2030, 5, 2, tzinfo=UTC).timestamp()
    await store.threads.open("t", "a")
    for run_id, agent_id in (("r1", "a"), ("r2", "b")):
        await store.batch(
            [
                store.runs.insert_op(
                    run_id=run_id, agent_id=agent_id, thread_id="t", status="running"
                )
            ]
        )
    tokens = {"input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 0}
    a, b = RunLog(store, "r1", "a"), RunLog(store, "r2", "b")
    a.cost("x:m", {**tokens, "cache_write_tokens": 0}, 100, False, midnight - 0.001)
    a.cost("x:m", {**tokens, "cache_write_tokens": 0}, 20, False, midnight)
    a.cost("x:n", {**tokens, "cache_write_tokens": 0}, 3, False, midnight + 86_399)
    a.cost("x:n", {**tokens, "cache_write_tokens": 0}, None, False, midnight + 60)  # unknown
    b.cost("x:m", {**tokens, "cache_write_tokens": 0}, 7, False, midnight + 1)
    b.cost("x:m", {**tokens, "cache_write_tokens": 0}, 1000, False, midnight - 86_401)
    await a.flush()
    await b.flush()

    def rows(found: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [
            (r["day"], r["agent_id"], r["model"], r["requests"], r["cost_micros"], r["unknown"])
            for r in found
        ]

    assert rows(await store.costs.summary(since="2030-05-01")) == [
        ("2030-05-02", "a", "x:m", 1, 20, 0),
        ("2030-05-02", "a", "x:n", 2, 3, 1),
        ("2030-05-02", "b", "x:m", 1, 7, 0),
        ("2030-05-01", "a", "x:m", 1, 100, 0),
    ]
    assert rows(await store.costs.summary(since="2030-05-02", agent_id="a")) == [
        ("2030-05-02", "a", "x:m", 1, 20, 0),
        ("2030-05-02", "a", "x:n", 2, 3, 1),
    ]
    assert rows(await store.costs.summary(since="2030-04-01", agent_id="b")) == [
        ("2030-05-02", "b", "x:m", 1, 7, 0),
        ("2030-04-30", "b", "x:m", 1, 1000, 0),
    ]
    assert await store.costs.summary(since="2030-05-03") == []
    [row] = await store.costs.summary(since="2030-05-02", agent_id="b")
    counts = ("requests", "input_tokens", "output_tokens", "cost_micros", "unknown")
    assert {key: type(row[key]) for key in counts} == dict.fromkeys(counts, int)


async def test_steps_and_run_messages_survive_their_rekeying(
    store_url: str, tmp_path: Path
) -> None:
    """Migration 9 rebuilds run_steps and run_messages (keyed by run, no step foreign key): a
    database written before it keeps every row, and deleting a run still takes both along."""
    from agentrunner.store.drivers import open_driver
    from agentrunner.store.sql import SqlSet, _render, load_sql

    if store_url.startswith("sqlite"):
        url, drop = f"sqlite:///{tmp_path / 'v8.db'}", None
    else:
        import psycopg

        with psycopg.connect(store_url, autocommit=True) as conn:
            conn.execute('DROP DATABASE IF EXISTS "agentrunner_v8" WITH (FORCE)')
            conn.execute('CREATE DATABASE "agentrunner_v8"')
        url, drop = store_url.rsplit("/", 1)[0] + "/agentrunner_v8", store_url
    try:
        driver = await open_driver(url)
        sql = await asyncio.to_thread(
            load_sql, "postgres" if driver.dialect == "postgres" else "sqlite"
        )
        await driver.migrate(SqlSet(sql.dialect, sql.queries, sql.migrations[:8]))
        # Cost rows as version 8 wrote them: migration 10 added their `estimated` column.
        v8_cost = sql["cost_insert"].replace(", estimated", "", 1)
        v8_cost = v8_cost.replace(", :estimated", "").replace(", %(estimated)s", "")
        # … and migration 13 the runs' `trace_id`.
        v8_run = sql["run_insert"].replace(", trace_id", "", 1)
        v8_run = v8_run.replace(", :trace_id", "").replace(", %(trace_id)s", "")
        # … and migration 18 their `thread_order`.
        v8_run = re.sub(r",\s*thread_order\)", ")", v8_run, count=1)
        v8_run = re.sub(r",\s*CASE WHEN .*?END\)", ")", v8_run, count=1, flags=re.S)
        # … and migration 15 the threads' `summary_through`.
        v8_thread = sql["thread_get"].replace(", summary_through", "", 1)
        # … and migration 19 their `waiting_run_id`.
        v8_thread = v8_thread.replace(", waiting_run_id", "", 1)
        # … and migration 24 their `forked_from` and `forked_at`.
        v8_thread = re.sub(r",\s*forked_from, forked_at", "", v8_thread, count=1)
        # … and migration 28 made cost_days each day's totals per model.
        v8_total = _render(
            "INSERT INTO cost_days (day, agent_id, micros) VALUES (:day, :agent_id, :micros) "
            "ON CONFLICT (day, agent_id) DO UPDATE SET micros = cost_days.micros + excluded.micros",
            sql.dialect,
        )
        v8 = {
            **sql.queries,
            "cost_insert": v8_cost,
            "cost_total_add": v8_total,
            "run_insert": v8_run,
            "thread_get": v8_thread,
        }
        old = Store(driver, SqlSet(sql.dialect, v8, []))
        await old.threads.open("t", "a")
        await old.batch(
            [old.runs.insert_op(run_id="r1", agent_id="a", thread_id="t", status="running")]
        )
        log = run_log(old, "r1", "a")
        log.message("user_message", "Weather?")
        log.emit("step.started", {"step": 1, "model": "x:m"})
        await log.flush()  # the step's insert is written; its finish will be an update
        log.emit("cost.updated", _cost("x:m", 0))
        log.emit("agent.tool_call", {"call_id": "c1", "name": "f", "input": {}, "model": "x:m"})
        log.emit("step.started", {"step": 2, "model": "x:m"})
        log.emit("agent.message", {"text": "Cold", "model": "x:m"})
        await log.flush()
        before = (await old.runs.steps("r1"), await old.runs.messages("r1"))
        await old.close()

        new = await open_store(url)
        try:
            steps, messages = await new.runs.steps("r1"), await new.runs.messages("r1")
            assert (steps, messages) == before
            assert [(s.step_number, s.status) for s in steps] == [(1, "completed"), (2, "running")]
            assert [m.step_id for m in messages] == [None, steps[0].id, steps[1].id]
            await new.batch(
                [new.runs.insert_op(run_id="r2", agent_id="a", thread_id="t", status="running")]
            )
            log = run_log(new, "r2", "a")  # a step finished by an update after the upgrade
            log.emit("step.started", {"step": 1, "model": "x:m"})
            await log.flush()
            log.emit("cost.updated", _cost("x:m", 0))
            await log.flush()
            assert [s.status for s in await new.runs.steps("r2")] == ["completed"]
            await new.driver.execute("DELETE FROM runs WHERE id = 'r1'", {})
            assert await new.runs.steps("r1") == []
            assert await new.runs.messages("r1") == []
        finally:
            await new.close()
    finally:
        if drop is not None:
            import psycopg

            with psycopg.connect(drop, autocommit=True) as conn:
                conn.execute('DROP DATABASE IF EXISTS "agentrunner_v8" WITH (FORCE)')


async def test_runs_listing(store: Store) -> None:
    statuses = ["created", "running", "completed", "failed", "cancelled", "completed", "running"]
    for n, status in enumerate(statuses):
        await store.batch(
            [
                store.runs.insert_op(
                    run_id=f"r{n}",
                    agent_id="a" if n % 3 else "b",
                    thread_id="t" if n % 2 else "u",
                    status=status,
                )
            ]
        )
        await asyncio.sleep(0.01)
    newest_first = [f"r{n}" for n in reversed(range(len(statuses)))]
    assert [r.id for r in await store.runs.list()] == newest_first
    assert [r.id for r in await store.runs.list(agent_id="a")] == ["r5", "r4", "r2", "r1"]
    assert [r.id for r in await store.runs.list(thread_id="t")] == ["r5", "r3", "r1"]
    assert [r.id for r in await store.runs.list(agent_id="b", thread_id="t")] == ["r3"]
    assert [r.id for r in await store.runs.list(limit=2)] == ["r6", "r5"]
    newest = await store.runs.list(limit=3)
    assert [r.id for r in await store.runs.list(before=newest[-1].created_at)] == newest_first[3:]
    assert [r.id for r in await store.runs.list(agent_id="a", limit=1)] == ["r5"]


async def test_listing_runs_never_reads_them_all(store: Store) -> None:
    """A long-lived project has millions of runs: each listing walks an index, newest first."""
    if store.dialect != "sqlite":
        pytest.skip("PostgreSQL plans by its statistics; the SQLite plan is fixed")
    params = {"agent_id": "a", "thread_id": "t", "status": "running", "before": 1e12, "limit": 50}
    for query in ("run_list_status", "run_list_agent_status", "run_list_thread"):
        plan = await store.driver.fetch_all(f"EXPLAIN QUERY PLAN {store.sql[query]}", params)
        details = [row["detail"] for row in plan]
        assert not any(d.startswith("SCAN runs") for d in details), (query, details)
        assert any(d.startswith("SEARCH runs USING") for d in details), (query, details)


async def test_memory_notes_agent_state(store: Store) -> None:
    await store.memory.seed("a", {"human": "unknown", "persona": "kind"})
    await store.memory.set("a", "human", "likes tea")
    await store.memory.seed("a", {"human": "reset?"})
    assert await store.memory.blocks("a") == {"human": "likes tea", "persona": "kind"}
    await store.notes.upsert("a", "plan", "The plan", "Step 1")
    note = await store.notes.get("a", "plan")
    assert note is not None and note.body == "Step 1"
    assert [n.slug for n in await store.notes.list("a")] == ["plan"]
    await store.agent_states.set_current_thread("a", "t9")
    state = await store.agent_states.get("a")
    assert (state.current_thread_id, state.status, state.current_run_id) == ("t9", "idle", None)
    await store.batch(
        [store.runs.insert_op(run_id="r1", agent_id="a", thread_id="t9", status="running")]
    )
    state = await store.agent_states.get("a")
    assert (state.status, state.current_run_id) == ("working", "r1")
    await store.batch([store.runs.finish_op("r1", status="failed", stop_reason="error")])
    state = await store.agent_states.get("a")
    assert (state.status, state.current_run_id, state.last_run_id) == ("error", None, "r1")
    await store.batch(
        [
            store.runs.insert_op(run_id="r2", agent_id="a", thread_id="t9", status="running"),
            store.runs.finish_op("r2", status="cancelled", stop_reason="cancelled"),
        ]
    )
    state = await store.agent_states.get("a")  # stopped by a person or a kill: free again
    assert (state.status, state.current_run_id, state.last_run_id) == ("idle", None, "r2")
    await store.batch(
        [
            store.runs.insert_op(run_id="r3", agent_id="a", thread_id="t9", status="running"),
            store.runs.finish_op("r3", status="completed", stop_reason="end_turn"),
        ]
    )
    assert (await store.agent_states.get("a")).status == "idle"


async def test_thread_lock_is_fifo_across_stores(store: Store, store_url: str) -> None:
    other = await open_store(store_url, lock_lease_s=2.0)  # another connection, as another process
    order: list[str] = []

    async def hold(s: Store, name: str, delay: float) -> None:
        await asyncio.sleep(delay)
        async with s.locks.hold("t"):
            order.append(f"{name}+")
            await asyncio.sleep(0.05)
            order.append(f"{name}-")

    await asyncio.gather(
        hold(store, "a", 0), hold(other, "b", 0.01), hold(store, "c", 0.02), hold(other, "d", 0.03)
    )
    await other.close()
    assert order == ["a+", "a-", "b+", "b-", "c+", "c-", "d+", "d-"]


async def test_an_uncontended_lock_writes_no_row_on_sqlite(store: Store, store_url: str) -> None:
    """On SQLite a thread nobody waits for is held by its byte in the lock file alone; a second
    store (another process) still has to wait for it, queued with a ticket."""
    other = await open_store(store_url, lock_lease_s=2.0)
    count = "SELECT COUNT(*) AS n FROM thread_locks"
    order: list[str] = []

    async def second() -> None:
        async with other.locks.hold("t"):
            order.append("second")

    try:
        async with store.locks.hold("t") as held:
            rows = await store.driver.fetch_one(count, {})
            assert rows is not None
            assert rows["n"] == (0 if store.dialect == "sqlite" else 1)
            assert (held.ticket is None) == (store.dialect == "sqlite")
            waiter = asyncio.ensure_future(second())
            await asyncio.sleep(0.1)
            assert order == []  # excluded without a row to see
            order.append("first")
        await asyncio.wait_for(waiter, 5)
    finally:
        await other.close()
    assert order == ["first", "second"]
    assert (await store.driver.fetch_one(count, {}) or {}).get("n") == 0


async def test_a_killed_process_holding_a_thread_frees_it_at_once(
    store: Store, store_url: str
) -> None:
    import subprocess
    import sys

    async def take(s: Store) -> None:
        async with s.locks.hold("t"):
            pass

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import asyncio, sys\n"
            "from agentrunner.store import open_store\n"
            "async def main():\n"
            f"    store = await open_store({store_url!r})\n"
            "    async with store.locks.hold('t'):\n"
            "        print('held', flush=True)\n"
            "        await asyncio.sleep(60)\n"
            "asyncio.run(main())\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        waiter = asyncio.ensure_future(take(store))
        await asyncio.sleep(0.2)
        assert not waiter.done()
        holder.kill()
        holder.wait()
        start = time.monotonic()
        await asyncio.wait_for(waiter, 5)
        assert time.monotonic() - start < 1.5
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


async def test_an_expired_lease_frees_the_thread(store: Store) -> None:
    # A ticket left by a process on another machine that died: only its lease can free it.
    await store.driver.execute(
        store.sql["lock_enqueue"],
        {"thread_id": "t", "ticket": 1, "owner": "elsewhere:1:x", "expires_at": time.time() + 0.3},
    )
    start = time.monotonic()
    async with store.locks.hold("t"):
        waited = time.monotonic() - start
    assert 0.2 < waited < 2


async def test_a_dead_local_owner_frees_the_thread_at_once(store: Store) -> None:
    import socket
    import subprocess
    import sys

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    owner = f"{socket.gethostname()}:{dead.stdout.strip()}:x"
    await store.driver.execute(
        store.sql["lock_enqueue"],
        {"thread_id": "t", "ticket": 1, "owner": owner, "expires_at": time.time() + 60},
    )
    start = time.monotonic()
    async with store.locks.hold("t"):
        pass
    assert time.monotonic() - start < 1


@pytest.mark.parametrize(
    "bad", ["sqlite:////proc/forbidden/x.db", "postgresql://nobody@127.0.0.1:1/none"]
)
async def test_unopenable_store_is_runner_io(bad: str) -> None:
    from agentrunner.errors import AgentRunnerError, ErrorCode

    with pytest.raises(AgentRunnerError) as info:
        await open_store(bad)
    assert info.value.code is ErrorCode.RUNNER_IO


async def test_a_run_start_does_not_walk_the_threads_earlier_runs(store: Store) -> None:
    """A run start that finds a crashed run marks it failed; that must cost the messages the
    dead run left, not every run the thread ever had (a long-lived session has thousands)."""
    if store.dialect != "sqlite":
        pytest.skip("PostgreSQL plans by its statistics; the SQLite plan is fixed")
    [(_, sql, params)] = store.runs.abandon_ops("t", "r", message_count=10, last_seq=12)
    plan = await store.driver.fetch_all(f"EXPLAIN QUERY PLAN {sql}", params)
    details = [row["detail"] for row in plan]
    assert "SEARCH messages USING PRIMARY KEY (thread_id=? AND seq>?)" in details, details
    assert not any("SCAN" in d or "runs_thread_created" in d for d in details), details


async def test_a_run_failed_by_the_lease_rules_stays_failed(store: Store) -> None:
    """A worker that paused past its lease (its run failed meanwhile by another worker) cannot
    settle the run when it resumes: its settle is refused with ``run_settled``, the batch that
    carried it leaves the thread as it was, and what the run spent is still counted."""
    from agentrunner.errors import AgentRunnerError

    for thread_id, agent_id in (("t-late", "ceo"), ("t-live", "cfo")):
        await store.threads.open(thread_id, agent_id)
    await store.mailbox.enqueue(
        [
            NewRun(run_id, agent_id, thread_id, {"kind": "x"})
            for run_id, agent_id, thread_id in (
                ("run_late", "ceo", "t-late"),
                ("run_live", "cfo", "t-live"),
            )
        ]
    )
    late = await store.mailbox.claim("paused:1", lease_s=-1.0)  # its lease is already over
    live = await store.mailbox.claim("alive:2", lease_s=60.0)
    assert (late and late.id, live and live.id) == ("run_late", "run_live")
    assert await store.mailbox.fail_expired() == ["run_late"]  # another worker's upkeep
    failed = await store.runs.get("run_late")
    assert failed is not None and failed.status == "failed"
    assert "paused:1 stopped renewing its lease" in (failed.error_message or "")

    def settle(run_id: str, thread_id: str, status: str = "completed") -> RunLog:
        log = run_log(store, run_id, "ceo")
        log.emit("cost.updated", _cost("x:m", 40))
        log.emit("agent.message", {"text": f"{run_id} done", "model": "x:m"})
        return log

    late_log = settle("run_late", "t-late")
    with pytest.raises(AgentRunnerError) as refused:
        await late_log.flush_with(
            [
                *store.messages.append_ops(
                    "t-late", 1, [AssistantMessage(text="too late")], "run_late"
                ),
                store.runs.finish_op("run_late", status="completed", stop_reason="end_turn"),
            ]
        )
    assert refused.value.code == "run_settled"
    assert "run_late" in refused.value.message and "failed" in refused.value.message
    after = await store.runs.get("run_late")
    assert after is not None
    assert (after.status, after.stop_reason, after.error_message) == (
        "failed",
        "error",
        failed.error_message,
    )
    assert await store.messages.page("t-late") == []  # the late answer is not in the thread
    assert [e.type for e in await store.events.list("run_late")] == []
    assert await store.costs.spent_today("ceo") == 40  # but what it spent is counted

    # The same settle of a run still running lands; once settled, it stays settled.
    live_log = settle("run_live", "t-live")
    await live_log.flush_with(
        [store.runs.finish_op("run_live", status="completed", stop_reason="end_turn")]
    )
    done = await store.runs.get("run_live")
    assert done is not None and done.status == "completed"
    assert [e.type for e in await store.events.list("run_live")] == [
        "cost.updated",
        "agent.message",
    ]
    for status in ("failed", "cancelled", "completed"):
        with pytest.raises(AgentRunnerError) as again:
            await store.batch([store.runs.finish_op("run_live", status=status, stop_reason="x")])
        assert again.value.code == "run_settled" and "completed" in again.value.message
    kept = await store.runs.get("run_live")
    assert kept is not None and (kept.status, kept.stop_reason) == ("completed", "end_turn")
    assert await store.costs.spent_today() == 80


async def test_only_a_queued_run_is_claimed_and_only_a_running_one_is_failed(
    store: Store,
) -> None:
    """``created → running`` only from ``created``, ``running → failed`` by the lease rules
    only from ``running``: a cancelled queued run is never claimed, a settled run never failed."""
    await store.threads.open("t", "ceo")
    await store.mailbox.enqueue(
        [NewRun(run_id, "ceo", "t", {"kind": "x"}) for run_id in ("run_a", "run_b")]
    )
    assert await store.mailbox.cancel("run_a") == "cancelled"
    claimed = await store.mailbox.claim("w:1", lease_s=-1.0)
    assert claimed is not None and claimed.id == "run_b"  # not the cancelled one
    await store.batch([store.runs.finish_op("run_b", status="completed", stop_reason="end_turn")])
    assert await store.mailbox.claim("w:1", lease_s=60.0) is None
    assert await store.mailbox.fail_expired() == []  # its lease is over, but it is settled
    statuses = {r.id: r.status for r in await store.runs.list(thread_id="t")}
    assert statuses == {"run_a": "cancelled", "run_b": "completed"}
    assert await store.mailbox.cancel("run_b") == "not_cancellable"


async def test_an_idempotency_key_is_recorded_with_its_work_once(store: Store) -> None:
    keys = store.idempotency
    assert await keys.find("POST /threads/t/runs", "k1") is None

    async def work(run_id: str, fingerprint: str = "f1") -> None:
        await store.mailbox.enqueue(
            [NewRun(run_id, "ceo", None, {"kind": "direct"})],
            with_ops=[
                keys.record_op("POST /threads/t/runs", "k1", fingerprint, {"run_id": run_id}, 60)
            ],
        )

    await work("run_a")
    found = await keys.find("POST /threads/t/runs", "k1")
    assert found is not None and (found.fingerprint, found.result) == ("f1", {"run_id": "run_a"})
    # A second record of the live key fails its whole transaction: the work is not written.
    import sqlite3

    import psycopg

    with pytest.raises((sqlite3.IntegrityError, psycopg.IntegrityError)):
        await work("run_b", "f2")
    assert await store.runs.get("run_b") is None
    assert (await keys.find("POST /threads/t/runs", "k1")).result == {"run_id": "run_a"}  # type: ignore[union-attr]
    # Keys are per scope, and other keys are other keys.
    assert await keys.find("POST /threads/u/runs", "k1") is None
    assert await keys.find("POST /threads/t/runs", "k2") is None
    await store.batch([keys.record_op("POST /threads/u/runs", "k1", "f1", {"run_id": "run_c"}, 60)])
    assert (await keys.find("POST /threads/u/runs", "k1")).result == {"run_id": "run_c"}  # type: ignore[union-attr]


async def test_an_idempotency_claim_is_held_completed_released_and_expires(store: Store) -> None:
    keys = store.idempotency
    assert await keys.claim("chat", "k", "f1", 60)
    assert not await keys.claim("chat", "k", "f1", 60)  # held: nobody else gets it
    pending = await keys.find("chat", "k")
    assert pending is not None and pending.result is None
    assert await keys.renew("chat", "k", "f1", 120)
    assert not await keys.renew("chat", "k", "other", 120)  # only the claim's own request
    assert (await keys.find("chat", "k")).expires_at > pending.expires_at  # type: ignore[union-attr]
    assert await keys.complete("chat", "k", "f1", {"text": "hi"}, 60)
    assert not await keys.complete("chat", "k", "f1", {"text": "again"}, 60)  # once
    assert not await keys.release("chat", "k", "f1")  # a completed key stays
    assert (await keys.find("chat", "k")).result == {"text": "hi"}  # type: ignore[union-attr]
    # Released: the key is free again.
    assert await keys.claim("chat", "r", "f1", 60)
    assert await keys.release("chat", "r", "f1")
    assert await keys.find("chat", "r") is None
    assert await keys.claim("chat", "r", "f2", 60)
    # Expired: absent, taken over by a new claim or a new record, and swept.
    assert await keys.claim("chat", "old", "f1", -1)
    assert await keys.find("chat", "old") is None
    assert await keys.claim("chat", "gone", "f1", -1)
    assert await keys.claim("chat", "gone", "f2", 60)
    assert (await keys.find("chat", "gone")).fingerprint == "f2"  # type: ignore[union-attr]
    await store.batch([keys.record_op("chat", "stale", "f1", {"x": 1}, -1)])
    assert await keys.find("chat", "stale") is None
    await store.batch([keys.record_op("chat", "stale", "f2", {"x": 2}, 60)])
    assert (await keys.find("chat", "stale")).result == {"x": 2}  # type: ignore[union-attr]
    await store.batch([keys.record_op("chat", "swept", "f1", {"x": 1}, -1)])
    assert await keys.sweep() == 1
    assert (await keys.find("chat", "k")).result == {"text": "hi"}  # type: ignore[union-attr]


async def test_a_mailbox_counts_its_queued_runs_up_to_a_bound(store: Store) -> None:
    await store.mailbox.enqueue(
        [NewRun(f"run_{n}", "ceo", None, {"kind": "direct"}) for n in range(5)]
    )
    assert await store.mailbox.queued("ceo", 100) == 5
    assert await store.mailbox.queued("ceo", 3) == 3
    assert await store.mailbox.queued("cfo", 100) == 0
    assert await store.mailbox.claim("w1", 30) is not None
    assert await store.mailbox.queued("ceo", 100) == 4


async def test_a_queued_run_keeps_the_trace_it_was_queued_in_until_claimed(store: Store) -> None:
    """What a worker needs to continue the trace a run was queued in, in another process: the
    context kept with the run (each run of the batch) and when it was queued and claimed."""
    traced = {
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tracestate": "vendor=opaque",
    }
    before = time.time()
    await store.mailbox.enqueue(
        [NewRun(f"run_{agent}", agent, None, {"kind": "direct"}) for agent in ("ceo", "cfo")],
        trace_context=traced,
    )
    await store.mailbox.enqueue([NewRun("run_plain", "cmo", None, {"kind": "direct"})])
    claimed = {}
    while (run := await store.mailbox.claim("w:1", 30)) is not None:
        claimed[run.id] = run
    assert sorted(claimed) == ["run_ceo", "run_cfo", "run_plain"]
    assert claimed["run_ceo"].trace_context == traced
    assert claimed["run_cfo"].trace_context == traced
    assert claimed["run_plain"].trace_context is None  # queued with telemetry off
    for run in claimed.values():
        # PostgreSQL stamps the claim with its own clock: a second's leeway for the two
        assert before - 1 <= run.queued_at <= run.claimed_at + 1 <= time.time() + 2
        stored = await store.runs.get(run.id)
        assert stored is not None and stored.started_at == pytest.approx(run.claimed_at)
        assert stored.created_at == pytest.approx(run.queued_at)


async def test_a_claim_says_how_long_its_run_waited_in_the_mailbox(store: Store) -> None:
    await store.mailbox.enqueue([NewRun("run_old", "ceo", None, {"kind": "direct"})])
    await asyncio.sleep(0.2)  # a lower bound, whatever the machine's speed
    await store.mailbox.enqueue([NewRun("run_new", "cfo", None, {"kind": "direct"})])
    first = await store.mailbox.claim("w1", 30)
    second = await store.mailbox.claim("w1", 30)
    assert first is not None and second is not None
    assert (first.id, second.id) == ("run_old", "run_new")  # the oldest first
    assert first.waited_s >= 0.2
    assert second.waited_s >= 0.0
