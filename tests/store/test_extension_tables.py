"""Extensions' tables (seed 002's registerTable): created by the migrations on both back ends,
once, and refused with the owner named when they cannot be."""

from __future__ import annotations

import uuid

import pytest

from agentrunner.errors import AgentRunnerError
from agentrunner.store import open_store
from agentrunner.store.sql import ExtensionTable


async def test_a_table_per_dialect_is_created_once(store_url: str) -> None:
    name = f"ext_{uuid.uuid4().hex[:8]}"
    table = ExtensionTable(
        name,
        {
            "sqlite": f"CREATE TABLE {name} (id INTEGER PRIMARY KEY, note TEXT)",
            "postgres": f"CREATE TABLE {name} (id BIGSERIAL PRIMARY KEY, note TEXT)",
        },
        (f"CREATE INDEX {name}_note ON {name} (note)",),
        owner="extension module 'notes_ext'",
    )
    for _ in range(2):  # the second open finds it there: not created again (that would raise)
        store = await open_store(store_url, tables=[table])
        try:
            await store.driver.execute(f"INSERT INTO {name} (note) VALUES ('x')", {})
            rows = await store.driver.fetch_all(f"SELECT note FROM {name}", {})
        finally:
            await store.close()
    assert [row["note"] for row in rows] == ["x", "x"]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (ExtensionTable("runs", "CREATE TABLE runs (x TEXT)"), "one of agentrunner's own"),
        (ExtensionTable("Bad-Name", "CREATE TABLE x (y TEXT)"), "lower-case letters"),
        (ExtensionTable("ext_a", "CREATE TABLE ext_b (y TEXT)"), "must create table ext_a"),
        (ExtensionTable("ext_a", {"nosql": "CREATE TABLE ext_a (y TEXT)"}), "no statement for"),
    ],
)
async def test_a_table_that_cannot_be_made_names_its_owner(
    store_url: str, table: ExtensionTable, message: str
) -> None:
    owned = ExtensionTable(table.name, table.create, owner="extension module 'mine'")
    with pytest.raises(AgentRunnerError) as info:
        await open_store(store_url, tables=[owned])
    assert info.value.code == "invalid_specification"
    assert info.value.message.startswith(f"extension module 'mine': table '{table.name}'")
    assert message in info.value.message
