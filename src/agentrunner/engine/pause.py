"""A turn that stops for a person and goes on later (issue 41): what the engine knows of it.

A ``policy`` sees each call of a step whose tool exists and whose arguments are valid (so a
person is asked about exactly what would run) and says whether it needs a person's decision,
naming the rule that asks. The step's other calls run; then the turn stops with ``TurnPaused``,
carrying what it did and the calls left. Where the pause is kept, who decides and how the run is
found again is the runner's and the store's: the engine neither stores nor waits.

A turn given a ``Resumed`` first finishes the paused step — the calls decided before it ran
(finished, denied, or answered after a crash) keep their results; each approved call runs once,
between the two marks of its ``journal`` — then goes on as any turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentrunner.engine.messages import ToolCall, ToolResult

if TYPE_CHECKING:
    from agentrunner.engine.tools import Tool
    from agentrunner.engine.turn import TurnResult

__all__ = ["CallWaits", "Journal", "Pending", "Policy", "Resumed", "TurnPaused"]

# (the call, its tool) → None: it runs; else the rule that asks a person first
Policy = Callable[[ToolCall, "Tool"], "str | None"]
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
