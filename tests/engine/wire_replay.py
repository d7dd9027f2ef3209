"""Replaying a provider's answer through the real HTTP client, and writing the same answer the
other way (a whole body as a stream, a stream's content as a whole body), so one answer can be
folded both ways and the results compared. ``provider`` names the wire: ``openai`` (Chat
Completions), ``anthropic``, or ``openai-responses`` (OpenAI's Responses API, provider
``openai``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx2

from agentrunner.engine.failures import ProviderError
from agentrunner.engine.http_client import HttpModelClient
from agentrunner.engine.messages import (
    ModelRequest,
    ModelResponse,
    TextDelta,
    ThinkingDelta,
    UserMessage,
)
from agentrunner.engine.wire_anthropic import AnthropicWire
from agentrunner.engine.wire_openai import OpenAIWire
from agentrunner.engine.wire_responses import ResponsesWire

SSE = "text/event-stream; charset=utf-8"


@dataclass
class Replayed:
    """What the client made of one answer: the response or the error, and the deltas it sent
    on, as text and thinking."""

    outcome: ModelResponse | ProviderError | None = None
    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)

    def on_delta(self, delta: TextDelta | ThinkingDelta) -> None:
        (self.text if isinstance(delta, TextDelta) else self.thinking).append(delta.text)

    @property
    def response(self) -> ModelResponse:
        assert isinstance(self.outcome, ModelResponse), self.outcome
        return self.outcome

    @property
    def error(self) -> dict[str, Any]:
        """The classified error, every field that reaches a run's record."""
        error = self.outcome
        assert isinstance(error, ProviderError), error
        return {
            "kind": str(error.kind),
            "code": str(error.code),
            "retryable": error.retryable,
            "failover": error.failover,
            "status": error.status,
            "retry_after": error.retry_after,
            "request_id": error.request_id,
            "message": error.message,
        }


def wire_for(provider: str) -> OpenAIWire | AnthropicWire | ResponsesWire:
    if provider == "openai-responses":
        return ResponsesWire("openai")
    return OpenAIWire("openai") if provider == "openai" else AnthropicWire("anthropic")


async def replay(
    provider: str,
    *,
    stream: bool,
    status: int = 200,
    body: Any,
    headers: dict[str, str] | None = None,
) -> Replayed:
    """``body`` (JSON, or text: an event stream with ``stream``) answered with ``status`` to one
    request through ``HttpModelClient``."""
    content_type = SSE if isinstance(body, str) and status < 400 else "application/json"
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    answer_headers = {"content-type": content_type, **(headers or {})}

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, headers=answer_headers, content=raw)

    client = HttpModelClient(
        wire_for(provider),
        base_url="https://provider.invalid/v1",
        headers={},
        transport=httpx2.MockTransport(answer),
    )
    request = ModelRequest("recorded", "", [UserMessage("hi")], stream=stream)
    replayed = Replayed()
    try:
        replayed.outcome = await client.request(request, replayed.on_delta)
    except ProviderError as exc:
        replayed.outcome = exc
    finally:
        await client.aclose()
    return replayed


# -- a whole body as the provider would have streamed it ------------------------------------


def pieces(text: str) -> list[str]:
    """``text`` in three pieces, as a stream would bring it."""
    step = max(1, -(-len(text) // 3))
    return [text[i : i + step] for i in range(0, len(text), step)]


def as_stream(provider: str, body: dict[str, Any]) -> str:
    if provider == "openai-responses":
        events = responses_events(body)
    else:
        events = openai_events(body) if provider == "openai" else anthropic_events(body)
    return "".join(
        (f"event: {name}\n" if name else "")
        + f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
        for name, data in events
    )


def openai_events(body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    base = {"id": body.get("id"), "object": "chat.completion.chunk", "model": body.get("model")}
    [choice] = body["choices"]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
        return None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events = [chunk({"role": "assistant", "content": ""})]
    for name in ("reasoning_content", "reasoning", "content", "refusal"):
        if isinstance(message.get(name), str):
            events += [chunk({name: piece}) for piece in pieces(message[name])]
    for index, call in enumerate(message.get("tool_calls") or ()):
        function = call["function"]
        start = {"index": index, "id": call["id"], "type": call.get("type", "function")}
        events.append(
            chunk(
                {"tool_calls": [{**start, "function": {"name": function["name"], "arguments": ""}}]}
            )
        )
        events += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in pieces(function.get("arguments") or "")
        ]
    events.append(chunk({}, choice.get("finish_reason")))
    if body.get("usage"):
        events.append((None, {**base, "choices": [], "usage": body["usage"]}))
    events.append((None, "[DONE]"))
    return events


def anthropic_events(body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    usage = body.get("usage") or {}
    message = {k: v for k, v in body.items() if k not in ("content", "stop_reason", "usage")}
    started = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {**usage, "output_tokens": 1},
    }
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": started})
    ]
    for index, block in enumerate(body.get("content") or ()):
        start, deltas = _block_stream(block)
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    stop = {"stop_reason": body.get("stop_reason"), "stop_sequence": body.get("stop_sequence")}
    output = {"output_tokens": usage.get("output_tokens")}
    events.append(("message_delta", {"type": "message_delta", "delta": stop, "usage": output}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def responses_events(body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """A whole ``response`` as the Responses API streams it: created, each output item added,
    its deltas, done; then the response completed (or incomplete), whole."""
    events: list[tuple[str | None, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append((kind, {"type": kind, "sequence_number": len(events), **fields}))

    started = {**body, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=started)
    emit("response.in_progress", response=started)
    for index, item in enumerate(body.get("output") or ()):
        at = {"item_id": item.get("id"), "output_index": index}
        kind = item["type"]
        if kind == "reasoning":
            begun = {"id": item["id"], "type": "reasoning", "summary": []}
            emit("response.output_item.added", output_index=index, item=begun)
            for s, part in enumerate(item.get("summary") or ()):
                for piece in pieces(part["text"]):
                    emit(
                        "response.reasoning_summary_text.delta", **at, summary_index=s, delta=piece
                    )
        elif kind == "message":
            emit("response.output_item.added", output_index=index, item={**item, "content": []})
            for c, part in enumerate(item.get("content") or ()):
                field, delta = (
                    ("text", "response.output_text.delta")
                    if part["type"] == "output_text"
                    else ("refusal", "response.refusal.delta")
                )
                for piece in pieces(part[field]):
                    emit(delta, **at, content_index=c, delta=piece)
        elif kind == "function_call":
            emit("response.output_item.added", output_index=index, item={**item, "arguments": ""})
            for piece in pieces(item.get("arguments") or ""):
                emit("response.function_call_arguments.delta", **at, delta=piece)
        else:
            emit("response.output_item.added", output_index=index, item=item)
        emit("response.output_item.done", output_index=index, item=item)
    emit(f"response.{body.get('status', 'completed')}", response=body)
    return events


def _block_stream(block: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    kind = block["type"]
    if kind == "text":
        return {**block, "text": ""}, [
            {"type": "text_delta", "text": p} for p in pieces(block["text"])
        ]
    if kind == "thinking":
        deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block.get("signature") or ""})
        return {**block, "thinking": "", "signature": ""}, deltas
    if kind == "tool_use":
        arguments = json.dumps(block.get("input") or {})
        return {**block, "input": {}}, [
            {"type": "input_json_delta", "partial_json": p} for p in pieces(arguments)
        ]
    return block, []


# -- a streamed answer's content as the provider would have sent it whole -------------------

OPENAI_FINISH = {"stop": "stop", "tool_calls": "tool_calls", "length": "length"}
ANTHROPIC_STOP = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "stop_sequence": "stop_sequence",
    "content_filter": "refusal",
}


def as_body(provider: str, folded: ModelResponse) -> dict[str, Any]:
    """What the fold made of a stream, written as the provider's whole body."""
    if provider == "openai-responses":
        return responses_body(folded)
    return openai_body(folded) if provider == "openai" else anthropic_body(folded)


def responses_body(folded: ModelResponse) -> dict[str, Any]:
    said, usage = folded.message, folded.usage
    output: list[dict[str, Any]] = []
    for thought in said.thinking:
        if output and output[-1]["id"] == thought.id:
            output[-1]["summary"].append({"type": "summary_text", "text": thought.text})
            continue
        item: dict[str, Any] = {"id": thought.id, "type": "reasoning", "summary": []}
        if thought.text:
            item["summary"].append({"type": "summary_text", "text": thought.text})
        if thought.signature:
            item["encrypted_content"] = thought.signature
        output.append(item)
    if said.text:
        text = {"type": "output_text", "text": said.text, "annotations": []}
        message = {"id": said.text_id, "type": "message", "role": "assistant", "content": [text]}
        if said.phase is not None:
            message["phase"] = said.phase
        output.append(message)
    output += [
        {
            "id": call.item_id,
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": call.raw_arguments
            if call.raw_arguments is not None
            else json.dumps(call.arguments),
        }
        for call in said.tool_calls
    ]
    cut = folded.finish_reason == "length"
    return {
        "id": "replayed",
        "object": "response",
        "model": folded.model,
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "output": output,
        "usage": {
            "input_tokens": usage.input_tokens,
            "input_tokens_details": {"cached_tokens": usage.cache_read_tokens},
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        },
    }


def openai_body(folded: ModelResponse) -> dict[str, Any]:
    said, usage = folded.message, folded.usage
    message: dict[str, Any] = {"role": "assistant", "content": said.text or None}
    if said.thinking:
        message["reasoning_content"] = "".join(t.text for t in said.thinking)
    if said.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.raw_arguments
                    if call.raw_arguments is not None
                    else json.dumps(call.arguments),
                },
            }
            for call in said.tool_calls
        ]
    return {
        "id": "replayed",
        "object": "chat.completion",
        "model": folded.model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": OPENAI_FINISH[folded.finish_reason]}
        ],
        "usage": {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
            "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        },
    }


def anthropic_body(folded: ModelResponse) -> dict[str, Any]:
    said, usage = folded.message, folded.usage
    blocks: list[dict[str, Any]] = []
    for thought in said.thinking:
        if thought.redacted is not None:
            blocks.append({"type": "redacted_thinking", "data": thought.redacted})
        else:
            blocks.append(
                {"type": "thinking", "thinking": thought.text, "signature": thought.signature}
            )
    if said.text:
        blocks.append({"type": "text", "text": said.text})
    blocks += [
        {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        for call in said.tool_calls
    ]
    cached = usage.cache_read_tokens + usage.cache_write_tokens
    return {
        "id": "replayed",
        "type": "message",
        "role": "assistant",
        "model": folded.model,
        "content": blocks,
        "stop_reason": ANTHROPIC_STOP[folded.finish_reason],
        "usage": {
            "input_tokens": usage.input_tokens - cached,
            "output_tokens": usage.output_tokens,
            "cache_read_input_tokens": usage.cache_read_tokens,
            "cache_creation_input_tokens": usage.cache_write_tokens,
        },
    }
