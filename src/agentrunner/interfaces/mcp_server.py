"""``agentrunner mcp``: the project's agents served over MCP (stdio), for MCP clients — an IDE, a
desktop assistant, another agent framework — to run them and read their threads.

A thin interface (DESIGN layering): each tool is one call into the runner, the task runner or
the store's repositories, and returns the same JSON shapes as the HTTP API and the stdio
protocol. Failures come back as tool errors (``is_error``) whose text, after the SDK's
``Error executing tool <name>:``, starts with the error taxonomy's code, so a model reading them
can tell a bad argument from a provider outage. The
tools are in docs/mcp.md. Needs the ``mcp`` extra; ``agentrunner mcp`` says so when it is missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field

from agentrunner._version import __version__
from agentrunner.engine.abort import AbortSignal
from agentrunner.engine.messages import Attachment
from agentrunner.errors import AgentRunnerError, ErrorCode, error_line
from agentrunner.events import EventData, typed
from agentrunner.run.attachment_entries import attach_entries, entries_of
from agentrunner.run.callbacks import AgentRunnerCallbacks
from agentrunner.run.request import RunAgentOverrides
from agentrunner.run.runner import AgentRunner
from agentrunner.runtime.compose import runner_with_tasks
from agentrunner.store.records import thread_message_dict
from agentrunner.workspace import decisions
from agentrunner.workspace.tasks import TaskRunner
from agentrunner.workspace.workspace import Workspace

__all__ = ["build_mcp_server", "serve_mcp"]

INSTRUCTIONS = """\
agentrunner runs the agents of one project. list_agents says who they are; run_agent sends one
of them a message on a thread (its current session unless you name one) and returns its answer
with the run's id, usage and cost; execute_task runs an agent's prompt template once with
structured input. list_threads, read_thread and get_run read what was recorded. A run whose
agent needs a person's yes for a tool answers with status "waiting" and its approvals (each
with an approval_id); list_approvals lists what waits, decide_approval approves or denies one,
and the run goes on."""

BY = "mcp"  # who decided, when the client does not say


class Answer(BaseModel):
    """What the person at the client is asked about a tool call (MCP elicitation)."""

    approve: bool = Field(description="Let the agent make this call")
    reason: str = Field(default="", description="Why (told to the agent when it is denied)")


class FileArg(BaseModel):
    """A file sent with the message (an image or a PDF): its bytes, or the digest of a file
    already kept. Read and checked as the HTTP API's are (``run/attachment_entries``)."""

    name: str = Field(description="the file's name, as the agent sees it")
    data: str | None = Field(
        default=None, description="the file's bytes, base64 (or a base64 data URL)"
    )
    sha256: str | None = Field(
        default=None,
        description="instead of data: the digest of a file already kept (read_thread names a "
        "message's files with theirs)",
    )
    detail: str | None = Field(
        default=None, description="auto, low or high: what OpenAI models see of an image"
    )


async def _files(runner: AgentRunner, given: list[FileArg] | None) -> tuple[Attachment, ...]:
    """The files of a tool's ``attachments``, read and checked; ``validation`` or
    ``attachment_refused`` naming one, before anything runs."""
    if not given:
        return ()
    entries = entries_of([f.model_dump(exclude_none=True) for f in given], "attachments")
    return await attach_entries(entries, runner)


def build_mcp_server(runner: AgentRunner, tasks: TaskRunner) -> MCPServer:
    """An MCP server whose tools call ``runner`` and ``tasks``."""
    server: MCPServer = MCPServer(
        "agentrunner", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )

    ws = Workspace(runner)  # what serves a decided run when no worker is alive

    def failed(exc: AgentRunnerError) -> ToolError:
        return ToolError(_error_text(str(exc.code), exc.message, exc.hint))

    @server.tool()
    async def list_agents() -> list[dict[str, Any]]:
        """The project's agents: id, name, description, model, tools, who they report to."""
        return [spec.summary() for spec in runner.app.agents]

    @server.tool()
    async def run_agent(
        agent: str,
        message: str,
        ctx: Context,
        thread_id: str | None = None,
        new_thread: bool = False,
        input: dict[str, Any] | None = None,
        model: str | None = None,
        attachments: list[FileArg] | None = None,
    ) -> dict[str, Any]:
        """Send ``message`` to ``agent`` and return its answer (``text``) with the run's id,
        thread, stop reason, usage and cost. The run continues the agent's current session
        thread unless ``thread_id`` names one or ``new_thread`` starts one; ``input`` fills the
        agent's ``{{input.x}}`` placeholders; ``attachments`` are images and PDFs sent with the
        message. Cancelling the call stops the run, recorded as cancelled. A run that waits
        for a person's yes on a tool call answers with status ``waiting`` and its
        ``approvals`` (decide_approval decides them); a client that supports elicitation is
        asked instead, and the run goes on."""
        try:
            files = await _files(runner, attachments)  # refused before a thread is opened
            thread = (
                await runner.agent_thread(agent, thread_id)
                if thread_id
                else await runner.session_thread(agent, new=new_thread)
            )
            progress = _Progress(ctx)
            abort = AbortSignal()
            run = asyncio.ensure_future(
                runner.run_agent(
                    agent,
                    thread,
                    message,
                    AgentRunnerCallbacks(on_event=progress.event),
                    RunAgentOverrides(model=model),
                    abort,
                    input=input or {},
                    attachments=files,
                )
            )
            try:
                result = await asyncio.shield(run)
            except asyncio.CancelledError:
                progress.cancel()
                await _stop(run, abort)
                raise
            except BaseException:
                progress.cancel()
                raise
            await progress.close()
            answered = result.to_dict()
            if result.status == "waiting" and _elicits(ctx):
                answered = await _asked_in_client(ctx, ws, answered)
        except AgentRunnerError as exc:
            raise failed(exc) from exc
        return answered

    @server.tool()
    async def execute_task(
        agent: str,
        input: dict[str, Any] | None = None,
        model: str | None = None,
        cache: bool | None = None,
        attachments: list[FileArg] | None = None,
    ) -> dict[str, Any]:
        """Run ``agent``'s prompt template once with ``input``, on no thread: a one-shot task.
        ``attachments`` are images and PDFs sent with it (part of its cache key). Returns its
        status, text, structured output (when the agent declares an output schema), usage,
        cost and whether the answer came from the result cache (used when the agent file says
        ``cache: true``, or ``cache`` asks for it)."""
        try:
            files = await _files(runner, attachments)
        except AgentRunnerError as exc:
            raise failed(exc) from exc
        outcome = await tasks.execute(
            agent, input or {}, model=model, cache=cache, attachments=files
        )
        if outcome.error is not None:
            error = outcome.error
            raise ToolError(_error_text(error["code"], error["message"], error.get("hint")))
        return outcome.to_dict()

    @server.tool()
    async def list_threads(agent: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
        """Threads, most recently updated first; only ``agent``'s when given."""
        if agent is not None:
            try:
                runner.app.agents.get(agent)
            except AgentRunnerError as exc:
                raise failed(exc) from exc
        threads = await runner.app.store.threads.list(agent_id=agent, limit=max(1, min(limit, 500)))
        return [t.to_dict() for t in threads]

    @server.tool()
    async def read_thread(thread_id: str, after: int = 0, limit: int = 50) -> dict[str, Any]:
        """A thread and its messages from number ``after`` + 1 on (at most ``limit``); page on
        with the last message's ``seq``."""
        thread = await runner.app.store.threads.get(thread_id)
        if thread is None:
            raise failed(_not_found("thread", thread_id))
        page = await runner.app.store.messages.page(
            thread_id, after=max(0, after), limit=max(1, min(limit, 1000))
        )
        return {
            "thread": thread.to_dict(),
            "messages": [thread_message_dict(*entry) for entry in page],
        }

    @server.tool()
    async def list_approvals() -> list[dict[str, Any]]:
        """What waits for a person's decision: each request's id, run, agent, tool and
        arguments, and when it is denied if nobody decides (``expires_at``)."""
        return [p.to_dict() for p in await runner.waits.pending()]

    @server.tool()
    async def decide_approval(
        approval_id: str,
        decision: Literal["approve", "deny"],
        ctx: Context,
        reason: str | None = None,
        arguments: dict[str, Any] | None = None,
        always: Literal["thread", "agent"] | None = None,
        by: str | None = None,
        answer: str | None = None,
    ) -> dict[str, Any]:
        """Approve or deny a tool call a run waits on (``approval_id`` from run_agent's
        ``approvals`` or list_approvals; a unique beginning is enough). ``reason`` is told to
        the agent when denied; ``arguments`` approves with these instead (recorded as edited);
        ``always`` approves the tool from now on, on this ``thread`` or for the ``agent``; a
        question (kind ``question``, ask_person) is approved with its ``answer``.
        Returns the request (``approval``), whether the run was queued again (``requeued``:
        it was its last request) and then what the run came to (``run``, as run_agent answers;
        ``waiting`` again with new ``approvals``). The first decision wins: a second one is
        ``approval_decided``, naming it."""
        progress = _Progress(ctx)
        try:
            outcome = await decisions.decide(
                ws,
                approval_id,
                approve=decision == "approve",
                by=by or BY,
                reason=reason,
                arguments=arguments,
                always=always,
                on_event=progress.event,
                answer=answer,
            )
        except AgentRunnerError as exc:
            progress.cancel()
            raise failed(exc) from exc
        except BaseException:
            progress.cancel()
            raise
        await progress.close()
        return outcome.to_dict()

    @server.tool()
    async def get_run(run_id: str) -> dict[str, Any]:
        """One run: status, stop reason, model, error, usage, cost and times."""
        from agentrunner.run.spend import with_spend

        run = await runner.app.store.runs.get(run_id)
        if run is None:
            raise failed(_not_found("run", run_id))
        return (await with_spend(runner.app.store, run)).to_dict()

    return server


def _elicits(ctx: Context) -> bool:
    """Whether the client can ask its person a question (MCP elicitation, form mode)."""
    capabilities = ctx.client_capabilities
    return capabilities is not None and capabilities.elicitation is not None


async def _asked_in_client(ctx: Context, ws: Workspace, result: dict[str, Any]) -> dict[str, Any]:
    """A waiting run's requests put to the client's person, one by one (elicitation); each
    answer decided (declined: denied), and the run goes on, asked again while it waits. One
    dismissed, or a client that cannot ask after all, leaves the rest pending: the run's
    result then lists them, to decide with decide_approval or any other interface."""
    while result["status"] == "waiting":
        outcome = None
        for request in result["approvals"]:
            question = (
                f"{request['agent_id']} asks to call {request['tool']} with "
                f"{json.dumps(request['arguments'], ensure_ascii=False)}. Approve?"
            )
            try:
                answer = await ctx.elicit(question, Answer)
            except (MCPError, ValueError):  # it could not ask, or the answer was not one
                return await _still_waiting(ws, result)
            if answer.action == "cancel":
                return await _still_waiting(ws, result)
            data = answer.data if answer.action == "accept" else None
            outcome = await decisions.decide(
                ws,
                request["approval_id"],
                approve=data is not None and data.approve,
                by=BY,
                reason=(data.reason if data is not None else "declined in the MCP client") or None,
            )
        said = outcome.run_dict() if outcome is not None else None
        if said is None:  # its last request was decided elsewhere meanwhile
            return await _still_waiting(ws, result)
        result = said
    return result


async def _still_waiting(ws: Workspace, result: dict[str, Any]) -> dict[str, Any]:
    """``result`` with the requests its run still waits on, as they are now."""
    records = await ws.app.store.approvals.waited_on(result["run_id"])
    return {**result, "approvals": [r.asked() for r in records]}


class _Progress:
    """Forwards a run's steps, tool calls and what its tools produce for people (notifications,
    files, shared notes) as MCP progress notifications, in order; the result's events are the
    full record. A client that sent no progress token gets none (the SDK drops them)."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._count = 0
        self._sender = asyncio.ensure_future(self._send())

    def event(self, kind: str, data: EventData) -> None:
        match typed(kind, data):
            case ("agent.token", _):
                pass  # the most frequent
            case ("step.started", step):
                self._queue.put_nowait(f"step {step['step']} ({step['model']})")
            case ("agent.tool_call", call):
                self._queue.put_nowait(f"calling {call['name']}")
            case ("agent.notify", notify):
                self._queue.put_nowait(f"notification: {notify['message']}")
            case ("agent.file", file):
                self._queue.put_nowait(f"file sent: {file['path']}")
            case ("agent.note_shared", note):
                self._queue.put_nowait(f"note shared: {note['title']}")

    async def _send(self) -> None:
        while (message := await self._queue.get()) is not None:
            self._count += 1
            with contextlib.suppress(Exception):  # a client that went away misses progress
                await self._ctx.report_progress(self._count, message=message)

    async def close(self) -> None:
        """Send what is queued, then stop."""
        self._queue.put_nowait(None)
        await self._sender

    def cancel(self) -> None:
        self._sender.cancel()


async def _stop(run: asyncio.Future[Any], abort: AbortSignal) -> None:
    """The client cancelled the call: stop the run at its next step and wait until it has
    recorded itself as cancelled, so the thread is left whole for the next call."""
    abort.abort("cancelled by the MCP client")
    with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
        await run


def _error_text(code: str, message: str, hint: str | None) -> str:
    said = error_line(code, message)
    return f"{said} (hint: {hint})" if hint else said


_FINDING = {
    "thread": "list_threads lists the threads.",
    "run": "run_agent returns its run_id; read_thread shows the run_id of each message.",
}


def _not_found(kind: str, key: str) -> AgentRunnerError:
    return AgentRunnerError(ErrorCode.NOT_FOUND, f"no {kind} '{key}'", hint=_FINDING[kind])


async def serve_mcp() -> None:
    """Serve MCP on stdin/stdout for the project at or above the working directory."""
    async with runner_with_tasks() as (runner, tasks):
        await build_mcp_server(runner, tasks).run_stdio_async()
