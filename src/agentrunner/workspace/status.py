"""A project at a glance (``agentrunner status``): each agent in org-chart order with its state,
its current run and today's spend; the runs that wait for a person, and on what; live
workers; the daily limits that are nearly or wholly used up. What it shows of money comes
from ``spend``, as ``cost`` and the budget check do.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from agentrunner.run.spend import LimitUse, Spend, spend_report
from agentrunner.workspace.approvals import waiting_runs
from agentrunner.workspace.project_schedules import (
    ScheduleView,
    project_schedules,
    schedule_problems,
    schedule_views,
)

if TYPE_CHECKING:
    from agentrunner.agents.registry import AgentRegistry
    from agentrunner.agents.spec import AgentSpec
    from agentrunner.config import Budgets, Config
    from agentrunner.store.store import Store

__all__ = ["STATES", "AgentStatus", "ProjectStatus", "project_status"]

# ``disabled``: ``enabled: false`` in the agent file (whatever its runs did); otherwise from
# its runs (``AgentStates``): ``working`` while one runs, ``error`` when the last one failed,
# ``waiting`` when none of that and a run of it waits for a person, ``idle`` else (a cancelled
# run too: a person stopped it, the agent is free).
STATES = ("idle", "working", "waiting", "error", "disabled")


@dataclass(frozen=True, slots=True)
class AgentStatus:
    agent_id: str
    name: str
    reports_to: str | None
    depth: int  # in the org chart: 0 for a root
    state: str
    run_id: str | None  # the run in progress (or, waiting, the oldest run that waits)
    last_run_id: str | None
    queued: int
    spent_today: Spend

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "name": self.name,
            "reports_to": self.reports_to,
            "depth": self.depth,
            "state": self.state,
            "run_id": self.run_id,
            "last_run_id": self.last_run_id,
            "queued": self.queued,
            "spent_today_micros": self.spent_today.micros,
            "spent_today_usd": self.spent_today.micros / 1e6,
        }


@dataclass(slots=True)
class ProjectStatus:
    """``agents`` depth first down the org chart (each root, then its reports, in file
    order); ``org_chart`` tells whether any agent reports to another."""

    agents: list[AgentStatus]
    org_chart: bool
    workers: list[dict[str, Any]]
    spent_today: Spend
    limits: list[LimitUse]
    problems: int = 0  # agent files left out for their problems
    # The active company session (with what it has cost so far) and the company's jobs still
    # queued or running (stale ones healed first).
    session: dict[str, Any] | None = None
    jobs: list[dict[str, Any]] = field(default_factory=list)
    # The runs that wait for a person, oldest first, each with what it waits on.
    waiting: list[dict[str, Any]] = field(default_factory=list)
    # The project's schedules, each with its next and last fire (docs/schedules.md).
    schedules: list[ScheduleView] = field(default_factory=list)
    # PostgreSQL's connections now and its bound (None: a SQLite file); each worker's pool
    # bound is with it (``pool_size``, written by its heartbeat).
    connections: tuple[int, int] | None = None

    @property
    def warnings(self) -> list[LimitUse]:
        return [use for use in self.limits if use.state != "ok"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "agents": [agent.to_dict() for agent in self.agents],
            "org_chart": self.org_chart,
            "workers": self.workers,
            "connections": None
            if self.connections is None
            else {"now": self.connections[0], "max": self.connections[1]},
            "spent_today": self.spent_today.to_dict(),
            "limits": [use.to_dict() for use in self.limits],
            "warnings": [use.message() for use in self.warnings],
            "problems": self.problems,
            "session": self.session,
            "jobs": self.jobs,
            "waiting": self.waiting,
            "schedules": [view.to_dict() for view in self.schedules],
        }


async def project_status(
    store: Store,
    agents: AgentRegistry,
    budgets: Budgets,
    *,
    floors: Mapping[str, int] | None = None,
    config: Config | None = None,
) -> ProjectStatus:
    """The project now. ``floors``: each agent's smallest request (``budgets.request_floors``),
    so that a daily limit that cannot pay for one shows as exhausted; with the project's
    ``config``, its schedules (``schedules.project_schedules``) with their next and last fires
    and what keeps one from firing."""
    specs = _chart_order(list(agents))
    spend = await spend_report(store, budgets, agents=[spec.id for spec, _ in specs], floors=floors)
    depths = await store.mailbox.depths()
    waiting = await waiting_runs(store)
    waits = {requests[0].agent_id: run_id for run_id, requests in reversed(waiting.items())}
    rows = []
    for spec, depth in specs:
        state = await store.agent_states.get(spec.id)
        shown, run_id = state.status, state.current_run_id
        if shown == "idle" and spec.id in waits:
            shown, run_id = "waiting", waits[spec.id]
        rows.append(
            AgentStatus(
                agent_id=spec.id,
                name=spec.name,
                reports_to=spec.reports_to,
                depth=depth,
                state=shown if spec.enabled else "disabled",
                run_id=run_id,
                last_run_id=state.last_run_id,
                queued=depths.get(spec.id, {}).get("created", 0),
                spent_today=spend.today.get(spec.id, Spend()),
            )
        )
    session, jobs = await _company(store)
    views: list[ScheduleView] = []
    if config is not None:
        schedules = project_schedules(config, agents)
        problems = schedule_problems(config, agents, schedules)
        views = await schedule_views(store, schedules, time.time(), problems)
    return ProjectStatus(
        agents=rows,
        org_chart=any(spec.reports_to is not None for spec, _ in specs),
        workers=await store.workers.alive(),
        connections=await store.workers.connections(),
        spent_today=spend.total,
        limits=spend.limits,
        problems=len({p.file for p in agents.problems}),
        session=session,
        jobs=jobs,
        schedules=views,
        waiting=[
            {
                "run_id": run_id,
                "agent_id": requests[0].agent_id,
                "thread_id": requests[0].thread_id,
                "approvals": [
                    {"id": r.id, "tool": r.tool, "expires_at": r.expires_at} for r in requests
                ],
            }
            for run_id, requests in waiting.items()
        ],
    )


async def _company(store: Store) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The active session and the unfinished jobs, those that wait for a person too (listing
    heals the stale ones first)."""
    from agentrunner.workspace.company.jobs import list_jobs
    from agentrunner.workspace.company.session import active, spent

    current = await active(store)
    session = None
    if current is not None:
        session = {**asdict(current), "spent": (await spent(store, current)).to_dict()}
    jobs = [job.to_dict() for job in await list_jobs(store, limit=50)]
    return session, [job for job in jobs if job["status"] in ("created", "running", "waiting")]


def _chart_order(specs: list[AgentSpec]) -> list[tuple[AgentSpec, int]]:
    """Each agent once with its depth: roots (agents reporting to nobody, or to an agent not
    loaded) in file order, each followed by its reports, depth first."""
    ids = {spec.id for spec in specs}
    reports: dict[str, list[AgentSpec]] = {}
    for spec in specs:
        if spec.reports_to in ids:
            reports.setdefault(spec.reports_to, []).append(spec)
    out: list[tuple[AgentSpec, int]] = []

    def walk(spec: AgentSpec, depth: int) -> None:
        out.append((spec, depth))
        for report in reports.get(spec.id, []):
            walk(report, depth + 1)

    for spec in specs:
        if spec.reports_to not in ids:
            walk(spec, 0)
    return out
