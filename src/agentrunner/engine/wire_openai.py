"""OpenAI Chat Completions ↔ agentrunner messages. Pure translation, no I/O.

Serves OpenAI and every compatible server (Ollama, vLLM, llama.cpp, LM Studio, OpenRouter,
Groq, DeepSeek, Gemini's compatible endpoint, Azure): differences are the URL shape, the
auth header and the name of the output-token limit, all chosen by ``OpenAIWire``'s options.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agentrunner.engine.failures import FailureKind, ProviderError, classify_status, error_fields
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

__all__ = ["OpenAIStream", "OpenAIWire", "is_strict_schema"]

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}


class OpenAIWire:
    """Builds request bodies and reads responses for one OpenAI-compatible provider."""

    def __init__(
        self,
        provider: str,
        *,
        max_tokens_field: str = "max_tokens",
        native_structured_output: bool = True,
        azure_api_version: str | None = None,
    ) -> None:
        self.provider = provider
        self.max_tokens_field = max_tokens_field
        self.native_structured_output = native_structured_output
        self.azure_api_version = azure_api_version

    def path(self, request: ModelRequest) -> str:
        if self.azure_api_version:
            return (
                f"/openai/deployments/{request.model}/chat/completions"
                f"?api-version={self.azure_api_version}"
            )
        return "/chat/completions"

    def build(self, request: ModelRequest) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        for message in request.messages:
            if isinstance(message, UserMessage):
                messages.append({"role": "user", "content": message.content})
            elif isinstance(message, ToolResult):
                messages.append(
                    {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
                )
            else:
                messages.append(_assistant(message))
        body: dict[str, Any] = {"model": request.model, "messages": messages}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.parameters),
                    },
                }
                for t in request.tools
            ]
        if request.max_output_tokens:
            body[self.max_tokens_field] = request.max_output_tokens
        if request.output_schema is not None and self.native_structured_output:
            schema = dict(request.output_schema)
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": request.output_schema_name,
                    "schema": schema,
                    "strict": is_strict_schema(schema),
                },
            }
        body["stream"] = request.stream
        if request.stream:
            body["stream_options"] = {"include_usage": True}
        return body

    def parse(self, body: Mapping[str, Any]) -> ModelResponse:
        choices = body.get("choices") or []
        if not choices:
            raise ProviderError(
                FailureKind.UNKNOWN, "response has no choices", provider=self.provider
            )
        choice = choices[0]
        raw = choice.get("message") or {}
        finish = _FINISH.get(choice.get("finish_reason") or "stop", "stop")
        text = raw.get("content") or ""
        if raw.get("refusal"):
            text, finish = raw["refusal"], "content_filter"
        thinking = _reasoning(raw)
        message = AssistantMessage(
            text=text,
            tool_calls=[
                _tool_call(
                    tc.get("id", ""), tc["function"]["name"], tc["function"].get("arguments")
                )
                for tc in raw.get("tool_calls") or ()
            ],
            thinking=[Thinking(thinking, self.provider)] if thinking else [],
            model=body.get("model"),
            provider=self.provider,
        )
        return ModelResponse(
            message, _usage(body.get("usage")), finish, str(body.get("model") or ""), body.get("id")
        )

    def stream(self) -> OpenAIStream:
        return OpenAIStream(self.provider)

    def error(self, status: int, body: Any, retry_after: float | None) -> ProviderError:
        etype, code, message = error_fields(body)
        if not message and isinstance(body, str):
            message = body.strip()[:300]
        kind = classify_status(status, etype, code)
        return ProviderError(
            kind,
            f"{self.provider} answered {status}"
            + (f" ({code or etype})" if code or etype else "")
            + (f": {message}" if message else ""),
            provider=self.provider,
            status=status,
            retry_after=retry_after,
        )


class OpenAIStream:
    """Folds ``chat.completion.chunk`` events into deltas and, at the end, a response."""

    __slots__ = (
        "_calls",
        "_done",
        "_finish",
        "_id",
        "_model",
        "_provider",
        "_reasoning",
        "_text",
        "_usage",
    )

    def __init__(self, provider: str) -> None:
        self._provider = provider
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, list[Any]] = {}
        self._finish: str | None = None
        self._usage = Usage()
        self._model = ""
        self._id: str | None = None
        self._done = False

    @property
    def complete(self) -> bool:
        return self._done or self._finish is not None

    def feed(self, event: str | None, data: str) -> list[TextDelta | ThinkingDelta]:
        if data == "[DONE]":
            self._done = True
            return []
        chunk = json.loads(data)
        if "error" in chunk:
            etype, code, message = error_fields(chunk)
            raise ProviderError(
                classify_status(500, etype, code),
                f"{self._provider} stream error ({code or etype}): {message}",
                provider=self._provider,
            )
        if not self._model:
            self._model = chunk.get("model") or ""
            self._id = chunk.get("id")
        if chunk.get("usage"):
            self._usage = _usage(chunk["usage"])
        out: list[TextDelta | ThinkingDelta] = []
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if content:
                self._text.append(content)
                out.append(TextDelta(content))
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning:
                self._reasoning.append(reasoning)
                out.append(ThinkingDelta(reasoning))
            for tc in delta.get("tool_calls") or ():
                slot = self._calls.setdefault(tc.get("index", 0), ["", "", []])
                if tc.get("id"):
                    slot[0] = tc["id"]
                function = tc.get("function") or {}
                if function.get("name"):
                    slot[1] = function["name"]
                if function.get("arguments"):
                    slot[2].append(function["arguments"])
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
        return out

    def result(self) -> ModelResponse:
        thinking = "".join(self._reasoning)
        message = AssistantMessage(
            text="".join(self._text),
            tool_calls=[
                _tool_call(slot[0], slot[1], "".join(slot[2]))
                for _, slot in sorted(self._calls.items())
            ],
            thinking=[Thinking(thinking, self._provider)] if thinking else [],
            model=self._model or None,
            provider=self._provider,
        )
        finish = _FINISH.get(self._finish or "stop", "stop")
        return ModelResponse(message, self._usage, finish, self._model, self._id)


def is_strict_schema(schema: Any) -> bool:
    """Whether OpenAI's strict mode accepts the schema: every object closed, all keys required."""
    if isinstance(schema, list):
        return all(is_strict_schema(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            return False
        if set(schema.get("required", [])) != set(props):
            return False
    return all(
        is_strict_schema(v) for k, v in schema.items() if k not in ("enum", "const", "default")
    )


def _assistant(message: AssistantMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": message.text or None}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.raw_arguments
                    if call.raw_arguments is not None
                    else json.dumps(call.arguments, separators=(",", ":"), ensure_ascii=False),
                },
            }
            for call in message.tool_calls
        ]
    return out


def _tool_call(call_id: str, name: str, arguments: str | None) -> ToolCall:
    if not arguments:
        return ToolCall(call_id, name, {})
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        return ToolCall(call_id, name, {}, raw_arguments=arguments)
    if not isinstance(parsed, dict):
        return ToolCall(call_id, name, {}, raw_arguments=arguments)
    return ToolCall(call_id, name, parsed)


def _reasoning(raw: Mapping[str, Any]) -> str:
    value = raw.get("reasoning_content") or raw.get("reasoning") or ""
    return value if isinstance(value, str) else ""


def _usage(raw: Mapping[str, Any] | None) -> Usage:
    if not raw:
        return Usage(requests=1)
    details = raw.get("prompt_tokens_details") or {}
    return Usage(
        input_tokens=int(raw.get("prompt_tokens") or 0),
        output_tokens=int(raw.get("completion_tokens") or 0),
        cache_read_tokens=int(details.get("cached_tokens") or 0),
        requests=1,
    )
