"""In-process models for offline demos and tests; they go through the same turn core.

* ``TestModel`` — the ``test`` provider: calls each granted tool once a run with schema-valid
  arguments, then summarises what it got (or answers schema-valid JSON for ``output_schema``).
  Everything it says is labelled as coming from a test model. Where calling everything would
  make no sense it behaves as a person would expect, deterministically: it hands the message
  it got on to one report (``delegate``: the first one the message names, else the first
  listed) or agent (``ask_agent``), and in a channel it either speaks (``send_message``) or,
  when the new message is a test model's, stays silent (``do_nothing``) — so a company's
  delegation is a chain down the org chart and a channel's chatter ends after one round. It
  changes nothing it was not asked to: a tool that writes (``ToolDefinition.writes``: memory,
  notes, files) is called only when the message names it.
* ``ScriptedModel`` — replies from a list, in order (text, tool calls, or an exception to raise).
* ``FunctionModel`` — replies by calling your function with the request.
"""

from __future__ import annotations

import inspect
import itertools
import json
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from agentrunner.engine.attachment_tokens import attachment_tokens
from agentrunner.engine.budget import estimate_text_tokens
from agentrunner.engine.embeddings import Embedded, hashed_embedding
from agentrunner.engine.fold import DeltaSink
from agentrunner.engine.messages import (
    AssistantMessage,
    Attachment,
    FinishReason,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCall,
    ToolDefinition,
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

    async def embed(self, model: str, texts: Sequence[str]) -> Embedded:
        """Hashed bag-of-words vectors (``engine.embeddings``): offline, deterministic."""
        vectors = [hashed_embedding(text) for text in texts]
        tokens = sum(estimate_text_tokens(text) for text in texts)
        return Embedded(vectors, Usage(input_tokens=tokens, requests=1), model)

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
    """Calls each granted tool once a run (schema-valid arguments), then summarises. Offline.
    See the module's docstring for the tools it treats as a person would."""

    __test__ = False  # not a pytest test class

    async def request(self, request: ModelRequest, on_delta: DeltaSink | None) -> ModelResponse:
        _check_loaded(request)
        if _last_is_user(request):
            asked = request.messages[-1]
            assert isinstance(asked, UserMessage)
            calls = _first_calls(request.tools, asked.content, asked.attachments)
            if calls:
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


def _first_calls(
    tools: Sequence[ToolDefinition], asked: str, files: Sequence[Attachment] = ()
) -> list[ToolCall]:
    """The test model's tool calls on a new message: every tool once, with the exceptions its
    module's docstring lists. (A run's later requests call nothing: the last message is a
    tool result then, so each tool is called at most once a run.) In a channel it names the
    files it was given, on the one line of its message."""
    names = {t.name for t in tools}
    channel = {"send_message", "do_nothing"} <= names
    if channel and _MARK in _newest(asked):  # a test model's message: nothing to add
        return [_call("do_nothing", {})]
    said = _newest(asked) if channel else asked  # in a channel, the new message's words
    calls = []
    for t in tools:
        if channel and t.name == "do_nothing":
            continue  # it speaks instead
        if t.writes and not _says(said, t.name):
            continue  # it changes what outlasts the run: only when asked to
        arguments = example_from_schema(t.parameters)
        if t.name == "send_message":
            given = "; ".join(a.label for a in files)
            arguments["text"] = f"{_MARK} Re: {_newest(asked)[:200]}" + (
                f" (I was given: {given})" if given else ""
            )
        elif t.name in _PASSES_ON:
            agent_field, text_field = _PASSES_ON[t.name]
            agent = _named(t.parameters, agent_field, asked)
            if agent is not None:
                arguments[agent_field] = agent
            arguments[text_field] = asked.strip()[:2000]  # the work, handed on as it came
        calls.append(_call(t.name, arguments))
    return calls


# Tools that hand the message on to another agent: their agent and text fields.
_PASSES_ON = {"delegate": ("agent", "task"), "ask_agent": ("agent", "message")}
_MARK = "[test model]"


def _call(name: str, arguments: Any) -> ToolCall:
    return ToolCall(f"test_call_{next(_ids)}", name, arguments)


def _newest(asked: str) -> str:
    """The last line of a message: in a channel transcript, the new message's."""
    lines = [line for line in asked.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _named(parameters: Mapping[str, Any], field: str, asked: str) -> str | None:
    """The first of the ``field``'s choices that ``asked`` names as a word, if any."""
    choices = (parameters.get("properties") or {}).get(field, {}).get("enum") or []
    return next((str(choice) for choice in choices if _says(asked, str(choice))), None)


def _says(text: str, word: str) -> bool:
    """Whether ``text`` names ``word`` as a word of its own (any case)."""
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text, re.IGNORECASE) is not None


def _summary(request: ModelRequest) -> str:
    """The answer to the last user message: what it said, or the tools called since it (the
    thread's earlier turns were answered already)."""
    last = max(
        (i for i, m in enumerate(request.messages) if isinstance(m, UserMessage)), default=-1
    )
    asked = request.messages[last] if last >= 0 else None
    question = asked.content if isinstance(asked, UserMessage) else ""
    results = [m for m in request.messages[last + 1 :] if isinstance(m, ToolResult)]
    seen = [a for m in (asked, *results) if m is not None for a in m.attachments]
    # what a model that reads them would be sent, named
    given = "\nI was given: " + "; ".join(a.label for a in seen) if seen else ""
    if not results:
        return f"[test model] You said: {question[:200]}{given}"
    lines = [f"- {r.name}: {'error: ' if r.is_error else ''}{r.content[:200]}" for r in results]
    called = ", ".join(r.name for r in results)
    return f"[test model] I called {called}.\n" + "\n".join(lines) + given


def _check_loaded(request: ModelRequest) -> None:
    """A provider is sent a file's bytes: a request that names one not loaded is refused, as
    the wires would (``Attachment.base64``), so a test on this model finds it."""
    for message in request.messages:
        for a in message.attachments:
            if a.data is None:
                raise ValueError(f"attachment {a.sha256[:12]} was not loaded for the request")


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
    files = sum(  # by OpenAI's tiles, as a budget counts them for this model
        attachment_tokens(a, "test", request.model) for m in request.messages for a in m.attachments
    )
    return Usage(
        input_tokens=max(1, chars // 4) + files, output_tokens=max(1, out // 4), requests=1
    )
