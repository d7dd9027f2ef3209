"""``agentrunner run`` and ``agentrunner chat``: a turn, streamed live; Ctrl-C cancels it."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from agentrunner.cli.console import err, out

if TYPE_CHECKING:
    from agentrunner.runner import AgentRunner, RunResult

__all__ = ["chat", "run"]


def run(
    agent_id: str = typer.Argument(..., help="The agent id."),
    message: str = typer.Argument(..., help="Your message."),
    new: bool = typer.Option(False, "--new", help="Start a new session thread."),
    thread: str | None = typer.Option(None, "--thread", help="Continue this thread."),
    model: str | None = typer.Option(None, "--model", "-m", help="Override the agent's model."),
    max_turns: int | None = typer.Option(None, "--max-turns", help="Override limits.max_turns."),
    input: str | None = typer.Option(
        None, "--input", "-i", help="Template input: JSON, @file or -."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON (no streaming)."),
) -> None:
    """Run one turn of an agent, streaming its answer and tool calls."""
    from agentrunner.cli.project import parse_input

    values = parse_input(input) if input else {}
    result = asyncio.run(
        _run_once(agent_id, message, new, thread, model, max_turns, values, as_json)
    )
    if result is not None and result.stop_reason == "cancelled":
        raise typer.Exit(130)


def chat(
    agent_id: str = typer.Argument(..., help="The agent id."),
    new: bool = typer.Option(False, "--new", help="Start a new session thread."),
    thread: str | None = typer.Option(None, "--thread", help="Continue this thread."),
    model: str | None = typer.Option(None, "--model", "-m", help="Override the agent's model."),
) -> None:
    """An interactive session: each line you type is a turn. Ctrl-C stops a turn; Ctrl-D quits."""
    asyncio.run(_chat(agent_id, new, thread, model))


async def _open(agent_id: str, new: bool, thread: str | None) -> tuple[AgentRunner, str]:
    from agentrunner.runner import AgentRunner

    runner = await AgentRunner.open()
    try:
        runner.agents.get(agent_id)
        if thread is not None:
            return runner, await runner.agent_thread(agent_id, thread)
        return runner, await runner.session_thread(agent_id, new=new)
    except BaseException:
        await runner.close()
        raise


async def _run_once(
    agent_id: str,
    message: str,
    new: bool,
    thread: str | None,
    model: str | None,
    max_turns: int | None,
    values: dict[str, Any],
    as_json: bool,
) -> RunResult | None:
    runner, thread_id = await _open(agent_id, new, thread)
    try:
        result = await _turn(
            runner, agent_id, thread_id, message, model, max_turns, values, stream=not as_json
        )
        if as_json:
            out.print_json(data=result.to_dict())
        return result
    finally:
        await runner.close()


async def _chat(agent_id: str, new: bool, thread: str | None, model: str | None) -> None:
    runner, thread_id = await _open(agent_id, new, thread)
    err.print(
        f"[dim]chatting with [bold]{escape(agent_id)}[/bold] on thread {escape(thread_id)}"
        " — Ctrl-D to quit[/]"
    )
    try:
        while True:
            try:
                line = await asyncio.to_thread(input, "you › ")
            except (EOFError, KeyboardInterrupt):
                err.print()
                return
            if line.strip() in ("/exit", "/quit"):
                return
            if line.strip():
                await _turn(runner, agent_id, thread_id, line, model, None, {}, stream=True)
    finally:
        await runner.close()


async def _turn(
    runner: AgentRunner,
    agent_id: str,
    thread_id: str,
    message: str,
    model: str | None,
    max_turns: int | None,
    values: dict[str, Any],
    *,
    stream: bool,
) -> RunResult:
    from agentrunner.callbacks import AgentRunnerCallbacks
    from agentrunner.engine.abort import AbortSignal
    from agentrunner.runner import RunAgentOverrides

    abort = AbortSignal()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, abort.abort, "Ctrl-C")
    printer = _Printer() if stream else None
    try:
        result = await runner.run_agent(
            agent_id,
            thread_id,
            message,
            AgentRunnerCallbacks(on_event=printer) if printer else None,
            RunAgentOverrides(model=model, max_turns=max_turns),
            abort,
            input=values,
        )
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        if printer is not None:
            printer.end()
    if stream:
        _footer(result, thread_id)
    return result


class _Printer:
    """Streams tokens to stdout and tool activity to stderr as events arrive."""

    def __init__(self) -> None:
        self.mid_line = False

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        child = data.get("from_agent")
        told = _told(kind, data)
        if told is not None:  # what a tool produced for the person: always shown
            self.end()
            who = f"{escape(child)} › " if child else ""
            err.print(f"[magenta]{who}{told}[/]", soft_wrap=True)
            return
        if child is not None:  # a delegated run: show its tool use, not its tokens
            if kind in ("agent.tool_call", "agent.message"):
                self.end()
                what = data["name"] if kind == "agent.tool_call" else "answered"
                indent = "  " * int(data.get("depth", 1))
                err.print(f"[dim]{indent}{escape(child)} › {escape(what)}[/]")
            return
        if kind == "agent.token":
            sys.stdout.write(data["token"])
            sys.stdout.flush()
            self.mid_line = not data["token"].endswith("\n")
        elif kind == "agent.tool_call":
            self.end()
            args = json.dumps(data["input"], ensure_ascii=False)
            err.print(
                f"[cyan]→ {escape(data['name'])}[/] [dim]{escape(args[:160])}[/]", soft_wrap=True
            )
        elif kind == "agent.tool_result":
            mark = "[red]✗[/]" if data["is_error"] else "[green]←[/]"
            err.print(f"{mark} [dim]{escape(data['output_summary'][:160])}[/]", soft_wrap=True)
        elif kind == "model.attempt_failed":
            self.end()
            err.print(
                f"[yellow]! {escape(data['model'])}: {escape(str(data['error_code']))} — "
                "retrying or failing over[/]"
            )

    def end(self) -> None:
        if self.mid_line:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self.mid_line = False


def _told(kind: str, data: dict[str, Any]) -> str | None:
    """A capability's output for the person, as a line of markup; None for other events."""
    if kind == "agent.notify":
        return f"🔔 {escape(data['message'])}"
    if kind == "agent.file":
        caption = f" — {escape(data['caption'])}" if data.get("caption") else ""
        return f"📎 file sent: {escape(data['path'])}{caption}"
    if kind == "agent.note_shared":
        message = f" — {escape(data['message'])}" if data.get("message") else ""
        return f"📝 note shared: {escape(data['title'])} ({escape(data['slug'])}){message}"
    return None


def _footer(result: RunResult, thread_id: str) -> None:
    if result.stop_reason == "cancelled":
        err.print(f"[yellow]cancelled[/] [dim]· run {result.run_id}[/]")
        return
    cost = f"${result.cost_usd:.4f}" if result.cost_known else "cost unknown"
    err.print(
        f"[dim]{result.usage.total_tokens:,} tokens · {cost} · {result.stop_reason} · "
        f"{escape(result.model or '')} · run {result.run_id} · thread {escape(thread_id)}[/]"
    )
