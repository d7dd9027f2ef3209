"""``{{input.x}}`` templating, exactly as seed 004 describes it.

Rules (``docs/agent-file.md`` repeats them for users):

* ``{{input.a}}`` is mandatory: a missing key or a ``null`` value is
  ``missing_mandatory_placeholder``.
* ``{{input.a?}}`` is optional: missing or ``null`` renders as the empty string. The ``?`` must
  be the last character; anywhere else it is ``invalid_placeholder_path``.
* Paths nest with dots and resolve left to right: ``{{input.a.b.c}}``.
* Whitespace inside the braces is ignored: ``{{ input . a ? }}`` == ``{{input.a?}}``.
* The root must be ``input``; ``{{input}}`` alone is the whole input object.
* Lists are indexed by a decimal segment: ``{{input.items.0.name}}``. A non-numeric segment on a
  list, or any segment on a string/number/bool, is ``invalid_placeholder_path``; an index past
  the end is a missing value.
* Values render as: strings verbatim; ``true``/``false``; numbers as JSON writes them; objects and
  lists as compact JSON (``{"a":1,"b":[2,3]}``, key order kept, non-ASCII kept).
* One pass: text produced by a substitution is never scanned again, so an input value that
  contains ``{{input.secret}}`` stays literal.
* Text that is not a complete ``{{ … }}`` pair is literal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentrunner.errors import AgentRunnerError, ErrorCode

__all__ = ["Placeholder", "Rendered", "Template", "render_value"]

_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_WHITESPACE = re.compile(r"\s+")
_SEGMENT = re.compile(r"[^.?{}]+")
_MISSING = object()


@dataclass(frozen=True, slots=True)
class Placeholder:
    """One ``{{ … }}`` occurrence: its text as written, the path below ``input``, its line."""

    text: str
    path: tuple[str, ...]
    optional: bool
    line: int

    @property
    def dotted(self) -> str:
        return ".".join(("input", *self.path))


@dataclass(frozen=True, slots=True)
class Rendered:
    """A rendered template and the input values it used, keyed by dotted path."""

    text: str
    used: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed template: literal text and placeholders, ready to render many times."""

    source: str
    parts: tuple[str | Placeholder, ...]
    file: str | None = None

    @property
    def placeholders(self) -> tuple[Placeholder, ...]:
        return tuple(p for p in self.parts if isinstance(p, Placeholder))

    @classmethod
    def parse(cls, source: str, *, file: str | None = None, first_line: int = 1) -> Template:
        """Parse ``source``; a malformed placeholder raises ``invalid_placeholder_path``.

        ``first_line`` is the file line the template starts on, so errors point into the file.
        """
        parts: list[str | Placeholder] = []
        pos = 0
        line = first_line
        for match in _PLACEHOLDER.finditer(source):
            literal = source[pos : match.start()]
            line += literal.count("\n")
            if literal:
                parts.append(literal)
            parts.append(_parse_placeholder(match.group(0), match.group(1), line, file))
            line += match.group(0).count("\n")
            pos = match.end()
        if pos < len(source):
            parts.append(source[pos:])
        return cls(source, tuple(parts), file)

    def render(self, input: Mapping[str, Any]) -> str:
        return self.render_with_values(input).text

    def render_with_values(self, input: Mapping[str, Any]) -> Rendered:
        """Render with ``input``; raises ``missing_mandatory_placeholder`` or
        ``invalid_placeholder_path`` naming the placeholder (and its file:line)."""
        if not isinstance(input, Mapping):
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"input must be a JSON object, not {type(input).__name__}",
                hint='Pass an object, e.g. --input \'{"topic": "tides"}\'.',
            )
        out: list[str] = []
        used: dict[str, Any] = {}
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            value = _resolve(input, part, self.file)
            if value is _MISSING or value is None:
                if not part.optional:
                    raise AgentRunnerError(
                        ErrorCode.MISSING_MANDATORY_PLACEHOLDER,
                        f"Required placeholder '{part.text}' could not be resolved: "
                        f"{part.dotted} is {'null' if value is None else 'missing'} in the input",
                        hint=f"Pass {part.dotted} in the input, or write "
                        f"'{{{{{part.dotted}?}}}}' to make it optional.",
                        file=self.file,
                        line=part.line,
                    )
                used[part.dotted] = None
                continue
            used[part.dotted] = value
            out.append(render_value(value))
        return Rendered("".join(out), used)


def render_value(value: Any) -> str:
    """How a non-null input value appears in rendered text."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float | dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return str(value)


def _parse_placeholder(text: str, inner: str, line: int, file: str | None) -> Placeholder:
    compact = _WHITESPACE.sub("", inner)
    optional = compact.endswith("?")
    core = compact[:-1] if optional else compact
    segments = core.split(".")

    def invalid(why: str) -> AgentRunnerError:
        return AgentRunnerError(
            ErrorCode.INVALID_PLACEHOLDER_PATH,
            f"Invalid path '{core}' in placeholder '{text}': {why}",
            hint="Write placeholders as {{input.a.b}} (mandatory) or {{input.a.b?}} (optional).",
            file=file,
            line=line,
        )

    if not core:
        raise invalid("the placeholder is empty")
    if "?" in core:
        raise invalid("'?' may only end a placeholder")
    if segments[0] != "input":
        raise invalid(f"the root must be 'input', not '{segments[0]}'")
    for segment in segments[1:]:
        if not _SEGMENT.fullmatch(segment):
            raise invalid("a path segment is empty or contains '{' or '}'")
    return Placeholder(text, tuple(segments[1:]), optional, line)


def _resolve(input: Mapping[str, Any], placeholder: Placeholder, file: str | None) -> Any:
    current: Any = input
    for depth, segment in enumerate(placeholder.path):
        if current is None:
            return _MISSING
        if isinstance(current, Mapping):
            current = current.get(segment, _MISSING)
        elif isinstance(current, list | tuple):
            if not segment.isdecimal():
                raise _walk_error(placeholder, depth, "a list needs a numeric index", file)
            index = int(segment)
            current = current[index] if index < len(current) else _MISSING
        else:
            raise _walk_error(placeholder, depth, f"it is a {type(current).__name__}", file)
        if current is _MISSING:
            return _MISSING
    return current


def _walk_error(
    placeholder: Placeholder, depth: int, why: str, file: str | None
) -> AgentRunnerError:
    parent = ".".join(("input", *placeholder.path[:depth]))
    return AgentRunnerError(
        ErrorCode.INVALID_PLACEHOLDER_PATH,
        f"Invalid path '{placeholder.dotted}' in placeholder '{placeholder.text}': "
        f"cannot read '{placeholder.path[depth]}' from {parent} because {why}",
        hint="Check the shape of the input against the placeholder's path.",
        file=file,
        line=placeholder.line,
    )
