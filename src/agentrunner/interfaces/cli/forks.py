"""Trying again (docs/threads.md): ``agentrunner threads fork|rewind``, from a point of a
thread, and ``agentrunner runs replay``, a run sent again. Commands of ``threads_runs``' apps,
which was past its size."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from agentrunner.interfaces.cli.console import Column, err, listing, out, verbatim
from agentrunner.interfaces.cli.workspace import with_workspace

if TYPE_CHECKING:
    from agentrunner.run.replay import Replay
    from agentrunner.store.forks import Cut
    from agentrunner.store.records import RunRecord
    from agentrunner.workspace.workspace import Workspace

__all__ = ["runs_replay", "threads_fork", "threads_rewind"]

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
        out.print_json(data=cut.to_dict())
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

        forks = ws.runner.store.forks
        thread = await find_thread(ws.runner.store, thread_id)
        _, point, last = await forks.point(thread.id, at)  # a wrong point is said first
        if not yes and point < last:  # else nothing is lost: no need to ask
            cut = f"messages {point + 1}-{last}" if point < last - 1 else f"message {last}"
            moved = f" (message {at} is among a step's tool calls)" if point != at else ""
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"rewinding thread {thread.id} to message {point}{moved} removes {cut} from "
                "it; nothing was cut",
                hint=f"Run `agentrunner threads rewind {thread.id} --at {at} --yes` to cut "
                f"them, or `agentrunner threads fork {thread.id} --at {at}` to keep this "
                "thread and go on in a new one.",
            )
        return await forks.rewind(thread.id, at)

    cut = with_workspace(rewind)
    if as_json:
        out.print_json(data=cut.to_dict())
        return
    _moved(cut)
    out.print(
        f"rewound [bold]{escape(cut.thread.id)}[/] to message {cut.at}: "
        f"{_messages(cut.left_out)} cut"
    )


def _moved(cut: Cut) -> None:
    if cut.at > cut.asked:
        err.print(
            f"[dim]message {cut.asked} is among a step's tool calls: kept through "
            f"{cut.at}, their last result (a call is never kept without its answer)[/]"
        )
    elif cut.at < cut.asked:
        err.print(
            f"[dim]message {cut.asked} is among tool calls not all answered yet: kept "
            f"through {cut.at}, before them (a call is never kept without its answer)[/]"
        )


def _messages(n: int) -> str:
    return f"{n} message{'s' if n != 1 else ''}"


def runs_replay(
    run_id: str = typer.Argument(..., help="The run id, or its beginning or end."),
    model: str | None = typer.Option(
        None, "--model", help="Send it to this model (default: the model that answered it)."
    ),
    as_json: bool = _JSON,
) -> None:
    """Send a run again, as a new run beside it: on a fork of its thread cut just before its
    message, with the prompt it logged, its message and files and its model settings, on the
    model that answered it or --model. Prints the two side by side. The new run is an ordinary
    one: its tools run and its cost is counted."""

    async def replay(ws: Workspace) -> tuple[Replay, RunRecord]:
        from agentrunner.run.replay import replay_run

        done = await replay_run(ws.runner, run_id, model=model)
        record = await ws.runner.store.runs.get(done.result.run_id)
        assert record is not None
        return done, record

    try:
        done, again = with_workspace(replay)
    except KeyboardInterrupt:  # the run was cancelled with its task, and recorded so
        err.print("[yellow]cancelled[/] [dim]· the replay's run is kept: agentrunner runs list[/]")
        raise typer.Exit(130) from None
    original = done.original
    if as_json:
        out.print_json(
            data={
                "original": original.to_dict(),
                "replay": again.to_dict(),
                "answer": done.result.text,
                "thread_id": done.fork.thread.id,
            }
        )
        return
    kept = f"messages 1-{done.fork.at}" if done.fork.at else "no message before it"
    err.print(
        f"[dim]replayed {escape(original.id)} as {escape(again.id)}, on a fork of its thread "
        f"({escape(done.fork.thread.id)}, {kept})[/]"
    )
    listing(
        f"{original.agent_id}: the run and its replay",
        [Column(""), Column("original", whole=True), Column("replay", whole=True)],
        [
            ["model", *(escape(r.model or "—") for r in (original, again))],
            ["status", *(escape(r.status) for r in (original, again))],
            ["stop reason", *(escape(r.stop_reason or "—") for r in (original, again))],
            ["tokens", *(_tokens(r) for r in (original, again))],
            ["cost", *(_cost(r) for r in (original, again))],
            ["seconds", *(_seconds(r) for r in (original, again))],
        ],
    )
    out.print(verbatim(done.result.text))  # the replay's answer, as the model wrote it


def _tokens(run: RunRecord) -> str:
    usage = run.token_usage or {}
    return f"{usage.get('input_tokens', 0):,} in · {usage.get('output_tokens', 0):,} out"


def _cost(run: RunRecord) -> str:
    return f"${run.cost_micros / 1e6:.4f}" if run.cost_known else "unknown"


def _seconds(run: RunRecord) -> str:
    if run.started_at is None or run.completed_at is None:
        return "—"
    return f"{run.completed_at - run.started_at:.1f}"
