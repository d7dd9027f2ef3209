"""``[approval]``: which tool calls need a person's yes, for every agent — and the one reading of
an approval block, which an agent file's ``approval:`` goes through too (``Approval.parse``).

A block says any of four things; what it leaves out is ``None`` (the other place's value, or
the default, applies): ``tools``, tool names or globs (``write_*``), or ``SERVER/TOOL`` for an
MCP server's tools (``github/*``); ``destructive``, whether the MCP tools whose server marks them
``destructiveHint: true`` need a yes as a group; ``above_usd``, a run's spend past which every
one of its tool calls needs a yes; ``timeout_s``, how long a request may wait before it counts
as denied. How a block becomes an agent's rules: ``agents.approval``.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any, ClassVar

from agentrunner.config.source import Table

__all__ = ["APPROVAL_KEYS", "DEFAULT_APPROVAL_TIMEOUT_S", "Approval", "ApprovalProblem"]

APPROVAL_KEYS: tuple[str, ...] = ("tools", "destructive", "above_usd", "timeout_s")
DEFAULT_APPROVAL_TIMEOUT_S = 86_400.0  # a day; past it a request is denied
_TOOLS_HINT = (
    "A list of tool names, globs (write_*) and SERVER/TOOL for an MCP server's tools "
    '(github/*), e.g. ["write_file", "github/*"].'
)

# (dotted key, message, hint): ``approval.tools`` — where a problem is, what, what to do
ApprovalProblem = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class Approval:
    """What one approval block says: ``[approval]`` in agentrunner.toml (every agent's) or an
    agent file's ``approval:`` (its own, key by key over the other). ``None``: not said."""

    NAME: ClassVar[str] = "approval"
    KEYS: ClassVar[tuple[str, ...]] = APPROVAL_KEYS

    tools: tuple[str, ...] | None = None
    destructive: bool | None = None
    timeout_s: float | None = None
    above_usd: float | None = None

    @classmethod
    def read(cls, table: Table) -> Approval | None:
        """``[approval]``; ``None`` when the file has none. Raises ``invalid_specification`` at
        the first wrong value's line."""
        if not table.values:
            return None
        block, problems = cls.parse(dict(table.values))
        if problems:
            key, message, hint = problems[0]
            raise table.source.error(tuple(key.split(".")), message, hint)
        return block

    @classmethod
    def parse(cls, value: Any) -> tuple[Approval | None, list[ApprovalProblem]]:
        """A block as written (a mapping; in an agent file also ``false``: no approvals, the
        defaults' included), and every problem with it. ``None`` for no block (``null``)."""
        if value is None:
            return None, []
        if value is False:  # as {tools: [], destructive: false}, and no spend asks: nothing
            return cls(tools=(), destructive=False, above_usd=math.inf), []  # needs a yes
        if not isinstance(value, dict):
            return None, [
                (
                    "approval",
                    f"'approval' must be a mapping of {', '.join(APPROVAL_KEYS)}, or false, "
                    f"got {value!r}",
                    'e.g. approval: {tools: [write_file, "github/*"], timeout_s: 3600}; '
                    "approval: false turns the project's [approval] defaults off for this agent.",
                )
            ]
        problems: list[ApprovalProblem] = []
        for key in value:
            if key not in APPROVAL_KEYS:
                near = difflib.get_close_matches(str(key), APPROVAL_KEYS, n=1)
                problems.append(
                    (
                        f"approval.{key}",
                        f"unknown key 'approval.{key}'"
                        + (f" (did you mean 'approval.{near[0]}'?)" if near else ""),
                        f"Valid keys under approval: {', '.join(APPROVAL_KEYS)}.",
                    )
                )
        block = cls(
            tools=_tools(value.get("tools"), problems),
            destructive=_destructive(value.get("destructive"), problems),
            above_usd=_above(value.get("above_usd"), problems),
            timeout_s=_timeout(value.get("timeout_s"), problems),
        )
        return block, problems


def _tools(value: Any, problems: list[ApprovalProblem]) -> tuple[str, ...] | None:
    if value is None:
        return None
    key = "approval.tools"
    if not isinstance(value, list):
        problems.append((key, f"'{key}' must be a list, got {value!r}", _TOOLS_HINT))
        return None
    for name in value:
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            problems.append((key, f"'{key}' holds {name!r}, which is not a tool name", _TOOLS_HINT))
            return None
        server, slash, tool = name.partition("/")
        if slash and (not server or not tool or "/" in tool):
            problems.append(
                (
                    key,
                    f"'{key}' holds {name!r}: an MCP server's tools are SERVER/TOOL, one "
                    "slash between two names (or globs)",
                    _TOOLS_HINT,
                )
            )
            return None
    return tuple(dict.fromkeys(value))


def _destructive(value: Any, problems: list[ApprovalProblem]) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    key = "approval.destructive"
    problems.append(
        (
            key,
            f"'{key}' must be true or false, got {value!r}",
            "true: every MCP tool whose server marks it destructive (destructiveHint) needs "
            "a person's yes.",
        )
    )
    return None


def _above(value: Any, problems: list[ApprovalProblem]) -> float | None:
    if value is None:
        return None
    key = "approval.above_usd"
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value < 0:
        problems.append(
            (
                key,
                f"'{key}' must be an amount of dollars (0 or more), got {value!r}",
                "Once a run has spent more than this, each of its tool calls needs a person's "
                "yes, e.g. above_usd: 0.50.",
            )
        )
        return None
    return float(value)


def _timeout(value: Any, problems: list[ApprovalProblem]) -> float | None:
    if value is None:
        return None
    key = "approval.timeout_s"
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value <= 0:
        problems.append(
            (
                key,
                f"'{key}' must be a positive number of seconds, got {value!r}",
                f"How long a request may wait for a person (default {DEFAULT_APPROVAL_TIMEOUT_S:g}"
                ", a day); past it the call is denied.",
            )
        )
        return None
    return float(value)
