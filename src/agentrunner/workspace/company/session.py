"""The active company session (seed 002's start / stop, DESIGN decision 6): the root agent's
session thread, marked active in the store — at most one per project, whichever process asks."""

from __future__ import annotations

import difflib
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from agentrunner.core.ids import new_id
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.store.company import CompanySession

if TYPE_CHECKING:
    from agentrunner.agents.registry import AgentRegistry
    from agentrunner.agents.spec import AgentSpec
    from agentrunner.config import Config
    from agentrunner.run.spend import Spend
    from agentrunner.store.store import Store

__all__ = [
    "CompanySession",
    "active",
    "end",
    "open_session",
    "root_agent",
    "root_agent_id",
    "spent",
    "team",
    "team_ids",
    "team_lines",
]

RESUME_HINT = "End it with `agentrunner stop`, or continue it with `agentrunner start --resume`."


def root_agent(config: Config, agents: AgentRegistry) -> AgentSpec:
    """The agent people brief (``[company] root``, default ``ceo``). Missing: ``agent_not_found``
    naming the file to create; a broken file: its own problems."""
    root_id = config.company_root
    try:
        return agents.runnable(root_id)  # agent_disabled before anything is opened or run
    except AgentRunnerError as exc:
        if exc.code is not ErrorCode.AGENT_NOT_FOUND:
            raise  # the file is there, and broken or disabled: its own error says how
        raise _missing_root(config, agents.ids()) from None


def root_agent_id(config: Config) -> str:
    """The root agent's id, checked only as far as its file being there: what a background brief
    needs before it is queued, without reading every agent file (the worker reads them)."""
    file = config.agents_dir / f"{config.company_root}.md"
    if not file.is_file():
        raise _missing_root(config)
    return config.company_root


def _missing_root(config: Config, ids: Sequence[str] = ()) -> AgentRunnerError:
    from agentrunner.core.paths import display_path

    file = display_path(config.agents_dir / f"{config.company_root}.md")
    near = difflib.get_close_matches(config.company_root, list(ids), n=1)
    hint = (
        f"Did you mean '{near[0]}'? Set [company] root = \"{near[0]}\" in agentrunner.toml."
        if near
        else "Start from a company: `agentrunner init --template company` in a new "
        'directory; or name another agent in agentrunner.toml: [company] root = "…".'
    )
    return AgentRunnerError(
        ErrorCode.AGENT_NOT_FOUND,
        f"this project has no root agent '{config.company_root}': create {file}",
        hint=hint,
    )


async def active(store: Store) -> CompanySession | None:
    """The project's active company session, if one is."""
    return await store.company.active()


async def open_session(store: Store, root: str) -> CompanySession:
    """A new active session on a new session thread of ``root``; ``session_active`` when one is
    active already (nothing is changed then)."""
    thread_id = new_id(f"{root}-")
    session = await store.company.open_session(root, thread_id)
    if session is None:
        current = await store.company.active()
        since = (
            f" since {time.strftime('%Y-%m-%d %H:%M', time.localtime(current.started_at))}"
            if current
            else ""
        )
        raise AgentRunnerError(
            ErrorCode.SESSION_ACTIVE,
            f"a company session is active already{since}"
            + (f" ({current.id}, thread {current.thread_id})" if current else ""),
            hint=RESUME_HINT,
        )
    await store.threads.open(thread_id, root)
    await store.agent_states.set_current_thread(root, thread_id)  # `run ceo …` continues it
    return session


async def end(store: Store, session: CompanySession) -> bool:
    """Mark ``session`` ended; False when it had ended already."""
    return await store.company.end(session.id)


def team(agents: AgentRegistry, root: AgentSpec) -> list[tuple[AgentSpec, int]]:
    """Every enabled agent under the root, depth first, with its level below the root (the
    registry refuses cycles in ``reports_to``, so the walk ends)."""
    found: list[tuple[AgentSpec, int]] = []

    def walk(boss: str, level: int) -> None:
        for report in agents.direct_reports(boss):
            if report.enabled:
                found.append((report, level))
                walk(report.id, level + 1)

    walk(root.id, 0)
    return found


def team_ids(agents: AgentRegistry, root: AgentSpec) -> list[str]:
    """Who a brief may reach."""
    return [report.id for report, _ in team(agents, root)]


def team_lines(agents: AgentRegistry, root: AgentSpec) -> list[str]:
    """The root's team as lines for its prompt, indented by level, with each title; who can be
    delegated to is who reports to whom."""
    return [
        f"{'  ' * level}- {r.id} ({r.name})" + (f": {r.description}" if r.description else "")
        for r, level in team(agents, root)
    ]


async def spent(store: Store, current: CompanySession) -> Spend:
    """What the session's briefs and their delegations have cost so far (the cost rows)."""
    from agentrunner.run.spend import Spend  # the CLI's startup path imports this module
    from agentrunner.store.costs import today

    spend = Spend()
    row = await store.company.cost(current.id, today(current.started_at))
    if row.get("requests"):
        spend.add(row)
    return spend
