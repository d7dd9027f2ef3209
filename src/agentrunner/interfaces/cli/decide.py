"""Deciding on a terminal what a run waits on (docs/approvals.md): ``run``, ``chat`` and a
foreground ``brief`` ask inline — yes, no (with a reason), always (this thread), show the
arguments, edit them — then go on with the run in this process, printing the rest of it as it
comes (``workspace.approvals.go_on``). Without a terminal, or at Ctrl-C, they print the
commands that decide and leave the run waiting."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.text import Text

from agentrunner.interfaces.cli.console import end_line, err, markup, print_error, verbatim

if TYPE_CHECKING:
    from agentrunner.interfaces.cli.run import EventPrinter
    from agentrunner.run.runner import AgentRunner
    from agentrunner.store.approvals import ApprovalRecord
    from agentrunner.store.records import RunRecord

__all__ = ["Asked", "asked_of", "decide_here", "on_terminal", "print_waiting", "read_line"]

# What a request is shown as: its id, tool, arguments and the rule that asks for it.
Asked = tuple[str, str, dict[str, Any], str]

_CHOICES = escape(
    "[y]es · [n]o (with a reason) · [a]lways (on this thread) · [s]how the arguments · [e]dit them"
)
_SHORT = 300  # the arguments shown with the question; `s` shows them whole


def on_terminal() -> bool:
    """Whether a person is there to ask: stdin and stderr are terminals."""
    return sys.stdin.isatty() and sys.stderr.isatty()


async def read_line(text: str) -> str | None:
    """A line from the person, or None when they quit (Ctrl-D, or Ctrl-C at the prompt). The
    prompt starts on a line of its own."""
    end_line()
    return await _LINES.read(text)


class _Lines:
    """The person's lines, read by one daemon thread for the whole process: a thread blocked
    in ``input()`` cannot be stopped (and a pool thread would keep the process alive after
    Ctrl-C until Enter is pressed), so a question given up by Ctrl-C leaves that thread
    reading, and the line it reads answers the next question — never a second thread racing
    it for the same line."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._asks: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._reading = False  # the thread is in input(), for a question given up or this one
        self._answer: tuple[asyncio.AbstractEventLoop, asyncio.Future[str | None]] | None = None
        self._early: list[str | None] = []  # read when no question was open
        self._pending = b""  # read from a piped stdin past the last line given

    async def read(self, text: str) -> str | None:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[str | None] = loop.create_future()

        def give_up() -> None:
            if not answer.done():
                answer.set_result(None)

        loop.add_signal_handler(signal.SIGINT, give_up)  # before the question shows
        try:
            with self._lock:
                if self._early:
                    return self._early.pop(0)
                self._answer = (loop, answer)
                if self._reading:  # still reading for a question given up: it answers this
                    sys.stderr.write(text)
                    sys.stderr.flush()
                else:
                    self._asks.put(text)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._read_lines, daemon=True, name="agentrunner-input"
                )
                self._thread.start()
            line = await answer
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            with self._lock:
                if self._answer is not None and self._answer[1] is answer:
                    self._answer = None
        if line is None:
            sys.stderr.write("\n")  # leave the terminal on a fresh line
        return line

    def _read_lines(self) -> None:
        while True:
            text = self._asks.get()
            with self._lock:
                self._reading = True
            try:
                line: str | None = input(text) if sys.stdin.isatty() else self._piped(text)
            except (EOFError, KeyboardInterrupt):
                line = None
            with self._lock:
                self._reading = False
                waiting, self._answer = self._answer, None
                if waiting is None:
                    self._early.append(line)
                    continue
            loop, answer = waiting
            loop.call_soon_threadsafe(_settle, answer, line)

    def _piped(self, prompt: str) -> str:
        """A line of a stdin that is no terminal, read from its file descriptor. ``input()``
        would read it through ``sys.stdin``'s buffer, holding its lock while it waits; this
        daemon thread holding it as the interpreter shuts down (the person quit meanwhile) is
        a fatal error, "could not acquire lock for <stdin> at interpreter shutdown" (a
        terminal's ``input()`` reads through readline, without that lock)."""
        sys.stdout.write(prompt)
        sys.stdout.flush()
        while b"\n" not in self._pending:
            chunk = os.read(sys.stdin.fileno(), 65536)
            if not chunk:
                if not self._pending:
                    raise EOFError
                self._pending += b"\n"  # a last line without its line break
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode("utf-8", errors="replace").removesuffix("\r")


def _settle(answer: asyncio.Future[str | None], line: str | None) -> None:
    if not answer.done():
        answer.set_result(line)


_LINES = _Lines()


def print_waiting(asked: Sequence[Asked], run_id: str, thread_id: str | None) -> None:
    """What the run waits on, and the commands that decide it."""
    for approval_id, tool, arguments, rule in asked:
        shown = json.dumps(arguments, ensure_ascii=False)
        err.print(
            Text.assemble(
                markup(f"[yellow]waiting for a decision[/] on [bold]{escape(tool)}[/]("),
                shown[:_SHORT],
                markup(
                    f") [dim]· {escape(rule)}[/]\n"
                    f"  [dim]approve:[/] agentrunner approve {approval_id}"
                    f"   [dim]deny:[/] agentrunner deny {approval_id} --reason …"
                ),
            )
        )
    held = f" (it holds thread {escape(thread_id)})" if thread_id else ""
    err.print(f"[dim]run {run_id} waits{held}; agentrunner approvals lists what waits[/]")


def asked_of(records: Sequence[ApprovalRecord]) -> list[Asked]:
    return [(r.id, r.tool, r.arguments, r.rule) for r in records]


async def decide_here(
    runner: AgentRunner,
    run_id: str,
    printer: EventPrinter,
    sink: Callable[[str, Any], None] | None = None,
) -> RunRecord | None:
    """Ask the person about each request run ``run_id`` waits on, decide each, and once all
    are decided go on with the run here (or follow it, served by a worker), its events passed
    to ``sink`` (by default ``printer``); again
    each time it waits again. Returns the run as it then is: ended, or still ``waiting`` when
    the person pressed Ctrl-C at a question (the commands that decide it are printed), or
    ``cancelled`` by Ctrl-C while it ran here."""
    from agentrunner.workspace.approvals import go_on, paused_at, waiting_on
    from agentrunner.workspace.workspace import Workspace

    store = runner.app.store
    ws = Workspace(runner)  # closed with the runner
    while True:
        run = await store.runs.get(run_id)
        if run is None or run.status != "waiting":
            return run
        pending = await waiting_on(store, run_id)
        after = await paused_at(store, run_id)
        for i, request in enumerate(pending):
            if not await _ask(runner, request, len(pending) - i):
                left = await waiting_on(store, run_id)
                print_waiting(asked_of(left), run_id, run.thread_id)
                return await store.runs.get(run_id)
        if pending and await waiting_on(store, run_id):
            continue  # one was refused (decided elsewhere meanwhile): what is left is asked
        # nothing left to ask: it goes on — or, a delegation's decided, the run it waits on
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, stop.set)
        try:
            gone = await go_on(
                ws, run_id, sink or printer, after=after, delegations=True, stop=stop
            )
        finally:
            loop.remove_signal_handler(signal.SIGINT)
        if gone.stopped and not gone.served_here:
            err.print("[yellow]stopped following[/] [dim]· a worker goes on with the run[/]")
            return gone.run
        waits = gone.run is not None and gone.run.status == "waiting"
        if not pending and waits and not await waiting_on(store, run_id):
            return gone.run  # nothing to ask, and nothing went on


async def _ask(runner: AgentRunner, request: ApprovalRecord, left: int) -> bool:
    """Ask about ``request`` until it is decided (or refused: decided first elsewhere);
    False when the person quit (Ctrl-C, Ctrl-D)."""
    from agentrunner.errors import AgentRunnerError
    from agentrunner.interfaces.cli.approvals import decider, parse_arguments

    shown = json.dumps(request.arguments, ensure_ascii=False)
    more = f" [dim]({left} to decide)[/]" if left > 1 else ""
    err.print(
        Text.assemble(
            markup(
                f"[yellow]?[/] [bold]{escape(request.agent_id)}[/] wants to run "
                f"[bold]{escape(request.tool)}[/]("
            ),
            shown[:_SHORT],
            markup(f"{'…' if len(shown) > _SHORT else ''}) [dim]· {escape(request.rule)}[/]{more}"),
        )
    )
    while True:
        err.print(f"  {_CHOICES}")
        choice = await read_line("  decide › ")
        if choice is None:
            return False
        word = choice.strip().lower()
        decision: dict[str, Any]
        if word in ("y", "yes"):
            decision = {"approve": True}
        elif word in ("a", "always"):
            decision = {"approve": True, "always": "thread"}
        elif word in ("n", "no"):
            reason = await read_line("  reason (Enter for none) › ")
            if reason is None:
                return False
            decision = {"approve": False, "reason": reason.strip() or None}
        elif word in ("s", "show"):
            err.print(verbatim(json.dumps(request.arguments, ensure_ascii=False, indent=2)))
            continue
        elif word in ("e", "edit"):
            text = await read_line("  arguments (JSON; Enter keeps them) › ")
            if text is None:
                return False
            if not text.strip():
                continue
            try:
                edited = parse_arguments(text, "what you typed")
            except AgentRunnerError as exc:
                print_error(exc)
                continue
            decision = {"approve": True, "arguments": edited}
        else:
            err.print("[dim]  answer y, n, a, s or e (Ctrl-C: decide later)[/]")
            continue
        try:
            decided = await runner.waits.decide(request.id, by=decider(), **decision)
        except AgentRunnerError as exc:  # decided first elsewhere, or its run stopped waiting
            print_error(exc)
            return True
        record = decided.record
        verb = "[green]approved[/]" if record.status == "approved" else "[yellow]denied[/]"
        edited_note = " [dim](arguments edited)[/]" if record.edited else ""
        err.print(f"{verb} {escape(record.tool)}{edited_note}")
        return True
