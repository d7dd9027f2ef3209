"""How the SQLite driver hands statements to sqlite3: a batch's rows grouped per statement
(one ``executemany`` each, the statements other rows reference first, known by name), and
named parameters bound by number."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any, cast

from agentrunner.store.drivers.contract import Op, Params
from agentrunner.store.sql import replace_parameters

__all__ = ["Group", "bind", "bind_many", "grouped"]

# The statements whose rows others in a batch reference, by name, and the order they go in:
# threads, then runs (a run's steps, messages, events and costs name it), then steps.
_REFERENCED = {"thread_create": 0, "run_insert": 1, "run_enqueue": 1, "step_insert": 2}
_OTHERS = len(_REFERENCED)

Group = tuple[str, str, list[Params]]  # (query name, SQL, its rows in the order given)


def grouped(ops: Sequence[Op]) -> list[Group]:
    """The batch's rows grouped by statement: the referenced statements first, the rest in the
    order they first appeared; rows keep their order."""
    groups: dict[tuple[str, str], Group] = {}
    for name, sql, params in ops:
        group = groups.get((name, sql))
        if group is None:
            groups[name, sql] = (name, sql, [params])
        else:
            group[2].append(params)
    # A stable sort: statements of equal rank keep the order they first appeared in.
    return sorted(groups.values(), key=lambda group: _REFERENCED.get(group[0], _OTHERS))


_Args = Callable[[Params], Sequence[Any]]
_NUMBERED: dict[str, tuple[str, _Args]] = {}


def bind(sql: str, params: Params) -> tuple[str, Sequence[Any] | Params]:
    """``sql`` with numbered parameters and its arguments in order.

    sqlite3 binds a named parameter by building a string from its name and looking it up in
    the dict, for every parameter of every row; numbered ones are taken from a tuple. A turn's
    two commits bind ~250 parameters: ~15 us of a durable turn (bench/store_writes.py)."""
    numbered, args = _numbered(sql)
    try:
        return numbered, args(params)
    except KeyError:  # a missing parameter: let sqlite3 name it in its error
        return sql, params


def bind_many(sql: str, rows: list[Params]) -> tuple[str, list[Sequence[Any]] | list[Params]]:
    """``bind`` for the rows of one ``executemany``; all bound before any runs."""
    numbered, args = _numbered(sql)
    try:
        return numbered, [args(row) for row in rows]
    except KeyError:
        return sql, rows


def _numbered(sql: str) -> tuple[str, _Args]:
    found = _NUMBERED.get(sql)
    if found is None:
        found = _number(sql)
        if len(_NUMBERED) < 4096:  # the store's statements; a caller's ad-hoc SQL is not kept
            _NUMBERED[sql] = found
    return found


def _number(sql: str) -> tuple[str, _Args]:
    names: dict[str, int] = {}
    numbered = replace_parameters(sql, lambda name: f"?{names.setdefault(name, len(names) + 1)}")
    if not names:
        return numbered, lambda params: ()
    if len(names) == 1:
        (only,) = names
        return numbered, lambda params: (params[only],)
    return numbered, cast(_Args, operator.itemgetter(*names))
