"""A turn that stops for a person and goes on later (issue 41): what the engine knows of it.

A ``policy`` sees each call of a step whose tool exists and whose arguments are valid (so a
person is asked about exactly what would run) and gives its ``Verdict``: ``None`` (or ``allow``)
lets the call run; ``deny`` answers it, unrun, with an error result naming the policy and its
reason, and the turn goes on (unlike ``ToolDenied``, which ends it); ``ask`` leaves it for a
person's decision, naming the rule that asks. The step's other calls run; then, if any call was
left for a person, the turn stops with ``TurnPaused``, carrying what it did and the calls left.
Where the pause is kept, who decides and how the run is found again is the runner's and the
store's: the engine neither stores nor waits.

A turn given a ``Resumed`` first finishes the paused step — the calls decided before it ran
(finished, denied, or answered after a crash) keep their results; each approved call runs once,
between the two marks of its ``journal`` — then goes on as any turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agentrunner.engine.messages import ToolCall, ToolResult

if TYPE_CHECKING:
    from agentrunner.engine.tools import Tool
    from agentrunner.engine.turn import TurnResult

__all__ = ["CallWaits", "Journal", "Pending", "Policy", "Resumed", "TurnPaused", "Verdict"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """A policy's word on one tool call. ``allow``: it runs. ``deny``: it does not run, and the
    model is told ``denied by policy BY: REASON`` as the call's (error) result; the turn goes
    on. ``ask``: a person decides first; ``reason`` is the rule that asks, as the person is
    told it. ``by`` names the policy that said so."""

    action: Literal["allow", "deny", "ask"]
    reason: str = ""
    by: str = ""

    @classmethod
    def allow(cls, by: str = "") -> Verdict:
        return cls("allow", "", by)

    @classmethod
    def deny(cls, reason: str, by: str = "") -> Verdict:
        return cls("deny", reason, by)

    @classmethod
    def ask(cls, rule: str, by: str = "") -> Verdict:
        return cls("ask", rule, by)

    @property
    def rule(self) -> str:
        """What a person asked about a call this verdict asks on is told of the rule."""
        return f"policy {self.by}: {self.reason}" if self.by else self.reason

    @property
    def told(self) -> str:
        """What the model is told of a call this verdict denies."""
        return f"denied by policy {self.by or 'a policy'}: {self.reason or 'no reason given'}"


# (the call, its tool) → None (or an ``allow``): it runs; a ``deny``; an ``ask``
Policy = Callable[[ToolCall, "Tool"], "Verdict | None"]
# an approved call's marks: (call id, None) before it runs, (call id, its result) after
Journal = Callable[[str, ToolResult | None], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Pending:
    """A call of the paused step waiting for a person, at ``position`` among the step's calls;
    ``waits_on``: the run whose end answers it (a delegation whose run waits), not a person."""

    call: ToolCall
    rule: str
    position: int
    waits_on: str | None = None


class CallWaits(Exception):
    """What a tool raises when its result will come later: the run it started (``run_id``: a
    delegation) waits for a person. The turn pauses on the call as on one a person decides,
    and the call's result is that run's answer when it ends."""

    def __init__(self, run_id: str, reason: str) -> None:
        super().__init__(reason)
        self.run_id = run_id
        self.reason = reason


class TurnPaused(Exception):
    """The turn stopped for a person: ``result`` is what it did (its new messages end with the
    assistant message whose ``pending`` calls wait), ``finished`` the results of the step's
    other calls, and the counters it goes on from."""

    def __init__(
        self,
        result: TurnResult,
        pending: Sequence[Pending],
        finished: Mapping[str, ToolResult],
        *,
        steps: int,
        corrections: int,
    ) -> None:
        super().__init__(f"waiting for a person on {len(pending)} tool call(s)")
        self.result = result
        self.pending = list(pending)
        self.finished = dict(finished)
        self.steps = steps
        self.corrections = corrections


@dataclass(slots=True)
class Resumed:
    """The paused step a turn finishes first. ``calls``: the step's calls still unanswered in
    the history, in order; ``results``: those already answered (run before the pause, denied,
    or cut off by a crash after they started); ``approved``: the arguments each approved call
    runs with; ``journal``: marks each approved call before and after it runs."""

    calls: Sequence[ToolCall]
    results: Mapping[str, ToolResult]
    approved: Mapping[str, Mapping[str, Any]]
    journal: Journal
    steps: int = 0
    tool_calls: int = 0
    corrections: int = 0
    notes: Mapping[str, str] = field(default_factory=dict)  # call id → what to tell the model
