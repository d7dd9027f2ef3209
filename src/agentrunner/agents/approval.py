"""An agent's approval rules: which of its tool calls need a person's yes before they run.

Rules come from two places, key by key: the agent file's ``approval:`` over agentrunner.toml's
``[approval]`` (both read by ``config.approval.Approval.parse``). ``ApprovalRules.merge`` is the
one place they are combined; the loader calls it, so ``AgentSpec.approval`` holds the rules an
agent's runs follow, or ``None`` when nothing of it needs a yes (what a run then checks: nothing).

A rule names a tool as a file's ``tools:`` does (``write_file``), by a glob (``write_*``), or as
``SERVER/TOOL`` (``github/*``): the tools of the MCP server the agent's ``mcp_servers`` names
``SERVER``. ``destructive: true`` covers, as a group, the MCP tools whose server marks them
``destructiveHint: true`` (a server that says nothing marks nothing). ``above_usd`` makes every
call of a run that has spent more than that need a yes (``over_spend``).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase, translate
from typing import Any, Literal

from agentrunner.config.approval import (
    DEFAULT_APPROVAL_TIMEOUT_S,
    Approval,
    ApprovalProblem,
)

__all__ = [
    "FILE_DESTRUCTIVE",
    "FILE_TOOLS",
    "PROJECT_DESTRUCTIVE",
    "PROJECT_TOOLS",
    "ApprovalRules",
    "UnmatchedName",
    "approval_rules",
    "unmatched_names",
]

# Where a rule was written, as ``rule_for`` names it to the person asked.
FILE_TOOLS = "approval.tools"
FILE_DESTRUCTIVE = "approval.destructive"
FILE_ABOVE = "approval.above_usd"
PROJECT_TOOLS = "[approval] tools"
PROJECT_DESTRUCTIVE = "[approval] destructive"
PROJECT_ABOVE = "[approval] above_usd"

_Match = Callable[[str], "re.Match[str] | None"]


def _is_glob(name: str) -> bool:
    return any(c in name for c in "*?[")


def _matcher(pattern: str) -> _Match:
    return re.compile(translate(pattern)).match


@dataclass(frozen=True, slots=True)
class ApprovalRules:
    """Which tool calls of an agent need a person's yes, and how long one may be waited for
    (``timeout_s``; a request left unanswered that long is denied). ``above_usd``: past this
    spend every call of a run needs a yes. ``tools_from``, ``destructive_from`` and
    ``above_from`` say where each rule was written (the agent file or agentrunner.toml).
    """

    tools: tuple[str, ...] = ()
    destructive: bool = False
    timeout_s: float = DEFAULT_APPROVAL_TIMEOUT_S
    tools_from: str = FILE_TOOLS
    destructive_from: str = FILE_DESTRUCTIVE
    above_usd: float | None = None
    above_from: str = FILE_ABOVE
    # ``tools`` compiled once: exact names, globs, then SERVER/TOOL patterns
    _names: frozenset[str] = field(init=False, repr=False, compare=False)
    _globs: tuple[tuple[str, _Match], ...] = field(init=False, repr=False, compare=False)
    _served: tuple[tuple[str, _Match, _Match], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        plain = [t for t in self.tools if "/" not in t]
        served = [(t, *t.split("/", 1)) for t in self.tools if "/" in t]
        set_ = object.__setattr__  # frozen: set once, here
        set_(self, "_names", frozenset(t for t in plain if not _is_glob(t)))
        set_(self, "_globs", tuple((t, _matcher(t)) for t in plain if _is_glob(t)))
        set_(self, "_served", tuple((t, _matcher(s), _matcher(n)) for t, s, n in served))

    def rule_for(
        self, tool_name: str, *, destructive: bool = False, server: str | None = None
    ) -> str | None:
        """The rule that makes a call of ``tool_name`` need a person's yes, as the person is
        told it (``approval.tools: github/*``, ``[approval] destructive``); ``None``: it needs
        none. ``server``: the agent's name for the MCP server the tool comes from (``None``
        for any other tool); ``destructive``: the tool is marked destructive (``Tool``'s
        ``destructive``: its MCP server's ``destructiveHint``)."""
        if tool_name in self._names:
            return f"{self.tools_from}: {tool_name}"
        for pattern, match in self._globs:
            if match(tool_name):
                return f"{self.tools_from}: {pattern}"
        if server is not None:
            for pattern, server_match, tool_match in self._served:
                if server_match(server) and tool_match(tool_name):
                    return f"{self.tools_from}: {pattern}"
        if destructive and self.destructive:
            return self.destructive_from
        return None

    def over_spend(self, spent_micros: int) -> str | None:
        """The rule that makes any call of a run that has spent ``spent_micros`` need a yes
        (``approval.above_usd: 0.5 (the run has spent $0.61)``); ``None``: it has not spent
        more than ``above_usd``, or there is no such rule."""
        above = self.above_usd
        if above is None or spent_micros <= round(above * 1_000_000):
            return None
        return f"{self.above_from}: {above:g} (the run has spent ${spent_micros / 1e6:.2f})"

    @classmethod
    def merge(cls, defaults: Approval | None, own: Approval | None) -> ApprovalRules | None:
        """An agent's rules: its file's block (``own``) over the project's ``[approval]``
        (``defaults``), key by key — a file's ``tools`` replaces the project's list, it does not
        add to it; ``approval: false`` turns every default off. ``None`` when nothing needs a
        yes (no tool named, ``destructive`` off, no ``above_usd``), whatever ``timeout_s``
        says."""
        none = Approval()
        d, o = defaults or none, own or none
        tools = o.tools if o.tools is not None else d.tools or ()
        destructive = o.destructive if o.destructive is not None else bool(d.destructive)
        above = o.above_usd if o.above_usd is not None else d.above_usd
        if above == math.inf:  # approval: false
            above = None
        if not tools and not destructive and above is None:
            return None
        timeout = o.timeout_s or d.timeout_s or DEFAULT_APPROVAL_TIMEOUT_S
        return cls(
            tools=tools,
            destructive=destructive,
            timeout_s=float(timeout),
            # the project's where it says and the file does not; else the file's key
            tools_from=PROJECT_TOOLS if o.tools is None and d.tools else FILE_TOOLS,
            destructive_from=(
                PROJECT_DESTRUCTIVE if o.destructive is None and d.destructive else FILE_DESTRUCTIVE
            ),
            above_usd=above,
            above_from=PROJECT_ABOVE if o.above_usd is None and above is not None else FILE_ABOVE,
        )


def approval_rules(
    value: Any, defaults: Approval | None
) -> tuple[ApprovalRules | None, list[ApprovalProblem]]:
    """An agent file's ``approval:`` value, read and merged over ``defaults`` (the project's
    ``[approval]``); with the file's problems, each ``(dotted key, message, hint)``. A block
    with problems counts as not written (the defaults apply), as the loader's other keys do."""
    own, problems = Approval.parse(value)
    return ApprovalRules.merge(defaults, None if problems else own), problems


@dataclass(frozen=True, slots=True)
class UnmatchedName:
    """A name in ``approval.tools`` that matches no tool ``agents validate`` knows of.

    ``kind``: ``server``, a ``SERVER/TOOL`` whose server no ``mcp_servers`` declares (it can
    match nothing); ``typo``, a name close to a tool's and no tool's itself (it is that one,
    misspelt); ``unknown``, a name or glob no known tool has (a tool a run is given from Python
    may still have it)."""

    name: str
    kind: Literal["server", "typo", "unknown"]
    message: str
    hint: str


def unmatched_names(
    names: Iterable[str],
    *,
    tools: Collection[str],
    every_tool: Collection[str],
    servers: Collection[str],
    whose: str,
) -> list[UnmatchedName]:
    """The ``names`` (an ``approval.tools`` list) that match nothing validate can see: ``tools``
    are the names the rules' agent may be given, ``every_tool`` every tool anyone may be given
    (a name among them that this agent lacks is no typo), ``servers`` the MCP servers declared
    (whose tools are known only once they run: a name without a slash may be one of theirs).
    ``whose`` names the owner in messages: ``the agent's``, ``any agent's``."""
    hint = (
        "Name a tool as tools: does, a glob (write_*), or SERVER/TOOL for the tools of one of "
        f"{whose} mcp_servers (github/*)."
    )
    found = []
    for name in names:
        server, slash, tool = name.partition("/")
        if slash:
            if any(fnmatchcase(s, server) for s in servers):
                continue
            near = difflib.get_close_matches(server, list(servers), n=1)
            found.append(
                UnmatchedName(
                    name,
                    "server",
                    f"'{name}' names MCP server '{server}', which is not in {whose} mcp_servers"
                    + (f" (did you mean '{near[0]}/{tool}'?)" if near else ""),
                    f"{whose.capitalize()} mcp_servers: {', '.join(sorted(servers)) or 'none'}.",
                )
            )
        elif servers:
            continue  # may be one of an MCP server's tools, which validate cannot list
        elif _is_glob(name):
            if not any(fnmatchcase(t, name) for t in tools):
                message = f"'{name}' matches none of {whose} tools"
                found.append(UnmatchedName(name, "unknown", message, hint))
        elif name not in tools:
            near = [] if name in every_tool else difflib.get_close_matches(name, list(tools), n=1)
            if near:
                message = f"'{name}' is not among {whose} tools (did you mean '{near[0]}'?)"
                found.append(UnmatchedName(name, "typo", message, hint))
            else:
                message = f"'{name}' is not among {whose} tools"
                found.append(UnmatchedName(name, "unknown", message, hint))
    return found
