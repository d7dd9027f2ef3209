"""``agentrunner exec`` and ``agentrunner cache``."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from agentrunner.cli.console import err, out

if TYPE_CHECKING:
    from agentrunner.tasks import Outcome, TaskRunner

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
    model: str | None = typer.Option(None, "--model", "-m", help="Override the agent's model."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the cache."),
    as_json: bool = typer.Option(False, "--json", help="Print the outcome as JSON."),
) -> None:
    """Run an agent once on an input object (a task); cached by agent, model and input."""
    from agentrunner.cli.project import parse_input
    from agentrunner.errors import AgentRunnerError, ErrorCode

    if batch is not None:
        failed = asyncio.run(_batch(agent_id, batch, concurrency, model, not no_cache))
        raise typer.Exit(1 if failed else 0)
    values = parse_input(input) if input is not None else {}
    outcome = asyncio.run(_one(agent_id, values, model, not no_cache))
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
    if not outcome.ok:
        error = outcome.error or {}
        raise AgentRunnerError(
            ErrorCode(error.get("code", "internal")),
            error.get("message", ""),
            hint=error.get("hint"),
        )


async def _open() -> TaskRunner:
    from agentrunner.tasks import TaskRunner

    return await TaskRunner.open()


async def _one(agent_id: str, values: Any, model: str | None, cache: bool) -> Outcome:
    async with await _open() as tasks:
        return await tasks.execute(agent_id, values, model=model, cache=cache)


async def _batch(
    agent_id: str, path: Path, concurrency: int, model: str | None, cache: bool
) -> int:
    """Outcomes as JSONL on stdout, in input order; a failing input does not stop the batch."""
    from rich.progress import Progress

    from agentrunner.errors import AgentRunnerError, ErrorCode
    from agentrunner.tasks import Outcome

    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError as exc:
        raise AgentRunnerError(
            ErrorCode.RUNNER_IO, f"cannot read {path}: {exc.strerror or exc}"
        ) from exc
    results: list[Outcome | None] = [None] * len(lines)
    good: list[tuple[int, Any]] = []
    for index, line in enumerate(lines):
        try:
            good.append((index, json.loads(line)))
        except json.JSONDecodeError as exc:
            bad = AgentRunnerError(ErrorCode.VALIDATION, f"line {index + 1} is not JSON: {exc.msg}")
            results[index] = Outcome.failure(agent_id, bad)
    async with await _open() as tasks:
        with Progress(console=err, transient=True) as progress:
            bar = progress.add_task(f"{agent_id}", total=len(lines))
            progress.advance(bar, len(lines) - len(good))
            outcomes = await tasks.execute_many(
                agent_id,
                [values for _, values in good],
                concurrency=concurrency,
                model=model,
                cache=cache,
                on_done=lambda _, __: progress.advance(bar),
            )
    for (index, _), done in zip(good, outcomes, strict=True):
        results[index] = done
    failed = 0
    for index, outcome in enumerate(results):
        assert outcome is not None
        failed += not outcome.ok
        sys.stdout.write(
            json.dumps({"line": index + 1, **outcome.to_dict()}, ensure_ascii=False) + "\n"
        )
    err.print(f"[dim]{len(lines) - failed} completed, {failed} failed[/]")
    return failed


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
            return await tasks.cache.clear(agent)

    out.print(f"removed {asyncio.run(work())} cached result(s)")
