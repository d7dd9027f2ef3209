"""Running an eval (docs/evals.md): each case of an ``EvalSpec`` as an ordinary run of its agent
on a new thread (one per case, repeat and variant), a few at a time, on each variant it is
compared on — the agent's model or others, several agents, versions of the agent's file at git
revisions; each check judged from the run's own record, or by a model (``eval_checks``); the
pass rates, costs, tokens and latencies they came to. The eval run and each case's outcome are
stored as they end (``store/evals``), and each case is a span carrying their ids."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrunner.agents.evals import CaseSpec, EvalSpec
from agentrunner.core.ids import new_id
from agentrunner.core.paths import display_path
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.workspace.eval_checks import CheckOutcome, Judge, judged

if TYPE_CHECKING:
    from agentrunner.agents.spec import AgentSpec
    from agentrunner.engine.abort import AbortSignal
    from agentrunner.run.runner import AgentRunner

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

    @property
    def passed(self) -> bool:
        return self.error is None and all(c.passed for c in self.checks)

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
        return sum(o.passed for o in self.outcomes) / len(self.outcomes)

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
        if len(seconds) == 1:
            return seconds[0], seconds[0]
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
        """The cases whose pass rate differs between the first model and another."""
        first, *others = (r.case_rates() for r in self.reports)
        return [c.name for c in self.spec.cases if any(o[c.name] != first[c.name] for o in others)]

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
) -> EvalReport:
    """Run every case ``repeat`` times on each variant — each of the file's agents on each of
    ``models`` (None: the agent's own chain), then as its file was at each of ``revisions``
    (git) — ``concurrency`` runs at a time; ``on_case`` hears each as it ends. Stored as an
    eval run (``EvalReport.eval_run_id``) with each case's outcome as it ends. Once ``abort``
    fires, the runs in flight end ``cancelled`` (their cases failed so), no other case starts
    and the eval run is stored ``cancelled``. Refused before anything runs or is stored: a
    model (a judge's too) that is unknown or whose key is not set, a model or revision named
    twice, a revision git cannot give or whose file does not parse."""

    registry = runner.engine.models
    for ref in [*models, *spec.judge_models()]:
        if ref is not None:
            registry.check_credential(registry.resolve(ref))
    for named, flag in (([str(m) for m in models], "--model"), (list(revisions), "--rev")):
        if len(set(named)) < len(named):
            twice = next(ref for ref in named if named.count(ref) > 1)
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"{flag} {twice} is given twice",
                hint="Name each once; --repeat runs the cases more than once.",
            )
    versions = await _versions(runner, spec, revisions)
    variants = [Variant(a, m) for a in spec.agents for m in models] + [
        Variant(a, None, r) for a in spec.agents for r in revisions
    ]
    judge = Judge(runner.engine, spec.judge)
    tracing, evals = runner.engine.tracing, runner.store.evals
    eval_run_id = new_id("eval_")
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(case: CaseSpec, n: int, index: int, variant: Variant) -> CaseOutcome:
        async with gate:
            if abort is not None and abort.aborted:  # not run, so not kept
                stopped = "cancelled: not run, the eval was stopped"
                return CaseOutcome(
                    case.name,
                    n,
                    variant.model,
                    None,
                    "",
                    (),
                    stopped,
                    None,
                    0,
                    0.0,
                    variant=index,
                    revision=variant.revision,
                )
            shown = variant.shown()
            with tracing.eval_case(eval_run_id, spec.name, case.name, n, shown):
                outcome = await _case(runner, case, n, index, variant, versions, judge, abort)
        checks = outcome.checks_dicts()
        await evals.add_case(
            eval_run_id,
            variant=index,
            name=case.name,
            repeat=n,
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

    file = display_path(spec.path)
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
            outcomes = tuple(await asyncio.gather(*jobs))
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
    case: CaseSpec,
    n: int,
    index: int,
    variant: Variant,
    versions: dict[tuple[str, str], AgentSpec],
    judge: Judge,
    abort: AbortSignal | None,
) -> CaseOutcome:
    """One run of ``case`` on ``variant``, judged."""
    from agentrunner.run.request import RunAgentOverrides  # loaded with the runner

    version = versions[(variant.agent, variant.revision)] if variant.revision else None
    overrides = (
        RunAgentOverrides(model=variant.model, agent=version) if variant.model or version else None
    )
    thread = new_id(f"{variant.agent}-eval-")
    started = time.monotonic()
    try:
        result = await runner.run_agent(
            variant.agent, thread, case.message, None, overrides, abort, input=dict(case.input)
        )
        if result.stop_reason == "cancelled":
            raise AgentRunnerError(
                ErrorCode.CANCELLED, "cancelled", details={"run_id": result.run_id}
            )
    except AgentRunnerError as exc:
        return CaseOutcome(
            case.name,
            n,
            variant.model,
            exc.details.get("run_id"),
            "",
            (),
            f"{exc.code}: {exc.message}",
            None,
            0,
            _since(started),
            variant=index,
            revision=variant.revision,
        )
    seconds = _since(started)  # the run's time: a judge's grade is not the agent's
    calls = [
        (m.tool_name or "", m.tool_input)
        for m in await runner.store.runs.messages(result.run_id)
        if m.message_type == "tool_call_message"
    ]
    cost = result.cost_micros if result.cost_known else None
    checks, judged_micros = [], 0
    for check in case.checks:
        if check.kind == "judge":
            outcome, micros = await judge.grade(check, case.message, result.text, abort)
            judged_micros += micros
        else:
            outcome = judged(check, result.text, calls, cost, seconds)
        checks.append(outcome)
    return CaseOutcome(
        case.name,
        n,
        variant.model,
        result.run_id,
        result.text,
        tuple(checks),
        None,
        cost,
        result.usage.input_tokens + result.usage.output_tokens,
        seconds,
        result.model,
        judged_micros,
        index,
        variant.revision,
    )


def _since(started: float) -> float:
    return time.monotonic() - started
