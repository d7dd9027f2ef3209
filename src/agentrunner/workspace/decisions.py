"""Deciding what a waiting run asks, and going on with it: what ``approve`` and ``deny``, the
stdio protocol and the MCP server share (docs/approvals.md).

The decision is ``Waits.decide``'s (the first one wins). The decision on a run's last request
queues the run again; with no worker alive, it is served here, in this process — as ``post``
and ``dm`` serve their replies — otherwise a worker serves it. Either way the caller may follow
it: its events from the decision on, as they are committed (``feeds.RunFeed``), until it has
ended or waits again, and what it came to (``Outcome``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentrunner.workspace.approvals import go_on, paused_at

if TYPE_CHECKING:
    from agentrunner.events import EventData
    from agentrunner.store.approvals import ApprovalRecord, Decided
    from agentrunner.store.records import RunRecord
    from agentrunner.store.store import Store
    from agentrunner.workspace.workspace import Workspace

__all__ = ["Outcome", "decide", "outcome_of"]

OnEvent = Callable[[str, "EventData"], None]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a decision came to: the request as decided and, when it let its run go on and the
    caller followed it, the run as it then stood (``None``: it waits for its other requests,
    or was not followed), its answer and, waiting again, what it asks now."""

    decided: Decided
    run: RunRecord | None = None
    text: str = ""
    pending: list[ApprovalRecord] = field(default_factory=list)

    def run_dict(self) -> dict[str, Any] | None:
        """The run as ``run_agent`` answers one (the stdio protocol, MCP), with ``error`` for
        a run that failed; None when it was not followed."""
        run = self.run
        if run is None:
            return None
        said: dict[str, Any] = {
            "status": run.status,
            "text": self.text,
            "agent_id": run.agent_id,
            "thread_id": run.thread_id,
            "run_id": run.id,
            "stop_reason": run.stop_reason,
            "model": run.model,
            "usage": run.token_usage or {},
            "cost_usd": run.cost_micros / 1e6 if run.cost_known else None,
            "cost_known": run.cost_known,
        }
        if run.error_code:
            said["error"] = {"code": run.error_code, "message": run.error_message}
        if self.pending:
            said["approvals"] = [p.asked() for p in self.pending]
        return said

    def to_dict(self) -> dict[str, Any]:
        """``{"approval", "requeued", "run"}``: the request, whether the decision queued its
        run again, and what the run came to (``run_dict``)."""
        return {
            "approval": self.decided.record.to_dict(),
            "requeued": self.decided.requeued,
            "run": self.run_dict(),
        }


async def decide(
    ws: Workspace,
    approval_id: str,
    *,
    approve: bool,
    by: str,
    reason: str | None = None,
    arguments: Mapping[str, Any] | None = None,
    always: str | None = None,
    on_event: OnEvent | None = None,
    follow_elsewhere: bool = True,
    answer: str | None = None,
) -> Outcome:
    """Decide ``approval_id`` (``Waits.decide``: ``approval_decided`` when it was decided
    first, ``not_found``, ``validation``). A decision that queued its run again: with no
    worker alive, the run is served here (and whatever else is queued, until idle); this
    returns once the run has ended or waits again, ``on_event`` given each of its events from
    the decision on, as they are committed — also where another process serves it, unless
    ``follow_elsewhere`` is False (then it returns at once). Cancelled meanwhile, a run served
    here is cancelled too (as Ctrl-C in ``post``)."""
    store = ws.app.store
    found = await ws.runner.waits.find(approval_id)
    after = await paused_at(store, found.run_id)  # its events go on after it
    decided = await ws.runner.waits.decide(
        found.id,
        approve=approve,
        by=by,
        reason=reason,
        arguments=arguments,
        always=always,
        answer=answer,
    )
    if not decided.requeued:
        return Outcome(decided)
    if not follow_elsewhere and await store.workers.alive():
        return Outcome(decided)  # a worker goes on with it
    gone = await go_on(ws, found.run_id, on_event, after=after)
    if gone.run is None:
        return Outcome(decided)
    return await outcome_of(store, decided, gone.run)


async def outcome_of(store: Store, decided: Decided, run: RunRecord) -> Outcome:
    """What ``run`` came to once it went on: its answer, or what it asks now."""
    if run.status == "waiting":
        pending = await store.approvals.waited_on(run.id)
        return Outcome(decided, run, "", pending)
    text = ""
    if run.status == "completed":
        events = await store.events.list(run.id, limit=100_000)
        text = next(
            (str(e.payload.get("text", "")) for e in reversed(events) if e.type == "agent.message"),
            "",
        )
    return Outcome(decided, run, text)
