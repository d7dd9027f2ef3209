"""The ``agentrunner`` command line: thin commands over the Python API.

One ``except`` at the edge turns an ``AgentRunnerError`` into one plain line (code, message,
hint) and an exit status; tracebacks only with ``--debug`` (or ``AGENTRUNNER_DEBUG=1``).
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    try:
        _main(args)
    except SystemExit as done:
        raise SystemExit(_after_telemetry(done.code)) from None
    finally:
        from agentrunner.interfaces.cli.console import finish

        finish()


def _after_telemetry(status: int | str | None) -> int | str | None:
    """The last spans and metrics are sent as the command ends (for at most 3 s), here rather
    than at interpreter exit, so that Ctrl-C during that wait gives it up quietly and the
    command exits 130 (or with the status it already had)."""
    setup = sys.modules.get("agentrunner.telemetry.setup")  # not imported: nothing to send
    if setup is None or not setup.telemetry_to_send():
        return status
    try:
        sent = setup.send_telemetry()
    except KeyboardInterrupt:  # before its own handler was reached
        sent = False
    # All that is left is the interpreter's exit (its atexit hooks): a Ctrl-C that comes once
    # the wait is over, as a person gives up on it, would print a traceback over an exit
    # already under way.
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt:  # the one that came before the line above
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sent = False
    return status if sent or status not in (0, None) else 130


def _global_first(args: list[str]) -> list[str]:
    """``--debug`` and ``--log-format`` wherever they were typed, moved before the command (as
    ``agentrunner run ceo hi --debug``, appended to a command line, is typed), up to ``--``."""
    ahead: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest += args[i:]
            break
        if arg == "--debug" or arg.startswith("--log-format="):
            ahead.append(arg)
        elif arg == "--log-format":
            ahead += args[i : i + 2]
            i += 1
        else:
            rest.append(arg)
        i += 1
    return ahead + rest


def _main(args: list[str]) -> None:
    from agentrunner.errors import AgentRunnerError
    from agentrunner.interfaces.cli import console
    from agentrunner.interfaces.cli.app import app

    args = _global_first(args)
    console.state.debug = "--debug" in args or os.environ.get("AGENTRUNNER_DEBUG") == "1"
    try:
        app(args=args, prog_name="agentrunner")
    except SystemExit as done:
        # Typer turns a Ctrl-C that reached it into a silent exit 130: said here, once, for
        # every command that has no words of its own for it (run, chat, brief and gc have).
        if done.code == 130 and _interrupted(done):
            console.err.print("[yellow]cancelled[/]")
        raise
    except AgentRunnerError as exc:
        if console.state.debug:
            console.print_traceback()
        console.print_error(exc)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        console.err.print("[yellow]cancelled[/]")
        raise SystemExit(130) from None
    except Exception as exc:
        if console.state.debug:
            raise
        console.print_internal(exc)
        raise SystemExit(1) from None


def _interrupted(done: BaseException) -> bool:
    """Whether ``done`` came of a KeyboardInterrupt no command spoke of (one that did raises
    its exit ``from None``)."""
    seen: BaseException | None = done
    while seen is not None and not seen.__suppress_context__:
        seen = seen.__cause__ or seen.__context__
        if isinstance(seen, KeyboardInterrupt):
            return True
    return False
