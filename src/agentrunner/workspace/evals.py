"""Running an eval (docs/evals.md): each case of an ``EvalSpec`` as an ordinary run of its agent
on a new thread (one per case, repeat and variant), a few at a time, on each variant it is
compared on — the agent's model or others, several agents, versions of the agent's file at git
revisions; each check judged from the run's own record, or by a model (``eval_checks``); the
pass rates, costs, tokens and latencies they came to. The eval run and each case's outcome are
stored as they end (``store/evals``), and each case is a span carrying their ids."""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrunner.agents.evals import CaseSpec, EvalSpec
from agentrunner.core.ids import new_id
from agentrunner.core.paths import display_path
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.workspace.eval_cases import no_worker, run_here, run_queued
from agentrunner.workspace.eval_checks import CheckOutcome, Judge, judge_model_problems, judged

if TYPE_CHECKING:
    from agentrunner.agents.spec import AgentSpec
    from agentrunner.engine.abort import AbortSignal
    from agentrunner.engine.messages import Attachment
    from agentrunner.run.runner import AgentRunner
    from agentrunner.workspace.queueing import RunQueue

__all__ = ["CaseOutcome", "CheckOutcome", "EvalReport", "ModelReport", "Variant", "run_eval"]


@dataclass(frozen=True, slots=True)
class Variant:
    """What a case is run on: ``agent`` on ``model`` (None: its own chain), as its file is now
    or as it was at git ``revision``."""

    agent: str
    model: str | None = None
    revision: str | None = None

    def shown(self) -> str:
        return " ".join(
            p for p in (self.agent, self.model, self.revision and f"@{self.revision}") if p
        )


@dataclass(frozen=True, slots=True)
class CaseOutcome:
    case: str
    repeat: int
    model: str | None  # as asked: None, the agent's own
    run_id: str | None
    answer: str
    checks: tuple[CheckOutcome, ...]
    error: str | None  # the run's failure: its code and message
    cost_micros: int | None  # None: a price unknown
    tokens: int
    seconds: float
    answered_by: str | None = None  # the model that answered (``provider:model``)
    judge_cost_micros: int = 0  # what its judge checks cost (the eval's judge budget)
    variant: int = 0  # its place in the eval's variants
    revision: str | None = None  # the version of the agent's file it ran, if not the file now
    agent: str | None = None  # the agent it ran (the eval's own, or one of those it compares)

    @property
    def passed(self) -> bool:
        return self.error is None and all(c.passed for c in self.checks)

    @property
    def why(self) -> str:
        """Why it failed: its run's error, else what its failed checks said ("" if passed)."""
        return self.error or "; ".join(c.said for c in self.checks if not c.passed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "repeat": self.repeat,
            "model": self.model,
            "run_id": self.run_id,
            "passed": self.passed,
            "answer": self.answer,
            "error": self.error,
            "checks": self.checks_dicts(),
            "cost_usd": None if self.cost_micros is None else self.cost_micros / 1e6,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 3),
            "answered_by": self.answered_by,
            "judge_cost_usd": self.judge_cost_micros / 1e6,
        }

    def checks_dicts(self) -> list[dict[str, Any]]:
        return [{"check": c.kind, "passed": c.passed, "said": c.said} for c in self.checks]


@dataclass(frozen=True, slots=True)
class ModelReport:
    """One variant's outcomes, in the cases' order: a model (``model`` None: the agent's own),
    an agent (``agent``, set when the eval compares several), a version of the agent's file
    (``revision``)."""

    model: str | None
    outcomes: tuple[CaseOutcome, ...]
    agent: str | None = None
    revision: str | None = None

    @property
    def pass_rate(self) -> float:
        """Of the cases that ran (an eval stopped midway counts those that ended)."""
        return sum(o.passed for o in self.outcomes) / len(self.outcomes) if self.outcomes else 0.0

    @property
    def label(self) -> str:
        """The model as asked, else the one that answered most of its cases; after the agent
        when the eval compares several, before ``@REVISION`` for an earlier version."""
        answered = [o.answered_by for o in self.outcomes if o.answered_by]
        model = self.model or max(set(answered), key=answered.count, default="the agent's model")
        shown = f"{self.agent} · {model}" if self.agent else model
        return f"{shown} @{self.revision}" if self.revision else shown

    def check_rates(self) -> dict[str, tuple[int, int]]:
        """Each kind of check: how many passed, of how many."""
        rates: dict[str, tuple[int, int]] = {}
        for outcome in self.outcomes:
            for check in outcome.checks:
                passed, total = rates.get(check.kind, (0, 0))
                rates[check.kind] = (passed + check.passed, total + 1)
        return rates

    @property
    def cost_micros(self) -> int | None:
        costs = [o.cost_micros for o in self.outcomes]
        return None if any(c is None for c in costs) else sum(c or 0 for c in costs)

    def latency(self) -> tuple[float, float]:
        """p50 and p95 of the cases' seconds."""
        seconds = sorted(o.seconds for o in self.outcomes)
        if len(seconds) <= 1:
            only = seconds[0] if seconds else 0.0
            return only, only
        cuts = statistics.quantiles(seconds, n=20, method="inclusive")
        return statistics.median(seconds), cuts[18]

    def case_rates(self) -> dict[str, float]:
        """Each case's pass rate over its repeats."""
        counts: dict[str, list[bool]] = {}
        for outcome in self.outcomes:
            counts.setdefault(outcome.case, []).append(outcome.passed)
        return {case: sum(passed) / len(passed) for case, passed in counts.items()}

    def to_dict(self) -> dict[str, Any]:
        return {**self.totals(), "cases": [o.to_dict() for o in self.outcomes]}

    def totals(self) -> dict[str, Any]:
        """What it came to, without its cases: what an eval run keeps of it."""
        p50, p95 = self.latency()
        cost = self.cost_micros
        return {
            "model": self.model,
            "agent": self.agent,
            "revision": self.revision,
            "label": self.label,
            "pass_rate": self.pass_rate,
            "passed": sum(o.passed for o in self.outcomes),
            "runs": len(self.outcomes),
            "checks": {k: {"passed": p, "total": t} for k, (p, t) in self.check_rates().items()},
            "cost_usd": None if cost is None else cost / 1e6,
            "tokens": sum(o.tokens for o in self.outcomes),
            "latency_p50_s": round(p50, 3),
            "latency_p95_s": round(p95, 3),
            "judge_cost_usd": sum(o.judge_cost_micros for o in self.outcomes) / 1e6,
        }


@dataclass(frozen=True, slots=True)
class EvalReport:
    spec: EvalSpec
    reports: tuple[ModelReport, ...]
    eval_run_id: str | None = None  # where it is stored: ``agentrunner evals show ID``

    @property
    def judge_cost_micros(self) -> int:
        return sum(o.judge_cost_micros for r in self.reports for o in r.outcomes)

    @property
    def passed(self) -> bool:
        """Whether every model's pass rate reaches the threshold."""
        return all(r.pass_rate >= self.spec.threshold for r in self.reports)

    def changed(self) -> list[str]:
        """The cases whose pass rate differs between the first variant and another (of those
        both ran)."""
        first, *others = (r.case_rates() for r in self.reports)
        return [
            c.name
            for c in self.spec.cases
            if any(
                c.name in first and first[c.name] != o.get(c.name, first[c.name]) for o in others
            )
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "eval": self.spec.name,
            "eval_run_id": self.eval_run_id,
            "agent": self.spec.agent,
            "threshold": self.spec.threshold,
            "passed": self.passed,
            "models": [r.to_dict() for r in self.reports],
            "changed": self.changed(),
            "judge_cost_usd": self.judge_cost_micros / 1e6,
        }


async def run_eval(
    runner: AgentRunner,
    spec: EvalSpec,
    *,
    models: Sequence[str | None] = (None,),
    revisions: Sequence[str] = (),
    repeat: int = 1,
    concurrency: int = 4,
    on_case: Callable[[CaseOutcome], None] | None = None,
    abort: AbortSignal | None = None,
    queue: RunQueue | None = None,
) -> EvalReport:
    """Run every case ``repeat`` times on each variant — each of the file's agents on each of
    ``models`` (None: the agent's own chain), then as its file was at each of ``revisions``
    (git) — ``concurrency`` runs at a time; ``on_case`` hears each as it ends. Stored as an
    eval run (``EvalReport.eval_run_id``) with each case's outcome as it ends. Once ``abort``
    fires, the runs in flight end ``cancelled`` (their cases failed so), no other case starts
    and the eval run is stored ``cancelled``. Refused before anything runs or is stored: a
    model (a judge's too) that is unknown or whose key is not set, a model or revision named
    twice, a revision git cannot give or whose file does not parse. With ``queue``, the
    cases' runs are queued for the project's workers (refused when none is alive, and with
    ``revisions``, which run here) and followed to their ends."""

    registry = runner.engine.models
    problems, keyless = judge_model_problems(registry, spec)
    if problems or keyless:
        raise (problems or keyless)[0]
    resolved = [registry.resolve(ref) for ref in models if ref is not None]
    for model in resolved:
        registry.check_credential(model)
    for named, flag in (([m.ref for m in resolved], "--model"), (list(revisions), "--rev")):
        if len(set(named)) < len(named):
            twice = next(ref for ref in named if named.count(ref) > 1)
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"{flag} {twice} is given twice",
                hint="Name each once; --repeat runs the cases more than once.",
            )
    if queue is not None:
        if revisions:
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                "an earlier version of an agent's file runs in this process, not on workers",
                hint="Leave out --workers to compare versions (--rev).",
            )
        if (idle := await no_worker(runner.store)) is not None:
            raise idle
    versions = await _versions(runner, spec, revisions)
    # each case's files read and checked once, before anything runs (attachment_refused)
    files = {c.name: tuple([await runner.attach(p) for p in c.attach]) for c in spec.cases}
    variants = [Variant(a, m) for a in spec.agents for m in models] + [
        Variant(a, None, r) for a in spec.agents for r in revisions
    ]
    judge = Judge(runner.engine, spec.judge)
    tracing, evals = runner.engine.tracing, runner.store.evals
    eval_run_id = new_id("eval_")
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(case: CaseSpec, n: int, index: int, variant: Variant) -> CaseOutcome | None:
        async with gate:
            if abort is not None and abort.aborted:
                return None  # not run: neither counted nor kept
            shown = variant.shown()
            with tracing.eval_case(eval_run_id, spec.name, case.name, n, shown):
                outcome = await _case(
                    runner, queue, case, files[case.name], n, index, variant, versions, judge, abort
                )
        checks = outcome.checks_dicts()
        await evals.add_case(
            eval_run_id,
            variant=index,
            name=case.name,
            repeat=n,
            position=spec.cases.index(case),
            run_id=outcome.run_id,
            passed=outcome.passed,
            checks=checks,
            error=outcome.error,
            cost_micros=outcome.cost_micros,
            judge_cost_micros=outcome.judge_cost_micros,
            tokens=outcome.tokens,
            seconds=outcome.seconds,
        )
        if on_case is not None:
            on_case(outcome)
        return outcome

    file = await asyncio.to_thread(_shown, spec.path, runner.config.root)  # resolves: a stat
    await evals.start(
        eval_run_id,
        eval=spec.name,
        agent=spec.agent,
        file=file,
        threshold=spec.threshold,
        repeats=repeat,
    )
    reports: list[ModelReport] = []
    status = "failed"
    try:
        several = len(spec.agents) > 1
        for index, variant in enumerate(variants):  # one variant's cases, then the next's
            jobs = [one(case, n, index, variant) for case in spec.cases for n in range(repeat)]
            outcomes = tuple(o for o in await asyncio.gather(*jobs) if o is not None)
            reports.append(
                ModelReport(
                    variant.model, outcomes, variant.agent if several else None, variant.revision
                )
            )
        status = "cancelled" if abort is not None and abort.aborted else "completed"
    except asyncio.CancelledError:
        status = "cancelled"
        raise
    finally:
        report = EvalReport(spec, tuple(reports), eval_run_id)
        ended = evals.end(
            eval_run_id,
            status=status,
            passed=report.passed if status == "completed" else None,
            variants=[r.totals() for r in reports],
            judge_cost_micros=report.judge_cost_micros,
        )
        await asyncio.shield(ended)
    return report


async def _versions(
    runner: AgentRunner, spec: EvalSpec, revisions: Sequence[str]
) -> dict[tuple[str, str], AgentSpec]:
    """Each agent's file at each revision, read before anything runs."""
    from agentrunner.workspace.agent_versions import agent_at_revision  # only --rev needs git

    return {
        (agent, rev): await agent_at_revision(runner.agents, agent, rev)
        for agent in spec.agents
        for rev in revisions
    }


async def _case(
    runner: AgentRunner,
    queue: RunQueue | None,
    case: CaseSpec,
    attachments: Sequence[Attachment],
    n: int,
    index: int,
    variant: Variant,
    versions: dict[tuple[str, str], AgentSpec],
    judge: Judge,
    abort: AbortSignal | None,
) -> CaseOutcome:
    """One run of ``case`` on ``variant`` (here, or by the workers with ``queue``), judged."""
    if queue is not None:
        ran = await run_queued(queue, case, attachments, variant.agent, variant.model, abort)
    else:
        version = versions[(variant.agent, variant.revision)] if variant.revision else None
        ran = await run_here(
            runner, case, attachments, variant.agent, variant.model, version, abort
        )
    checks, judged_micros = [], 0
    for check in case.checks if ran.error is None else ():
        if check.kind == "judge":
            outcome, micros = await judge.grade(check, case.message, ran.text, abort)
            judged_micros += micros
        else:
            outcome = judged(check, ran.text, ran.calls, ran.cost_micros, ran.seconds)
        checks.append(outcome)
    return CaseOutcome(
        case.name,
        n,
        variant.model,
        ran.run_id,
        ran.text,
        tuple(checks),
        ran.error,
        ran.cost_micros,
        ran.tokens,
        ran.seconds,
        ran.model,
        judged_micros,
        index,
        variant.revision,
        variant.agent,
    )


def _shown(path: Path, root: Path) -> str:
    """An eval file as kept: under the project's root, from there, wherever it was run from."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return display_path(path)
