"""``agentrunner eval FILE``: an eval's cases run, judged and summed up (docs/evals.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from agentrunner.interfaces.cli.console import Column, err, listing, out

if TYPE_CHECKING:
    from agentrunner.agents.evals import EvalSpec
    from agentrunner.workspace.evals import CaseOutcome, EvalReport, ModelReport
    from agentrunner.workspace.workspace import Workspace

__all__ = ["eval_command"]


def eval_command(
    file: str = typer.Argument(..., help="The eval file, or its name in evals/."),
    model: list[str] = typer.Option(
        [], "--model", help="Run the cases on this model (repeat to compare models)."
    ),
    repeat: int = typer.Option(1, "--repeat", min=1, help="Run each case this many times."),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="Runs at a time."),
    threshold: float | None = typer.Option(
        None, "--threshold", min=0.0, max=1.0, help="The pass rate to reach (default: the file's)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
) -> None:
    """Run an eval's cases as runs of its agent, judge each answer by the case's checks, and
    print the pass rates, costs, tokens and latencies. Exits 1 when a pass rate is under the
    threshold, so CI can gate on it."""
    from agentrunner.interfaces.cli.workspace import with_workspace

    async def work(ws: Workspace) -> tuple[EvalReport, bool]:
        import asyncio
        import signal
        from dataclasses import replace

        from agentrunner.agents.evals import find_eval, load_eval
        from agentrunner.engine.abort import AbortSignal
        from agentrunner.workspace.evals import run_eval

        def read() -> EvalSpec:  # files, off the loop
            return load_eval(find_eval(file, ws.app.config.root), agents=ws.app.agents.ids())

        spec = await asyncio.to_thread(read)
        abort = AbortSignal()  # Ctrl-C: the runs in flight end cancelled, recorded so
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, abort.abort, "Ctrl-C")
        if threshold is not None:
            spec = replace(spec, threshold=threshold)
        try:
            return (
                await run_eval(
                    ws.runner,
                    spec,
                    models=model or [None],
                    repeat=repeat,
                    concurrency=concurrency,
                    on_case=None if as_json else _said,
                    abort=abort,
                ),
                abort.aborted,
            )
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    report, stopped = with_workspace(work)
    if stopped:
        err.print("[yellow]cancelled[/] [dim]· the cases' runs are kept: agentrunner runs list[/]")
        raise typer.Exit(130)
    if as_json:
        out.print_json(data=report.to_dict())
    else:
        _print(report)
    if not report.passed:
        raise typer.Exit(1)


def _said(outcome: CaseOutcome) -> None:
    on = f" on {escape(outcome.model)}" if outcome.model else ""
    again = f" (repeat {outcome.repeat + 1})" if outcome.repeat else ""
    if outcome.passed:
        err.print(f"[green]✓[/] {escape(outcome.case)}{on}{again} [dim]{outcome.seconds:.1f} s[/]")
        return
    why = outcome.error or "; ".join(c.said for c in outcome.checks if not c.passed)
    err.print(f"[red]✗[/] {escape(outcome.case)}{on}{again}: {escape(why)}")


def _print(report: EvalReport) -> None:
    spec = report.spec
    rows = [_row(spec.threshold, r) for r in report.reports]
    listing(
        f"{spec.name}: {spec.agent}, {len(spec.cases)} case{'s' if len(spec.cases) != 1 else ''}",
        [
            Column("model", whole=True),
            Column("passed", number=True),
            Column("pass rate", number=True),
            Column("cost", number=True),
            Column("tokens", number=True),
            Column("p50 s", number=True),
            Column("p95 s", number=True),
        ],
        rows,
    )
    kinds = sorted({k for r in report.reports for k in r.check_rates()})
    listing(
        "checks",
        [Column("check", whole=True)]
        + [Column(escape(r.label), number=True) for r in report.reports],
        [
            [kind, *(_rate(*r.check_rates().get(kind, (0, 0))) for r in report.reports)]
            for kind in kinds
        ],
    )
    if len(report.reports) > 1:
        changed = report.changed()
        out.print(
            f"changed: {', '.join(escape(c) for c in changed)}" if changed else "changed: none"
        )
    short = [r for r in report.reports if r.pass_rate < spec.threshold]
    if not short:
        out.print(f"[green]passed[/] [dim](threshold {spec.threshold:.0%})[/]")
        return
    under = ", ".join(f"{escape(r.label)} {r.pass_rate:.0%}" for r in short)
    out.print(f"[red]failed[/]: under the threshold of {spec.threshold:.0%}: {under}")


def _row(threshold: float, report: ModelReport) -> list[str]:
    p50, p95 = report.latency()
    cost = report.cost_micros
    rate = f"{report.pass_rate:.0%}"
    return [
        escape(report.label),
        f"{sum(o.passed for o in report.outcomes)}/{len(report.outcomes)}",
        rate if report.pass_rate >= threshold else f"[red]{rate}[/]",
        "unknown" if cost is None else f"${cost / 1e6:.4f}",
        f"{sum(o.tokens for o in report.outcomes):,}",
        f"{p50:.2f}",
        f"{p95:.2f}",
    ]


def _rate(passed: int, total: int) -> str:
    return f"{passed}/{total}" if total else "—"
