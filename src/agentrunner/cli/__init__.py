"""The ``agentrunner`` command line: thin commands over the Python API.

One ``except`` at the edge turns an ``AgentRunnerError`` into one plain line (code, message,
hint) and an exit status; tracebacks only with ``--debug`` (or ``AGENTRUNNER_DEBUG=1``).
"""

from __future__ import annotations

import os
import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    from agentrunner.cli import console
    from agentrunner.cli.app import app
    from agentrunner.errors import AgentRunnerError

    args = sys.argv[1:] if argv is None else argv
    console.state.debug = "--debug" in args or os.environ.get("AGENTRUNNER_DEBUG") == "1"
    try:
        app(args=args, prog_name="agentrunner")
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
