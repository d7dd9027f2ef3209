"""The store's SQL: named blocks in ``sql/queries.sql`` (with per-dialect overrides) and the
numbered migrations in ``sql/schema.sql``, rendered for one dialect at load time; and the
tables extensions register (``ExtensionTable``), created beside them."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from typing import Literal

from agentrunner.errors import AgentRunnerError, ErrorCode

__all__ = [
    "TABLE_EXISTS",
    "Dialect",
    "ExtensionTable",
    "SqlSet",
    "load_sql",
    "replace_parameters",
    "with_tables",
]

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
        "{blob}": "BLOB",
    },
    "postgres": {
        "{json}": "JSONB",
        "{serial}": "BIGSERIAL PRIMARY KEY",
        "{clustered}": "",
        "{blob}": "BYTEA",
    },
}


@dataclass(frozen=True, slots=True)
class SqlSet:
    dialect: Dialect
    queries: dict[str, str]
    migrations: list[tuple[int, list[str]]]
    # The names of the blocks marked ``-- guarded:``: a batch in which one changes no row is
    # refused and rolled back (drivers' ``GuardRefused``).
    guarded: frozenset[str] = frozenset()
    # Extensions' tables: (name, statements, who registered it), created when missing.
    tables: tuple[tuple[str, list[str], str], ...] = ()

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


# A channel's feed keys (`feeds`), which order its rows as they were committed; the
# queries that write or read them name the channel ``:channel_id``. ``{next_feed_key}``: the
# key of a row written now. PostgreSQL: the id of the writing transaction — a later one may
# commit first, so a reader gives a row only below ``{settled_feed_key}``, the oldest
# transaction still under way (every row below it is committed, or never will be). SQLite
# writes one transaction at a time: the channel's next number, every row written is settled.
_SQLITE_NEXT_FEED_KEY = (
    "(SELECT COALESCE(MAX(k), 0) + 1 FROM ("
    "SELECT MAX(feed_key) AS k FROM channel_messages WHERE channel_id = :channel_id "
    "UNION ALL SELECT MAX(feed_key) FROM channel_activity WHERE channel_id = :channel_id))"
)
# The schedules' fires (``feeds.ScheduleFeed``) are one feed, keyed the same way:
# ``{next_fire_key}`` and ``{settled_fire_key}``; on SQLite the next number of them all.
_SQLITE_NEXT_FIRE_KEY = "(SELECT COALESCE(MAX(feed_key), 0) + 1 FROM schedule_fires)"
_PG_TRANSACTION = "pg_current_xact_id()::text::bigint"
_PG_OLDEST_UNDER_WAY = "pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
_FEED_KEYS: dict[Dialect, dict[str, str]] = {
    "sqlite": {
        "{next_feed_key}": _SQLITE_NEXT_FEED_KEY,
        "{settled_feed_key}": _SQLITE_NEXT_FEED_KEY,
        "{next_fire_key}": _SQLITE_NEXT_FIRE_KEY,
        "{settled_fire_key}": _SQLITE_NEXT_FIRE_KEY,
    },
    "postgres": {
        "{next_feed_key}": _PG_TRANSACTION,
        "{settled_feed_key}": _PG_OLDEST_UNDER_WAY,
        "{next_fire_key}": _PG_TRANSACTION,
        "{settled_fire_key}": _PG_OLDEST_UNDER_WAY,
    },
}


def _render(sql: str, dialect: Dialect) -> str:
    sql = sql.replace("{json}", "::jsonb" if dialect == "postgres" else "")
    for placeholder, expression in _FEED_KEYS[dialect].items():
        sql = sql.replace(placeholder, expression)
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


# Whether a table exists (its name the one parameter), per dialect.
TABLE_EXISTS: dict[Dialect, str] = {
    "sqlite": "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
    "postgres": "SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = %s",
}
_TABLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_CREATED = re.compile(r"\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.I)


@dataclass(frozen=True, slots=True)
class ExtensionTable:
    """A table an extension registers (seed 002's ``registerTable``), created when the store
    opens and it does not exist yet, with its indexes; never altered afterwards.

    ``create`` is one ``CREATE TABLE`` for both back ends, where ``{json}``, ``{serial}`` and
    ``{clustered}`` are written as in agentrunner's own schema — or a map from dialect
    (``sqlite``, ``postgres``) to its own statement. ``indexes`` are further statements, the
    same for both. ``owner`` names who registered it, for errors."""

    name: str
    create: str | Mapping[str, str]
    indexes: tuple[str, ...] = ()
    owner: str = "code"

    def statements(self, dialect: Dialect) -> list[str]:
        if isinstance(self.create, str):
            create = self.create
        elif dialect in self.create:
            create = self.create[dialect]
        else:
            raise self._error(
                f"its SQL names no statement for {dialect}",
                "Give create= one statement for both, or one per dialect: sqlite and postgres.",
            )
        out = []
        for statement in (create, *self.indexes):
            for placeholder, sql_type in _TYPES[dialect].items():
                statement = statement.replace(placeholder, sql_type)
            out.append(statement.strip().rstrip(";"))
        return out

    def _error(self, message: str, hint: str | None = None) -> AgentRunnerError:
        return AgentRunnerError(
            ErrorCode.INVALID_SPECIFICATION,
            f"{self.owner}: table '{self.name}': {message}",
            hint=hint,
        )


def with_tables(sql: SqlSet, tables: Sequence[ExtensionTable]) -> SqlSet:
    """``sql`` with the extensions' tables to create; ``invalid_specification`` naming who
    registered it for a table whose name is agentrunner's own or not a plain lower-case name,
    or whose SQL creates another table."""
    if not tables:
        return sql
    own = {
        match[1].lower()
        for _, statements in sql.migrations
        for statement in statements
        for match in _CREATED.finditer(statement)
    } | {"schema_migrations"}
    out = []
    for table in tables:
        if not _TABLE_NAME.fullmatch(table.name):
            raise table._error(
                "a table name is lower-case letters, digits and _",
                "e.g. audit_log (an extension's own prefix keeps names apart).",
            )
        if table.name in own:
            raise table._error(
                "the name is one of agentrunner's own tables", "Give the table a name of its own."
            )
        statements = table.statements(sql.dialect)
        created = [m[1].lower() for m in _CREATED.finditer(statements[0])]
        if created != [table.name]:
            raise table._error(
                f"its SQL must create table {table.name} and only it",
                f"Start it with CREATE TABLE {table.name} (...).",
            )
        out.append((table.name, statements, table.owner))
    return replace(sql, tables=tuple(out))
