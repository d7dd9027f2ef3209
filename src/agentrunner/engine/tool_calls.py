"""A turn's tool calls: the calls of one model reply run, and each given its result.

Apart from the turn's loop because of the rule the history depends on: every call the model
makes gets exactly one result, in the order the model made them, whatever becomes of it — run,
retried (``ToolRetry``: an error the model is shown and may correct), refused for a name or
arguments the model got wrong, denied by a policy (the turn goes on) or by a tool
(``ToolDenied`` ends the turn), left for a person (``engine.pause``), crashed, cancelled, or
never run past a limit — so the conversation can always be sent again. The calls' events, their
spans, the secrets cut from what a tool returns and the correction budget go with it. The loop
decides when tools run and what the turn's outcome is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from agentrunner.engine.messages import Attachment, ToolCall, ToolResult
from agentrunner.engine.pause import CallWaits, Journal, Pending, Resumed
from agentrunner.engine.secrets import Secrets
from agentrunner.engine.tools import ToolContext, ToolDenied, ToolRetry, render_output
from agentrunner.errors import ErrorCode
from agentrunner.events import AgentToolResult, Emit

if TYPE_CHECKING:
    from agentrunner.engine.turn import StopReason, Turn, TurnError

__all__ = ["INTERRUPTED", "ToolCalls"]

log = logging.getLogger("agentrunner.engine")

INTERRUPTED = "interrupted: the run stopped before this tool call finished"


class ToolCalls:
    """One turn's tool calls: ``run`` runs a reply's calls (``count``: how many so far),
    ``answer`` gives those that will not run a result. A failure that ends the turn is raised
    as the turn's error, which ``error`` makes with what the turn had done."""

    def __init__(
        self,
        turn: Turn,
        emit: Emit,
        error: Callable[[ErrorCode, str, StopReason], TurnError],
        start: int,
    ) -> None:
        self.turn = turn
        self.emit = emit  # the turn's: silent once the turn is cancelled
        self.error = error
        self.start = start  # where the turn's messages begin in its history
        self.tools = {t.name: t for t in turn.tools}
        self.count = 0
        self.corrections = 0
        self.finished: dict[str, ToolResult] = {}
        self.journal: Journal | None = None  # set while a paused step's approved calls run
        self.deferred: dict[str, CallWaits] = {}  # calls whose result another run will give

    async def run(self, calls: Sequence[ToolCall], model: str) -> list[Pending]:
        """Run the calls of the reply ``model`` (the model of the attempt that answered) made,
        concurrently, and append their results to the history. With a policy, the calls it
        denies are answered without running, and the calls it asks a person about are left:
        they are returned (the others ran or were denied, their results kept in ``finished``,
        none appended) for the turn to pause on."""
        limits = self.turn.limits
        if limits.max_tool_calls is not None and self.count + len(calls) > limits.max_tool_calls:
            self.answer(calls, "not run: the tool call limit was reached")
            raise self.error(
                ErrorCode.TURN_LIMIT,
                f"reached max_tool_calls ({limits.max_tool_calls})",
                "max_steps",
            )
        self.count += len(calls)
        if log.isEnabledFor(logging.INFO):  # an agent's decision, for structured logs
            names = [call.name for call in calls]
            log.info("chose tools: %s", ", ".join(names), extra={"tools": names})
        for call in calls:
            self.emit(
                "agent.tool_call",
                {"call_id": call.id, "name": call.name, "input": call.arguments, "model": model},
            )
        if self.turn.before_tools is not None:
            # The conversation so far (ending with these calls) is made durable before any
            # tool runs, so a crash leaves a record the next run can repair.
            await self.turn.before_tools(self.turn.messages[self.start :])
        self.finished = {}
        if self.turn.policy is None:
            await self.execute(calls, calls)
            pending: list[Pending] = []
        else:
            pending = self.judged(calls)  # the calls it denies are answered in ``finished``
            asked = {p.call.id for p in pending}
            left = [c for c in calls if c.id not in asked and c.id not in self.finished]
            await self.execute(left, calls, append=not pending, keep=True)
        if self.deferred:  # a tool's result comes later (a delegation that waits)
            positions = {c.id: n for n, c in enumerate(calls)}
            pending.extend(
                Pending(c, w.reason, positions[c.id], waits_on=w.run_id)
                for c in calls
                if (w := self.deferred.get(c.id)) is not None
            )
            pending.sort(key=lambda p: p.position)
            self.deferred = {}
        return pending

    def judged(self, calls: Sequence[ToolCall]) -> list[Pending]:
        """The policy's verdicts on ``calls``: those it denies are answered (an error result
        naming the policy, in ``finished``), those it asks a person about returned. Only calls
        that would run as they are (a known tool, valid arguments) are judged, so a person
        decides on exactly what would run; the others get their own error when they run."""
        policy = self.turn.policy
        assert policy is not None
        pending = []
        for position, call in enumerate(calls):
            tool = self.tools.get(call.name)
            if tool is None or call.raw_arguments is not None:
                continue
            if tool.validation_error(call.arguments) is not None:
                continue
            verdict = policy(call, tool)
            if verdict is None or verdict.action == "allow":
                continue
            if verdict.action == "deny":
                self.settle(call, verdict.told, error=True)
                # not the model's mistake: credited against the count its error result adds
                # when the step's results are appended (now, or after a pause)
                self.corrections -= 1
            else:
                pending.append(Pending(call, verdict.rule, position))
        return pending

    async def resume(self, resumed: Resumed) -> None:
        """Finish a paused step: its approved calls run, each between its journal's marks;
        every call's result, decided before or now, is appended in the order of the calls."""
        self.count, self.corrections = resumed.tool_calls, resumed.corrections
        self.finished = dict(resumed.results)
        approved = [
            ToolCall(c.id, c.name, dict(resumed.approved[c.id]))
            for c in resumed.calls
            if c.id not in resumed.results
        ]
        self.journal = resumed.journal
        try:
            await self.execute(approved, resumed.calls, keep=True, notes=resumed.notes)
        except asyncio.CancelledError:  # one call, cancelled as it ran: the step is answered
            if any(c.id not in self.finished for c in resumed.calls):
                self.answer(resumed.calls, INTERRUPTED)
            raise
        finally:
            self.journal = None

    async def execute(
        self,
        calls: Sequence[ToolCall],
        step: Sequence[ToolCall],
        *,
        append: bool = True,
        keep: bool = False,
        notes: Mapping[str, str] | None = None,
    ) -> None:
        """Run ``calls`` concurrently; then (``append``) append the results of the ``step``'s
        calls (those run now, and those ``finished`` already held when ``keep``), in order. If
        the turn ends here, every call of the step is answered."""
        if not keep:
            self.finished = {}
        try:
            if len(calls) == 1:
                await self.run_one(calls[0])
            elif calls:
                async with asyncio.TaskGroup() as group:
                    for call in calls:
                        group.create_task(self.run_one(call))
        except* ToolDenied as group:
            self.answer(step, INTERRUPTED)
            raise self.error(
                ErrorCode.TOOL_DENIED, str(group.exceptions[0]) or "tool call denied", "error"
            ) from None
        except* _ToolCrashed as group:
            crash = group.exceptions[0]
            assert isinstance(crash, _ToolCrashed)
            self.answer(step, INTERRUPTED)
            raise self.error(
                ErrorCode.TOOL_FAILED, f"tool '{crash.name}' failed: {crash.cause}", "error"
            ) from crash.__cause__
        if any(c.id not in self.finished and c.id not in self.deferred for c in calls):
            # A tool of several raised CancelledError, which a task group takes for that task
            # being cancelled: the turn is cancelled, as with a single tool.
            self.answer(step, INTERRUPTED)
            raise asyncio.CancelledError
        if not append or self.deferred:
            return
        results = [self.finished[c.id] for c in step]
        if notes:
            results = [
                replace(r, content=f"{notes[r.call_id]}\n{r.content}") if r.call_id in notes else r
                for r in results
            ]
        errors = sum(1 for r in results if r.is_error)
        self.turn.messages.extend(results)
        self.finished = {}
        self.corrections += errors
        if errors and self.corrections > self.turn.limits.max_corrections:
            raise self.error(
                ErrorCode.TOOL_FAILED,
                f"the model kept making invalid tool calls ({self.corrections} so far)",
                "invalid_tool_call",
            )

    async def run_one(self, call: ToolCall) -> None:
        tracing = self.turn.tracing
        journal = self.journal
        if journal is not None:  # an approved call: marked started before, finished after
            await journal(call.id, None)
        with tracing.tool(call) as span:  # current while the tool runs: runs it starts nest
            await self.call(call)
            if call.id in self.deferred:
                return
            tracing.tool_result(span, self.finished[call.id])
        if journal is not None:
            await journal(call.id, self.finished[call.id])

    async def call(self, call: ToolCall) -> None:
        tool = self.tools.get(call.name)
        if tool is None:
            known = ", ".join(self.tools) or "none"
            self.settle(call, f"Unknown tool '{call.name}'. Available tools: {known}.", error=True)
            return
        if call.raw_arguments is not None:
            self.settle(
                call, f"The arguments are not valid JSON: {call.raw_arguments[:200]}", error=True
            )
            return
        problem = tool.validation_error(call.arguments)
        if problem is not None:
            self.settle(call, f"Invalid arguments for '{call.name}': {problem}", error=True)
            return
        try:
            value = await tool.fn(
                call.arguments, ToolContext(call.id, call.name, self.turn.tool_context)
            )
            text, files = render_output(value)
        except ToolRetry as exc:
            self.settle(call, str(exc), error=True)
            return
        except CallWaits as exc:  # answered when the run it started ends
            self.deferred[call.id] = exc
            return
        except (ToolDenied, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise _ToolCrashed(call.name, exc, self.turn.secrets) from exc
        self.settle(call, text, error=False, files=files)

    def settle(
        self, call: ToolCall, content: str, *, error: bool, files: tuple[Attachment, ...] = ()
    ) -> None:
        """``call``'s result: ``content`` (the runtime's secrets cut from it) and the images
        or PDFs its tool returned, which its event names (never their bytes)."""
        if self.turn.secrets:
            content = self.turn.secrets.scrub(content)
        result = ToolResult(call.id, call.name, content, is_error=error, attachments=files)
        self.finished[call.id] = result
        event: AgentToolResult = {
            "call_id": call.id,
            "name": call.name,
            "success": not error,
            "is_error": error,
            "output_summary": content[:200],
            "output": content,
        }
        if files:
            event["attachments"] = [file.to_dict() for file in files]
        self.emit("agent.tool_result", event)

    def answer(self, calls: Sequence[ToolCall], reason: str) -> None:
        """Give every call of the last assistant message a result, so the history can be resent."""
        for call in calls:
            self.turn.messages.append(
                self.finished.get(call.id) or ToolResult(call.id, call.name, reason, is_error=True)
            )
        self.finished = {}


class _ToolCrashed(Exception):
    def __init__(self, name: str, cause: BaseException, secrets: Secrets | None) -> None:
        self.name = name
        self.cause = f"{type(cause).__name__}: {cause}"
        if secrets:  # the run's error, its record and events quote it: no key a tool read
            self.cause = secrets.scrub(self.cause)
        super().__init__(f"tool '{name}' failed: {self.cause}")  # what its span says
