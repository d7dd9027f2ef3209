"""How a batch's statements are known to the driver: by the name of their SQL block, not by
their text — the same on SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import replace

import pytest

from agentrunner.store import Store
from agentrunner.store.drivers import GuardRefused
from agentrunner.store.repositories import Repository
from agentrunner.store.sql import replace_parameters


async def test_a_statement_is_guarded_by_its_name_not_its_text(store: Store) -> None:
    """Two blocks with one text, one of them guarded: a batch of the other that changes no row
    is committed, not refused."""
    sql = store.sql
    twin = replace(sql, queries={**sql.queries, "run_finish_quietly": sql["run_finish"]})
    finish = store.runs.finish_op("run_absent", status="completed", stop_reason="end_turn")
    quietly = Repository(store.driver, twin).op("run_finish_quietly", **finish[-1])
    await store.driver.batch([quietly, store.threads.create_op("t-after", "ceo")])
    assert await store.threads.get("t-after") is not None  # committed, not rolled back
    with pytest.raises(GuardRefused) as refused:
        await store.driver.batch([finish, store.threads.create_op("t-never", "ceo")])
    assert refused.value.query == "run_finish"
    assert await store.threads.get("t-never") is None


async def test_referenced_rows_go_first_by_name_not_by_a_prefix_of_their_text(
    store: Store,
) -> None:
    """A statement that merely begins like a referenced one (``INSERT INTO threads…``) keeps
    its place after the run its row references; it is not taken for a thread's insert."""
    sql = store.sql
    await store.driver.execute(
        "CREATE TABLE threads_seen (run_id TEXT NOT NULL REFERENCES runs (id), seen_at REAL)", {}
    )
    try:
        seen = "INSERT INTO threads_seen (run_id, seen_at) VALUES (:run_id, :now)"
        if store.dialect == "postgres":
            seen = replace_parameters(seen, lambda name: f"%({name})s")
        named = replace(sql, queries={**sql.queries, "run_seen": seen})
        await store.threads.open("t", "ceo")
        await store.batch(
            [
                store.runs.insert_op(run_id="r1", agent_id="ceo", thread_id="t", status="running"),
                Repository(store.driver, named).op("run_seen", run_id="r1", now=1.0),
            ]
        )
        rows = await store.driver.fetch_all("SELECT run_id FROM threads_seen", {})
        assert rows == [{"run_id": "r1"}]
    finally:
        await store.driver.execute("DROP TABLE threads_seen", {})
