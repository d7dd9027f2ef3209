"""``agentrunner exec`` and ``agentrunner cache``."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from agentrunner.interfaces.cli.console import err, out
from agentrunner.interfaces.cli.project import SET_HELP

if TYPE_CHECKING:
    from agentrunner.core.model_settings import ModelSettings
    from agentrunner.workspace.tasks import Outcome, TaskRunner

__all__ = ["cache_app", "exec_command"]

cache_app = typer.Typer(help="The task result cache.", no_args_is_help=True)


def exec_command(
    agent_id: str = typer.Argument(..., help="The agent id."),
    input: str | None = typer.Option(None, "--input", "-i", help="Input object: JSON, @file or -."),
    batch: Path | None = typer.Option(
        None, "--batch", help="A JSONL file of inputs, one task each."
    ),
    concurrency: int = typer.Option(
        8, "--concurrency", "-c", min=1, help="Tasks at once (--batch)."
    ),
    ordered: bool = typer.Option(
        False, "--ordered", help="Write --batch outcomes in input order (else as they finish)."
    ),
    model: str | None = typer.Option(
        None, "--model", "-m", help="Use this model only, instead of the agent's models."
    ),
    fallback: list[str] = typer.Option(
        [], "--fallback", help="With --model: a model to fall back to (repeat)."
    ),
    cache: bool | None = typer.Option(
        None,
        "--cache/--no-cache",
        help="Use the result cache, or not (default: the agent file's `cache:`).",
        show_default=False,
    ),
    assignments: list[str] = typer.Option([], "--set", help=SET_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the outcome as JSON."),
    attach: list[str] = typer.Option(
        [], "--attach", "-a", help="Send a file with the task's message: an image or a PDF."
    ),
    conversation: str | None = typer.Option(
        None,
        "--conversation",
        help='The messages before the task\'s: JSON or @file, [{"role": "user", "content": …}].',
    ),
) -> None:
    """Run an agent once on an input object (a task); with the cache on, the same request is
    answered from it."""
    from agentrunner.errors import AgentRunnerError, ErrorCode
    from agentrunner.interfaces.cli.project import parse_input, parse_settings

    for given, flag in ((attach, "--attach"), (conversation, "--conversation")):
        if given and batch is not None:
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"{flag} goes with one task, not a --batch",
                hint=f"Run that task on its own: exec AGENT -i JSON {flag} ….",
            )
    settings = parse_settings(assignments)
    messages = parse_input(conversation, "--conversation") if conversation is not None else None
    plan = _Plan(agent_id, model, tuple(fallback), cache, settings, tuple(attach), messages)
    if batch is not None:
        failed = asyncio.run(_batch(plan, batch, concurrency, ordered))
        raise typer.Exit(1 if failed else 0)
    values = parse_input(input) if input is not None else {}
    outcome = asyncio.run(_one(plan, values))
    error = outcome.error or {}
    if as_json:
        out.print_json(data=outcome.to_dict())
    elif outcome.ok:
        shown = (
            outcome.output
            if isinstance(outcome.output, str)
            else json.dumps(outcome.output, indent=2)
        )
        sys.stdout.write(f"{shown}\n")
        err.print(f"[dim]{outcome.model} · {'cache hit' if outcome.cached else 'ran'}[/]")
    if error.get("code") == "cancelled":
        cost = "cost unknown" if outcome.cost_usd is None else f"${outcome.cost_usd:.4f}"
        tokens = sum(outcome.usage.get(k, 0) for k in ("input_tokens", "output_tokens"))
        estimated = " (estimated)" if outcome.usage.get("estimated") else ""
        err.print(
            f"[yellow]cancelled[/] [dim]· {tokens:,} tokens{estimated} · {cost} · "
            f"run {outcome.run_id}[/]",
        )
        raise typer.Exit(130)
    if not outcome.ok:
        raise AgentRunnerError(
            ErrorCode(error.get("code", "internal")),
            error.get("message", ""),
            hint=error.get("hint"),
            file=error.get("file"),
            line=error.get("line"),
        )


@dataclass(frozen=True, slots=True)
class _Plan:
    agent_id: str
    model: str | None
    fallback: tuple[str, ...]
    cache: bool | None
    settings: ModelSettings | None = None
    attach: tuple[str, ...] = ()
    conversation: Any = None  # read by the task: a bad one is its failed outcome

    def __post_init__(self) -> None:
        from agentrunner.run.request import RunAgentOverrides

        RunAgentOverrides(model=self.model, fallback=self.fallback)  # its checks, up front


async def _open() -> TaskRunner:
    from agentrunner.runtime.compose import open_task_runner

    return await open_task_runner()


async def _one(plan: _Plan, values: Any) -> Outcome:
    """One task; Ctrl-C stops its run, which is recorded, and the outcome says so."""
    from agentrunner.engine.abort import AbortSignal

    abort = AbortSignal()
    loop = asyncio.get_running_loop()
    async with await _open() as tasks:
        files = [await tasks.attach(path) for path in plan.attach]  # refused: nothing has run
        loop.add_signal_handler(signal.SIGINT, abort.abort, "Ctrl-C")
        try:
            return await tasks.execute(
                plan.agent_id,
                values,
                model=plan.model,
                fallback=plan.fallback,
                cache=plan.cache,
                abort=abort,
                model_settings=plan.settings,
                attachments=files,
                conversation=plan.conversation,
            )
        finally:
            loop.remove_signal_handler(signal.SIGINT)


async def _batch(plan: _Plan, path: Path, concurrency: int, ordered: bool) -> int:
    """Outcomes as JSONL on stdout, each with its input line number: written as they finish
    (or, ``ordered``, in input order as soon as every earlier one is written). A failing input
    does not stop the batch; on Ctrl-C every finished outcome is written before exiting."""
    from rich.progress import Progress

    from agentrunner.errors import AgentRunnerError, ErrorCode
    from agentrunner.workspace.tasks import Outcome

    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise AgentRunnerError(
            ErrorCode.RUNNER_IO, f"cannot read {path}: {exc.strerror or exc}"
        ) from exc
    writer = _OutcomeWriter(ordered)
    good: list[tuple[int, Any]] = []
    bad: list[tuple[int, Outcome]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        writer.expect(number)
        try:
            good.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            error = AgentRunnerError(ErrorCode.VALIDATION, f"line {number} is not JSON: {exc.msg}")
            bad.append((number, Outcome.failure(plan.agent_id, error)))
    for number, outcome in bad:
        writer.done(number, outcome)
    async with await _open() as tasks:
        with Progress(console=err, transient=True) as progress:
            bar = progress.add_task(plan.agent_id, total=len(writer.expected))
            progress.advance(bar, len(writer.finished))

            def finished(index: int, outcome: Outcome) -> None:
                writer.done(good[index][0], outcome)
                progress.advance(bar)

            try:
                await tasks.execute_many(
                    plan.agent_id,
                    [values for _, values in good],
                    concurrency=concurrency,
                    model=plan.model,
                    fallback=plan.fallback,
                    cache=plan.cache,
                    on_done=finished,
                    model_settings=plan.settings,
                )
            finally:
                writer.flush_all()  # interrupted: what finished is written all the same
    total = len(writer.expected)
    err.print(f"[dim]{total - writer.failed} completed, {writer.failed} failed[/]")
    return writer.failed


class _OutcomeWriter:
    """Writes outcomes as JSON lines: at once, or in input order as the order allows."""

    def __init__(self, ordered: bool) -> None:
        self.ordered = ordered
        self.expected: list[int] = []
        self.finished: dict[int, Outcome] = {}
        self.written: set[int] = set()
        self.failed = 0
        self._next = 0  # index into expected of the next line to write, when ordered

    def expect(self, number: int) -> None:
        self.expected.append(number)

    def done(self, number: int, outcome: Outcome) -> None:
        self.failed += not outcome.ok
        self.finished[number] = outcome
        if not self.ordered:
            self._write(number)
            return
        while self._next < len(self.expected) and self.expected[self._next] in self.finished:
            self._write(self.expected[self._next])
            self._next += 1

    def flush_all(self) -> None:
        for number in sorted(self.finished):
            if number not in self.written:
                self._write(number)

    def _write(self, number: int) -> None:
        self.written.add(number)
        line = {"line": number, **self.finished[number].to_dict()}
        sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")
        sys.stdout.flush()


@cache_app.command("stats")
def cache_stats(agent: str | None = typer.Option(None, "--agent", help="Only this agent.")) -> None:
    """How many results are cached, and their size."""

    async def work() -> Any:
        async with await _open() as tasks:
            return await tasks.cache.stats(agent)

    stats = asyncio.run(work())
    out.print(f"{stats.entries} cached result(s), {stats.bytes / 1024:.1f} KiB")
    for name, count in sorted(stats.agents.items()):
        out.print(f"  {escape(name)}: {count}")


@cache_app.command("clear")
def cache_clear(agent: str | None = typer.Option(None, "--agent", help="Only this agent.")) -> None:
    """Remove cached results."""

    async def work() -> int:
        async with await _open() as tasks:
            if agent is not None:
                tasks.app.agents.get(agent)  # a typo is agent_not_found, not "removed 0"
            return await tasks.cache.clear(agent)

    out.print(f"removed {asyncio.run(work())} cached result(s)")
