"""``/ui/evals``: each eval's history — its pass rate at each eval run, drawn as a line against
its threshold (and said in words), with the runs listed — and ``/ui/evals/{id}``, one eval run
with each variant's totals and each case's outcome, linked to the run that answered it. What is
shown is what ``agentrunner eval`` stored (``store/evals``; docs/evals.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from agentrunner.errors import AgentRunnerError
from agentrunner.interfaces.server.dashboard.templating import page, problem
from agentrunner.interfaces.server.fields import Id
from agentrunner.store.evals import EvalRunRecord
from agentrunner.workspace.workspace import Workspace

__all__ = ["History", "history", "router"]

router = APIRouter()
PAGE = "/ui/evals"
RUNS_READ = 500  # the newest eval runs the page reads, of every eval
HISTORY = 30  # an eval's chart: its newest runs
_WIDTH, _HEIGHT = 240, 60  # the chart's drawing, in SVG units


@dataclass(frozen=True, slots=True)
class History:
    """One eval's runs, newest first, and its chart: a line per variant through the pass
    rates of its completed runs, oldest on the left."""

    eval: str
    runs: list[EvalRunRecord]
    lines: list[tuple[str, str]]  # (variant's label, SVG points)
    threshold_y: float
    said: str  # the chart in words

    @property
    def latest(self) -> EvalRunRecord:
        return self.runs[0]


def history(eval: str, runs: list[EvalRunRecord]) -> History:
    """``runs`` (one eval's, newest first) as its history."""
    done = [r for r in runs if r.status == "completed"][:HISTORY][::-1]
    rates: dict[str, list[tuple[int, float]]] = {}
    for n, run in enumerate(done):
        for variant in run.variants:
            rates.setdefault(str(variant["label"]), []).append((n, float(variant["pass_rate"])))
    step = _WIDTH / max(1, len(done) - 1)
    lines = [
        (label, " ".join(f"{n * step:.1f},{(1 - rate) * _HEIGHT:.1f}" for n, rate in points))
        for label, points in rates.items()
    ]
    threshold = runs[0].threshold
    said = "; ".join(
        f"{label}: " + " → ".join(f"{rate:.0%}" for _, rate in points)
        for label, points in rates.items()
    )
    said = f"{said or 'no completed run yet'} (threshold {threshold:.0%})"
    return History(eval, runs, lines, (1 - threshold) * _HEIGHT, said)


@router.get(PAGE)
async def evals_page(request: Request) -> Response:
    """Every eval with a run kept, the one run most recently first."""
    ws = _ws(request)
    by_eval: dict[str, list[EvalRunRecord]] = {}
    for run in await ws.runner.store.evals.recent(limit=RUNS_READ):
        by_eval.setdefault(run.eval, []).append(run)
    context = {
        "active": "evals",
        "histories": [history(name, runs) for name, runs in by_eval.items()],
        "width": _WIDTH,
        "height": _HEIGHT,
    }
    return page(request, "evals.html", context)


@router.get(PAGE + "/{eval_run_id}")
async def eval_run_page(request: Request, eval_run_id: Id) -> Response:
    """One eval run and its cases (404 for none of that id)."""
    ws = _ws(request)
    try:
        run = await ws.runner.store.evals.find(eval_run_id)
    except AgentRunnerError as exc:
        status = 404 if exc.details.get("not_found") else 422
        back = (PAGE, "Back to the evals")
        return problem(
            request, status, str(exc.code), exc.message, exc.hint, active="evals", back=back
        )
    cases = await ws.runner.store.evals.cases(run.id)
    labels = {n: str(v["label"]) for n, v in enumerate(run.variants)}
    context: dict[str, Any] = {
        "active": "evals",
        "run": run,
        "cases": cases,
        "labels": labels,
    }
    return page(request, "eval_run.html", context)


def _ws(request: Request) -> Workspace:
    ws: Workspace = request.app.state.workspace
    return ws
