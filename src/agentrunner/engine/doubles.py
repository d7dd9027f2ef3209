"""In-process models for offline demos and tests; they go through the same turn core.

* ``TestModel`` — the ``test`` provider: calls each granted tool once with schema-valid
  arguments, then summarises what it got (or answers schema-valid JSON for ``output_schema``).
  Everything it says is labelled as coming from a test model.
* ``ScriptedModel`` — replies from a list, in order (text, tool calls, or an exception to raise).
* ``FunctionModel`` — replies by calling your function with the request.
"""

from __future__ import annotations

import inspect
import itertools
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from agentrunner.engine.fold import DeltaSink
from agentrunner.engine.messages import (
    AssistantMessage,
    FinishReason,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)

__all__ = ["FunctionModel", "ScriptedModel", "TestModel", "example_from_schema"]

Reply = str | AssistantMessage | list[ToolCall] | Exception
_ids = itertools.count(1)


class _InProcessModel:
    provider = "test"

    async def aclose(self) -> None:
        return None

    def _respond(
        self, request: ModelRequest, message: AssistantMessage, on_delta: DeltaSink | None
    ) -> ModelResponse:
        message.model = message.model or request.model
        message.provider = message.provider or self.provider
        if on_delta is not None and message.text:
            for word in _chunks(message.text):
                on_delta(TextDelta(word))
        finish: FinishReason = "tool_calls" if message.tool_calls else "stop"
        return ModelResponse(message, _estimate_usage(request, message), finish, request.model)


class TestModel(_InProcessModel):
    """Calls each granted tool once (schema-valid arguments), then summarises. Offline."""

    __test__ = False  # not a pytest test class

    async def request(self, request: ModelRequest, on_delta: DeltaSink | None) -> ModelResponse:
        called = {
            c.name
            for m in request.messages
            if isinstance(m, AssistantMessage)
            for c in m.tool_calls
        }
        pending = [t for t in request.tools if t.name not in called]
        if pending and _last_is_user(request):
            calls = [
                ToolCall(f"test_call_{next(_ids)}", t.name, example_from_schema(t.parameters))
                for t in pending
            ]
            return self._respond(request, AssistantMessage(tool_calls=calls), on_delta)
        if request.output_schema is not None:
            text = json.dumps(example_from_schema(request.output_schema))
        else:
            text = _summary(request)
        return self._respond(request, AssistantMessage(text=text), on_delta)


class ScriptedModel(_InProcessModel):
    """Answers with ``replies`` in order; an ``Exception`` in the list is raised instead."""

    def __init__(self, replies: Iterable[Reply], provider: str = "scripted") -> None:
        self.provider = provider
        self._replies = list(replies)
        self.requests: list[ModelRequest] = []

    async def request(self, request: ModelRequest, on_delta: DeltaSink | None) -> ModelResponse:
        self.requests.append(request)
        if not self._replies:
            raise AssertionError("ScriptedModel ran out of replies")
        reply = self._replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return self._respond(request, _as_message(reply), on_delta)


class FunctionModel(_InProcessModel):
    """Answers by calling ``fn(request)`` (sync or async) returning text, calls or a message."""

    def __init__(
        self,
        fn: Callable[[ModelRequest], Reply | Awaitable[Reply]],
        provider: str = "function",
    ) -> None:
        self.provider = provider
        self._fn = fn

    async def request(self, request: ModelRequest, on_delta: DeltaSink | None) -> ModelResponse:
        reply = self._fn(request)
        if inspect.isawaitable(reply):
            reply = await reply
        if isinstance(reply, Exception):
            raise reply
        return self._respond(request, _as_message(reply), on_delta)


def example_from_schema(schema: Mapping[str, Any], root: Mapping[str, Any] | None = None) -> Any:
    """A small value that satisfies ``schema`` (objects get every property)."""
    root = root or schema
    if "$ref" in schema:
        target: Any = root
        for part in str(schema["$ref"]).lstrip("#/").split("/"):
            target = target.get(part, {}) if part else target
        return example_from_schema(target, root)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return example_from_schema(schema[key][0], root)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        return {
            k: example_from_schema(v, root) for k, v in (schema.get("properties") or {}).items()
        }
    if kind == "array":
        count = int(schema.get("minItems", 1))
        return [example_from_schema(schema.get("items") or {}, root) for _ in range(count)]
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 1.5))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    if kind == "string":
        length = int(schema.get("minLength", 0))
        return "example".ljust(length, "x")
    return "example"


def _summary(request: ModelRequest) -> str:
    results = [m for m in request.messages if isinstance(m, ToolResult)]
    question = next(
        (m.content for m in reversed(request.messages) if isinstance(m, UserMessage)), ""
    )
    if not results:
        return f"[test model] You said: {question[:200]}"
    lines = [f"- {r.name}: {'error: ' if r.is_error else ''}{r.content[:200]}" for r in results]
    return "[test model] I called " + ", ".join(r.name for r in results) + ".\n" + "\n".join(lines)


def _last_is_user(request: ModelRequest) -> bool:
    return bool(request.messages) and isinstance(request.messages[-1], UserMessage)


def _as_message(reply: str | AssistantMessage | list[ToolCall]) -> AssistantMessage:
    if isinstance(reply, AssistantMessage):
        return AssistantMessage(
            reply.text, list(reply.tool_calls), list(reply.thinking), reply.model, reply.provider
        )
    if isinstance(reply, str):
        return AssistantMessage(text=reply)
    return AssistantMessage(tool_calls=list(reply))


def _chunks(text: str) -> Iterable[str]:
    start = 0
    for i, ch in enumerate(text):
        if ch == " ":
            yield text[start : i + 1]
            start = i + 1
    if start < len(text):
        yield text[start:]


def _estimate_usage(request: ModelRequest, message: AssistantMessage) -> Usage:
    """Roughly four characters a token, so limits and costs behave as with a real model."""
    chars = len(request.system) + sum(
        len(getattr(m, "content", "") or getattr(m, "text", "")) for m in request.messages
    )
    out = len(message.text) + sum(len(json.dumps(c.arguments)) for c in message.tool_calls)
    return Usage(input_tokens=max(1, chars // 4), output_tokens=max(1, out // 4), requests=1)
