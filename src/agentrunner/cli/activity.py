"""Who is working, while ``post`` or ``dm`` follows a channel.

On a terminal, a spinner per working agent below the conversation, gone when it goes idle;
elsewhere (a pipe, a file) one plain line on stderr when an agent starts working. A failed run
is a line with its error code either way (its notice, with the message, is in the conversation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape

from agentrunner.cli.console import err, out

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live

__all__ = ["ActivityDisplay"]


class ActivityDisplay:
    """Shows the activity events of a channel's feed (``agent.working`` / ``failed`` /
    ``idle``); ``close()`` when done following."""

    def __init__(self, stdout: Console = out, stderr: Console = err) -> None:
        self.stderr = stderr
        self.working: dict[str, str] = {}  # run id → agent id
        self.live: Live | None = None
        # The spinners go where the conversation is printed when that is a terminal (Rich
        # keeps its prints above them), else to stderr's terminal.
        screen = next((c for c in (stdout, stderr) if _live_capable(c)), None)
        if screen is not None:
            from rich.live import Live

            self.live = Live(
                self._spinners(), console=screen, transient=True, refresh_per_second=10
            )
            self.live.start()

    def show(self, kind: str, data: dict[str, Any]) -> None:
        agent, run_id = str(data.get("agent_id", "?")), str(data.get("run_id", ""))
        if kind == "agent.working":
            self.working[run_id] = agent
            if self.live is None:
                self.stderr.print(f"[dim]{escape(agent)} is working…[/]")
        elif kind == "agent.failed":
            code = escape(str(data.get("error_code", "internal")))
            line = f"[red]✗ {escape(agent)} failed ({code})[/]"
            (self.live.console if self.live else self.stderr).print(line)
        elif kind == "agent.idle":
            self.working.pop(run_id, None)
        if self.live is not None:
            self.live.update(self._spinners())

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def _spinners(self) -> RenderableType:
        from rich.console import Group
        from rich.spinner import Spinner

        return Group(
            *(
                Spinner("dots", text=f"[dim]{escape(agent)} is working…[/]")
                for agent in dict.fromkeys(self.working.values())
            )
        )


def _live_capable(console: Console) -> bool:
    return console.is_terminal and not console.is_dumb_terminal
