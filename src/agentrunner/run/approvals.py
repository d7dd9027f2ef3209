"""A person in the loop (issue 41, docs/approvals.md): which calls of a run wait for a person,
the run's pause, its resume point, and the decisions.

The rules are the agent's (``agents.approval``); a grant ("always", for a thread or an agent)
lets a tool through without asking. A run whose step asks settles ``waiting``: the step's
other calls ran and their results are kept in its resume point, each waiting call is a request,
its thread is held and its lease given up — the process may exit. The first decision on a
request wins; the decision on a run's last request queues it again, and whichever worker claims
it finishes the step from the store: each approved call runs once, journalled ``started``
before and ``finished`` after, so a crash between the two answers the call as interrupted and
never runs it again; denied calls answer "denied by NAME: reason".
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from agentrunner.engine.budget import CostTracker
from agentrunner.engine.messages import (
    AssistantMessage,
    Attachment,
    ToolCall,
    ToolResult,
    Usage,
)
from agentrunner.engine.pause import Policy, Resumed, TurnPaused, Verdict
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.run.capabilities.builtin import ASK_PERSON
from agentrunner.run.capabilities.toolset import Caller
from agentrunner.run.guards import Guards
from agentrunner.store.changes import APPROVALS_KEY
from agentrunner.store.repositories import FAR_FUTURE
from agentrunner.telemetry.tracing import NO_TRACING, Tracing

if TYPE_CHECKING:
    from agentrunner.agents.spec import AgentSpec, Trust
    from agentrunner.engine.messages import Message
    from agentrunner.engine.tools import Tool
    from agentrunner.events import ApprovalRequested
    from agentrunner.run.lifecycle import LiveRun
    from agentrunner.run.request import RunResult
    from agentrunner.run.thread import RunThread
    from agentrunner.store.approvals import ApprovalRecord, Decided, ResumePoint
    from agentrunner.store.drivers import Op
    from agentrunner.store.store import Store

__all__ = ["INTERRUPTED_APPROVED", "Waits", "denial", "thread_waiting", "waits_reason"]

INTERRUPTED_APPROVED = (
    "interrupted while running: the run stopped after this approved call started; it may have "
    "taken effect, and it was not run again"
)
DEFAULT_TIMEOUT_S = 86_400.0


def denial(record: ApprovalRecord) -> str:
    """What the model is told of a call a person did not approve."""
    if record.status == "expired":
        return f"denied: nobody decided in time ({record.reason or 'the request expired'})"
    if record.status == "cancelled":
        return "denied: the run was cancelled while it waited for a decision"
    reason = f": {record.reason}" if record.reason else ""
    return f"denied by {record.decided_by or 'a person'}{reason}"


class Waits:
    """The runs that wait for a person, over ``store``; ``guards``: the tool policies that
    judge their calls besides their agents' approval rules (``run.guards``)."""

    def __init__(
        self, store: Store, guards: Guards | None = None, tracing: Tracing = NO_TRACING
    ) -> None:
        self._store = store
        self._guards = guards or Guards()
        self._tracing = tracing  # each wait a span of the run's trace, when it goes on

    async def policy_of(self, agent: AgentSpec, run: LiveRun, trust: Trust) -> Policy | None:
        """``policy`` for ``run`` of ``agent`` (with ``trust``): what it has spent so far, and
        whether it can wait (a task, on no thread, cannot)."""
        waits = run.thread_id is not None
        return await self.policy(
            agent, run.thread_id, run.cost, trust, run_id=run.run_id, waits=waits
        )

    async def asked_of(self, run_id: str, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """What a person decides for a run that paused on ``requests``: a delegation's wait is
        what the delegated run waits on."""
        if not any(r["kind"] == "delegation" for r in requests):
            return requests
        return [r.asked() for r in await self._store.approvals.waited_on(run_id)]

    async def policy(
        self,
        agent: AgentSpec,
        thread_id: str | None,
        cost: CostTracker | None = None,
        trust: Trust | None = None,
        *,
        run_id: str = "",
        waits: bool = True,
    ) -> Policy | None:
        """The verdict on each of ``agent``'s calls in a run on ``thread_id`` (``cost``: what
        it has spent so far; ``trust``: its trust) — its approval rules, ``ask_person`` (every
        call of it asks: its answer is a person's) and the tool policies in one: deny wins over
        ask, ask over allow. A person's "always" (a grant) lets an ask through, never a deny. A
        run that cannot wait (``waits`` false: a task, which keeps no thread to go on from) is
        denied what would ask. None (nothing read) for an agent with no rules and no
        ``ask_person`` where there are no policies — every agent's run asks this, so that costs
        nothing."""
        rules = agent.approval
        person = "person" in agent.capabilities
        if rules is None and not person and not self._guards.policies:
            return None
        cost = cost or CostTracker()
        judge = self._guards.judge(
            agent, run_id=run_id, thread_id=thread_id, cost=cost, trust=trust or agent.trust
        )
        granted = await self._store.approvals.grants_for(agent.id, thread_id)

        def policy(call: ToolCall, tool: Tool) -> Verdict | None:
            if call.name == ASK_PERSON:
                if not waits:
                    return Verdict.deny("no person can be asked from a task", ASK_PERSON)
                return Verdict.ask(ASK_PERSON)
            verdict = judge(call, tool) if judge is not None else None
            if verdict is not None and verdict.action == "deny":
                return verdict
            rule = None
            if rules is not None:
                found = rules.rule_for(call.name, destructive=tool.destructive, server=tool.server)
                rule = found or rules.over_spend(cost.micros)
            if rule is not None:
                verdict = Verdict.ask(rule)
            elif verdict is None or verdict.action != "ask":
                return None
            if any(fnmatchcase(call.name, g) for g in granted):
                return None
            if not waits:
                return Verdict.deny(
                    f"it needs a person's yes ({verdict.rule}), which a task (a run on no "
                    "thread) cannot wait for",
                    verdict.by or "approval",
                )
            return verdict

        return policy

    def pause_ops(
        self, agent: AgentSpec, run: LiveRun, paused: TurnPaused, caller: Caller | None
    ) -> tuple[list[Op], list[dict[str, Any]]]:
        """The rows of a run pausing on ``paused`` — its requests (each announced by an
        ``approval.requested``), its resume point and its thread's hold — and the requests."""
        approvals = self._store.approvals
        rules = agent.approval
        timeout = rules.timeout_s if rules is not None else DEFAULT_TIMEOUT_S
        expires_at = time.time() + timeout
        ops: list[Op] = []
        requests: list[dict[str, Any]] = []
        for pending in paused.pending:
            call = pending.call
            kind = "question" if call.name == ASK_PERSON else "tool"
            if pending.waits_on is not None:
                kind = "delegation"  # answered by that run's end; no person decides it
            approval_id, op = approvals.request_op(
                run_id=run.run_id,
                agent_id=run.agent_id,
                thread_id=run.thread_id,
                call_id=call.id,
                position=pending.position,
                kind=kind,
                tool=call.name,
                arguments=call.arguments,
                rule=pending.rule,
                expires_at=expires_at if pending.waits_on is None else FAR_FUTURE,
                waits_on=pending.waits_on,
            )
            ops.append(op)
            requested: ApprovalRequested = {
                "approval_id": approval_id,
                "run_id": run.run_id,
                "agent_id": run.agent_id,
                "thread_id": run.thread_id,
                "call_id": call.id,
                "kind": kind,
                "tool": call.name,
                "arguments": call.arguments,
                "rule": pending.rule,
                "expires_at": expires_at,
            }
            run.log.emit("approval.requested", requested)
            requests.append(dict(requested))
        held = paused.finished.values()  # the files they returned: kept now, sent on resuming
        ops.extend(self._store.attachments.keep_ops(a for r in held for a in r.attachments))
        state = {
            "finished": {cid: _kept_result(r) for cid, r in paused.finished.items()},
            "steps": paused.steps,
            "tool_calls": paused.result.tool_calls,
            "corrections": paused.corrections,
        }
        if caller is not None:  # a delegation: bounded by its caller when it goes on
            state["caller"] = {
                "grant": sorted(caller.grant),
                "trust": caller.trust,
                "depth": caller.depth,
            }
        ops.append(approvals.changed_op(APPROVALS_KEY))  # the pages of what waits
        cost = run.cost
        ops.extend(
            approvals.wait_ops(
                run.run_id,
                run.thread_id,
                state,
                model=paused.result.model,
                usage=cost.usage.to_dict(),
                cost_micros=cost.micros,
                cost_known=cost.known,
            )
        )
        return ops, requests

    async def ended(self, run: LiveRun, said: str, *, failed: bool = False) -> list[Op]:
        """The rows a run that waited adds to its settle: if a run waits on it (it is a
        delegation), that run's call is answered with what it ``said`` (an error if it
        ``failed``) and, its last request, that run queued again."""
        if not run.waited:
            return []
        return await self._store.approvals.child_done_ops(
            run.run_id, run.agent_id, said, is_error=failed
        )

    @staticmethod
    def caller_of(point: ResumePoint) -> Caller | None:
        """The caller a delegation that waited was started by, as its pause kept it."""
        kept = point.state.get("caller")
        if not kept:
            return None
        trust: Trust = "sandboxed"  # the narrowest, should the stored value be unknown
        if kept["trust"] in ("workspace", "full"):
            trust = kept["trust"]
        return Caller(frozenset(kept["grant"]), trust, int(kept["depth"]))

    async def held(self, thread: RunThread, claimed: str | None) -> ResumePoint | None:
        """Where run ``claimed`` stopped, if it waited for a person on ``thread``, which it
        holds; ``thread_waiting`` for any other run on a held thread."""
        holder = thread.manifest.waiting_run_id if thread.manifest is not None else None
        if holder is None:
            return None
        if holder != claimed:
            raise thread_waiting(thread.id or "", holder)
        return await self._store.approvals.resume_point(holder)

    async def going_on(self, run: LiveRun, point: ResumePoint, thread: RunThread) -> Resumed | None:
        """A run going on after a wait: its events and spend continue from ``point``; how it
        finishes its paused step (``resumed``)."""
        run.waited = True
        run.log.seq = point.last_seq
        run.cost.micros, run.cost.known = point.cost_micros, point.cost_known
        run.cost.usage.add(Usage.from_dict(point.usage or {}))
        recent = thread.recent.messages if thread.recent else []
        unanswered = {r.call_id for r in thread.repairs if isinstance(r, ToolResult)}
        return await self.resumed(run.run_id, point, recent, unanswered)

    async def resumed(
        self, run_id: str, point: ResumePoint, history: Sequence[Message], unanswered: set[str]
    ) -> Resumed | None:
        """How run ``run_id`` finishes its paused step, from its ``point`` and its thread's
        ``history`` (whose last assistant message's ``unanswered`` calls have no result); None
        when that step is answered already (it went on, and stopped in a later one)."""
        records = await self._store.approvals.of_run(run_id)
        asked = {r.call_id: r for r in records}
        if not unanswered & asked.keys():
            return None
        message = next(m for m in reversed(history) if isinstance(m, AssistantMessage))
        calls = [c for c in message.tool_calls if c.id in unanswered]
        state = point.state
        results: dict[str, ToolResult] = {
            cid: _result_of(cid, r["name"], r) for cid, r in (state.get("finished") or {}).items()
        }
        approved: dict[str, Mapping[str, Any]] = {}
        notes: dict[str, str] = {}
        ids: dict[str, str] = {}
        for call in calls:
            record = asked.get(call.id)
            if record is not None and record.decided_at is not None:
                self._tracing.approval_waited(
                    approval_id=record.id,
                    agent_id=record.agent_id,
                    tool=record.tool,
                    decision=record.status,
                    by=record.decided_by or "",
                    requested_ns=int(record.created_at * 1e9),
                    decided_ns=int(record.decided_at * 1e9),
                )
            if record is None:
                if call.id not in results:  # ran before the pause, its result lost: never again
                    results[call.id] = ToolResult(call.id, call.name, INTERRUPTED_APPROVED, True)
                continue
            if record.status != "approved":
                results[call.id] = ToolResult(call.id, call.name, denial(record), is_error=True)
            elif record.execution == "finished" and record.result is not None:
                results[call.id] = _result_of(call.id, call.name, record.result)
            elif record.execution == "started":
                results[call.id] = ToolResult(call.id, call.name, INTERRUPTED_APPROVED, True)
            else:
                arguments = record.arguments_used or record.arguments
                approved[call.id] = arguments
                ids[call.id] = record.id
                if record.edited:
                    notes[call.id] = (
                        f"(run with arguments edited by {record.decided_by}: "
                        f"{json.dumps(arguments, ensure_ascii=False)})"
                    )
        loaded = await self._store.attachments.hydrate(list(results.values()))  # files to send
        results = dict(zip(results, loaded, strict=True))
        approvals = self._store.approvals

        async def journal(call_id: str, result: ToolResult | None) -> None:
            if result is None:
                if not await approvals.started(ids[call_id]):
                    raise AgentRunnerError(
                        ErrorCode.INTERNAL,
                        f"approved call {call_id} was started elsewhere; it is not run twice",
                    )
                return
            if result.attachments:  # a crash after this: its files are there to send
                await self._store.attachments.keep(result.attachments)
            await approvals.finished(ids[call_id], _kept_result(result))

        return Resumed(
            calls,
            results,
            approved,
            journal,
            steps=int(state.get("steps", 0)),
            tool_calls=int(state.get("tool_calls", 0)),
            corrections=int(state.get("corrections", 0)),
            notes=notes,
        )

    # -- decisions ------------------------------------------------------------------------

    async def find(self, approval_id: str) -> ApprovalRecord:
        """The request ``approval_id`` names, or the one whose id begins with it."""
        approvals = self._store.approvals
        found = await approvals.get(approval_id)
        if found is None and approval_id:
            ids = await approvals.ids_starting(approval_id, 3)
            if len(ids) == 1:
                found = await approvals.get(ids[0])
            elif ids:
                raise AgentRunnerError(
                    ErrorCode.VALIDATION,
                    f"'{approval_id}' begins more than one request's id: {', '.join(ids[:2])}, …",
                    hint="Give more of the id (agentrunner approvals lists them).",
                )
        if found is None:
            raise AgentRunnerError(
                ErrorCode.NOT_FOUND,
                f"no approval request '{approval_id}'",
                hint="List what waits with: agentrunner approvals",
            )
        return found

    async def decide(
        self,
        approval_id: str,
        *,
        approve: bool,
        by: str,
        reason: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        always: str | None = None,
        expired: bool = False,
        answer: str | None = None,
    ) -> Decided:
        """Decide a request; ``approval_decided`` (naming the first decision) when it was
        decided before, or its run no longer waits. A question (``ask_person``) is approved
        with an ``answer`` — one of its choices, if it gave some — or denied (declined)."""
        found = await self.find(approval_id)
        if found.kind == "delegation":
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"approval {found.id} is not a person's to decide: {found.rule}",
                hint="Decide what that run waits on: agentrunner approvals",
            )
        answer = _checked_answer(found, approve, answer)
        if always not in (None, "thread", "agent"):
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"always must be 'thread' or 'agent', not {always!r}",
                hint="Use --always (this thread) or --always agent.",
            )
        if always == "thread" and found.thread_id is None:
            always = "agent"
        if arguments is not None and not approve:
            arguments = None
        status = "approved" if approve else ("expired" if expired else "denied")
        decided = await self._store.approvals.decide(
            found,
            status=status,
            by=by,
            reason=reason,
            arguments=arguments,
            always=always if approve else None,
            event={
                "approval_id": found.id,
                "run_id": found.run_id,
                "call_id": found.call_id,
                "tool": found.tool,
                "decision": "approve" if approve else "deny",
                "by": by,
                "reason": reason,
                "arguments": dict(arguments) if arguments is not None else None,
                "edited": found.edited_by(arguments),
                "always": always if approve else None,
                "timed_out": expired,
            },
            answer=answer,
        )
        if not decided.won:
            first = decided.record
            if first.status == "pending":  # its run stopped waiting (cancelled)
                said = "its run no longer waits"
            else:
                said = f"it was {first.status} by {first.decided_by}" + (
                    f" ({first.reason})" if first.reason else ""
                )
            raise AgentRunnerError(
                ErrorCode.APPROVAL_DECIDED,
                f"approval {found.id} was decided first: {said}",
                hint="A request is decided once; the first decision stands.",
                details={"approval": first.to_dict()},
            )
        return decided

    async def answer(self, approval_id: str, text: str, *, by: str) -> Decided:
        """Answer the question ``approval_id`` asks (``ask_person``)."""
        return await self.decide(approval_id, approve=True, by=by, answer=text)

    async def pending(self) -> list[ApprovalRecord]:
        """What waits for a decision now: requests whose time ran out are denied first (with
        no worker running, nobody else would)."""
        await self.expire_due()
        return await self._store.approvals.pending()

    async def expire_due(self) -> int:
        """Deny every request whose time ran out; how many."""
        count = 0
        for approval_id in await self._store.approvals.expired():
            try:
                await self.decide(
                    approval_id,
                    approve=False,
                    by="timeout",
                    reason="no decision within the agent's approval timeout",
                    expired=True,
                )
            except AgentRunnerError:  # decided meanwhile
                continue
            count += 1
        return count


def _checked_answer(found: ApprovalRecord, approve: bool, answer: str | None) -> str | None:
    """What a decision answers: a question approved needs an answer (one of its choices, if
    it has some); a tool call takes none."""
    if found.kind != "question":
        if answer is not None:
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"approval {found.id} is a tool call ({found.tool}), not a question: it is "
                "approved or denied, not answered",
                hint=f"agentrunner approve {found.id} (or deny)",
            )
        return None
    if not approve:
        return None
    if answer is None or not answer.strip():
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"approval {found.id} asks a question: give the answer",
            hint=f"agentrunner answer {found.id} TEXT (or deny it to decline)",
        )
    choices = found.arguments.get("choices") or []
    if choices and answer not in choices:
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"'{answer}' is not one of the question's choices: {', '.join(map(str, choices))}",
            hint="Answer with one of the choices, exactly.",
        )
    return answer


def waits_reason(agent_id: str, child: RunResult) -> str:
    """What a delegation's call waits on, for the person looking at the run that made it."""
    ids = ", ".join(str(a["approval_id"]) for a in child.approvals)
    return f"{agent_id}'s run {child.run_id} waits for a person's decision ({ids})"


def thread_waiting(thread_id: str, holder: str) -> AgentRunnerError:
    """What anything but its holder is told of a thread a waiting run holds."""
    return AgentRunnerError(
        ErrorCode.THREAD_WAITING,
        f"thread {thread_id} waits for a person's decision on run {holder}",
        hint="Decide it (agentrunner approvals; approve ID / deny ID), then send the message "
        "again; or cancel the waiting run.",
        details={"run_id": holder},
    )


def _kept_result(result: ToolResult) -> dict[str, Any]:
    """A tool result as a paused run keeps it until it goes on: its files by reference."""
    kept: dict[str, Any] = {
        "name": result.name,
        "content": result.content,
        "is_error": result.is_error,
    }
    if result.attachments:
        kept["attachments"] = [a.to_dict() for a in result.attachments]
    return kept


def _result_of(call_id: str, name: str, kept: Mapping[str, Any]) -> ToolResult:
    files = tuple(Attachment.from_dict(a) for a in kept.get("attachments") or ())
    return ToolResult(
        call_id, name, str(kept["content"]), bool(kept["is_error"]), attachments=files
    )
