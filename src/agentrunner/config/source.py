"""The config file as read: its text, where each key is written in it, and the errors that say so.

``tomllib`` gives values but no positions, so the line of a key is found by reading the file's
tables and keys again: ``line_of`` is the one place that does. Every error about a value in the
file is made by a ``Table`` (or its ``Source``) from the value's path — section, named table,
key — so it carries that path (``details["config_key"]``) and the line where that path is
written, never the first line that has a key of the same name.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

from agentrunner.errors import AgentRunnerError, ErrorCode

__all__ = ["CONFIG_FILE", "Source", "Table", "line_of", "meant"]

CONFIG_FILE = "agentrunner.toml"

KeyPath = tuple[str, ...]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Source:
    """The config file as read: ``file`` as errors name it (``None``: no file), its ``text``."""

    file: str | None
    text: str

    def line_of(self, *path: str) -> int | None:
        """The line of ``path`` in the file: see ``line_of``."""
        return line_of(self.text, path)

    def error(self, path: KeyPath, message: str, hint: str | None = None) -> AgentRunnerError:
        """``invalid_specification`` for the value at ``path``, at its line."""
        return AgentRunnerError(
            ErrorCode.INVALID_SPECIFICATION,
            message,
            hint=hint,
            file=self.file or CONFIG_FILE,
            line=self.line_of(*path),
            details={"config_key": path},
        )

    def table(self, name: str, values: Mapping[str, Any]) -> Table:
        """The top-level table ``name``."""
        return Table(self, (name,), values)


@dataclass(frozen=True, slots=True)
class Table:
    """One table of the file — a section, or a named table in one (``[providers.NAME]``) — with
    its path, so that what is wrong in it is reported at its own key."""

    source: Source
    path: KeyPath
    values: Mapping[str, Any]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.values

    def name(self, key: str | None = None) -> str:
        """The dotted name errors give: ``compaction.model``, ``prices.local:llama3``."""
        return ".".join(self.path if key is None else (*self.path, key))

    def error(self, key: str | None, message: str, hint: str | None = None) -> AgentRunnerError:
        """``invalid_specification`` for ``key`` of this table (``None``: the table itself)."""
        return self.source.error(self.path if key is None else (*self.path, key), message, hint)

    def entries(self, not_a_table: str) -> Iterator[Table]:
        """The named tables this one holds (``[providers.NAME]``); a value that is not a table is
        an error, ``not_a_table`` formatted with its ``name``."""
        for name, value in self.values.items():
            if not isinstance(value, dict):
                raise self.error(str(name), not_a_table.format(name=name))
            yield Table(self.source, (*self.path, str(name)), value)

    def each(self, not_a_table: str, read: Callable[[Table], T]) -> Mapping[str, T]:
        """Each named table this one holds, read by ``read``, by its name."""
        return MappingProxyType(
            {entry.path[-1]: read(entry) for entry in self.entries(not_a_table)}
        )

    def check_keys(self, allowed: tuple[str, ...]) -> None:
        """A key of one of agentrunner's sections that it does not know: an error naming the
        nearest one it does."""
        for key in self.values:
            if key not in allowed:
                near = difflib.get_close_matches(key, allowed, n=1)
                raise self.error(
                    key,
                    f"unknown key '{self.name(key)}'"
                    + (f" (did you mean '{self.name(near[0])}'?)" if near else ""),
                    f"[{self.name()}] accepts: {', '.join(allowed)}",
                )

    def check_entry_keys(self, allowed: tuple[str, ...]) -> None:
        """A key of a named table (``[prices."MODEL"]``) that it does not take: an error listing
        the ones it does."""
        for key in self.values:
            if key not in allowed:
                raise self.error(
                    key, f"unknown key '{self.name(key)}'", f"Accepted: {', '.join(allowed)}"
                )


def meant(value: Any, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for a misspelt choice, else nothing."""
    near = (
        difflib.get_close_matches(str(value), list(choices), n=1) if isinstance(value, str) else []
    )
    return f" (did you mean '{near[0]}'?)" if near else ""


def line_of(text: str, path: KeyPath) -> int | None:
    """The line (1-based) where ``path`` is written in the TOML ``text``: as a key in its own
    table (``[compaction]`` then ``model = …``), as a dotted key (``compaction.model = …``), as a
    table header (``[providers.local]``); else the line of the deepest table or inline table
    written that holds it (``model_settings = {temperature = 9}``). ``None`` when none is."""
    found: tuple[int, int] | None = None  # (how much of the path, line)
    for keys, line in _written(text):
        if keys == path:
            return line
        holds = len(keys) < len(path) and path[: len(keys)] == keys
        if holds and (found is None or len(keys) > found[0]):
            found = (len(keys), line)
    return found[1] if found else None


_BARE = re.compile(r"[A-Za-z0-9_-]+")
_SPACE = " \t"


def _written(text: str) -> Iterator[tuple[KeyPath, int]]:
    """Each table header's and key's full path, with its line, in the order written. Values are
    skipped over (strings, multi-line ones included, and arrays over several lines), so that
    text inside them is never read as a key."""
    table: KeyPath = ()
    at, line = 0, 1
    while at < len(text):
        char = text[at]
        if char == "\n":
            at, line = at + 1, line + 1
        elif char in " \t\r":
            at += 1
        elif char == "#":
            at = _line_end(text, at)
        elif char == "[":
            keys, at = _key(text, at + (2 if text.startswith("[[", at) else 1))
            table = keys
            yield keys, line
            at = _line_end(text, at)
        else:
            keys, at = _key(text, at)
            yield (*table, *keys), line
            at, line = _value_end(text, at + 1, line)  # past the "="


def _key(text: str, at: int) -> tuple[KeyPath, int]:
    """A dotted key from ``at``: its parts, and where it ends (at ``=`` or the header's ``]``)."""
    parts: list[str] = []
    while at < len(text):
        while at < len(text) and text[at] in _SPACE:
            at += 1
        if at >= len(text) or text[at] in "=]\n":
            break
        if text[at] == ".":
            at += 1
        elif text[at] in "\"'":
            end = _string_end(text, at)
            parts.append(str(tomllib.loads(f"k = {text[at:end]}")["k"]))
            at = end
        else:
            bare = _BARE.match(text, at)
            if bare is None:  # not TOML, which tomllib would have refused: stop here
                break
            parts.append(bare.group())
            at = bare.end()
    return tuple(parts), at


def _value_end(text: str, at: int, line: int) -> tuple[int, int]:
    """Past the value that starts at ``at`` (and the rest of its last line), with the line it
    ends on."""
    depth = 0
    while at < len(text):
        char = text[at]
        if char == "\n":
            if depth == 0:
                return at, line
            line += 1
            at += 1
        elif char == "#":
            at = _line_end(text, at)
        elif char in "\"'":
            end = _string_end(text, at)
            line += text.count("\n", at, end)
            at = end
        else:
            depth += (char in "[{") - (char in "]}")
            at += 1
    return at, line


def _string_end(text: str, at: int) -> int:
    """Past the string (basic, literal, or either over several lines) that starts at ``at``."""
    quote = text[at]
    triple = text.startswith(quote * 3, at)
    at += 3 if triple else 1
    while at < len(text):
        if quote == '"' and text[at] == "\\":  # an escape: the next character is content
            at += 2
        elif triple and text.startswith(quote * 3, at):
            end = at + 3
            while end < at + 5 and end < len(text) and text[end] == quote:  # content's last two
                end += 1
            return end
        elif not triple and text[at] in (quote, "\n"):
            return at + 1
        else:
            at += 1
    return at


def _line_end(text: str, at: int) -> int:
    end = text.find("\n", at)
    return len(text) if end < 0 else end
