"""OpenAI Responses API (``POST /v1/responses``) ↔ agentrunner messages. Pure translation, no I/O.

Stateless: every request says ``store: false`` and carries the whole conversation as input
items, so a thread survives a restart and a switch of provider, and nothing is kept at OpenAI
between requests. A reasoning model's reasoning is kept all the same: its requests ask for
``reasoning.encrypted_content``, and the reasoning items that come back are stored with the
assistant message (a ``Thinking`` per part of their summary, the encrypted content as its
signature) and sent back unchanged, to the same provider only, on the next requests of the tool
loop and of the thread. The API wants a reasoning item followed by the item it came with (the
message or function call, known by its id): the ids of those items are kept too
(``AssistantMessage.text_id``, ``ToolCall.item_id``), and a reasoning item whose follower
cannot be named is not sent back. So is what a newer model says its message is, ``phase``
(``commentary`` or ``final_answer``), which the API asks to have resent with it.

Images and PDFs go as the API documents them, after the text: an image as an ``input_image``
(a data URL, always with its ``detail``), a PDF as an ``input_file`` (a data URL and a file
name), in a user message's content and in a tool's ``function_call_output``, whose ``output``
is then a list of such parts rather than a text.

``previous_response_id`` is not used: it needs ``store: true``, and bills the whole
conversation as input just the same (cached or not, as a resent one is).

Model settings go in the API's own fields: ``reasoning_effort`` as ``reasoning.effort``,
``thinking`` as ``reasoning.summary: "auto"`` (what a person sees of the reasoning; its budget is
not the API's to take), ``tool_choice`` and ``parallel_tool_calls`` with tools, ``temperature``
and ``top_p`` except to a reasoning model (which refuses them); the API has no ``seed`` or
``stop``. The output cap is ``max_output_tokens``.

Streamed events are folded as they come: text, function-call arguments and reasoning-summary
deltas by the id of their item; ``response.output_item.done`` completes a reasoning item (its
ids and encrypted content); ``response.completed`` / ``response.incomplete`` end the response
with its usage, ``response.failed`` and ``error`` fail it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, assert_never

import orjson

from agentrunner.core.json_text import json_text
from agentrunner.engine.failures import stream_error
from agentrunner.engine.fold import ResponseFold
from agentrunner.engine.messages import (
    AssistantMessage,
    Attachment,
    ModelRequest,
    Thinking,
    ToolResult,
    UserMessage,
)
from agentrunner.engine.tools import is_strict_schema

__all__ = ["ResponsesWire", "reasons"]

ENCRYPTED_REASONING = "reasoning.encrypted_content"
_STRICT_CACHE = 1024
# Model names OpenAI's reasoning models go by; the ``-chat`` ones (gpt-5-chat-latest) do not
# reason. A model that does not reason may refuse to be asked for encrypted reasoning (other
# clients ask only reasoning models), so the list errs short: a reasoning model missing from it
# works, only without its reasoning kept between requests.
_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5", "codex")


def reasons(model: str) -> bool:
    """Whether ``model`` is one of OpenAI's reasoning models (by its name)."""
    return model.startswith(_REASONING_PREFIXES) and "-chat" not in model


@dataclass
class ResponsesWire:
    """Builds request bodies and reads responses for the OpenAI Responses API."""

    provider: str
    _: KW_ONLY
    native_structured_output: bool = True
    prompt_cache_key: bool = False  # send the request's cache_key (OpenAI knows the field)
    # Whether each tool's schema is strict, by the schema itself: a tool is sent with every
    # request of every run, and walking its schema each time cost more than the rest of the
    # tool's translation. The schema is kept with its answer so the entry cannot outlive it.
    _strict: dict[int, tuple[Mapping[str, Any], bool]] = field(default_factory=dict, repr=False)

    @property
    def embeddings(self) -> bool:
        return True  # the same API's POST /embeddings

    def path(self, request: ModelRequest) -> str:
        return "/responses"

    def _strict_schema(self, schema: Mapping[str, Any]) -> bool:
        known = self._strict.get(id(schema))
        if known is not None and known[0] is schema:
            return known[1]
        if len(self._strict) >= _STRICT_CACHE:  # tools made per run (an MCP server's) come and go
            self._strict.clear()
        strict = is_strict_schema(schema)
        self._strict[id(schema)] = (schema, strict)
        return strict

    def build(self, request: ModelRequest) -> dict[str, Any]:
        items: list[dict[str, Any]] = []
        for message in request.messages:
            match message:
                case UserMessage():
                    content: str | list[dict[str, Any]] = message.content
                    if message.attachments:
                        content = _parts(message.content, message.attachments)
                    items.append({"role": "user", "content": content})
                case ToolResult():
                    output: str | list[dict[str, Any]] = message.content
                    if message.attachments:
                        output = _parts(message.content, message.attachments)
                    items.append(
                        {
                            "type": "function_call_output",
                            "call_id": message.call_id,
                            "output": output,
                        }
                    )
                case AssistantMessage():
                    self._assistant(message, items)
                case _:
                    assert_never(message)
        body: dict[str, Any] = {"model": request.model}
        if request.system:
            body["instructions"] = request.system
        body["input"] = items
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.parameters),
                    # The API's default is strict, which refuses a schema strict mode cannot take.
                    "strict": self._strict_schema(t.parameters),
                }
                for t in request.tools
            ]
        if request.max_output_tokens:
            body["max_output_tokens"] = request.max_output_tokens
        if request.settings is not None:
            body.update(_settings(request)[0])
        if request.output_schema is not None and self.native_structured_output:
            schema = dict(request.output_schema)
            body["text"] = {
                "format": {
                    "type": "json_schema",
                    "name": request.output_schema_name,
                    "schema": schema,
                    "strict": is_strict_schema(schema),
                }
            }
        if self.prompt_cache_key and request.cache_key:
            body["prompt_cache_key"] = request.cache_key
        body["store"] = False
        if reasons(request.model):
            body["include"] = [ENCRYPTED_REASONING]
        body["stream"] = request.stream
        if request.settings is not None and request.settings.extra:
            body.update(request.settings.extra_for(self.provider))
        return body

    def dropped_settings(self, request: ModelRequest) -> list[tuple[str, str]]:
        """The settings of ``request`` its body leaves out, each with the reason."""
        return _settings(request)[1] if request.settings is not None else []

    def _assistant(self, message: AssistantMessage, items: list[dict[str, Any]]) -> None:
        """What the model said, as the items it came in. Its own items' ids and reasoning go
        back only to the provider that wrote them, and not for a turn cut short (its text is
        no longer what came, so its reasoning would precede another message)."""
        own = message.provider == self.provider and not message.interrupted
        text, calls = message.text, message.tool_calls
        item: dict[str, Any]
        if own and message.thinking:
            follower = message.text_id if text else (calls[0].item_id if calls else None)
            if follower:  # the API refuses a reasoning item without the item it came with
                items += _reasoning_items(message.thinking, self.provider)
        if text:
            if own and message.text_id:
                item = {
                    "type": "message",
                    "role": "assistant",
                    "id": message.text_id,
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
                if message.phase:
                    item["phase"] = message.phase
                items.append(item)
            else:
                items.append({"role": "assistant", "content": text})
        for call in calls:
            item = {
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": call.raw_arguments
                if call.raw_arguments is not None
                else json_text(call.arguments),
            }
            if own and call.item_id:
                item["id"] = call.item_id
            items.append(item)

    def fold_body(self, body: Mapping[str, Any], fold: ResponseFold) -> None:
        """A whole ``response``: each output item read as a stream would bring it."""
        for item in body.get("output") or ():
            kind = item.get("type")
            item_id = item.get("id") or ""
            if kind == "message":
                fold.text_item(item_id, item.get("phase"))
                for part in item.get("content") or ():
                    if part.get("type") == "output_text":
                        fold.text(item_id, part.get("text") or "")
                    elif part.get("type") == "refusal":
                        fold.refusal((item_id, "refusal"), part.get("refusal") or "")
            elif kind == "function_call":
                fold.tool_call(
                    item_id,
                    call_id=item.get("call_id") or "",
                    name=item.get("name") or "",
                    arguments=item.get("arguments") or "",
                    item_id=item_id,
                )
            elif kind == "reasoning":
                for index, part in enumerate(item.get("summary") or ()):
                    fold.thinking((item_id, index), part.get("text") or "")
                _reasoning_done(item, fold)
        self._end(body, fold)

    def fold_event(self, event: str | None, data: str, fold: ResponseFold) -> None:
        """One Responses stream event; parts go by the id of their item. An event whose name
        says it adds nothing (``response.in_progress`` echoes the whole request, the ``.done``
        of a part repeats its deltas) is not parsed."""
        if event is not None and event not in _FOLDED:
            return
        payload = orjson.loads(data)  # a stream's events are many: the faster parser
        kind = payload.get("type") or event
        # The deltas first: they are most of a stream.
        if kind == "response.output_text.delta":
            fold.text(payload["item_id"], payload["delta"])
        elif kind == "response.function_call_arguments.delta":
            fold.tool_call(payload["item_id"], arguments=payload["delta"])
        elif kind == "response.reasoning_summary_text.delta":
            fold.thinking((payload["item_id"], payload.get("summary_index", 0)), payload["delta"])
        else:
            handler = _EVENTS.get(kind or "")
            if handler is not None:
                handler(self, payload, fold)

    def _added(self, payload: Mapping[str, Any], fold: ResponseFold) -> None:
        item = payload.get("item") or {}
        kind = item.get("type")
        if kind == "function_call":
            item_id = item.get("id") or ""
            fold.tool_call(
                item_id,
                call_id=item.get("call_id") or "",
                name=item.get("name") or "",
                arguments=item.get("arguments") or "",
                item_id=item_id,
            )
        elif kind == "message":
            fold.text_item(item.get("id") or "", item.get("phase"))

    def _done(self, payload: Mapping[str, Any], fold: ResponseFold) -> None:
        item = payload.get("item") or {}
        kind = item.get("type")
        if kind == "reasoning":  # its encrypted content is complete only now
            _reasoning_done(item, fold)
        elif kind == "message":  # whole now: its phase, if the item added left it out
            fold.text_item(item.get("id") or "", item.get("phase"))

    def _refusal(self, payload: Mapping[str, Any], fold: ResponseFold) -> None:
        fold.refusal((payload["item_id"], "refusal"), payload.get("delta") or "")

    def _finished(self, payload: Mapping[str, Any], fold: ResponseFold) -> None:
        self._end(payload.get("response") or {}, fold)

    def _failed(self, payload: Mapping[str, Any], fold: ResponseFold) -> None:
        raise stream_error(self.provider, {"error": _failure(payload.get("response") or {})})

    def _error(self, payload: Mapping[str, Any], fold: ResponseFold) -> None:
        raise stream_error(self.provider, payload)

    def _end(self, response: Mapping[str, Any], fold: ResponseFold) -> None:
        """The response's model, usage and status; the end of it."""
        status = response.get("status")
        if status == "failed":
            raise stream_error(self.provider, {"error": _failure(response)})
        fold.identify(response.get("model"))
        _fold_usage(response.get("usage"), fold)
        if status == "incomplete":
            reason = (response.get("incomplete_details") or {}).get("reason")
            fold.finish("content_filter" if reason == "content_filter" else "length")
        elif any(i.get("type") == "function_call" for i in response.get("output") or ()):
            fold.finish("tool_calls")
        else:
            fold.finish("stop")
        fold.end()


_Handler = Callable[[ResponsesWire, Mapping[str, Any], ResponseFold], None]
_EVENTS: dict[str, _Handler] = {
    "response.output_item.added": ResponsesWire._added,
    "response.output_item.done": ResponsesWire._done,
    "response.refusal.delta": ResponsesWire._refusal,
    "response.completed": ResponsesWire._finished,
    "response.incomplete": ResponsesWire._finished,
    "response.failed": ResponsesWire._failed,
    "error": ResponsesWire._error,
}
# The events read (the rest are skipped unparsed): the deltas and the handled ones.
_FOLDED = frozenset(
    {
        "response.output_text.delta",
        "response.function_call_arguments.delta",
        "response.reasoning_summary_text.delta",
        *_EVENTS,
    }
)


def _settings(request: ModelRequest) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The request's settings as Responses API fields, and those it cannot take."""
    settings = request.settings
    assert settings is not None
    fields: dict[str, Any] = {}
    dropped: list[tuple[str, str]] = []
    for name in ("temperature", "top_p"):
        value = getattr(settings, name)
        if value is None:
            continue
        if reasons(request.model):
            dropped.append((name, f"{request.model} is a reasoning model: it takes no {name}"))
        else:
            fields[name] = value
    if settings.seed is not None:
        dropped.append(("seed", "the Responses API has no seed"))
    if settings.stop:
        dropped.append(("stop", "the Responses API has no stop sequences"))
    if request.tools:  # as on Chat Completions: only with tools to choose from
        choice = settings.tool_choice
        if choice is not None:
            fields["tool_choice"] = (
                choice
                if choice in ("auto", "required", "none")
                else {"type": "function", "name": choice}
            )
        if settings.parallel_tool_calls is not None:
            fields["parallel_tool_calls"] = settings.parallel_tool_calls
    reasoning: dict[str, Any] = {}
    if settings.reasoning_effort is not None:
        reasoning["effort"] = settings.reasoning_effort
    if settings.thinking is not None:
        reasoning["summary"] = "auto"
    if reasoning:
        fields["reasoning"] = reasoning
    return fields, dropped


def _parts(text: str, attachments: Sequence[Attachment]) -> list[dict[str, Any]]:
    """A user message's or a tool output's text, then its files: an image as an
    ``input_image`` (a data URL; ``detail``, which the API requires), a PDF as an
    ``input_file`` (a data URL and a file name)."""
    parts: list[dict[str, Any]] = [{"type": "input_text", "text": text}] if text else []
    for file in attachments:
        if file.kind == "image":
            parts.append(
                {"type": "input_image", "image_url": file.data_url(), "detail": file.detail}
            )
        else:
            parts.append(
                {
                    "type": "input_file",
                    "filename": file.name or "file.pdf",
                    "file_data": file.data_url(),
                }
            )
    return parts


def _reasoning_done(item: Mapping[str, Any], fold: ResponseFold) -> None:
    """A whole reasoning item: each part of its summary a thinking part with the item's id,
    the first (made if the summary is empty) with its encrypted content."""
    item_id = item.get("id") or ""
    for index in range(max(1, len(item.get("summary") or ()))):
        fold.thinking_item((item_id, index), item_id)
    encrypted = item.get("encrypted_content")
    if encrypted:
        fold.thinking((item_id, 0), signature=encrypted)


def _reasoning_items(thinking: Sequence[Thinking], provider: str) -> list[dict[str, Any]]:
    """The reasoning items ``thinking`` was folded from, as they came: consecutive parts of one
    item (its id) joined again. An item without its encrypted content is left out: with
    ``store: false`` the API could not read it."""
    items: list[dict[str, Any]] = []
    skipped = None
    for thought in thinking:
        if thought.provider != provider or thought.id is None or thought.id == skipped:
            continue
        summary = [{"type": "summary_text", "text": thought.text}] if thought.text else []
        if items and items[-1]["id"] == thought.id:
            items[-1]["summary"] += summary
        elif thought.signature:
            items.append(
                {
                    "type": "reasoning",
                    "id": thought.id,
                    "summary": summary,
                    "encrypted_content": thought.signature,
                }
            )
        else:
            skipped = thought.id
    return items


def _failure(response: Mapping[str, Any]) -> Mapping[str, Any]:
    error = response.get("error")
    if isinstance(error, Mapping):
        return error
    return {"type": "server_error", "message": "the response failed"}


def _fold_usage(raw: Mapping[str, Any] | None, fold: ResponseFold) -> None:
    """``input_tokens`` include the cached ones; ``output_tokens`` the reasoning ones."""
    if not raw:
        return
    cached = (raw.get("input_tokens_details") or {}).get("cached_tokens")
    reasoning = (raw.get("output_tokens_details") or {}).get("reasoning_tokens")
    fold.usage(
        input_tokens=raw.get("input_tokens") or 0,
        output_tokens=raw.get("output_tokens") or 0,
        cache_read_tokens=cached or 0,
        reasoning_tokens=reasoning or 0,
    )
