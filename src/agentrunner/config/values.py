"""The kinds of value a section's key may hold, each checked with the same words everywhere: an
error names the key as ``section.key`` and is located at it (``Table.error``)."""

from __future__ import annotations

import re
from typing import Any

from agentrunner.config.source import Table

__all__ = [
    "amount",
    "count",
    "flag",
    "holds_password",
    "name",
    "optional_name",
    "positive",
    "usd",
]

_PASSWORD_IN_URL = re.compile(r"://[^/@:]+:[^/@]+@")


def holds_password(url: str) -> bool:
    """Whether ``url`` carries a password (``scheme://user:password@host``): a secret, which
    never goes in the file."""
    return _PASSWORD_IN_URL.search(url) is not None


def name(table: Table, key: str, default: Any = None) -> str:
    """A non-empty string, stripped."""
    value = table.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise table.error(key, f"{table.name(key)} must be a non-empty string, got {value!r}")
    return value.strip()


def optional_name(table: Table, key: str) -> str | None:
    """A non-empty string, or ``None`` when the key is not written."""
    return None if table.get(key) is None else name(table, key)


def count(table: Table, key: str, default: int, hint: str | None = None) -> int:
    """A whole number, 0 or more."""
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise table.error(key, f"{table.name(key)} must be a whole number, got {value!r}", hint)
    return value


def positive(table: Table, key: str, default: int, hint: str | None = None) -> int:
    """A whole number, 1 or more."""
    if count(table, key, default, hint) == 0:
        raise table.error(key, f"{table.name(key)} must be at least 1, got 0", hint)
    return int(table.get(key, default))


def flag(table: Table, key: str, default: bool) -> bool:
    """``true`` or ``false`` (not 1, not ``"yes"``)."""
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise table.error(key, f"{table.name(key)} must be true or false, got {value!r}")
    return value


def usd(table: Table, key: str) -> float:
    """A number of dollars, 0 or more."""
    value = table.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise table.error(
            key, f"{table.name(key)} must be a non-negative number of dollars, got {value!r}"
        )
    return float(value)


def amount(
    table: Table, key: str, unit: str, hint: str = "Leave it out for no limit."
) -> float | None:
    """An optional positive number of ``unit`` (absent: ``None``, no limit or the default)."""
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise table.error(
            key, f"{table.name(key)} must be a positive number of {unit}, got {value!r}", hint
        )
    return float(value)
