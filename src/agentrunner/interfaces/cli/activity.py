"""Who is working, while ``post`` or ``dm`` follows a channel, and what came of it.

On a terminal, a spinner per working agent below the conversation, gone when it goes idle;
elsewhere (a pipe, a file) one plain line on stderr when an agent starts working. Either way
each agent's work is closed by a line saying what came of it: it replied, it stayed silent, it
failed (with its error code: its notice, with the message, is in the conversation), it was
cancelled, or it waits for a person's decision (its notice says how to decide).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape

from agentrunner.interfaces.cli.console import err, out

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live

    from agentrunner.store.channels import ChannelMessage

__all__ = ["ActivityDisplay"]


class ActivityDisplay:
    """Shows the activity events of a channel's feed (``agent.working`` / ``failed`` /
    ``idle``) and, from the messages its agents' runs post there, whether each one replied;
    ``close()`` when done following."""

    def __init__(self, stdout: Console = out, stderr: Console = err) -> None:
        self.stderr = stderr
        self.working: dict[str, str] = {}  # run id → agent id
        self.spoke: set[str] = set()  # working runs that posted a message here
        self.told: set[str] = set()  # runs whose failure was said
        # Ended without a message so far: an answer given as plain text is posted for the
        # agent just after its run ends, so silence is only known once the follow is over.
        self.ended: dict[str, str] = {}  # run id → agent id
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
            self.told.add(run_id)
            self._failed(agent, str(data.get("error_code", "internal")))
        elif kind == "agent.idle":
            self.working.pop(run_id, None)
            outcome = data.get("outcome")
            if outcome == "completed" and run_id in self.spoke:
                self._say(f"[dim]{escape(agent)} replied[/]")
            elif outcome == "completed":
                self.ended[run_id] = agent
            elif outcome == "cancelled":
                self._say(f"[yellow]{escape(agent)} was cancelled[/]")
            elif outcome == "waiting":  # its notice, in the conversation, says how to decide
                self._say(f"[yellow]{escape(agent)} waits for a decision[/]")
            elif run_id not in self.told:
                self._failed(agent, "internal")
            self.spoke.discard(run_id)
            self.told.discard(run_id)
        if self.live is not None:
            self.live.update(self._spinners())

    def message(self, message: ChannelMessage) -> None:
        """A message posted in the channel: an agent's run that posts one replied."""
        if message.sender_kind != "agent" or message.run_id is None:
            return
        if message.run_id in self.working:
            self.spoke.add(message.run_id)
        elif message.run_id in self.ended:
            self._say(f"[dim]{escape(self.ended.pop(message.run_id))} replied[/]")

    def close(self, *, settled: bool = True) -> None:
        """Done following. ``settled``: everything posted has been read, so a run that ended
        with no message stayed silent (not so when the follow was cut short)."""
        if settled:
            for agent in self.ended.values():
                self._say(f"[dim]{escape(agent)} stayed silent[/]")
        self.ended.clear()
        if self.live is not None:
            self.live.stop()
            self.live = None

    def _failed(self, agent: str, code: str) -> None:
        self._say(f"[red]✗ {escape(agent)} failed ({escape(code)})[/]")

    def _say(self, line: str) -> None:
        (self.live.console if self.live else self.stderr).print(line)

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
