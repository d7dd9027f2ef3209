"""``agentrunner run`` and ``agentrunner chat``: a turn, streamed live; Ctrl-C cancels it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.text import Text

from agentrunner.interfaces.cli.console import err, out, print_error, stream, verbatim
from agentrunner.interfaces.cli.project import SET_HELP

if TYPE_CHECKING:
    from agentrunner.core.model_settings import ModelSettings
    from agentrunner.engine.messages import Attachment
    from agentrunner.events import Event, EventData, ThreadCompacted
    from agentrunner.run.request import RunResult
    from agentrunner.run.runner import AgentRunner
    from agentrunner.store.records import RunRecord

__all__ = ["WAITING_EXIT", "EventPrinter", "chat", "run"]


@dataclass(frozen=True, slots=True)
class _Session:
    """What a person chose for the turns of one command."""

    agent_id: str
    new: bool = False
    thread: str | None = None
    model: str | None = None
    fallback: tuple[str, ...] = ()
    max_steps: int | None = None
    values: dict[str, Any] = field(default_factory=dict)
    settings: ModelSettings | None = None
    attach: tuple[str, ...] = ()  # files for the (first) message, read once the project is open

    def __post_init__(self) -> None:
        from agentrunner.errors import AgentRunnerError, ErrorCode

        if self.new and self.thread is not None:
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                "--new and --thread ask for different threads",
                hint="Use --new for a fresh session thread, or --thread ID to continue one.",
            )


_THREAD = typer.Option(
    None, "--thread", help="Continue this thread of the agent (an id or its beginning)."
)
_MODEL = typer.Option(
    None, "--model", "-m", help="Use this model only, instead of the agent's models."
)
_FALLBACK = typer.Option([], "--fallback", help="With --model: a model to fall back to (repeat).")
_ATTACH = typer.Option(
    [], "--attach", "-a", help="Send a file with the message: an image or a PDF (repeat)."
)


def run(
    agent_id: str = typer.Argument(..., help="The agent id."),
    message: str = typer.Argument(
        ..., help="Your message; - reads it from stdin, @FILE from a file (@@… for a literal @)."
    ),
    new: bool = typer.Option(False, "--new", help="Start a new session thread."),
    thread: str | None = _THREAD,
    model: str | None = _MODEL,
    fallback: list[str] = _FALLBACK,
    max_steps: int | None = typer.Option(
        None,
        "--max-steps",
        "--max-turns",
        help="Override limits.max_steps (--max-turns: old name).",
    ),
    input: str | None = typer.Option(
        None, "--input", "-i", help="Template input: JSON, @file or -."
    ),
    assignments: list[str] = typer.Option([], "--set", help=SET_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON (no streaming)."),
    attach: list[str] = _ATTACH,
) -> None:
    """Run one turn of an agent, streaming its answer and tool calls."""
    from agentrunner.interfaces.cli.project import parse_input, parse_settings, read_message

    if message == "-" and input == "-":
        from agentrunner.errors import AgentRunnerError, ErrorCode

        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            "the message and --input cannot both come from stdin",
            hint="Pass one of them as @file.",
        )
    settings = parse_settings(assignments)  # before stdin is read: a typo fails at once
    text = read_message(message)
    values = parse_input(input) if input else {}
    session = _Session(
        agent_id, new, thread, model, tuple(fallback), max_steps, values, settings, tuple(attach)
    )
    status = asyncio.run(_run_once(session, text, as_json))
    if status in ("cancelled", "created", "running"):  # cancelled, or left to a worker
        raise typer.Exit(130)
    if status == "waiting":
        raise typer.Exit(WAITING_EXIT)


# ``run``'s exit status for a run that waits for a person's decision (docs/approvals.md)
WAITING_EXIT = 3


def chat(
    agent_id: str = typer.Argument(..., help="The agent id."),
    new: bool = typer.Option(False, "--new", help="Start a new session thread."),
    thread: str | None = _THREAD,
    model: str | None = _MODEL,
    fallback: list[str] = _FALLBACK,
    input: str | None = typer.Option(
        None, "--input", "-i", help="Template input for every turn: JSON or @file."
    ),
    assignments: list[str] = typer.Option([], "--set", help=SET_HELP),
    attach: list[str] = _ATTACH,
) -> None:
    """An interactive session: each line you type is a turn. Ctrl-C stops a turn; Ctrl-C at
    the prompt, Ctrl-D or /exit quits. An error is printed and the session goes on.
    ``/attach PATH`` sends a file with your next message (``--attach``: with the first)."""
    from agentrunner.interfaces.cli.project import parse_input, parse_settings

    settings = parse_settings(assignments)
    values = parse_input(input) if input else {}
    session = _Session(
        agent_id, new, thread, model, tuple(fallback), None, values, settings, tuple(attach)
    )
    asyncio.run(_chat(session))


async def _open(session: _Session) -> tuple[AgentRunner, str]:
    from agentrunner.runtime.compose import open_runner

    runner = await open_runner()
    try:
        # disabled or missing inputs: refused up front, before a thread is opened
        runner.app.agents.runnable(session.agent_id).render_system(session.values)
        if session.model is not None:  # a typo fails before the first turn, not after it
            runner.app.engine.chain([session.model, *session.fallback])
        if session.thread is not None:
            return runner, await runner.agent_thread(session.agent_id, session.thread)
        return runner, await runner.session_thread(session.agent_id, new=session.new)
    except BaseException:
        await runner.close()
        raise


async def _run_once(session: _Session, message: str, as_json: bool) -> str:
    """The run's status once this command is done with it."""
    runner, thread_id = await _open(session)
    try:
        files = [await runner.attach(path) for path in session.attach]  # refused: none ran
        return await _turn(runner, session, thread_id, message, files, stream=not as_json)
    finally:
        await runner.close()


async def _chat(session: _Session) -> None:
    from agentrunner.errors import AgentRunnerError
    from agentrunner.interfaces.cli.decide import read_line

    runner, thread_id = await _open(session)
    err.print(
        f"[dim]chatting with [bold]{escape(session.agent_id)}[/bold] on thread "
        f"{escape(thread_id)} — Ctrl-D to quit, /attach FILE to send a file[/]"
    )
    try:
        files = [await runner.attach(path) for path in session.attach]
        while True:
            line = await read_line("you › ")
            if line is None or line.strip() in ("/exit", "/quit"):
                return
            if not line.strip():
                continue
            try:
                if line.strip().startswith("/attach"):
                    files.append(await _attach_line(runner, line.strip()))
                    continue
                await _turn(runner, session, thread_id, line, files, stream=True)
                files = []
            except AgentRunnerError as exc:  # recorded with the run; the session goes on
                print_error(exc)
    finally:
        await runner.close()


async def _attach_line(runner: AgentRunner, line: str) -> Attachment:
    """``/attach PATH``: the file, read and checked now, said to go with the next message."""
    from agentrunner.errors import AgentRunnerError, ErrorCode

    path = line.removeprefix("/attach").strip().strip("'\"")
    if not path:
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            "/attach needs a file",
            hint="Type /attach PATH, e.g. /attach screenshot.png, then your message.",
        )
    file = await runner.attach(os.path.expanduser(path))
    err.print(f"[dim]attached {escape(file.label)}: it goes with your next message[/]")
    return file


async def _turn(
    runner: AgentRunner,
    session: _Session,
    thread_id: str,
    message: str,
    files: Sequence[Attachment] = (),
    *,
    stream: bool,
) -> str:
    """One turn, streamed (else printed as JSON); on a terminal, what it waits on is asked
    and the run goes on here. The run's status once done with it."""
    from agentrunner.engine.abort import AbortSignal
    from agentrunner.interfaces.cli.decide import decide_here, on_terminal
    from agentrunner.run.callbacks import AgentRunnerCallbacks
    from agentrunner.run.request import RunAgentOverrides

    abort = AbortSignal()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, abort.abort, "Ctrl-C")
    printer = EventPrinter() if stream else None
    overrides = RunAgentOverrides(
        model=session.model,
        fallback=session.fallback,
        max_steps=session.max_steps,
        model_settings=session.settings,
    )
    try:
        result = await runner.run_agent(
            session.agent_id,
            thread_id,
            message,
            AgentRunnerCallbacks(on_event=printer) if printer else None,
            overrides,
            abort,
            input=session.values,
            attachments=files,
        )
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    if printer is None:
        out.print_json(data=result.to_dict())
        return result.status
    if result.status == "waiting" and on_terminal():
        run = await decide_here(runner, result.run_id, printer)
        if run is not None:
            return _ended(await _with_spend(runner, run))
    _footer(result, thread_id)
    return result.status


class EventPrinter:
    """Streams tokens to stdout and tool activity to stderr as events arrive: a model's words
    as it wrote them (`verbatim`), a line on stderr on a line of its own (`console.stream`)."""

    def __init__(self) -> None:
        from agentrunner.events import child_of, typed

        self.typed, self.child_of = typed, child_of

    def __call__(self, kind: str, data: EventData) -> None:
        event = self.typed(kind, data)
        child = self.child_of(data)
        told = _told(event)
        if told is not None:  # what a tool produced for the person: always shown
            who = f"{child[0]} › " if child else ""
            err.print(Text.assemble(who, told, style="magenta"))
            return
        if child is not None:  # a delegated run: show its tool use, not its tokens
            match event:
                case ("agent.tool_call", call):
                    what = call["name"]
                case ("agent.message", _):
                    what = "answered"
                case _:
                    return
            agent_id, depth = child
            err.print(verbatim(f"{'  ' * depth}{agent_id} › {what}", "dim"))
            return
        match event:
            case ("agent.token", token):
                stream(token["token"])
            case ("agent.tool_call", call):
                args = json.dumps(call["input"], ensure_ascii=False)
                err.print(Text.assemble((f"→ {call['name']}", "cyan"), " ", (args[:160], "dim")))
            case ("agent.tool_result", result):
                mark = ("✗", "red") if result["is_error"] else ("←", "green")
                err.print(Text.assemble(mark, " ", (result["output_summary"][:160], "dim")))
            case ("thread.compacted", compacted):  # why this turn took longer, and cost more
                requests = compacted["requests"]
                err.print(
                    f"[dim]… {compacted['messages']} earlier messages summarized by "
                    f"{escape(compacted['model'])} ({requests} request"
                    f"{'s' if requests != 1 else ''}): {_outgrew(compacted)}[/]"
                )
            case ("model.setting_dropped", dropped):
                err.print(
                    f"[yellow]! {escape(dropped['model'])}: {escape(dropped['setting'])} not "
                    f"sent — {escape(dropped['reason'])}[/]",
                )
            case ("model.attempt_failed", failed):
                said = f"! {escape(failed['model'])}: {escape(failed['error_code'])}"
                if failed["failover"]:
                    err.print(f"[yellow]{said} — retrying or failing over[/]")
                else:  # a bad request or rejected key: the run ends with it, tried nowhere else
                    status = f" (HTTP {failed['status']})" if failed["status"] else ""
                    err.print(f"[yellow]{said}{status}[/]")


def _outgrew(compacted: ThreadCompacted) -> str:
    """Which bound on its history the thread outgrew."""
    tokens = compacted["bound_tokens"]
    match compacted["bound"]:
        case "history_tokens":
            return f"the thread outgrew history_tokens ({tokens:,} tokens)"
        case "context_window":
            return f"the thread outgrew the context window ({tokens:,} tokens for history)"
    return "asked for"


def _told(event: Event) -> Text | None:
    """A capability's output for the person, its words as the model wrote them; None for
    other events."""
    match event:
        case ("agent.notify", notify):
            return Text.assemble("🔔 ", notify["message"])
        case ("agent.file", file):
            caption = f" — {file['caption']}" if file["caption"] else ""
            return Text.assemble("📎 file sent: ", file["path"], caption)
        case ("agent.note_shared", note):
            message = f" — {note['message']}" if note["message"] else ""
            return Text.assemble("📝 note shared: ", note["title"], f" ({note['slug']})", message)
    return None


def _footer(result: RunResult, thread_id: str) -> None:
    from agentrunner.interfaces.cli.decide import print_waiting

    if result.stop_reason == "waiting":
        asked = [(a["approval_id"], a["tool"], a["arguments"], a["rule"]) for a in result.approvals]
        print_waiting(asked, result.run_id, thread_id)
        return
    _end_line(
        result.stop_reason,
        result.usage.total_tokens,
        result.usage.estimated,
        result.cost_usd if result.cost_known else None,
        result.model,
        result.run_id,
        thread_id,
    )


def _end_line(
    stop_reason: str,
    tokens: int,
    estimated: bool,
    cost_usd: float | None,
    model: str | None,
    run_id: str,
    thread_id: str | None,
) -> None:
    cost = f"${cost_usd:.4f}" if cost_usd is not None else "cost unknown"
    said = " (estimated)" if estimated else ""  # cut off, or the provider reported none
    if stop_reason == "cancelled":
        err.print(f"[yellow]cancelled[/] [dim]· {tokens:,} tokens{said} · {cost} · run {run_id}[/]")
        return
    err.print(
        f"[dim]{tokens:,} tokens{said} · {cost} · {stop_reason} · {escape(model or '')} · "
        f"run {run_id} · thread {escape(thread_id or '—')}[/]"
    )


async def _with_spend(runner: AgentRunner, run: RunRecord) -> RunRecord:
    from agentrunner.run.spend import with_spend

    return await with_spend(runner.app.store, run)


def _ended(run: RunRecord) -> str:
    """The end of a run that went on here after its decisions: its line, or its error raised
    (as a run that fails in this process raises it); its status."""
    from agentrunner.errors import AgentRunnerError, ErrorCode, code_info

    if run.status == "failed":
        code = ErrorCode(run.error_code or "internal")
        raise AgentRunnerError(
            code,
            run.error_message or "the run failed",
            hint=code_info(code).action,
            details={"run_id": run.id},
        )
    if run.status in ("completed", "cancelled"):
        usage = run.token_usage or {}
        tokens = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
        _end_line(
            run.stop_reason or run.status,
            tokens,
            bool(usage.get("estimated")),
            run.cost_micros / 1e6 if run.cost_known else None,
            run.model,
            run.id,
            run.thread_id,
        )
    return run.status
