"""What a caller's input must be before it is stored or sent to a model, whichever interface it
came through: ids and names of a bounded length without control characters; texts of a bounded
length without NUL characters or unpaired surrogates (PostgreSQL's text and jsonb cannot hold
the one, no UTF-8 encoder the other); ``input`` values nested a bounded number of levels (JSON
encoders have recursion limits) and of a bounded size.

Lengths and sizes are bounded where input enters (the HTTP API, the run queue, channel posts);
``run_agent`` and ``run_task`` check only what could not be stored or encoded, since what
reaches them from a mailbox was checked when it was queued, and a Python caller may mean a long
text.

Each ``check_*`` raises ``validation`` naming the field, with ``details={"invalid": field}`` so
an interface can answer with its own status for bad input (the HTTP API's 422); each
``*_problem`` says what is wrong, or ``None``, for callers that raise their own error type.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from agentrunner.core.json_text import json_bytes
from agentrunner.errors import AgentRunnerError, ErrorCode

__all__ = [
    "ID_PATTERN",
    "MAX_DEPTH",
    "MAX_ID_CHARS",
    "MAX_INPUT_BYTES",
    "MAX_TEXT_CHARS",
    "MAX_THREAD_ID_CHARS",
    "TEXT_PATTERN",
    "check_id",
    "check_input",
    "check_text",
    "id_problem",
    "input_problem",
    "invalid",
    "text_problem",
    "without_controls",
]

MAX_ID_CHARS = 200
# Threads the library names from others' ids (``<agent>-<user>``, ``<agent>@<channel>``) may
# be longer; this still keeps a key well inside PostgreSQL's 2,704-byte index entries.
MAX_THREAD_ID_CHARS = 600
MAX_TEXT_CHARS = 200_000
MAX_INPUT_BYTES = 200_000
MAX_DEPTH = 32

# The rules as JSON Schema patterns, for schemas to state (unpaired surrogates left out: no
# JSON Schema validator's regex engine can name them, and no valid UTF-8 holds one).
ID_PATTERN = r"^[^\u0000-\u001f\u007f-\u009f]+$"
TEXT_PATTERN = r"^[^\u0000]*$"
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def invalid(field: str, problem: str, hint: str | None = None) -> AgentRunnerError:
    """The ``validation`` error for bad input in ``field``."""
    return AgentRunnerError(
        ErrorCode.VALIDATION, f"{field} {problem}", hint=hint, details={"invalid": field}
    )


def id_problem(value: str, max_chars: int = MAX_ID_CHARS) -> str | None:
    """An id or a name (of a thread, run, message, channel or sender): 1 to ``max_chars``
    characters of any script — no control character (line breaks and tabs included) and no
    unpaired surrogate."""
    if not value:
        return "is empty"
    if len(value) > max_chars:
        return f"is {len(value)} characters long; the most is {max_chars}"
    if _CONTROL.search(value) is not None:
        return "holds a control character (a line break, a tab, NUL…) or an unpaired surrogate"
    return None


def without_controls(value: str) -> str:
    """``value`` without the characters ``id_problem`` refuses (control characters, line breaks
    and tabs included, and unpaired surrogates): for a name that is cleaned rather than refused
    (an attachment's file name)."""
    return _CONTROL.sub("", value)


def text_problem(value: str, max_chars: int | None = MAX_TEXT_CHARS) -> str | None:
    """A text (a message, a post): at most ``max_chars`` characters (``None``: any length),
    no NUL character and no unpaired surrogate; tabs and line breaks are text."""
    if max_chars is not None and len(value) > max_chars:
        return f"is {len(value)} characters long; the most is {max_chars}"
    found = _UNSTORABLE.search(value)
    if found is not None:
        kind = "a NUL character" if found[0] == "\x00" else "an unpaired surrogate"
        return f"holds {kind} (at character {found.start()}), which cannot be stored"
    return None


def input_problem(value: Mapping[str, Any], max_bytes: int | None = MAX_INPUT_BYTES) -> str | None:
    """An ``input`` object: nested at most 32 levels, no NUL or unpaired surrogate in its keys
    and strings, at most ``max_bytes`` as JSON (``None``: any size)."""
    problem = _walk(value, 1)
    if problem is not None or max_bytes is None:
        return problem
    size = len(json_bytes(value, default=str))
    if size > max_bytes:
        return f"is {size} bytes as JSON; the most is {max_bytes}"
    return None


def _walk(value: Any, depth: int) -> str | None:
    """The first problem in ``value``, an object or array at ``depth`` levels of them."""
    if isinstance(value, str):
        return _string_problem(value)
    if isinstance(value, Mapping | list | tuple) and depth > MAX_DEPTH:
        return f"is nested more than {MAX_DEPTH} levels deep"
    if isinstance(value, Mapping):
        for key, item in value.items():
            problem = (_string_problem(key) if isinstance(key, str) else None) or _walk(
                item, depth + 1
            )
            if problem is not None:
                return problem
    elif isinstance(value, list | tuple):
        for item in value:
            problem = _walk(item, depth + 1)
            if problem is not None:
                return problem
    return None


def _string_problem(value: str) -> str | None:
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    kind = "a NUL character" if found[0] == "\x00" else "an unpaired surrogate"
    return f"holds {kind} in a string, which cannot be stored"


def check_id(value: str, field: str, max_chars: int = MAX_ID_CHARS) -> str:
    problem = id_problem(value, max_chars)
    if problem is not None:
        raise invalid(
            field, problem, f"Ids and names are 1 to {max_chars} characters, none a control one."
        )
    return value


def check_text(value: str, field: str, max_chars: int | None = MAX_TEXT_CHARS) -> str:
    problem = text_problem(value, max_chars)
    if problem is not None:
        raise invalid(field, problem, "Send plain text; split a long text into several.")
    return value


def check_input(
    value: Mapping[str, Any] | None, field: str = "input", max_bytes: int | None = MAX_INPUT_BYTES
) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise invalid(field, f"must be an object, not {type(value).__name__}")
    problem = input_problem(value, max_bytes)
    if problem is not None:
        raise invalid(field, problem, "Pass plain JSON values, nested a few levels at most.")
    return dict(value)
