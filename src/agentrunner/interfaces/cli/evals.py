"""``agentrunner eval FILE``: an eval's cases run, judged and summed up; ``agentrunner evals``:
the eval runs kept, one with its cases (docs/evals.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from agentrunner.interfaces.cli.console import Column, err, listing, out

if TYPE_CHECKING:
    from agentrunner.agents.evals import EvalSpec
    from agentrunner.store.evals import EvalCaseRecord, EvalRunRecord
    from agentrunner.workspace.evals import CaseOutcome, EvalReport
    from agentrunner.workspace.workspace import Workspace

__all__ = ["eval_command", "evals_app"]

evals_app = typer.Typer(
    help="The eval runs kept: listed, and one with its cases (docs/evals.md).",
    no_args_is_help=True,
)


def eval_command(
    file: str = typer.Argument(..., help="The eval file, or its name in evals/."),
    model: list[str] = typer.Option(
        [], "--model", help="Run the cases on this model (repeat to compare models)."
    ),
    rev: list[str] = typer.Option(
        [],
        "--rev",
        help="Run them on the agent's file as it was at this git revision too (repeatable).",
    ),
    repeat: int = typer.Option(1, "--repeat", min=1, help="Run each case this many times."),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="Runs at a time."),
    workers: bool = typer.Option(
        False,
        "--workers",
        help="Queue the cases for the project's workers (agentrunner worker), not run them here.",
    ),
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

        from rich.progress import Progress

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
        total = len(spec.cases) * repeat * len(spec.agents) * (len(model or [None]) + len(rev))
        # on a terminal, a bar under the cases' lines while they run (Rich draws none in a pipe)
        with Progress(console=err, transient=True, disable=as_json) as progress:
            bar = progress.add_task(spec.name, total=total)

            def heard(outcome: CaseOutcome) -> None:
                if not as_json:
                    _said(outcome, several=len(spec.agents) > 1)
                progress.advance(bar)

            try:
                report = await run_eval(
                    ws.runner,
                    spec,
                    models=model or [None],
                    revisions=rev,
                    repeat=repeat,
                    concurrency=concurrency,
                    on_case=heard,
                    abort=abort,
                    queue=ws.runs if workers else None,
                )
            finally:
                loop.remove_signal_handler(signal.SIGINT)
        return report, abort.aborted

    report, stopped = with_workspace(work)
    if stopped:
        if as_json:  # what the cases that ended came to, for a script as for a person
            out.print_json(data={**report.to_dict(), "cancelled": True})
        err.print(
            f"[yellow]cancelled[/] [dim]· the cases that ended are kept: agentrunner evals show "
            f"{report.eval_run_id}[/]"
        )
        raise typer.Exit(130)
    if as_json:
        out.print_json(data={**report.to_dict(), "cancelled": False})
    else:
        _print(report)
    if not report.passed:
        raise typer.Exit(1)


@evals_app.command("list")
def list_command(
    name: str | None = typer.Argument(None, help="Only this eval's runs."),
    limit: int = typer.Option(20, "--limit", min=1, help="How many, newest first."),
    as_json: bool = typer.Option(False, "--json", help="Print them as JSON."),
) -> None:
    """The eval runs kept, newest first: each one's eval, when, its status, and each
    variant's pass rate."""
    from agentrunner.interfaces.cli.workspace import with_workspace

    async def work(ws: Workspace) -> list[EvalRunRecord]:
        return await ws.runner.store.evals.recent(eval=name, limit=limit)

    runs = with_workspace(work)
    if as_json:
        out.print_json(data=[r.to_dict() for r in runs])
        return
    if not runs:
        which = f"of eval '{escape(name)}' " if name else ""
        out.print(f"no eval runs {which}yet [dim]· agentrunner eval NAME runs one[/]")
        return
    listing(
        "eval runs",
        [
            Column("id", whole=True),
            Column("eval", whole=True),
            Column("started", whole=True, drop=1),
            Column("status", whole=True),
            Column("pass rates"),
        ],
        [
            [
                r.id,
                escape(r.eval),
                _when(r.started_at),
                _status(r),
                "; ".join(
                    f"{escape(str(v['label']))} {float(v['pass_rate']):.0%}" for v in r.variants
                )
                or f"[dim]{r.cases_done} case(s) so far[/]",
            ]
            for r in runs
        ],
    )


@evals_app.command("show")
def show_command(
    eval_run_id: str = typer.Argument(..., help="The eval run's id (or its end)."),
    as_json: bool = typer.Option(False, "--json", help="Print it as JSON."),
) -> None:
    """One eval run: each variant's totals, then each case with its outcome and the run that
    answered it (open it with `agentrunner runs show`)."""
    from agentrunner.interfaces.cli.workspace import with_workspace

    async def work(ws: Workspace) -> tuple[EvalRunRecord, list[EvalCaseRecord]]:
        found = await ws.runner.store.evals.find(eval_run_id)
        return found, await ws.runner.store.evals.cases(found.id)

    run, cases = with_workspace(work)
    if as_json:
        out.print_json(data={**run.to_dict(), "cases": [c.to_dict() for c in cases]})
        return
    out.print(
        f"[bold]{escape(run.eval)}[/] {run.id} · {escape(run.agent)} · {escape(run.file)} · "
        f"{_when(run.started_at)} · {_status(run)} [dim](threshold {run.threshold:.0%})[/]"
    )
    if run.variants:
        _totals("variants", run.variants, run.threshold)
    labels = {n: str(v["label"]) for n, v in enumerate(run.variants)}
    listing(
        "cases",
        [
            Column("case", whole=True),
            Column("variant", whole=True, drop=2),
            Column("#", number=True, drop=1),
            Column("", whole=True),
            Column("run", whole=True),
            Column("why"),
        ],
        [
            [
                escape(c.name),
                escape(labels.get(c.variant, str(c.variant + 1))),
                str(c.repeat + 1),
                "[green]✓[/]" if c.passed else "[red]✗[/]",
                c.run_id or "—",
                escape(c.why),
            ]
            for c in cases
        ],
    )


def _when(t: float) -> str:
    from agentrunner.interfaces.cli.schedules import moment

    return moment(t)


def _status(run: EvalRunRecord) -> str:
    color = {"passed": "green", "failed": "red"}.get(run.outcome, "yellow")
    return f"[{color}]{run.outcome}[/]"


def _totals(title: str, variants: list[dict[str, Any]], threshold: float) -> None:
    """Each variant's totals (``ModelReport.totals``, as an eval run keeps them), a pass rate
    under ``threshold`` in red."""
    rows = []
    for v in variants:
        rate = f"{v['pass_rate']:.0%}"
        rows.append(
            [
                escape(str(v["label"])),
                f"{v['passed']}/{v['runs']}",
                rate if v["pass_rate"] >= threshold else f"[red]{rate}[/]",
                "unknown" if v["cost_usd"] is None else f"${v['cost_usd']:.4f}",
                f"{v['tokens']:,}",
                f"{v['latency_p50_s']:.2f}",
                f"{v['latency_p95_s']:.2f}",
            ]
        )
    columns = [Column("variant", whole=True)]
    for header in ("passed", "pass rate", "cost", "tokens", "p50 s", "p95 s"):
        columns.append(Column(header, number=True))
    listing(title, columns, rows)


def _said(outcome: CaseOutcome, *, several: bool = False) -> None:
    on = f" on {escape(outcome.model)}" if outcome.model else ""
    on = f" ({escape(outcome.agent or '')}){on}" if several else on
    on += f" @{escape(outcome.revision)}" if outcome.revision else ""
    again = f" (repeat {outcome.repeat + 1})" if outcome.repeat else ""
    if outcome.passed:
        err.print(f"[green]✓[/] {escape(outcome.case)}{on}{again} [dim]{outcome.seconds:.1f} s[/]")
        return
    why = outcome.why
    err.print(f"[red]✗[/] {escape(outcome.case)}{on}{again}: {escape(why)}")


def _print(report: EvalReport) -> None:
    spec = report.spec
    cases = f"{len(spec.cases)} case{'s' if len(spec.cases) != 1 else ''}"
    title = f"{spec.name}: {', '.join(spec.agents)}, {cases}"
    _totals(title, [r.totals() for r in report.reports], spec.threshold)
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
    if spec.judge_models():
        spent = report.judge_cost_micros / 1e6
        out.print(f"[dim]judge: ${spent:.4f} of ${spec.judge.budget_usd:.2f}[/]")
    out.print(f"[dim]kept as {report.eval_run_id} · agentrunner evals show {report.eval_run_id}[/]")
    short = [r for r in report.reports if r.pass_rate < spec.threshold]
    if not short:
        out.print(f"[green]passed[/] [dim](threshold {spec.threshold:.0%})[/]")
        return
    under = ", ".join(f"{escape(r.label)} {r.pass_rate:.0%}" for r in short)
    out.print(f"[red]failed[/]: under the threshold of {spec.threshold:.0%}: {under}")


def _rate(passed: int, total: int) -> str:
    return f"{passed}/{total}" if total else "—"
