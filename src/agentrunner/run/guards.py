"""Guards (issue 41, docs/approvals.md "Guards and policies"): tool policies that let a call
run, deny it or ask a person first, and input and output guards that may block a message before
its run sends anything to a model, or an answer before it is delivered.

Extensions register them (``run.extensions``); ``Guards.of`` puts the built-in ones a project's
``[guards]`` turns on first (``write_paths``: ``WritePaths``). A run's tool policies are
combined with its agent's approval rules by ``run.approvals.Waits.policy``; within the
policies here deny wins over ask, ask over allow, and among equals the first registered.

A policy is a plain function (it is asked for every call of a step, on the turn's loop) of a
``ToolCheck``: the call, the agent, the run's trust and what the run has spent so far. A guard
is a function, or an ``async`` one, of a ``GuardedText``; it returns ``None`` to let the text
through, or the reason it blocks it. What fails in a policy or a guard denies or blocks (it
fails closed), and is logged with its traceback.
"""

from __future__ import annotations

import inspect
import logging
import posixpath
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

from agentrunner.engine.pause import Verdict
from agentrunner.errors import AgentRunnerError, ErrorCode

if TYPE_CHECKING:
    from agentrunner.agents.spec import AgentSpec, Trust
    from agentrunner.config import Config
    from agentrunner.engine.budget import CostTracker
    from agentrunner.engine.messages import ToolCall
    from agentrunner.engine.tools import Tool

__all__ = [
    "BUILT_IN",
    "GuardedText",
    "Guards",
    "TextGuard",
    "ToolCheck",
    "ToolPolicy",
    "Verdict",
    "WritePaths",
    "guard_blocked",
]

log = logging.getLogger("agentrunner.guards")

WRITE_TOOL = "write_file"  # the files capability's (capabilities/files), its ``path`` argument
BUILT_IN = ("write_paths",)  # the built-in policies' names, which no extension may take


@dataclass(frozen=True, slots=True)
class ToolCheck:
    """What a tool policy sees of one call: the tool's ``name`` and the call's ``arguments``
    (valid for the tool: a call the model got wrong is not judged, it fails on its own);
    the ``agent``; the run's ``trust`` (its agent's, lowered to its caller's in a delegation);
    what the run has spent so far, its delegations included (``spent_micros``, micro-dollars;
    ``spent_usd``); the run and its thread; the tool's MCP ``server`` (the agent's name for
    it; ``None`` for any other tool), ``destructive`` (its server's ``destructiveHint``) and
    ``writes`` (it changes what outlasts the run). ``allow``, ``deny`` and ``ask`` make the
    verdict to return."""

    name: str
    arguments: Mapping[str, Any]
    agent: AgentSpec
    trust: Trust
    spent_micros: int
    run_id: str
    thread_id: str | None
    server: str | None = None
    destructive: bool = False
    writes: bool = False

    @property
    def spent_usd(self) -> float:
        return self.spent_micros / 1_000_000

    def allow(self) -> Verdict:
        """The call runs (as ``None`` says too)."""
        return Verdict.allow()

    def deny(self, reason: str) -> Verdict:
        """The call does not run; the model is told ``denied by policy NAME: reason``."""
        return Verdict.deny(reason)

    def ask(self, reason: str) -> Verdict:
        """A person decides first; they are told ``policy NAME: reason``."""
        return Verdict.ask(reason)


@dataclass(frozen=True, slots=True)
class GuardedText:
    """What an input or output guard sees: the ``text`` (the message a run was given, or the
    answer it is about to deliver), the ``agent``, the run and its thread (``None``: a task)."""

    text: str
    agent: AgentSpec
    run_id: str
    thread_id: str | None


ToolPolicy = Callable[[ToolCheck], "Verdict | None"]
TextGuard = Callable[[GuardedText], "str | Awaitable[str | None] | None"]
Stage = Literal["input", "output"]


def guard_blocked(stage: Stage, name: str, reason: str) -> AgentRunnerError:
    """The error of a run a guard stopped: ``guard_blocked``, naming the guard and its reason
    (also in ``details``)."""
    what = "message" if stage == "input" else "answer"
    after = (
        "Nothing was sent to a model."
        if stage == "input"
        else "The answer was not delivered; what the run cost is recorded."
    )
    return AgentRunnerError(
        ErrorCode.GUARD_BLOCKED,
        f"{stage} guard '{name}' blocked the {what}: {reason}",
        hint=f"{after} The guard comes from an extension ([extensions] modules, or an installed "
        "package's agentrunner.extensions entry point).",
        details={"guard": name, "reason": reason, "stage": stage},
    )


class Guards:
    """A runner's tool policies, input guards and output guards, each by name, in the order
    registered (``Extensions`` registers them and refuses a name given twice)."""

    def __init__(self) -> None:
        self.policies: list[tuple[str, ToolPolicy]] = []
        self.inputs: list[tuple[str, TextGuard]] = []
        self.outputs: list[tuple[str, TextGuard]] = []

    @classmethod
    def of(cls, config: Config, registered: Guards | None = None) -> Guards:
        """The built-in policies ``config``'s ``[guards]`` turns on, then ``registered``."""
        guards = cls()
        write_paths = config.guards.write_paths
        if write_paths is not None:
            guards.policies.append(("write_paths", WritePaths(write_paths, str(config.root))))
        if registered is not None:
            guards.policies += registered.policies
            guards.inputs += registered.inputs
            guards.outputs += registered.outputs
        return guards

    def judge(
        self,
        agent: AgentSpec,
        *,
        run_id: str,
        thread_id: str | None,
        cost: CostTracker,
        trust: Trust,
    ) -> Callable[[ToolCall, Tool], Verdict | None] | None:
        """The policies as one for a run (what it has spent read from ``cost`` at each call):
        its verdict on a call, each named by the policy that gave it; None when there are no
        policies."""
        policies = tuple(self.policies)
        if not policies:
            return None

        def judged(call: ToolCall, tool: Tool) -> Verdict | None:
            check = ToolCheck(
                call.name,
                call.arguments,
                agent,
                trust,
                cost.micros,
                run_id,
                thread_id,
                tool.server,
                tool.destructive,
                tool.writes,
            )
            asked = None
            for name, policy in policies:
                verdict = _verdict(name, policy, check)
                if verdict is None or verdict.action == "allow":
                    continue
                if verdict.action == "deny":
                    return verdict
                asked = asked or verdict
            return asked

        return judged

    async def check_input(
        self, agent: AgentSpec, text: str, *, run_id: str, thread_id: str | None
    ) -> None:
        """``guard_blocked`` if an input guard blocks ``text``, the message a run was given."""
        said = GuardedText(text, agent, run_id, thread_id)
        for name, guard in self.inputs:
            reason = await _blocks(name, guard, said)
            if reason is not None:
                raise guard_blocked("input", name, reason)

    def answer_check(
        self, agent: AgentSpec, *, run_id: str, thread_id: str | None
    ) -> Callable[[str], Awaitable[None]] | None:
        """What sees a run's answer before it is delivered (``Turn.check_answer``): it raises
        ``guard_blocked`` if an output guard blocks it. None when there are no output guards."""
        outputs = tuple(self.outputs)
        if not outputs:
            return None

        async def check(text: str) -> None:
            said = GuardedText(text, agent, run_id, thread_id)
            for name, guard in outputs:
                reason = await _blocks(name, guard, said)
                if reason is not None:
                    raise guard_blocked("output", name, reason)

        return check


def _verdict(name: str, policy: ToolPolicy, check: ToolCheck) -> Verdict | None:
    """``policy``'s verdict on ``check``, named ``name``; a policy that fails denies."""
    try:
        verdict: Any = policy(check)  # what an extension's code returns, whatever it says
    except Exception:
        log.exception("tool policy '%s' failed on %s; the call is denied", name, check.name)
        return Verdict.deny(
            "the policy failed (its error is in the log): the call was not run", name
        )
    if verdict is None:
        return None
    if not isinstance(verdict, Verdict):
        if inspect.isawaitable(verdict):
            close = getattr(verdict, "close", None)
            if close is not None:
                close()
        log.error("tool policy '%s' returned %r, not a verdict; the call is denied", name, verdict)
        return Verdict.deny("the policy gave no verdict; the call was not run", name)
    return replace(verdict, by=name)  # the name it was registered by, whatever it says


async def _blocks(name: str, guard: TextGuard, said: GuardedText) -> str | None:
    """Why ``guard`` blocks ``said``; None if it lets it through. One that fails blocks."""
    try:
        reason: Any = guard(said)
        if inspect.isawaitable(reason):
            reason = await reason
    except Exception as exc:
        log.exception("guard '%s' failed; what it guards is blocked", name)
        return f"the guard failed ({type(exc).__name__}: {exc})"
    if reason is None or reason is False:
        return None
    if not isinstance(reason, str):
        log.error("guard '%s' returned %r, not None or a reason; it blocks", name, reason)
        return "the guard gave no reason"
    return reason or "no reason given"


class WritePaths:
    """The built-in policy ``[guards] write_paths``: ``write_file`` writes only to ``paths``.

    A path is compared as the model wrote it, ``.`` and ``..`` folded (no symlink is followed:
    what the file scope refuses it still refuses after), relative to where the file tools'
    paths start, an absolute one under the project directory (``root``) as the relative one it
    is; an entry ending in ``/`` covers everything below that folder; each part of an entry may
    be a glob (``out/*.md``: a ``.md`` file in ``out/``, not in a folder below it)."""

    def __init__(self, paths: Sequence[str], root: str) -> None:
        self.paths = tuple(paths)
        self.root = posixpath.normpath(root)
        self._entries = [(_parts(p), p.endswith("/")) for p in self.paths]

    def __call__(self, check: ToolCheck) -> Verdict | None:
        if check.name != WRITE_TOOL or check.server is not None:
            return None
        path = check.arguments.get("path")
        if isinstance(path, str) and self.allows(path):
            return None
        where = ", ".join(self.paths) or "nowhere"
        return Verdict.deny(
            f"'{path}' is outside the paths write_file may write to ([guards] write_paths: {where})"
        )

    def allows(self, path: str) -> bool:
        """Whether ``path`` (as ``write_file`` is given it) is one ``paths`` hold."""
        if not path or path.startswith("~") or "\0" in path:
            return False
        normal = posixpath.normpath(path)
        if normal.startswith("/") and PurePosixPath(normal).is_relative_to(self.root):
            normal = posixpath.relpath(normal, self.root)
        if normal == ".." or normal.startswith("../"):
            return False
        parts = _parts(normal)
        for entry, folder in self._entries:
            if folder:
                if len(parts) > len(entry) and _same(parts[: len(entry)], entry):
                    return True
            elif len(parts) == len(entry) and _same(parts, entry):
                return True
        return False


def _parts(path: str) -> list[str]:
    """A path's parts, folded (``.``: none); an absolute one's first part is ``""``."""
    normal = posixpath.normpath(path)
    return [] if normal == "." else normal.split("/")


def _same(parts: Sequence[str], patterns: Sequence[str]) -> bool:
    return all(
        fnmatchcase(part, pattern) if any(c in pattern for c in "*?[") else part == pattern
        for part, pattern in zip(parts, patterns, strict=True)
    )
