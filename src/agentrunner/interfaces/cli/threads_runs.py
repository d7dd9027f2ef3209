"""``agentrunner threads list|show|compact|delete`` and ``agentrunner runs list|cancel|show``."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import signal
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.markup import escape
from rich.text import Text

from agentrunner.interfaces.cli.console import Column, err, listing, markup, out, verbatim
from agentrunner.interfaces.cli.cost import cache_line

if TYPE_CHECKING:
    from agentrunner.engine.messages import Attachment
    from agentrunner.run.spend import CacheSpend
    from agentrunner.store.approvals import ApprovalRecord
    from agentrunner.store.records import RunRecord, StepRecord, ThreadSummary
    from agentrunner.store.store import Store

__all__ = ["print_files", "runs_app", "threads_app"]

threads_app = typer.Typer(help="Conversations and their messages.", no_args_is_help=True)
runs_app = typer.Typer(
    help="Runs: steps, messages, tool calls, costs, stop reasons.", no_args_is_help=True
)
T = TypeVar("T")
_STATUS = {
    "completed": "green",
    "failed": "red",
    "cancelled": "yellow",
    "running": "cyan",
    "created": "dim",
}


def _with_store(work: Callable[[Store], Awaitable[T]]) -> T:
    from agentrunner.config import load_config

    config = load_config()  # before the loop: nothing to stall yet

    async def main() -> T:
        from agentrunner.store.store import open_project_store

        store = await open_project_store(config)
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(main())


def _when(epoch: float | None) -> str:
    return dt.datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M:%S") if epoch else "—"


_JSON = typer.Option(False, "--json", help="Print it as JSON, for scripts.")


def _usd(micros: int | None, known: bool = True) -> str:
    if micros is None or not known:
        return "unknown"
    return f"${micros / 1e6:.4f}"


@threads_app.command("list")
def threads_list(
    agent: str | None = typer.Option(None, "--agent", help="Only this agent's threads."),
    limit: int = typer.Option(30, "--limit", help="How many, newest first."),
    as_json: bool = _JSON,
) -> None:
    """The most recent threads."""
    threads = _with_store(lambda s: s.threads.list(agent_id=agent, limit=limit))
    if as_json:
        out.print_json(data=[t.to_dict() for t in threads])
        return
    listing(
        "Threads",
        [
            Column("id", whole=True),
            Column("agent", whole=True, drop=2 if agent is None else 9),
            Column("title"),
            Column("messages", number=True, drop=1),
            Column("updated", whole=True, drop=3),
        ],
        [
            [
                escape(t.id),
                escape(t.agent_id),
                verbatim(t.title or "—"),
                str(t.message_count),
                _when(t.updated_at),
            ]
            for t in threads
        ],
    )


@threads_app.command("show")
def threads_show(
    thread_id: str = typer.Argument(..., help="The thread id, or its beginning."),
    limit: int = typer.Option(200, "--limit", help="How many messages."),
    as_json: bool = _JSON,
) -> None:
    """A thread's messages, oldest first; where a turn stopped, why."""
    from agentrunner.engine.messages import AssistantMessage, ToolResult, UserMessage

    async def load(store: Store) -> Any:
        from agentrunner.run.sessions import find_thread

        thread = await find_thread(store, thread_id)
        page = await store.messages.page(thread.id, limit=limit)
        cut = {r for _, m, r, _ in page if isinstance(m, AssistantMessage) and m.interrupted}
        summary = await store.threads.summary(thread.id) if thread.summary_through else None
        return thread, page, {r: await store.runs.get(r) for r in cut if r}, summary

    thread, page, stopped, summary = _with_store(load)
    if as_json:
        from agentrunner.store.records import thread_message_dict

        out.print_json(
            data={
                "thread": thread.to_dict(),
                "summary": summary.to_dict() if summary else None,
                "messages": [thread_message_dict(*e) for e in page],
            }
        )
        return
    forked = (
        f" · forked from {escape(thread.forked_from)} at message {thread.forked_at}"
        if thread.forked_from
        else ""
    )
    out.print(
        f"[bold]{escape(thread.title or thread.id)}[/] "
        f"[dim]· {escape(thread.agent_id)} · {thread.message_count} messages{forked}[/]\n"
    )
    if summary is not None:  # what runs are sent in place of the messages it covers
        _print_summary(summary)
    for seq, message, run_id, _ in page:
        if isinstance(message, UserMessage):
            unsent = " [yellow](not sent to the model: its run ended first)[/]" * message.unsent
            out.print(markup(f"[bold blue]user[/] [dim]#{seq}[/]{unsent}"))
            out.print(verbatim(message.content))
            print_files(message.attachments)
            out.print()
        elif isinstance(message, AssistantMessage):
            cut = " [yellow](interrupted)[/]" if message.interrupted else ""
            out.print(f"[bold green]assistant[/] [dim]#{seq}[/]{cut}")
            if message.text:
                out.print(verbatim(message.text))
            run = stopped.get(run_id) if message.interrupted else None
            if run is not None:  # why it stopped: for people, never sent to the model
                out.print(verbatim(f"✗ run {run.id} {_why(run)}", "red"))
            elif message.interrupted and run_id in stopped:  # its run is no more
                out.print(verbatim(f"✗ run {run_id}: removed by the [retention] rules", "dim"))
            for call in message.tool_calls:
                shown = json.dumps(call.arguments, ensure_ascii=False)[:200]
                out.print(Text.assemble((f"→ {call.name}", "cyan"), " ", (shown, "dim")))
            out.print()
        elif isinstance(message, ToolResult):
            mark = ("✗", "red") if message.is_error else ("←", "green")
            said = f"{message.name} #{seq}: {message.content[:300]}"
            out.print(Text.assemble(mark, " ", (said, "dim")))
            print_files(message.attachments)
            out.print()


def print_files(files: Sequence[Attachment]) -> None:
    """A message's files: name, type, size, digest (their bytes stay in the store)."""
    for a in files:
        shape = f"{a.width}×{a.height}" if a.width else f"{a.pages} pages"
        out.print(
            f"[magenta]attached {escape(a.name or '(unnamed)')}[/] [dim]{a.media_type} · {shape} · "
            f"{a.size:,} bytes · sha256 {a.sha256[:12]}[/]"
        )


@threads_app.command("compact")
def threads_compact(
    thread_id: str = typer.Argument(..., help="The thread id, or its beginning."),
    as_json: bool = _JSON,
) -> None:
    """Summarize a thread's messages now, by [compaction] model: its next run is sent the
    summary in their place (the messages stay). Runs do it themselves when a thread outgrows
    the history's bound. Ctrl-C cancels it."""

    async def main() -> ThreadSummary | None:
        from agentrunner.engine.abort import AbortSignal
        from agentrunner.errors import AgentRunnerError, ErrorCode
        from agentrunner.runtime.compose import open_runner

        runner = await open_runner()
        abort = AbortSignal()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, abort.abort, "Ctrl-C")
        try:
            return await runner.compact_thread(thread_id, abort)
        except AgentRunnerError as exc:
            run_id = exc.details.get("run_id")
            if exc.code is not ErrorCode.CANCELLED or run_id is None:
                raise
            run = await runner.app.store.runs.get(run_id)
            if run is None:
                raise
            _cancelled(run)  # said as `run` says it
            return None
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            await runner.close()

    summary = asyncio.run(main())
    if summary is None:
        raise typer.Exit(130)
    if as_json:
        out.print_json(data={"thread_id": summary.thread_id, **summary.to_dict()})
        return
    out.print(f"[bold]{escape(summary.thread_id)}[/] compacted")
    _print_summary(summary)


@threads_app.command("delete")
def threads_delete(
    thread_id: str = typer.Argument(..., help="The thread id, or its beginning."),
    yes: bool = typer.Option(False, "--yes", help="Delete it: there is no undo."),
    as_json: bool = _JSON,
) -> None:
    """Delete a thread, its delegations' threads, their messages and summaries, and each
    attached file no other thread names. Its runs and what they cost are kept. Refused while
    a run on it is queued, running or waiting."""

    async def delete(store: Store) -> tuple[list[str], int]:
        from agentrunner.run.sessions import find_thread

        thread = await find_thread(store, thread_id)
        if not yes:
            from agentrunner.errors import AgentRunnerError, ErrorCode

            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"deleting thread {thread.id} cannot be undone; nothing was deleted",
                hint=f"Run `agentrunner threads delete {thread.id} --yes` to delete it.",
            )
        return await store.threads.delete(thread.id, store.attachments)

    deleted, files = _with_store(delete)
    if as_json:
        out.print_json(data={"deleted": deleted, "files_deleted": files})
        return
    more = f" (and {len(deleted) - 1} delegation threads)" if len(deleted) > 1 else ""
    kept = f"{files} attached file{'s' if files != 1 else ''}"
    out.print(f"deleted thread {escape(deleted[0])}{more}; {kept} no longer kept")


def _cancelled(run: RunRecord) -> None:
    usage = run.token_usage or {}
    tokens = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
    cost = _usd(run.cost_micros, run.cost_known)
    estimated = " (estimated)" if usage.get("estimated") else ""
    err.print(
        f"[yellow]cancelled[/] [dim]· {tokens:,} tokens{estimated} · "
        f"{'cost unknown' if cost == 'unknown' else cost} · run {run.id}[/]"
    )


def _print_summary(summary: ThreadSummary) -> None:
    requests = f"{summary.requests} request{'s' if summary.requests != 1 else ''}"
    cost = _usd(summary.cost_micros, summary.cost_micros is not None)
    out.print(
        f"[bold magenta]summary[/] [dim]of messages 1-{summary.through_seq} · "
        f"{escape(summary.model)} · {requests} · {cost} · {_when(summary.created_at)}[/]"
    )
    out.print(verbatim(summary.summary + "\n"))


@runs_app.command("list")
def runs_list(
    agent: str | None = typer.Option(None, "--agent", help="Only this agent's runs."),
    thread: str | None = typer.Option(None, "--thread", help="Only this thread's runs."),
    limit: int = typer.Option(30, "--limit", help="How many, newest first."),
    as_json: bool = _JSON,
) -> None:
    """The most recent runs."""

    async def load(store: Store) -> list[RunRecord]:
        from agentrunner.run.spend import with_spend

        listed = await store.runs.list(agent_id=agent, thread_id=thread, limit=limit)
        return [await with_spend(store, run) for run in listed]

    runs = _with_store(load)
    if as_json:
        out.print_json(data=[r.to_dict() for r in runs])
        return
    rows = []
    for r in runs:
        usage = r.token_usage or {}
        tokens = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
        took = f"{r.completed_at - r.started_at:.2f}" if r.completed_at and r.started_at else "—"
        color = _STATUS.get(r.status, "white")
        rows.append(
            [
                escape(r.id),
                escape(r.agent_id),
                escape(r.thread_id or "—"),
                f"[{color}]{r.status}[/]",
                r.stop_reason or "—",
                escape(r.model or "—"),
                f"{tokens:,}",
                _usd(r.cost_micros, r.cost_known),
                _when(r.started_at),
                took,
            ]
        )
    # Narrow terminals lose first what a filter already says, then the thread (see `runs
    # show`), then the details.
    listing(
        "Runs",
        [
            Column("id", whole=True),
            Column("agent", whole=True, drop=9 if agent else 3),
            Column("thread", whole=True, drop=9 if thread else 7),
            Column("status", whole=True),
            Column("stop reason", whole=True, drop=2),
            Column("model", whole=True, drop=6),
            Column("tokens", number=True, drop=4),
            Column("cost", number=True, drop=1),
            Column("started", whole=True, drop=5),
            Column("seconds", number=True, drop=8),
        ],
        rows,
    )


@runs_app.command("cancel")
def runs_cancel(
    run_id: str = typer.Argument(
        ..., help="The run id, its beginning, or its end as the dashboard shows it."
    ),
    as_json: bool = _JSON,
) -> None:
    """Cancel a run: a queued or waiting one at once (a waiting run's requests with it, its
    thread freed), a running one by asking the worker running it. One that ended is left as
    it was."""

    async def cancel(store: Store) -> tuple[str, str]:
        from agentrunner.run.run_ids import find_run

        run = await find_run(store, run_id)
        return run.id, await store.mailbox.cancel(run.id)

    found, outcome = _with_store(cancel)
    if as_json:
        out.print_json(data={"run_id": found, "cancel": outcome})
        return
    said = {
        "cancelled": f"cancelled run {escape(found)}",
        "requested": f"asked the worker running {escape(found)} to cancel it",
        "not_cancellable": f"run {escape(found)} had already ended; left as it was",
    }
    out.print(said[outcome])


@runs_app.command("show")
def runs_show(
    run_id: str = typer.Argument(
        ..., help="The run id, its beginning, or its end as the dashboard shows it."
    ),
    as_json: bool = _JSON,
) -> None:
    """One run: status, steps with their attempts and costs, messages and tool calls."""

    async def load(store: Store) -> Any:
        from agentrunner.run.run_ids import find_run
        from agentrunner.run.spend import with_spend

        run = await with_spend(store, await find_run(store, run_id))
        steps, messages = await store.runs.steps(run.id), await store.runs.messages(run.id)
        return run, steps, messages, await store.approvals.of_run(run.id)

    run, steps, messages, approvals = _with_store(load)
    cache = _run_cache(run, steps)
    if as_json:
        out.print_json(
            data={
                "run": run.to_dict(),
                "steps": [s.to_dict() for s in steps],
                "messages": [m.to_dict() for m in messages],
                "cache": cache.to_dict(),
                "approvals": [a.to_dict() for a in approvals],
            }
        )
        return
    color = _STATUS.get(run.status, "white")
    usage = run.token_usage or {}
    out.print(
        f"[bold]{escape(run.id)}[/]  [{color}]{run.status}[/] · "
        f"stop reason [bold]{run.stop_reason or '—'}[/]"
    )
    out.print(
        f"agent [bold]{escape(run.agent_id)}[/] · thread {escape(run.thread_id or '—')} · "
        f"model {escape(run.model or '—')}"
        + (
            f" · parent {escape(run.parent_run_id)} (depth {run.depth})"
            if run.parent_run_id
            else ""
        )
    )
    estimated = " (estimated)" if usage.get("estimated") else ""
    out.print(
        f"tokens in {usage.get('input_tokens', 0):,} / out {usage.get('output_tokens', 0):,}"
        f"{estimated} · cost {_usd(run.cost_micros, run.cost_known)}{estimated} · "
        f"started {_when(run.started_at)} · ended {_when(run.completed_at)}"
    )
    line = cache_line(cache)
    if line:
        out.print(line)
    if run.trace_id:  # where to find it in the tracing tool (docs/observability.md)
        out.print(f"trace {run.trace_id}")
    if run.error_code:
        out.print(Text.assemble(("error:", "red"), " ", _why(run)))
    cached = cache.read_tokens > 0  # else no column for it
    listing(
        "Steps",
        [
            Column("#", number=True),
            Column("status", whole=True),
            Column("model", whole=True, drop=2),
            Column("in", number=True),
            *([Column("cached", number=True, drop=3)] if cached else []),
            Column("out", number=True),
            Column("cost", number=True),
            Column("attempts", drop=1),
        ],
        [
            [
                str(s.step_number),
                s.status,
                escape(s.model_id),
                f"{(s.token_usage or {}).get('input_tokens', 0):,}",
                *([f"{(s.token_usage or {}).get('cache_read_tokens', 0):,}"] if cached else []),
                f"{(s.token_usage or {}).get('output_tokens', 0):,}",
                _usd(s.cost_micros),
                escape(", ".join(f"{a['model']} {a['outcome']}" for a in s.attempts or [])),
            ]
            for s in steps
        ],
    )
    out.print("[bold]Messages[/]")
    if not messages and "run_messages" in run.removed:
        out.print("  [dim]removed by the \\[retention] rules (run_messages_days)[/]")
    for m in messages:
        if m.message_type == "tool_call_message":
            _hanging(
                f"  [cyan]→ {escape(m.tool_name or '')}[/]",
                verbatim(f"{m.content[:200]} ({m.tool_call_id or ''})", "dim"),
            )
        elif m.message_type == "tool_return_message":
            mark = "[red]✗[/]" if m.is_error else "[green]←[/]"
            _hanging(
                f"  {mark} [dim]{escape(m.tool_name or '')}:[/]", verbatim(m.content[:200], "dim")
            )
        else:
            label = m.message_type.removesuffix("_message")
            text = (
                m.content
                if label != "system"
                else m.content[:160] + ("…" if len(m.content) > 160 else "")
            )
            _hanging(f"  [bold]{label}[/]:", verbatim(text))
    if approvals:
        _print_approvals(approvals)


_DECIDED = {"approved": "green", "denied": "red", "expired": "red", "cancelled": "yellow"}


def _print_approvals(approvals: list[ApprovalRecord]) -> None:
    """Each request of the run: the tool, what became of it — who decided, when, why, with
    which arguments, for how long — and whether the call ran."""
    out.print("[bold]Approvals[/]")
    for a in approvals:
        color = _DECIDED.get(a.status, "yellow")
        if a.status == "pending":
            what = f"[yellow]pending[/] · decide: agentrunner approve {a.id}"
        elif a.decided_by is not None:
            what = f"[{color}]{a.status}[/] by {escape(a.decided_by)} · {_when(a.decided_at)}"
        else:
            what = f"[{color}]{a.status}[/] · {_when(a.decided_at)}"
        if a.always:
            what += f" · always, on this {a.always}"
        if a.status == "approved":
            what += f" · execution {a.execution or 'not yet'}"
        _hanging(f"  [cyan]{escape(a.tool)}[/]", f"{what} [dim]({escape(a.id)})[/]")
        if a.reason:
            _hanging("    reason:", verbatim(a.reason))
        asked = json.dumps(a.arguments, ensure_ascii=False)
        if a.edited and a.arguments_used is not None:
            used = json.dumps(a.arguments_used, ensure_ascii=False)
            _hanging(
                "    arguments edited:",
                Text.assemble(used[:300], " ", (f"(asked: {asked[:300]})", "dim")),
            )
        else:
            _hanging("    arguments:", verbatim(asked[:300], "dim"))


def _hanging(label: str, text: str | Text) -> None:
    """``label`` then ``text`` (markup, or `verbatim` words), whose wrapped and later lines
    stay under its first: a long or multi-line message reads as one, not as lines of the
    page's own."""
    from rich.table import Table

    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row(label, text)
    out.print(grid)


def _run_cache(run: RunRecord, steps: list[StepRecord]) -> CacheSpend:
    """The run's prompt-cache use, each step priced with its model at the project's prices
    (a step whose price was unknown when it was made is not priced now)."""
    from agentrunner.config import load_config
    from agentrunner.engine.pricing import PriceBook
    from agentrunner.run.spend import CacheSpend

    prices = PriceBook(load_config().prices)
    cache = CacheSpend()
    parts = [(s.model_id, s.token_usage or {}, s.cost_micros is not None) for s in steps] or [
        (run.model or "", run.token_usage or {}, run.cost_known)
    ]
    for model, usage, known in parts:
        read, written = usage.get("cache_read_tokens", 0), usage.get("cache_write_tokens", 0)
        cache.add(model, read, written, 1, prices, priced=(read, written) if known else (0, 0))
    return cache


def _why(run: RunRecord) -> str:
    """Why a run stopped: its error, its code said once (``cancelled: Ctrl-C``, ``cancelled on
    request``), else its status."""
    from agentrunner.errors import error_line

    return error_line(run.error_code, run.error_message) if run.error_code else run.status
