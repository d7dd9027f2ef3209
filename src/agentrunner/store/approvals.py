"""A person's decisions on what a waiting run asks (migration 19, docs/approvals.md): the
requests, decided once (the first decision wins: a guarded update, after the run's row is
taken, so the decision on a run's last request queues it again exactly once), the journal of
each approved call, and the grants "always" leaves."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentrunner.core.ids import new_id
from agentrunner.store.changes import APPROVALS_KEY, run_key, thread_key
from agentrunner.store.drivers import Op
from agentrunner.store.drivers.errors import GuardRefused
from agentrunner.store.records import from_json, to_json
from agentrunner.store.repositories import Repository

__all__ = ["ApprovalRecord", "Approvals", "Decided", "Grant", "ResumePoint"]


@dataclass(slots=True)
class ApprovalRecord:
    id: str
    run_id: str
    agent_id: str
    thread_id: str | None
    call_id: str
    position: int
    kind: str  # tool | question
    tool: str
    arguments: dict[str, Any]
    rule: str
    waits_on: str | None  # a delegation's: the run whose end answers it
    status: str  # pending | approved | denied | expired | cancelled
    decision_id: str | None
    decided_by: str | None
    decided_at: float | None
    reason: str | None
    arguments_used: dict[str, Any] | None
    edited: bool
    always: str | None
    expires_at: float
    execution: str | None  # None | started | finished
    result: dict[str, Any] | None
    created_at: float

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ApprovalRecord:
        for key in ("arguments", "arguments_used", "result"):
            row[key] = from_json(row[key])
        row["edited"] = bool(row["edited"])
        return cls(**row)

    def edited_by(self, arguments: Mapping[str, Any] | None) -> bool:
        """Whether a decision's ``arguments`` differ from those the call asked with."""
        return arguments is not None and dict(arguments) != self.arguments

    def asked(self) -> dict[str, Any]:
        """A pending request as a waiting run's result lists it (the ``approval.requested``
        event's fields)."""
        return {
            "approval_id": self.id,
            "run_id": self.run_id,
            "agent_id": self.agent_id,
            "thread_id": self.thread_id,
            "call_id": self.call_id,
            "kind": self.kind,
            "tool": self.tool,
            "arguments": self.arguments,
            "rule": self.rule,
            "expires_at": self.expires_at,
        }

    def to_dict(self) -> dict[str, Any]:
        """The request as the CLI's ``--json``, the HTTP API and the events show it."""
        return {
            "id": self.id,
            "run_id": self.run_id,
            "agent_id": self.agent_id,
            "thread_id": self.thread_id,
            "call_id": self.call_id,
            "kind": self.kind,
            "tool": self.tool,
            "arguments": self.arguments,
            "rule": self.rule,
            "status": self.status,
            "decided_by": self.decided_by,
            "decided_at": self.decided_at,
            "reason": self.reason,
            "arguments_used": self.arguments_used,
            "edited": self.edited,
            "always": self.always,
            "expires_at": self.expires_at,
            "execution": self.execution,
            "created_at": self.created_at,
        }


@dataclass(frozen=True, slots=True)
class Decided:
    """What a decision came to: ``won`` False when another decided first (``record`` is then
    the winner's); ``requeued`` when it was the run's last request."""

    record: ApprovalRecord
    won: bool
    requeued: bool


@dataclass(frozen=True, slots=True)
class Grant:
    id: str
    agent_id: str
    scope: str  # agent | thread
    scope_id: str
    tool: str
    granted_by: str
    created_at: float


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """Where a waiting run stopped (``state``: what the runner stored), what it had spent,
    and its last event's number."""

    state: dict[str, Any]
    cost_micros: int
    cost_known: bool
    usage: dict[str, int] | None
    last_seq: int


class Approvals(Repository):
    def request_op(
        self,
        *,
        run_id: str,
        agent_id: str,
        thread_id: str | None,
        call_id: str,
        position: int,
        kind: str,
        tool: str,
        arguments: Mapping[str, Any],
        rule: str,
        expires_at: float,
        waits_on: str | None = None,
    ) -> tuple[str, Op]:
        """A new request, and its id."""
        approval_id = new_id("ap_")
        op = self.op(
            "approval_insert",
            id=approval_id,
            run_id=run_id,
            agent_id=agent_id,
            thread_id=thread_id,
            call_id=call_id,
            position=position,
            kind=kind,
            tool=tool,
            arguments=to_json(dict(arguments)),
            rule=rule,
            waits_on=waits_on,
            expires_at=expires_at,
            now=time.time(),
        )
        return approval_id, op

    async def child_done_ops(
        self, child_run_id: str, agent_id: str, content: str, *, is_error: bool
    ) -> list[Op]:
        """Run ``child_run_id`` (a delegation of ``agent_id`` that waited) has ended: the call
        of the run waiting on it is answered with ``content`` and, its last request, that run
        queued again. Nothing, for a run no run waits on."""
        row = await self.db.fetch_one(self.sql["approval_waiting_on"], {"child": child_run_id})
        if row is None:
            return []
        found = ApprovalRecord.from_row(row)
        now = time.time()
        by = f"run {child_run_id}"
        event = {
            "approval_id": found.id,
            "run_id": found.run_id,
            "call_id": found.call_id,
            "tool": found.tool,
            "decision": "deny" if is_error else "approve",
            "by": by,
            "reason": f"{agent_id}'s run ended",
            "arguments": None,
            "edited": False,
            "always": None,
            "timed_out": False,
        }
        result = to_json({"content": content, "is_error": is_error})
        ops = [
            self.op("approval_lock_run", run_id=found.run_id),
            self.op("approval_child_done", child=child_run_id, by=by, now=now, result=result),
            self.op("approval_requeue", run_id=found.run_id),
            self.op(
                "event_insert_next",
                run_id=found.run_id,
                type="approval.decided",
                payload=to_json(event),
                now=now,
            ),
        ]
        if self.sql.dialect == "postgres":
            ops.append(self.op("notify_runs", agent_id=found.agent_id))
        keys = [run_key(found.run_id)] + ([thread_key(found.thread_id)] if found.thread_id else [])
        ops.append(self.changed_op(*keys))
        return ops

    def wait_ops(
        self,
        run_id: str,
        thread_id: str | None,
        state: Mapping[str, Any],
        *,
        model: str | None,
        usage: Mapping[str, int] | None,
        cost_micros: int,
        cost_known: bool,
    ) -> list[Op]:
        """The run settles ``waiting`` with its resume point, holding its thread."""
        ops = [
            self.op(
                "run_wait",
                id=run_id,
                resume=to_json(dict(state)),
                model=model,
                token_usage=to_json(usage),
                cost_micros=cost_micros,
                cost_known=cost_known,
            )
        ]
        if thread_id is not None:
            ops.append(self.op("thread_hold", thread_id=thread_id, run_id=run_id))
        return ops

    def release_ops(self, run_id: str, thread_id: str | None) -> list[Op]:
        """A run that waited settles: its thread is no longer held, its resume point gone."""
        ops = [self.op("run_resume_clear", id=run_id)]
        if thread_id is not None:
            ops.append(self.op("thread_unhold", thread_id=thread_id, run_id=run_id))
        return ops

    async def resume_point(self, run_id: str) -> ResumePoint | None:
        row = await self.db.fetch_one(self.sql["run_resume_get"], {"id": run_id})
        if row is None or row["resume"] is None:
            return None
        return ResumePoint(
            from_json(row["resume"]),
            int(row["cost_micros"]),
            bool(row["cost_known"]),
            from_json(row["token_usage"]),
            int(row["last_seq"]),
        )

    async def get(self, approval_id: str) -> ApprovalRecord | None:
        row = await self.db.fetch_one(self.sql["approval_get"], {"id": approval_id})
        return ApprovalRecord.from_row(row) if row else None

    async def ids_starting(self, prefix: str, limit: int) -> list[str]:
        return await self.ids("approval_ids_starting", prefix=prefix, limit=limit)

    async def of_run(self, run_id: str) -> list[ApprovalRecord]:
        rows = await self.db.fetch_all(self.sql["approvals_of_run"], {"run_id": run_id})
        return [ApprovalRecord.from_row(r) for r in rows]

    async def waited_on(self, run_id: str) -> list[ApprovalRecord]:
        """What a person must decide for run ``run_id`` to go on: its pending requests in the
        order of its calls, a delegation's wait replaced by what the delegated run waits on
        (down the chain: a CEO's brief waits on its CTO's request)."""
        found: list[ApprovalRecord] = []
        for record in await self.of_run(run_id):
            if record.status != "pending":
                continue
            if record.kind == "delegation" and record.waits_on is not None:
                found.extend(await self.waited_on(record.waits_on))
            else:
                found.append(record)
        return found

    async def pending(self, limit: int = 200) -> list[ApprovalRecord]:
        rows = await self.db.fetch_all(self.sql["approvals_pending"], {"limit": limit})
        return [ApprovalRecord.from_row(r) for r in rows]

    async def expired(self, now: float | None = None) -> list[str]:
        moment = now if now is not None else time.time()
        rows = await self.db.fetch_all(self.sql["approvals_expired"], {"now": moment})
        return [str(row["id"]) for row in rows]

    async def decide(
        self,
        found: ApprovalRecord,
        *,
        status: str,
        by: str,
        reason: str | None,
        arguments: Mapping[str, Any] | None,
        always: str | None,
        event: Mapping[str, Any],
        answer: str | None = None,
    ) -> Decided:
        """Decide ``found`` (``approved``, ``denied`` or ``expired``) in one transaction with
        its ``approval.decided`` event, the grant ``always`` asks for, and — the run's last
        request — the run queued again. A question's ``answer`` is its call's result, stored
        as the call's journal would store it. Refused (``won`` False) when another decided
        first."""
        decision_id = new_id()
        now = time.time()
        run_id = found.run_id
        ops = [
            self.op("approval_lock_run", run_id=run_id),
            self.op(
                "approval_decide",
                id=found.id,
                status=status,
                decision_id=decision_id,
                decided_by=by,
                now=now,
                reason=reason,
                arguments_used=to_json(dict(arguments)) if arguments is not None else None,
                edited=found.edited_by(arguments),
                always=always,
                execution=None if answer is None else "finished",
                result=None if answer is None else to_json({"content": answer, "is_error": False}),
            ),
            self.op("approval_requeue", run_id=run_id),
            self.op(
                "event_insert_next",
                run_id=run_id,
                type="approval.decided",
                payload=to_json(dict(event)),
                now=now,
            ),
        ]
        if always is not None:
            scope_id = found.agent_id if always == "agent" else (found.thread_id or "")
            ops.append(
                self.op(
                    "approval_grant_insert",
                    id=new_id("gr_"),
                    agent_id=found.agent_id,
                    scope=always,
                    scope_id=scope_id,
                    tool=found.tool,
                    granted_by=by,
                    now=now,
                )
            )
        if self.sql.dialect == "postgres":
            ops.append(self.op("notify_runs", agent_id=found.agent_id))
        keys = [run_key(run_id), APPROVALS_KEY]
        if found.thread_id:
            keys.append(thread_key(found.thread_id))
        ops.append(self.changed_op(*keys))
        # Whether this transaction queued the run again, read inside it: once committed, a
        # worker may claim the run before any read after it.
        ops.append(self.op("run_get", id=run_id))
        try:
            [run] = await self.db.fetch_in_transaction(ops)
        except GuardRefused:
            winner = await self.get(found.id)
            return Decided(winner or found, False, False)
        self.db.notify()  # SQLite's idle workers
        record = await self.get(found.id)
        assert record is not None
        return Decided(record, True, run["status"] == "created")

    async def started(self, approval_id: str) -> bool:
        """The journal's mark before an approved call runs; False: it was marked before (it
        may have run: it is not run again)."""
        changed = await self.db.execute(self.sql["approval_started"], {"id": approval_id})
        return changed > 0

    async def finished(self, approval_id: str, result: Mapping[str, Any]) -> None:
        await self.db.execute(
            self.sql["approval_finished"], {"id": approval_id, "result": to_json(dict(result))}
        )

    async def grants_for(self, agent_id: str, thread_id: str | None) -> list[str]:
        """The tools (names or patterns) ``agent_id`` may call without asking, on ``thread_id``."""
        rows = await self.db.fetch_all(
            self.sql["approval_grants_of"], {"agent_id": agent_id, "thread_id": thread_id or ""}
        )
        return [str(row["tool"]) for row in rows]

    async def grants(self) -> list[Grant]:
        rows = await self.db.fetch_all(self.sql["approval_grants_list"], {})
        return [Grant(**row) for row in rows]

    async def revoke(self, grant_id: str) -> bool:
        return await self.db.execute(self.sql["approval_grant_delete"], {"id": grant_id}) > 0
