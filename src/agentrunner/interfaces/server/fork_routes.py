"""Trying again (docs/threads.md, docs/http-api.md#forks-rewinds-and-replays):
``/threads/{id}/fork`` and ``/threads/{id}/rewind``, from a point of a thread (every rule is
``store/forks``'s), and ``/runs/{id}/replay``, a run sent again, queued for a worker (what is
sent is ``run/replay``'s)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from agentrunner.interfaces.server.fields import Id
from agentrunner.interfaces.server.responses import Thread, operation
from agentrunner.interfaces.server.routes import workspace
from agentrunner.run.replay import plan_replay
from agentrunner.workspace.workspace import Workspace

__all__ = ["router"]

router = APIRouter()


class Point(BaseModel):
    at: int = Field(
        description="the last message to keep, by its number (`seq`: messages are 1..n; 0 "
        "keeps none). A point among a step's tool calls moves past their last result"
    )


class CutThread(BaseModel):
    """The thread a fork made, or the one a rewind cut back."""

    thread: Thread
    at: int = Field(description="the last message it keeps")
    asked: int = Field(description="the point asked for (`at` differs: moved past tool results)")
    left_out: int = Field(description="how many of the source thread's messages it does not hold")


_ERRORS = {
    400: "`validation`: no message `at` in the thread; for a rewind, a run on the thread is "
    "queued, running or waiting (fork it instead)",
    404: "`thread_not_found`",
}


@router.post(
    "/threads/{thread_id}/fork",
    status_code=201,
    **operation("fork_thread", CutThread, tag="threads", errors=_ERRORS),
)
async def fork_thread(
    thread_id: Id, body: Point, ws: Workspace = Depends(workspace)
) -> dict[str, Any]:
    """A new thread of the same agent beginning with this thread's first `at` messages,
    copied as they are stored: its next run (`POST /threads/{new id}/runs`) sends the model
    that history byte for byte, then its message. The thread forked is left as it is."""
    return (await ws.app.store.forks.fork(thread_id, body.at)).to_dict()


@router.post(
    "/threads/{thread_id}/rewind",
    **operation("rewind_thread", CutThread, tag="threads", errors=_ERRORS),
)
async def rewind_thread(
    thread_id: Id, body: Point, ws: Workspace = Depends(workspace)
) -> dict[str, Any]:
    """This thread cut back to its first `at` messages, in place, with the summaries past
    them. What is cut stays in the records of the runs that wrote it (`GET /runs/{id}`)."""
    return (await ws.app.store.forks.rewind(thread_id, body.at)).to_dict()


class ReplayBody(BaseModel):
    model: str | None = Field(
        default=None,
        description="the model to send it to, `provider:model` or an alias; default: the "
        "model that answered it",
    )


class Replayed(BaseModel):
    run_id: str = Field(description="the new run, queued: follow it on /runs/{id}/events")
    thread_id: str = Field(description="the fork it runs on")
    replay_of: str = Field(description="the run it sends again")
    model: str | None = Field(description="the model it is sent to; null: the agent's")
    status: str = Field(description="`created`: a worker starts it")


@router.post(
    "/runs/{run_id}/replay",
    status_code=202,
    **operation(
        "replay_run",
        Replayed,
        tag="runs",
        errors={
            400: "`validation`: the run cannot be replayed (a task's, a channel's, one not "
            "ended, one whose message its thread no longer holds), said in the message; "
            "`model_not_found`",
            404: "`not_found`: no such run",
        },
    ),
)
async def replay_run(
    run_id: Id, body: ReplayBody | None = None, ws: Workspace = Depends(workspace)
) -> dict[str, Any]:
    """Queue the run again, as a new run beside it: on a fork of its thread cut just before
    its message, with the prompt it logged, its message and files and its model settings, on
    the model that answered it or `model`. Compare the two with `GET /runs/{id}`."""
    model = body.model if body else None
    plan = await plan_replay(ws.app.store, ws.app.engine.models, run_id, model=model)
    queued = await ws.runs.queue(
        plan.original.agent_id,
        plan.fork.thread.id,
        plan.message.content,
        input=plan.input,
        model_settings=plan.model_settings,
        attachments=plan.message.attachments,
        model=plan.model,
        prompt=plan.prompt,
    )
    return {
        "run_id": queued.run_id,
        "thread_id": queued.thread_id,
        "replay_of": plan.original.id,
        "model": plan.model,
        "status": "created",
    }
