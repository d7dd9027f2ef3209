"""The store's SQL: named blocks in ``sql/queries.sql`` (with per-dialect overrides) and the
numbered migrations in ``sql/schema.sql``, rendered for one dialect at load time."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Literal

__all__ = ["Dialect", "SqlSet", "load_sql", "replace_parameters"]

Dialect = Literal["sqlite", "postgres"]

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.M)
_MIGRATION = re.compile(r"^-- migration: (\d+)\s*$", re.M)
_GUARDED = re.compile(r"^-- guarded:", re.M)
# A named parameter; string literals, quoted names and comments match whole first, so a colon
# inside them is left alone, as is the second colon of PostgreSQL's ``::`` cast.
_PARAM = re.compile(
    r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|--[^\n]*|/\*.*?\*/|(?<![:\w]):([A-Za-z_]\w*)""", re.S
)
_TYPES: dict[Dialect, dict[str, str]] = {
    # No AUTOINCREMENT: it writes sqlite_sequence on every insert. A new rowid is still
    # larger than every live one, which is all the thread-lock queue needs.
    "sqlite": {
        "{json}": "TEXT",
        "{serial}": "INTEGER PRIMARY KEY",
        "{clustered}": " WITHOUT ROWID",
    },
    "postgres": {"{json}": "JSONB", "{serial}": "BIGSERIAL PRIMARY KEY", "{clustered}": ""},
}


@dataclass(frozen=True, slots=True)
class SqlSet:
    dialect: Dialect
    queries: dict[str, str]
    migrations: list[tuple[int, list[str]]]
    # The names of the blocks marked ``-- guarded:``: a batch in which one changes no row is
    # refused and rolled back (drivers' ``GuardRefused``).
    guarded: frozenset[str] = frozenset()

    def __getitem__(self, name: str) -> str:
        return self.queries[name]


def load_sql(dialect: Dialect) -> SqlSet:
    files = resources.files("agentrunner.store") / "sql"
    queries = _blocks((files / "queries.sql").read_text())
    override = files / f"{dialect}.sql"
    if override.is_file():
        queries.update(_blocks(override.read_text()))
    rendered = {name: _render(sql, dialect) for name, sql in queries.items()}
    guarded = frozenset(name for name, sql in queries.items() if _GUARDED.search(sql))
    migrations = _migrations((files / "schema.sql").read_text(), dialect)
    return SqlSet(dialect, rendered, migrations, guarded)


def _blocks(text: str) -> dict[str, str]:
    parts = _NAME.split(text)
    return {parts[i]: parts[i + 1].strip().rstrip(";") for i in range(1, len(parts), 2)}


def _render(sql: str, dialect: Dialect) -> str:
    sql = sql.replace("{json}", "::jsonb" if dialect == "postgres" else "")
    if dialect == "postgres":
        sql = replace_parameters(sql, lambda name: f"%({name})s")
    return sql


def replace_parameters(sql: str, replace: Callable[[str], str]) -> str:
    """``sql`` with each ``:name`` parameter replaced by ``replace(name)``."""
    return _PARAM.sub(lambda m: m[0] if m[1] is None else replace(m[1]), sql)


def _migrations(text: str, dialect: Dialect) -> list[tuple[int, list[str]]]:
    parts = _MIGRATION.split(text)
    out = []
    for i in range(1, len(parts), 2):
        body = parts[i + 1]
        for placeholder, sql_type in _TYPES[dialect].items():
            body = body.replace(placeholder, sql_type)
        lines = [line for line in body.splitlines() if not line.strip().startswith("--")]
        statements = [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
        out.append((int(parts[i]), statements))
    return out
