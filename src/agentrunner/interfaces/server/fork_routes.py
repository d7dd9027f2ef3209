"""``/threads/{id}/fork`` and ``/threads/{id}/rewind``: try again from a point of a thread
(docs/threads.md, docs/http-api.md#forks). Every rule is ``store/forks``'s."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from agentrunner.interfaces.server.fields import Id
from agentrunner.interfaces.server.responses import Thread, operation
from agentrunner.interfaces.server.routes import workspace
from agentrunner.store.forks import Cut
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
    cut: int = Field(description="how many of the source thread's messages it does not hold")


_ERRORS = {
    400: "`validation`: no message `at` in the thread; for a rewind, a run on the thread is "
    "queued, running or waiting (fork it instead)",
    404: "`thread_not_found`",
}


def _answer(cut: Cut) -> dict[str, Any]:
    return {"thread": cut.thread.to_dict(), "at": cut.at, "asked": cut.asked, "cut": cut.left_out}


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
    return _answer(await ws.app.store.forks.fork(thread_id, body.at))


@router.post(
    "/threads/{thread_id}/rewind",
    **operation("rewind_thread", CutThread, tag="threads", errors=_ERRORS),
)
async def rewind_thread(
    thread_id: Id, body: Point, ws: Workspace = Depends(workspace)
) -> dict[str, Any]:
    """This thread cut back to its first `at` messages, in place, with the summaries past
    them. What is cut stays in the records of the runs that wrote it (`GET /runs/{id}`)."""
    return _answer(await ws.app.store.forks.rewind(thread_id, body.at))
