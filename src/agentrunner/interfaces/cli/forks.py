"""``agentrunner threads fork|rewind``: try again from a point of a thread (docs/threads.md).
The commands of ``threads_runs.threads_app``, which was past its size."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from agentrunner.interfaces.cli.console import err, out
from agentrunner.interfaces.cli.workspace import with_workspace

if TYPE_CHECKING:
    from agentrunner.store.forks import Cut
    from agentrunner.workspace.workspace import Workspace

__all__ = ["threads_fork", "threads_rewind"]

_AT = typer.Option(
    ...,
    "--at",
    help="The last message to keep, by its number (`agentrunner threads show` numbers them).",
)
_JSON = typer.Option(False, "--json", help="Print it as JSON, for scripts.")


def threads_fork(
    thread_id: str = typer.Argument(..., help="The thread id, or its beginning."),
    at: int = _AT,
    as_json: bool = _JSON,
) -> None:
    """A new thread of the same agent that begins with this thread's first messages, up to
    --at: its next run sends the model that history as it was, then the new message. The
    thread forked is left as it is."""

    async def fork(ws: Workspace) -> Cut:
        from agentrunner.run.sessions import find_thread

        thread = await find_thread(ws.runner.store, thread_id)
        return await ws.runner.store.forks.fork(thread.id, at)

    cut = with_workspace(fork)
    if as_json:
        out.print_json(data=_as_dict(cut))
        return
    thread = cut.thread
    _moved(cut)
    out.print(
        f"forked [bold]{escape(thread.forked_from or '')}[/] at message {cut.at}: "
        f"[bold]{escape(thread.id)}[/] ({_messages(cut.at)})"
    )
    err.print(
        f"[dim]go on from there: agentrunner run {escape(thread.agent_id)} "
        f'"…" --thread {escape(thread.id)}[/]'
    )


def threads_rewind(
    thread_id: str = typer.Argument(..., help="The thread id, or its beginning."),
    at: int = _AT,
    yes: bool = typer.Option(False, "--yes", help="Cut it: the thread keeps no copy."),
    as_json: bool = _JSON,
) -> None:
    """Cut a thread back to its first messages, up to --at, in place: its next run goes on
    from there. What is cut stays in the records of the runs that wrote it (`agentrunner runs
    show`). Refused while a run on the thread is queued, running or waiting."""

    async def rewind(ws: Workspace) -> Cut:
        from agentrunner.errors import AgentRunnerError, ErrorCode
        from agentrunner.run.sessions import find_thread

        thread = await find_thread(ws.runner.store, thread_id)
        if not yes:
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"rewinding thread {thread.id} removes its messages after {at} from it; "
                "nothing was cut",
                hint=f"Run `agentrunner threads rewind {thread.id} --at {at} --yes` to cut "
                f"them, or `agentrunner threads fork {thread.id} --at {at}` to keep this "
                "thread and go on in a new one.",
            )
        return await ws.runner.store.forks.rewind(thread.id, at)

    cut = with_workspace(rewind)
    if as_json:
        out.print_json(data=_as_dict(cut))
        return
    _moved(cut)
    out.print(
        f"rewound [bold]{escape(cut.thread.id)}[/] to message {cut.at}: "
        f"{_messages(cut.left_out)} cut"
    )


def _moved(cut: Cut) -> None:
    if cut.at != cut.asked:
        err.print(
            f"[dim]message {cut.asked} is among a step's tool calls: kept through "
            f"{cut.at}, their last result (a call is never kept without its answer)[/]"
        )


def _messages(n: int) -> str:
    return f"{n} message{'s' if n != 1 else ''}"


def _as_dict(cut: Cut) -> dict[str, object]:
    return {"thread": cut.thread.to_dict(), "at": cut.at, "asked": cut.asked, "cut": cut.left_out}
