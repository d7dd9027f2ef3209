"""OpenAI-compatible chat: ``POST /v1/chat/completions`` (model = an agent id) and
``GET /v1/models``, so any OpenAI client can talk to agentrunner's agents.

The conversation lives in an agentrunner thread, chosen by the ``X-Agentrunner-Thread``
header or else the request's ``user`` field (``<agent>-<user>``); with neither, each request is a
new thread. Only the last user message is new input — the thread has the history. The agent's
tools run server-side; the client sees their result in the answer.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Header
from pydantic import BaseModel, Field
from starlette.responses import StreamingResponse

from agentrunner.compose import Workspace
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.ids import new_id
from agentrunner.server.routes import workspace

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["openai"])


class ChatMessage(BaseModel):
    role: str = Field(max_length=20)
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    model: str = Field(min_length=1, max_length=200)
    messages: list[ChatMessage] = Field(min_length=1, max_length=1000)
    stream: bool = False
    user: str | None = Field(default=None, max_length=200)


@router.get("/models")
async def models(ws: Workspace = Depends(workspace)) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {"id": a.id, "object": "model", "created": 0, "owned_by": "agentrunner"}
            for a in ws.runner.agents
        ],
    }


@router.post("/chat/completions", response_model=None)
async def chat_completions(
    body: ChatRequest,
    ws: Workspace = Depends(workspace),
    x_agentrunner_thread: str | None = Header(default=None),
) -> dict[str, Any] | StreamingResponse:
    agent = ws.runner.agents.get(body.model)
    text = _last_user_text(body.messages)
    thread = x_agentrunner_thread or (
        f"{agent.id}-{body.user}" if body.user else new_id(f"{agent.id}-")
    )
    completion_id = new_id("chatcmpl-")
    if not body.stream:
        result = await ws.runner.run_agent(agent.id, thread, text)
        return {
            "id": completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": agent.id,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": result.text},
                    "finish_reason": "stop",
                }
            ],
            "usage": _usage(result.usage),
        }
    return StreamingResponse(
        _stream(ws, agent.id, thread, text, completion_id),
        media_type="text/event-stream",
        headers={"x-agentrunner-thread": thread},
    )


async def _stream(
    ws: Workspace, agent_id: str, thread: str, text: str, completion_id: str
) -> AsyncIterator[bytes]:
    from agentrunner.callbacks import AgentRunnerCallbacks

    queue: asyncio.Queue[str | None] = asyncio.Queue()
    created = int(time.time())

    def on_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "agent.token" and "from_agent" not in data:
            queue.put_nowait(data["token"])
        elif kind == "model.attempt_failed":
            pass  # a retry streams its own tokens; OpenAI's format has no way to take text back

    def chunk(
        delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None
    ) -> bytes:
        payload: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": agent_id,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
            if usage is None
            else [],
        }
        if usage is not None:
            payload["usage"] = usage
        return f"data: {json.dumps(payload)}\n\n".encode()

    async def run() -> Any:
        try:
            return await ws.runner.run_agent(
                agent_id, thread, text, AgentRunnerCallbacks(on_event=on_event)
            )
        finally:
            queue.put_nowait(None)

    task = asyncio.ensure_future(run())
    yield chunk({"role": "assistant", "content": ""})
    while (token := await queue.get()) is not None:
        yield chunk({"content": token})
    try:
        result = await task
    except AgentRunnerError as exc:
        error = {"error": {"code": str(exc.code), "message": exc.message}}
        yield f"data: {json.dumps(error)}\n\n".encode()
        yield b"data: [DONE]\n\n"
        return
    yield chunk({}, "stop")
    yield chunk({}, usage=_usage(result.usage))
    yield b"data: [DONE]\n\n"


def _last_user_text(messages: list[ChatMessage]) -> str:
    for message in reversed(messages):
        if message.role != "user":
            continue
        if isinstance(message.content, str):
            return message.content
        parts = [p.get("text", "") for p in message.content or () if p.get("type") == "text"]
        if parts:
            return "".join(parts)
    raise AgentRunnerError(ErrorCode.VALIDATION, "messages has no user message with text")


def _usage(usage: Any) -> dict[str, int]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }
