"""``approvals``, ``approve``, ``deny``: what waits for a person, and the decisions
(docs/approvals.md). With no worker alive, a decision that lets a run go on serves it here, as
``post`` and ``dm`` serve their replies."""

from __future__ import annotations

import dataclasses
import getpass
import json
import time
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from agentrunner.interfaces.cli.console import Column, err, listing, out, verbatim
from agentrunner.interfaces.cli.workspace import with_workspace

if TYPE_CHECKING:
    from agentrunner.store.approvals import ApprovalRecord, Grant
    from agentrunner.workspace.decisions import Outcome
    from agentrunner.workspace.workspace import Workspace

__all__ = ["answer", "approvals", "approve", "decider", "deny", "grants", "parse_arguments"]


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
        return await ws.runner.waits.pending()

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


def grants(
    revoke: str | None = typer.Option(
        None, "--revoke", help="Take back this grant (its id): the tool asks again."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print them as JSON, for scripts."),
) -> None:
    """What "approve --always" granted: the tools that run without asking, on a thread or for
    an agent."""

    async def work(ws: Workspace) -> list[Grant]:
        if revoke is not None and not await ws.app.store.approvals.revoke(revoke):
            from agentrunner.errors import AgentRunnerError, ErrorCode

            raise AgentRunnerError(
                ErrorCode.NOT_FOUND,
                f"no grant '{revoke}'",
                hint="List them with: agentrunner grants",
            )
        return await ws.app.store.approvals.grants()

    granted = with_workspace(work)
    if revoke is not None:
        err.print(f"[yellow]revoked[/] {escape(revoke)}")
    if as_json:
        out.print_json(data=[dataclasses.asdict(g) for g in granted])
        return
    if not granted:
        err.print("[dim]no grants: every rule asks[/]")
        return
    rows = [
        [
            escape(g.id),
            escape(g.agent_id),
            escape(g.tool),
            f"{g.scope} {escape(g.scope_id)}",
            escape(g.granted_by),
        ]
        for g in granted
    ]
    listing(
        "Granted (approve --always)",
        [
            Column("id", whole=True),
            Column("agent", whole=True),
            Column("tool", whole=True),
            Column("where"),
            Column("by", whole=True, drop=1),
        ],
        rows,
    )


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


def answer(
    approval_id: str = typer.Argument(..., help="The question's id (or its unique beginning)."),
    text: str = typer.Argument(..., help="Your answer (one of its choices, if it gave some)."),
) -> None:
    """Answer a question an agent asked (ask_person); deny it to decline."""
    _decide(approval_id, approve=True, reason=None, arguments=None, always=None, answer=text)


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
    answer: str | None = None,
) -> None:
    from agentrunner.workspace import decisions

    async def work(ws: Workspace) -> Outcome:
        return await decisions.decide(
            ws,
            approval_id,
            approve=approve,
            by=decider(),
            reason=reason,
            arguments=arguments,
            always=always,
            answer=answer,
            follow_elsewhere=False,  # a worker goes on with it
        )

    outcome = with_workspace(work)
    record = outcome.decided.record
    verb = "[green]approved[/]" if approve else "[yellow]denied[/]"
    if answer is not None:
        verb = "[green]answered[/]"
    err.print(f"{verb} {escape(record.tool)} [dim]({escape(record.id)}, run {record.run_id})[/]")
    if not outcome.decided.requeued:
        err.print("[dim]the run waits for its other requests: agentrunner approvals[/]")
    said = _answer(outcome)
    if said is not None:
        out.print(verbatim(said))  # the agent's words, as it wrote them


def _answer(outcome: Outcome) -> str | None:
    """What the run came to, served here; None: it was not (a worker goes on with it)."""
    run = outcome.run
    if run is None:
        return None
    if run.status == "waiting":
        ids = ", ".join(a.id for a in outcome.pending)
        return f"(the run waits again for a decision: {ids}; agentrunner approvals)"
    if run.status != "completed":
        return f"(the run {run.status}: {run.error_code or ''} {run.error_message or ''})".strip()
    return outcome.text
