"""``/approvals``: what waits for a person, and the decisions (docs/approvals.md)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from agentrunner.interfaces.server.fields import Id
from agentrunner.interfaces.server.responses import operation
from agentrunner.interfaces.server.routes import workspace
from agentrunner.workspace.workspace import Workspace

__all__ = ["router"]

router = APIRouter()


class Approval(BaseModel):
    """A tool call a waiting run asks a person about, and its decision once made."""

    id: str
    run_id: str
    agent_id: str
    thread_id: str | None
    call_id: str
    kind: str = Field(description="`tool` (a call to approve) or `question` (`ask_person`)")
    tool: str
    arguments: dict[str, Any] = Field(description="the arguments it would run with")
    rule: str = Field(description="the rule that asked for a decision")
    status: str = Field(description="`pending`, `approved`, `denied`, `expired` or `cancelled`")
    decided_by: str | None
    decided_at: float | None
    reason: str | None
    arguments_used: dict[str, Any] | None = Field(description="edited arguments, if any")
    edited: bool
    always: str | None = Field(description="`thread` or `agent`: approved from now on there")
    expires_at: float = Field(description="when an undecided request is denied")
    execution: str | None = Field(description="an approved call: `started`, then `finished`")
    created_at: float


class ApprovalList(BaseModel):
    approvals: list[Approval]


class Decision(BaseModel):
    decision: Literal["approve", "deny"]
    reason: str | None = Field(default=None, max_length=4000)
    arguments: dict[str, Any] | None = Field(
        default=None, description="approve with these arguments instead (recorded as edited)"
    )
    always: Literal["thread", "agent"] | None = Field(
        default=None, description="approve this tool from now on, on this thread or agent"
    )
    answer: str | None = Field(
        default=None,
        max_length=100_000,
        description="a question's answer (`ask_person`, kind `question`): approve with it",
    )
    by: Id | None = Field(default=None, description="who decides; default: `http`")


class Decided(BaseModel):
    approval: Approval
    requeued: bool = Field(description="the run's last request: the run is queued again")


@router.get("/approvals", **operation("list_approvals", ApprovalList, tag="approvals"))
async def list_approvals(ws: Workspace = Depends(workspace)) -> dict[str, Any]:
    pending = await ws.runner.waits.pending()
    return {"approvals": [p.to_dict() for p in pending]}


@router.get("/approvals/{approval_id}", **operation("get_approval", Approval, tag="approvals"))
async def get_approval(approval_id: Id, ws: Workspace = Depends(workspace)) -> dict[str, Any]:
    return (await ws.runner.waits.find(approval_id)).to_dict()


@router.post(
    "/approvals/{approval_id}",
    **operation(
        "decide_approval",
        Decided,
        tag="approvals",
        errors={409: "decided already (the first decision stands: named in `details`)"},
    ),
)
async def decide_approval(
    approval_id: Id, body: Decision, ws: Workspace = Depends(workspace)
) -> dict[str, Any]:
    decided = await ws.runner.waits.decide(
        approval_id,
        approve=body.decision == "approve",
        by=body.by or "http",
        reason=body.reason,
        arguments=body.arguments,
        always=body.always,
        answer=body.answer,
    )
    return {"approval": decided.record.to_dict(), "requeued": decided.requeued}
