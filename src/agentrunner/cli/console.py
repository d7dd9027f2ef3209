"""Terminal output shared by the commands: one stdout console, one stderr console."""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape

from agentrunner.errors import AgentRunnerError

__all__ = ["err", "out", "print_error", "print_internal", "print_traceback", "state"]

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


@dataclass
class _State:
    debug: bool = False


state = _State()


def print_error(exc: AgentRunnerError) -> None:
    """``error: file:line: code: message`` then the hint, on stderr."""
    err.print(f"[bold red]error:[/] {escape(exc.one_line())}", soft_wrap=True)
    if exc.hint:
        err.print(f"  [dim]hint:[/] {escape(exc.hint)}", soft_wrap=True)


def print_internal(exc: BaseException) -> None:
    err.print(
        f"[bold red]error:[/] internal: {escape(type(exc).__name__)}: {escape(str(exc))}",
        soft_wrap=True,
    )
    err.print("  [dim]hint:[/] re-run with --debug for the traceback, and report it")


def print_traceback() -> None:
    err.print_exception(show_locals=False)
