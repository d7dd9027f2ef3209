"""Running an eval (docs/evals.md): each case of an ``EvalSpec`` as an ordinary run of its agent
on a new thread (one per case, repeat and model), a few at a time, on the agent's model or on
several to compare; each check judged from the run's own record (its answer, the tool calls its
messages name, its cost and time); the pass rates, costs, tokens and latencies they came to."""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrunner.agents.evals import CaseSpec, Check, EvalSpec
from agentrunner.core.ids import new_id
from agentrunner.errors import AgentRunnerError, ErrorCode

if TYPE_CHECKING:
    from agentrunner.engine.abort import AbortSignal
    from agentrunner.run.runner import AgentRunner

__all__ = ["CaseOutcome", "CheckOutcome", "EvalReport", "ModelReport", "run_eval"]


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    kind: str
    passed: bool
    said: str  # why it failed, for people; "" when it passed


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
            "checks": [{"check": c.kind, "passed": c.passed, "said": c.said} for c in self.checks],
            "cost_usd": None if self.cost_micros is None else self.cost_micros / 1e6,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 3),
            "answered_by": self.answered_by,
        }


@dataclass(frozen=True, slots=True)
class ModelReport:
    """One model's outcomes (``model`` None: the agent's own), in the cases' order."""

    model: str | None
    outcomes: tuple[CaseOutcome, ...]

    @property
    def pass_rate(self) -> float:
        return sum(o.passed for o in self.outcomes) / len(self.outcomes)

    @property
    def label(self) -> str:
        """The model as asked, else the one that answered most of its cases."""
        answered = [o.answered_by for o in self.outcomes if o.answered_by]
        return self.model or max(set(answered), key=answered.count, default="the agent's model")

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
        p50, p95 = self.latency()
        cost = self.cost_micros
        return {
            "model": self.model,
            "label": self.label,
            "pass_rate": self.pass_rate,
            "passed": sum(o.passed for o in self.outcomes),
            "runs": len(self.outcomes),
            "checks": {k: {"passed": p, "total": t} for k, (p, t) in self.check_rates().items()},
            "cost_usd": None if cost is None else cost / 1e6,
            "tokens": sum(o.tokens for o in self.outcomes),
            "latency_p50_s": round(p50, 3),
            "latency_p95_s": round(p95, 3),
            "cases": [o.to_dict() for o in self.outcomes],
        }


@dataclass(frozen=True, slots=True)
class EvalReport:
    spec: EvalSpec
    reports: tuple[ModelReport, ...]

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
            "agent": self.spec.agent,
            "threshold": self.spec.threshold,
            "passed": self.passed,
            "models": [r.to_dict() for r in self.reports],
            "changed": self.changed(),
        }


async def run_eval(
    runner: AgentRunner,
    spec: EvalSpec,
    *,
    models: Sequence[str | None] = (None,),
    repeat: int = 1,
    concurrency: int = 4,
    on_case: Callable[[CaseOutcome], None] | None = None,
    abort: AbortSignal | None = None,
) -> EvalReport:
    """Run every case ``repeat`` times on each of ``models`` (None: the agent's own chain),
    ``concurrency`` runs at a time; ``on_case`` hears each as it ends. Once ``abort`` fires,
    the runs in flight end ``cancelled`` (their cases failed so) and no other case starts.
    A model that is unknown, whose key is not set or that is named twice is refused before any
    case runs."""
    from agentrunner.run.request import RunAgentOverrides  # loaded with the runner

    registry = runner.engine.models
    for ref in models:
        if ref is not None:
            registry.check_credential(registry.resolve(ref))
    if len(set(models)) < len(models):
        twice = next(ref for ref in models if models.count(ref) > 1)
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"--model {twice} is given twice",
            hint="Name each model once; --repeat runs the cases more than once.",
        )

    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(case: CaseSpec, n: int, model: str | None) -> CaseOutcome:
        async with gate:
            overrides = RunAgentOverrides(model=model) if model else None
            thread = new_id(f"{spec.agent}-eval-")
            started = time.monotonic()
            try:
                if abort is not None and abort.aborted:
                    raise AgentRunnerError(ErrorCode.CANCELLED, "not run: the eval was stopped")
                result = await runner.run_agent(
                    spec.agent,
                    thread,
                    case.message,
                    None,
                    overrides,
                    abort,
                    input=dict(case.input),
                )
                if result.stop_reason == "cancelled":
                    raise AgentRunnerError(
                        ErrorCode.CANCELLED, "cancelled", details={"run_id": result.run_id}
                    )
            except AgentRunnerError as exc:
                run_id = exc.details.get("run_id")
                failed = f"{exc.code}: {exc.message}"
                outcome = CaseOutcome(
                    case.name, n, model, run_id, "", (), failed, None, 0, _since(started)
                )
            else:
                calls = [
                    (m.tool_name or "", m.tool_input)
                    for m in await runner.store.runs.messages(result.run_id)
                    if m.message_type == "tool_call_message"
                ]
                seconds = _since(started)
                cost = result.cost_micros if result.cost_known else None
                checks = tuple(_judged(c, result.text, calls, cost, seconds) for c in case.checks)
                tokens = result.usage.input_tokens + result.usage.output_tokens
                outcome = CaseOutcome(
                    case.name,
                    n,
                    model,
                    result.run_id,
                    result.text,
                    checks,
                    None,
                    cost,
                    tokens,
                    seconds,
                )
        if on_case is not None:
            on_case(outcome)
        return outcome

    reports = []
    for model in models:  # one model's cases, then the next's
        jobs = [one(case, n, model) for case in spec.cases for n in range(repeat)]
        reports.append(ModelReport(model, tuple(await asyncio.gather(*jobs))))
    return EvalReport(spec, tuple(reports))


def _since(started: float) -> float:
    return time.monotonic() - started


def _judged(
    check: Check,
    answer: str,
    calls: Sequence[tuple[str, Any]],
    cost_micros: int | None,
    seconds: float,
) -> CheckOutcome:
    kind, value = check.kind, check.value
    said = ""
    if kind == "equals":
        if answer.strip() != str(value).strip():
            said = f"the answer is not {str(value)!r}"
    elif kind == "contains":
        missing = [v for v in value if v not in answer]
        if missing:
            said = f"the answer has no {', '.join(repr(m) for m in missing)}"
    elif kind == "regex":
        if re.search(str(value), answer) is None:
            said = f"the answer does not match {str(value)!r}"
    elif kind == "schema":
        said = _schema_problem(answer, value)
    elif kind == "tool_called":
        name = value if isinstance(value, str) else value["name"]
        wanted = {} if isinstance(value, str) else dict(value.get("arguments") or {})
        if not any(n == name and _holds(args, wanted) for n, args in calls):
            said = f"{name} was not called" + (f" with {json.dumps(wanted)}" if wanted else "")
    elif kind == "tool_not_called":
        called = sorted({n for n, _ in calls if n in value})
        if called:
            said = f"{', '.join(called)} was called"
    elif kind == "max_cost_usd":
        if cost_micros is None:
            said = "its cost is unknown (a price missing)"
        elif cost_micros / 1e6 > float(value):
            said = f"it cost ${cost_micros / 1e6:.6f}, over ${float(value):.6f}"
    elif kind == "max_seconds" and seconds > float(value):
        said = f"it took {seconds:.2f} s, over {float(value):g} s"
    return CheckOutcome(kind, not said, said)


def _holds(arguments: object, wanted: Mapping[str, Any]) -> bool:
    return isinstance(arguments, Mapping) and all(arguments.get(k) == v for k, v in wanted.items())


def _schema_problem(answer: str, schema: Mapping[str, Any]) -> str:
    from jsonschema import validators  # only evals that use it pay the import

    try:
        value = json.loads(answer)
    except ValueError:
        return "the answer is not JSON"
    validator = validators.validator_for(schema)(schema)
    error = next(iter(validator.iter_errors(value)), None)
    return "" if error is None else f"the answer does not fit the schema: {error.message}"
