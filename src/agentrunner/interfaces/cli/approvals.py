"""``approvals``, ``approve``, ``deny``: what waits for a person, and the decisions
(docs/approvals.md). With no worker alive, a decision that lets a run go on serves it here, as
``post`` and ``dm`` serve their replies."""

from __future__ import annotations

import getpass
import json
import time
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from agentrunner.interfaces.cli.console import Column, err, listing, out
from agentrunner.interfaces.cli.workspace import with_workspace

if TYPE_CHECKING:
    from agentrunner.store.approvals import ApprovalRecord, Decided
    from agentrunner.workspace.workspace import Workspace

__all__ = ["approvals", "approve", "decider", "deny", "parse_arguments"]


def decider() -> str:
    """Who decides from this terminal: the user's login name."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container): still someone
        return "cli"


def approvals(
    as_json: bool = typer.Option(False, "--json", help="Print them as JSON, for scripts."),
) -> None:
    """What waits for a person's decision: each request's id, run, agent, tool and arguments."""

    async def work(ws: Workspace) -> list[ApprovalRecord]:
        await ws.runner.waits.expire_due()  # with no worker running, nobody else does
        return await ws.app.store.approvals.pending()

    pending = with_workspace(work)
    if as_json:
        out.print_json(data=[p.to_dict() for p in pending])
        return
    if not pending:
        err.print("[dim]nothing waits for a decision[/]")
        return
    now = time.time()
    rows = [
        [
            escape(p.id),
            escape(p.agent_id),
            escape(p.tool),
            escape(json.dumps(p.arguments, ensure_ascii=False)),
            escape(p.run_id),
            f"{max(0.0, p.expires_at - now) / 3600:.1f} h",
        ]
        for p in pending
    ]
    listing(
        "Waiting for a decision",
        [
            Column("id", whole=True),
            Column("agent", whole=True),
            Column("tool", whole=True),
            Column("arguments"),
            Column("run", whole=True, drop=2),
            Column("denied in", number=True, drop=1),
        ],
        rows,
    )
    err.print("[dim]decide: agentrunner approve ID · agentrunner deny ID --reason TEXT[/]")


def approve(
    approval_id: str = typer.Argument(..., help="The request's id (or its unique beginning)."),
    always: bool = typer.Option(
        False, "--always", help="Approve this tool from now on, on this thread."
    ),
    for_agent: bool = typer.Option(
        False, "--for-agent", help="With --always: for every thread of the agent."
    ),
    arguments: str | None = typer.Option(
        None, "--arguments", help="Run it with these arguments instead (a JSON object)."
    ),
    reason: str | None = typer.Option(None, "--reason", help="Why, for the record."),
) -> None:
    """Approve a tool call a run waits on; the run goes on once all its requests are decided."""
    edited = parse_arguments(arguments, "--arguments") if arguments is not None else None
    scope = ("agent" if for_agent else "thread") if always else None
    _decide(approval_id, approve=True, reason=reason, arguments=edited, always=scope)


def deny(
    approval_id: str = typer.Argument(..., help="The request's id (or its unique beginning)."),
    reason: str | None = typer.Option(None, "--reason", help="Told to the model, and recorded."),
) -> None:
    """Deny a tool call a run waits on: the model is told "denied by YOU: REASON"."""
    _decide(approval_id, approve=False, reason=reason, arguments=None, always=None)


def parse_arguments(text: str, label: str) -> dict[str, Any]:
    """Edited arguments as a person typed them (``label`` names where): a JSON object, or
    ``validation``."""
    from agentrunner.errors import AgentRunnerError, ErrorCode

    hint = 'Give a JSON object, e.g. {"path": "notes.txt"}.'
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"{label} is not valid JSON: {exc.msg} (column {exc.colno})",
            hint=hint,
        ) from None
    if not isinstance(value, dict):
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"{label} must be a JSON object, not {type(value).__name__}",
            hint=hint,
        )
    return value


def _decide(
    approval_id: str,
    *,
    approve: bool,
    reason: str | None,
    arguments: dict[str, Any] | None,
    always: str | None,
) -> None:
    async def work(ws: Workspace) -> tuple[Decided, str | None]:
        decided = await ws.runner.waits.decide(
            approval_id,
            approve=approve,
            by=decider(),
            reason=reason,
            arguments=arguments,
            always=always,
        )
        answer = None
        if decided.requeued and not await ws.app.store.workers.alive():
            answer = await _serve(ws, decided.record.run_id)
        return decided, answer

    decided, answer = with_workspace(work)
    record = decided.record
    verb = "[green]approved[/]" if approve else "[yellow]denied[/]"
    err.print(f"{verb} {escape(record.tool)} [dim]({escape(record.id)}, run {record.run_id})[/]")
    if not decided.requeued:
        err.print("[dim]the run waits for its other requests: agentrunner approvals[/]")
    if answer is not None:
        out.print(escape(answer))


async def _serve(ws: Workspace, run_id: str) -> str:
    """Go on with the run here (no worker is alive): what it came to."""
    from agentrunner.workspace.approvals import go_on, paused_at, waiting_on

    said: list[str] = []

    def answer(kind: str, data: Any) -> None:
        if kind == "agent.message":
            said.append(str(data.get("text", "")))

    gone = await go_on(ws, run_id, answer, after=await paused_at(ws.app.store, run_id))
    run = gone.run
    if run is None:
        return ""
    if run.status == "waiting":
        ids = ", ".join(a.id for a in await waiting_on(ws.app.store, run_id))
        return f"(the run waits again for a decision: {ids}; agentrunner approvals)"
    if run.status != "completed":
        return f"(the run {run.status}: {run.error_code or ''} {run.error_message or ''})".strip()
    return said[-1] if said else ""
