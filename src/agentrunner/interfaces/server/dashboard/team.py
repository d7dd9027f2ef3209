"""``/``: the team — the org chart with each agent's state, current run, queue and today's
spend, the workers serving them and the limits nearly used up; refreshed in place while open."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from agentrunner.interfaces.server.dashboard.templating import page
from agentrunner.workspace.status import AgentStatus, project_status
from agentrunner.workspace.workspace import Workspace

__all__ = ["router"]

router = APIRouter()


@router.get("/")
async def team(request: Request) -> Response:
    return page(request, "team.html", await _team(request))


@router.get("/ui/team")
async def team_part(request: Request) -> Response:
    """The part of the page that changes, for the page's refresh."""
    return page(request, "_team.html", await _team(request))


async def _team(request: Request) -> dict[str, Any]:
    ws: Workspace = request.app.state.workspace
    runner = ws.runner
    status = await project_status(
        runner.app.store,
        runner.app.agents,
        runner.app.config.budgets,
        floors=await runner.smallest_requests(),
    )
    children: dict[str | None, list[AgentStatus]] = {}
    ids = {agent.agent_id for agent in status.agents}
    for agent in status.agents:
        boss = agent.reports_to if agent.reports_to in ids and agent.depth else None
        children.setdefault(boss, []).append(agent)
    channels = await ws.app.store.channels.all()
    return {
        "active": "team",
        "status": status,
        "children": children,
        "working": sum(agent.state == "working" for agent in status.agents),
        "channels": channels,
    }
