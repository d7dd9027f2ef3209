"""How the SQLite driver hands statements to sqlite3: a batch's rows grouped per statement
(one ``executemany`` each, the statements other rows reference first, known by name), and
named parameters bound by position."""

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
_POSITIONAL: dict[str, tuple[str, _Args]] = {}


def bind(sql: str, params: Params) -> tuple[str, Sequence[Any] | Params]:
    """``sql`` with positional parameters and its arguments in order.

    sqlite3 binds a named parameter by building a string from its name and looking it up in
    the dict, for every parameter of every row; positional ones are taken from a tuple. A turn's
    two commits bind ~250 parameters: ~15 us of a durable turn (bench/store_writes.py)."""
    positional, args = _positional(sql)
    try:
        return positional, args(params)
    except KeyError:  # a missing parameter: let sqlite3 name it in its error
        return sql, params


def bind_many(sql: str, rows: list[Params]) -> tuple[str, list[Sequence[Any]] | list[Params]]:
    """``bind`` for the rows of one ``executemany``; all bound before any runs."""
    positional, args = _positional(sql)
    try:
        return positional, [args(row) for row in rows]
    except KeyError:
        return sql, rows


def _positional(sql: str) -> tuple[str, _Args]:
    found = _POSITIONAL.get(sql)
    if found is None:
        found = _to_positional(sql)
        if len(_POSITIONAL) < 4096:  # the store's statements; a caller's ad-hoc SQL is not kept
            _POSITIONAL[sql] = found
    return found


def _to_positional(sql: str) -> tuple[str, _Args]:
    # Plain ``?`` placeholders, one per occurrence (a name used twice is bound twice): sqlite3
    # takes ``?1`` for a named one, which a sequence may not bind (deprecated in Python 3.12,
    # an error from 3.14 on).
    names: list[str] = []

    def placeholder(name: str) -> str:
        names.append(name)
        return "?"

    positional = replace_parameters(sql, placeholder)
    if not names:
        return positional, lambda params: ()
    if len(names) == 1:
        (only,) = names
        return positional, lambda params: (params[only],)
    return positional, cast(_Args, operator.itemgetter(*names))
