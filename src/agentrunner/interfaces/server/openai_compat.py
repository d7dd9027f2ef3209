"""OpenAI-compatible chat: ``POST /v1/chat/completions`` (model = an agent id) and
``GET /v1/models``, so any OpenAI client can talk to agentrunner's agents.

The conversation lives in an agentrunner thread, chosen by the ``X-Agentrunner-Thread``
header or else the request's ``user`` field (``<agent>-<user>``); with neither, each request is a
new thread. A thread the request opens takes the client's earlier turns as its history (a client
that keeps the conversation itself sends it whole each time); one that exists has its own. What
each field of the request does is ``chat_request``'s: the user messages after the last answer
are the new input, the client's system message is context in the user position, sampling and
length fields are the run's model settings, and what a run cannot do is refused. The agent's
tools run server-side; the client sees their result in the answer.

A user message's ``image_url`` and ``file`` parts (data URLs) are its files, checked by
``attach`` before anything runs (``_with_files``): the new input's go with the run, an earlier
turn's into the history a new thread is opened with. A file refused, or sent as a web address,
is answered 400 in OpenAI's error shape (``type``, ``param``), as OpenAI answers a bad image.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any, Literal

from fastapi import APIRouter, Depends, Header
from pydantic import BaseModel, Field
from starlette.responses import JSONResponse, StreamingResponse

from agentrunner.core.ids import new_id
from agentrunner.engine.messages import Attachment, Message, UserMessage
from agentrunner.errors import AgentRunnerError
from agentrunner.events import EventData, child_of, typed
from agentrunner.interfaces.server.chat_request import ChatRequest, ChatRun, SentFile, chat_run
from agentrunner.interfaces.server.fields import Id, Retry
from agentrunner.interfaces.server.routes import workspace
from agentrunner.run.app import AppParts
from agentrunner.run.attachment_entries import attach_entries
from agentrunner.run.idempotency import IdempotencyKey, run_once
from agentrunner.workspace.workspace import Workspace

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["openai"])


class Model(BaseModel):
    id: str = Field(description="an agent id")
    object: Literal["model"]
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"]
    data: list[Model]


class CompletionUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class AnswerMessage(BaseModel):
    role: Literal["assistant"]
    content: str


class Choice(BaseModel):
    index: int
    message: AnswerMessage
    finish_reason: Literal["stop", "length"] = Field(
        description="length: the answer was cut off at the output cap (max_tokens)"
    )


class ChatCompletion(BaseModel):
    """The agent's answer, as OpenAI's chat completion object."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str = Field(description="the agent id")
    choices: list[Choice]
    usage: CompletionUsage


_CHUNKS = {
    "description": "with `stream: true`: `chat.completion.chunk` objects as server-sent events "
    "(`data: {...}`), the last with `usage`, then `data: [DONE]`",
    "content": {"text/event-stream": {"schema": {"type": "string"}}},
}


@router.get("/models", operation_id="list_models", response_model=ModelList)
async def models(ws: Workspace = Depends(workspace)) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {"id": a.id, "object": "model", "created": 0, "owned_by": "agentrunner"}
            for a in ws.app.agents
            if a.enabled  # a disabled agent is no model to talk to
        ],
    }


@router.post(
    "/chat/completions",
    operation_id="create_chat_completion",
    response_model=ChatCompletion,
    responses={200: _CHUNKS},
)
async def chat_completions(
    body: ChatRequest,
    retry: Retry = Depends(),
    ws: Workspace = Depends(workspace),
    x_agentrunner_thread: Id | None = Header(default=None),
) -> dict[str, Any] | StreamingResponse | JSONResponse:
    agent = ws.app.agents.runnable(body.model)  # refused before a stream starts
    asked = chat_run(body)  # … as is what a run does not do
    try:
        asked = await _with_files(ws.runner, asked)  # … and a file refused
    except AgentRunnerError as exc:
        return _refused_file(exc)
    thread = x_agentrunner_thread or (
        f"{agent.id}-{body.user}" if body.user else new_id(f"{agent.id}-")
    )
    key = retry.key(body, thread=x_agentrunner_thread)
    chat = _Chat(ws, agent.id, thread, asked)
    if not body.stream:
        completion, repeated = await chat.complete(key)
        retry.answered(repeated)
        return _completion_json(completion)
    return StreamingResponse(
        chat.stream(key),
        media_type="text/event-stream",
        headers={"x-agentrunner-thread": thread},
    )


async def _with_files(runner: AppParts, asked: ChatRun) -> ChatRun:
    """``asked`` with its files read and checked: the new input's as its ``attachments``,
    each earlier turn's in its message. Nothing is stored."""
    earlier: list[Message] = []
    for message, sent in zip(asked.earlier, asked.earlier_files, strict=True):
        if sent and isinstance(message, UserMessage):
            message = replace(message, attachments=await _files(runner, sent))
        earlier.append(message)
    files = await _files(runner, asked.files)
    return replace(asked, attachments=files, earlier=tuple(earlier))


async def _files(runner: AppParts, sent: Sequence[SentFile]) -> tuple[Attachment, ...]:
    if not sent:
        return ()
    return await attach_entries([file.entry() for file in sent], runner)


def _refused_file(exc: AgentRunnerError) -> JSONResponse:
    """A file refused, as OpenAI answers a bad image: 400, ``invalid_request_error``, the
    field in ``param``; with agentrunner's code and hint."""
    param = exc.details.get("invalid") or exc.details.get("field")
    error: dict[str, Any] = {
        "message": exc.message,
        "type": "invalid_request_error",
        "param": param,
        "code": str(exc.code),
    }
    if exc.hint:
        error["hint"] = exc.hint
    return JSONResponse({"error": error}, status_code=400)


class _Chat:
    """One chat completion: the agent's run, once per idempotency key; what a repeat is
    answered from is the completion's JSON (``_completion``), streamed or not."""

    def __init__(self, ws: Workspace, agent_id: str, thread: str, asked: ChatRun) -> None:
        self.ws = ws
        self.agent_id = agent_id
        self.thread = thread
        self.asked = asked
        self.id = new_id("chatcmpl-")
        self.created = int(time.time())
        self.tokens: asyncio.Queue[str | None] = asyncio.Queue()

    async def run(self) -> dict[str, Any]:
        from agentrunner.run.callbacks import AgentRunnerCallbacks
        from agentrunner.run.request import RunAgentOverrides

        def on_event(kind: str, data: EventData) -> None:
            match typed(kind, data):
                case ("agent.token", token) if child_of(token) is None:
                    self.tokens.put_nowait(token["token"])
            # model.attempt_failed: a retry streams its own tokens; OpenAI's format has no way
            # to take text back

        asked = self.asked
        if asked.earlier:  # a thread this opens takes them; one that exists has its own
            threads = self.ws.app.store.threads
            await threads.open_with_history(self.thread, self.agent_id, asked.earlier)
        result = await self.ws.runner.run_agent(
            self.agent_id,
            self.thread,
            asked.message,
            AgentRunnerCallbacks(on_event=on_event),
            RunAgentOverrides(model_settings=asked.settings, context=asked.context),
            attachments=asked.attachments,
        )
        return {
            "id": self.id,
            "created": self.created,
            "model": self.agent_id,
            "text": result.text,
            "finish_reason": "length" if result.stop_reason == "max_tokens_exceeded" else "stop",
            "usage": _usage(result.usage),
        }

    async def complete(self, key: IdempotencyKey | None) -> tuple[dict[str, Any], bool]:
        if key is None:
            return await self.run(), False
        return await run_once(self.ws.app.store, key, self.run)

    async def stream(self, key: IdempotencyKey | None) -> AsyncIterator[bytes]:
        async def finish() -> tuple[dict[str, Any], bool]:
            try:
                return await self.complete(key)
            finally:
                self.tokens.put_nowait(None)

        # Not tied to this generator: a client that goes away mid-stream leaves the run (and
        # its idempotency key) to finish, so its retry gets the answer.
        task = asyncio.ensure_future(finish())
        yield self._chunk(self.id, self.created, {"role": "assistant", "content": ""})
        while (token := await self.tokens.get()) is not None:
            yield self._chunk(self.id, self.created, {"content": token})
        try:
            completion, repeated = await task
        except AgentRunnerError as exc:
            error = {"error": {"code": str(exc.code), "message": exc.message}}
            yield f"data: {json.dumps(error)}\n\n".encode()
            yield b"data: [DONE]\n\n"
            return
        cid, created = completion["id"], completion["created"]
        if repeated:  # nothing was streamed live: the first answer, whole
            yield self._chunk(cid, created, {"content": completion["text"]})
        yield self._chunk(cid, created, {}, _finish_reason(completion))
        if self.asked.include_usage:
            yield self._chunk(cid, created, {}, usage=completion["usage"])
        yield b"data: [DONE]\n\n"

    def _chunk(
        self,
        cid: str,
        created: int,
        delta: dict[str, Any],
        finish: str | None = None,
        usage: dict[str, int] | None = None,
    ) -> bytes:
        payload: dict[str, Any] = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": self.agent_id,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
            if usage is None
            else [],
        }
        if usage is not None:
            payload["usage"] = usage
        return f"data: {json.dumps(payload)}\n\n".encode()


def _completion_json(completion: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": completion["id"],
        "object": "chat.completion",
        "created": completion["created"],
        "model": completion["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": completion["text"]},
                "finish_reason": _finish_reason(completion),
            }
        ],
        "usage": completion["usage"],
    }


def _finish_reason(completion: dict[str, Any]) -> str:
    """``stop``, or ``length`` for an answer cut off at its output cap (a completion stored
    before this was said answers ``stop``)."""
    return str(completion.get("finish_reason", "stop"))


def _usage(usage: Any) -> dict[str, int]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }
