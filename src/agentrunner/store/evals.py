"""Eval runs and their cases (docs/evals.md): an eval run written as it starts, each case's
outcome as it ends (with the run that answered it), the run settled as it ends; read back for
`agentrunner evals` and the dashboard's history of an eval's pass rate."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.store.records import from_json, to_json
from agentrunner.store.repositories import FAR_FUTURE, Repository

__all__ = ["EvalCaseRecord", "EvalRunRecord", "EvalRuns"]


@dataclass(frozen=True, slots=True)
class EvalRunRecord:
    id: str
    eval: str
    agent: str
    file: str
    status: str  # running, completed, cancelled
    threshold: float
    repeats: int
    passed: bool | None  # None until it ends
    variants: list[dict[str, Any]]  # each variant's totals (``ModelReport.totals``)
    judge_cost_micros: int
    started_at: float
    ended_at: float | None
    cases_done: int

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> EvalRunRecord:
        return cls(
            row["id"],
            row["eval"],
            row["agent"],
            row["file"],
            row["status"],
            float(row["threshold"]),
            int(row["repeats"]),
            None if row["passed"] is None else bool(row["passed"]),
            from_json(row["variants"]) or [],
            int(row["judge_cost_micros"]),
            float(row["started_at"]),
            None if row["ended_at"] is None else float(row["ended_at"]),
            int(row["cases_done"]),
        )

    @property
    def outcome(self) -> str:
        """What came of it in one word: ``passed``, ``failed``, else its status (``running``,
        ``cancelled``)."""
        if self.status != "completed":
            return self.status
        return "passed" if self.passed else "failed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "eval": self.eval,
            "agent": self.agent,
            "file": self.file,
            "status": self.status,
            "threshold": self.threshold,
            "repeat": self.repeats,
            "passed": self.passed,
            "variants": self.variants,
            "judge_cost_usd": self.judge_cost_micros / 1e6,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "cases_done": self.cases_done,
        }


@dataclass(frozen=True, slots=True)
class EvalCaseRecord:
    variant: int  # its place in the eval run's variants
    name: str
    repeat: int
    run_id: str | None
    passed: bool
    checks: list[dict[str, Any]]
    error: str | None
    cost_micros: int | None
    judge_cost_micros: int
    tokens: int
    seconds: float
    run_status: str | None  # None once its run's thread is deleted

    @property
    def why(self) -> str:
        """Why it failed: its run's error, else what its failed checks said ("" if passed)."""
        return self.error or "; ".join(str(c["said"]) for c in self.checks if not c["passed"])

    def to_dict(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "case": self.name,
            "repeat": self.repeat,
            "run_id": self.run_id,
            "run_status": self.run_status,
            "passed": self.passed,
            "checks": self.checks,
            "error": self.error,
            "cost_usd": None if self.cost_micros is None else self.cost_micros / 1e6,
            "judge_cost_usd": self.judge_cost_micros / 1e6,
            "tokens": self.tokens,
            "seconds": self.seconds,
        }


class EvalRuns(Repository):
    async def start(
        self, id: str, *, eval: str, agent: str, file: str, threshold: float, repeats: int
    ) -> None:
        await self.db.batch(
            [
                self.op(
                    "eval_run_start",
                    id=id,
                    eval=eval,
                    agent=agent,
                    file=file,
                    threshold=threshold,
                    repeats=repeats,
                    now=time.time(),
                )
            ]
        )

    async def add_case(
        self,
        eval_run_id: str,
        *,
        variant: int,
        name: str,
        repeat: int,
        position: int,
        run_id: str | None,
        passed: bool,
        checks: Sequence[Mapping[str, Any]],
        error: str | None,
        cost_micros: int | None,
        judge_cost_micros: int,
        tokens: int,
        seconds: float,
    ) -> None:
        await self.db.batch(
            [
                self.op(
                    "eval_case_add",
                    eval_run_id=eval_run_id,
                    variant=variant,
                    name=name,
                    repeat=repeat,
                    position=position,
                    run_id=run_id,
                    passed=passed,
                    checks=to_json(list(checks)),
                    error=error,
                    cost_micros=cost_micros,
                    judge_cost_micros=judge_cost_micros,
                    tokens=tokens,
                    seconds=seconds,
                )
            ]
        )

    async def end(
        self,
        id: str,
        *,
        status: str,
        passed: bool | None,
        variants: Sequence[Mapping[str, Any]],
        judge_cost_micros: int,
    ) -> None:
        await self.db.batch(
            [
                self.op(
                    "eval_run_end",
                    id=id,
                    status=status,
                    passed=passed,
                    variants=to_json(list(variants)),
                    judge_cost_micros=judge_cost_micros,
                    now=time.time(),
                )
            ]
        )

    async def recent(
        self, *, eval: str | None = None, limit: int = 20, before: float = FAR_FUTURE
    ) -> list[EvalRunRecord]:
        """The newest eval runs (of ``eval``, or of all) started before ``before``."""
        rows = await self.db.fetch_all(
            self.sql["eval_runs_recent"], {"eval": eval, "before": before, "limit": limit}
        )
        return [EvalRunRecord.from_row(r) for r in rows]

    async def find(self, given: str) -> EvalRunRecord:
        """The eval run ``given`` names: its id, or the only one whose id begins or ends with
        it; ``not_found`` or ``validation`` (several) otherwise."""
        row = await self.db.fetch_one(self.sql["eval_run_get"], {"id": given})
        if row is None and given:
            pattern = given.replace("\\", "").replace("%", "").replace("_", "\\_")
            ids = await self.ids("eval_run_ids", start=f"{pattern}%", ending=f"%{pattern}")
            if len(ids) > 1:
                listed = ", ".join(ids[:2]) + (", …" if len(ids) > 2 else "")
                raise AgentRunnerError(
                    ErrorCode.VALIDATION,
                    f"'{given}' could be more than one eval run: {listed}",
                    hint="Give more of the id.",
                )
            if ids:
                row = await self.db.fetch_one(self.sql["eval_run_get"], {"id": ids[0]})
        if row is None:
            raise AgentRunnerError(
                ErrorCode.NOT_FOUND,
                f"no eval run '{given}'",
                hint="See `agentrunner evals list`.",
                details={"not_found": "eval run"},
            )
        return EvalRunRecord.from_row(row)

    async def cases(self, id: str) -> list[EvalCaseRecord]:
        rows = await self.db.fetch_all(self.sql["eval_cases_of"], {"id": id})
        return [
            EvalCaseRecord(
                int(r["variant"]),
                r["name"],
                int(r["repeat"]),
                r["run_id"],
                bool(r["passed"]),
                from_json(r["checks"]) or [],
                r["error"],
                None if r["cost_micros"] is None else int(r["cost_micros"]),
                int(r["judge_cost_micros"]),
                int(r["tokens"]),
                float(r["seconds"]),
                r["run_status"],
            )
            for r in rows
        ]
