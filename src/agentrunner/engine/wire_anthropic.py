"""Anthropic Messages ↔ agentrunner messages. Pure translation, no I/O.

Thinking blocks keep their signatures and are replayed only to the provider that produced them
(seed 001, same-provider reasoning replay); for any other provider they are dropped. Usage is
normalized so ``input_tokens`` includes cache reads and writes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agentrunner.engine.failures import ProviderError, classify_status, error_fields
from agentrunner.engine.messages import (
    AssistantMessage,
    FinishReason,
    ModelRequest,
    ModelResponse,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicStream", "AnthropicWire"]

DEFAULT_MAX_TOKENS = 8192
_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "stop_sequence": "stop_sequence",
    "refusal": "content_filter",
    "pause_turn": "stop",
}


class AnthropicWire:
    """Builds request bodies and reads responses for the Anthropic Messages API."""

    def __init__(self, provider: str, *, cache_system: bool = True) -> None:
        self.provider = provider
        self.cache_system = cache_system

    def path(self, request: ModelRequest) -> str:
        return "/v1/messages"

    def build(self, request: ModelRequest) -> dict[str, Any]:
        turns: list[dict[str, Any]] = []
        for message in request.messages:
            if isinstance(message, UserMessage):
                role, blocks = "user", [{"type": "text", "text": message.content}]
            elif isinstance(message, ToolResult):
                block: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": message.call_id,
                    "content": message.content,
                }
                if message.is_error:
                    block["is_error"] = True
                role, blocks = "user", [block]
            else:
                role, blocks = "assistant", self._assistant_blocks(message)
                if not blocks:
                    continue
            if turns and turns[-1]["role"] == role:
                turns[-1]["content"].extend(blocks)  # the API wants roles to alternate
            else:
                turns.append({"role": role, "content": blocks})
        body: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_output_tokens or DEFAULT_MAX_TOKENS,
            "messages": turns,
        }
        if request.system:
            system: dict[str, Any] = {"type": "text", "text": request.system}
            if self.cache_system:
                system["cache_control"] = {"type": "ephemeral"}
            body["system"] = [system]
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
                for t in request.tools
            ]
        if request.output_schema is not None:
            body["output_config"] = {
                "format": {"type": "json_schema", "schema": dict(request.output_schema)}
            }
        body["stream"] = request.stream
        return body

    def _assistant_blocks(self, message: AssistantMessage) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        for thought in message.thinking:
            if thought.provider != self.provider:
                continue  # reasoning is replayed only to the provider that wrote it
            if thought.redacted is not None:
                blocks.append({"type": "redacted_thinking", "data": thought.redacted})
            elif thought.signature:
                blocks.append(
                    {"type": "thinking", "thinking": thought.text, "signature": thought.signature}
                )
        if message.text:
            blocks.append({"type": "text", "text": message.text})
        for call in message.tool_calls:
            blocks.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            )
        return blocks

    def parse(self, body: Mapping[str, Any]) -> ModelResponse:
        text: list[str] = []
        calls: list[ToolCall] = []
        thinking: list[Thinking] = []
        for block in body.get("content") or ():
            kind = block.get("type")
            if kind == "text":
                text.append(block.get("text", ""))
            elif kind == "tool_use":
                calls.append(ToolCall(block["id"], block["name"], dict(block.get("input") or {})))
            elif kind == "thinking":
                thinking.append(
                    Thinking(block.get("thinking", ""), self.provider, block.get("signature"))
                )
            elif kind == "redacted_thinking":
                thinking.append(Thinking("", self.provider, redacted=block.get("data", "")))
        model = str(body.get("model") or "")
        message = AssistantMessage("".join(text), calls, thinking, model or None, self.provider)
        finish = _FINISH.get(body.get("stop_reason") or "end_turn", "stop")
        return ModelResponse(
            message, _usage(body.get("usage") or {}), finish, model, body.get("id")
        )

    def stream(self) -> AnthropicStream:
        return AnthropicStream(self.provider)

    def error(self, status: int, body: Any, retry_after: float | None) -> ProviderError:
        etype, _, message = error_fields(body)
        if not message and isinstance(body, str):
            message = body.strip()[:300]
        return ProviderError(
            classify_status(status, etype),
            f"{self.provider} answered {status}"
            + (f" ({etype})" if etype else "")
            + (f": {message}" if message else ""),
            provider=self.provider,
            status=status,
            retry_after=retry_after,
        )


class AnthropicStream:
    """Folds Messages stream events (by content block index) into deltas and a response."""

    __slots__ = ("_blocks", "_done", "_finish", "_id", "_model", "_provider", "_usage")

    def __init__(self, provider: str) -> None:
        self._provider = provider
        self._blocks: dict[int, dict[str, Any]] = {}
        self._usage: dict[str, Any] = {}
        self._finish: str | None = None
        self._model = ""
        self._id: str | None = None
        self._done = False

    @property
    def complete(self) -> bool:
        return self._done

    def feed(self, event: str | None, data: str) -> list[TextDelta | ThinkingDelta]:
        payload = json.loads(data)
        kind = payload.get("type") or event
        if kind == "content_block_delta":
            return self._delta(payload["index"], payload.get("delta") or {})
        if kind == "content_block_start":
            block = dict(payload.get("content_block") or {})
            block["_parts"] = []
            self._blocks[payload["index"]] = block
        elif kind == "message_start":
            message = payload.get("message") or {}
            self._model = message.get("model") or ""
            self._id = message.get("id")
            self._usage.update(message.get("usage") or {})
        elif kind == "message_delta":
            delta = payload.get("delta") or {}
            self._finish = delta.get("stop_reason") or self._finish
            self._usage.update(
                {k: v for k, v in (payload.get("usage") or {}).items() if v is not None}
            )
        elif kind == "message_stop":
            self._done = True
        elif kind == "error":
            etype, _, message = error_fields(payload)
            raise ProviderError(
                classify_status(500, etype),
                f"{self._provider} stream error ({etype}): {message}",
                provider=self._provider,
            )
        return []

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[TextDelta | ThinkingDelta]:
        block = self._blocks.setdefault(index, {"type": "text", "_parts": []})
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text", "")
            block["_parts"].append(text)
            return [TextDelta(text)] if text else []
        if kind == "thinking_delta":
            text = delta.get("thinking", "")
            block["_parts"].append(text)
            return [ThinkingDelta(text)] if text else []
        if kind == "signature_delta":
            block["signature"] = block.get("signature", "") + delta.get("signature", "")
        elif kind == "input_json_delta":
            block["_parts"].append(delta.get("partial_json", ""))
        return []

    def result(self) -> ModelResponse:
        text: list[str] = []
        calls: list[ToolCall] = []
        thinking: list[Thinking] = []
        for _, block in sorted(self._blocks.items()):
            joined = "".join(block["_parts"])
            kind = block.get("type")
            if kind == "text":
                text.append(block.get("text", "") + joined)
            elif kind == "thinking":
                thinking.append(
                    Thinking(
                        block.get("thinking", "") + joined,
                        self._provider,
                        block.get("signature") or None,
                    )
                )
            elif kind == "redacted_thinking":
                thinking.append(Thinking("", self._provider, redacted=block.get("data", "")))
            elif kind == "tool_use":
                calls.append(_tool_call(block, joined))
        message = AssistantMessage(
            "".join(text), calls, thinking, self._model or None, self._provider
        )
        finish = _FINISH.get(self._finish or "end_turn", "stop")
        return ModelResponse(message, _usage(self._usage), finish, self._model, self._id)


def _tool_call(block: Mapping[str, Any], partial_json: str) -> ToolCall:
    if not partial_json:
        return ToolCall(block["id"], block["name"], dict(block.get("input") or {}))
    try:
        parsed = json.loads(partial_json)
    except json.JSONDecodeError:
        return ToolCall(block["id"], block["name"], {}, raw_arguments=partial_json)
    if not isinstance(parsed, dict):
        return ToolCall(block["id"], block["name"], {}, raw_arguments=partial_json)
    return ToolCall(block["id"], block["name"], parsed)


def _usage(raw: Mapping[str, Any]) -> Usage:
    cache_read = int(raw.get("cache_read_input_tokens") or 0)
    cache_write = int(raw.get("cache_creation_input_tokens") or 0)
    return Usage(
        input_tokens=int(raw.get("input_tokens") or 0) + cache_read + cache_write,
        output_tokens=int(raw.get("output_tokens") or 0),
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        requests=1,
    )
