"""Anthropic Messages ↔ agentrunner messages. Pure translation, no I/O.

Thinking blocks keep their signatures and are replayed only to the provider that produced them
(seed 001, same-provider reasoning replay); for any other provider they are dropped. Usage is
normalized so ``input_tokens`` includes cache reads and writes.

Images and PDFs go as the API documents them, as blocks with a base64 source (the bare
base64, no ``data:`` URL): an image as an ``image`` block, a PDF as a ``document`` block (its
file name as the ``title``). In a user message they come before its text, as Anthropic advises;
in a tool result, its ``content`` is then a list: the text, then the files.

Prompt caching: Anthropic caches a prefix only up to a block marked ``cache_control``, at most
four a request. With ``prompt_cache`` on (the default) they go on the last tool and the system
prompt (the part every turn of an agent shares, cached even when what follows changes), and on
the last block of the last two user turns: the new end of the conversation, written for the
next request, and the end of the previous request, which that request wrote, read back here
however many blocks came after it (Anthropic looks back only ~20 blocks from a breakpoint).
The markers are not part of the cached prefix, so moving them breaks nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, assert_never

import orjson

from agentrunner.engine.failures import stream_error
from agentrunner.engine.fold import ResponseFold
from agentrunner.engine.messages import (
    AssistantMessage,
    Attachment,
    FinishReason,
    ModelRequest,
    ToolResult,
    UserMessage,
)

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicWire"]

DEFAULT_MAX_TOKENS = 8192
_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "stop_sequence": "stop_sequence",
    "refusal": "content_filter",
    "pause_turn": "stop",
}


@dataclass
class AnthropicWire:
    """Builds request bodies and reads responses for the Anthropic Messages API."""

    provider: str
    _: KW_ONLY
    prompt_cache: bool = True

    @property
    def embeddings(self) -> bool:
        return False  # the Messages API has no embeddings endpoint

    def path(self, request: ModelRequest) -> str:
        return "/v1/messages"

    def build(self, request: ModelRequest) -> dict[str, Any]:
        turns: list[dict[str, Any]] = []
        for message in request.messages:
            match message:
                case UserMessage():
                    role, blocks = "user", [{"type": "text", "text": message.content}]
                    if message.attachments:  # the files first, as Anthropic advises
                        blocks[:0] = _files(message.attachments)
                        if not message.content:  # the API refuses an empty text block
                            blocks.pop()
                case ToolResult():
                    content: str | list[dict[str, Any]] = message.content
                    if message.attachments:
                        content = _files(message.attachments)
                        if message.content:
                            content.insert(0, {"type": "text", "text": message.content})
                    block: dict[str, Any] = {
                        "type": "tool_result",
                        "tool_use_id": message.call_id,
                        "content": content,
                    }
                    if message.is_error:
                        block["is_error"] = True
                    role, blocks = "user", [block]
                case AssistantMessage():
                    role, blocks = "assistant", self._assistant_blocks(message)
                    if not blocks:
                        continue
                case _:
                    assert_never(message)
            if turns and turns[-1]["role"] == role:
                turns[-1]["content"].extend(blocks)  # the API wants roles to alternate
            else:
                turns.append({"role": role, "content": blocks})
        body: dict[str, Any] = {
            "model": request.model,
            "max_tokens": _max_tokens(request),
            "messages": turns,
        }
        if request.system:
            body["system"] = [{"type": "text", "text": request.system}]
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
                for t in request.tools
            ]
        if self.prompt_cache:
            _mark_breakpoints(body)
        if request.output_schema is not None:
            body["output_config"] = {
                "format": {"type": "json_schema", "schema": dict(request.output_schema)}
            }
        if request.settings is not None:
            body.update(_settings(request)[0])
        body["stream"] = request.stream
        if request.settings is not None and request.settings.extra:
            body.update(request.settings.extra_for(self.provider))
        return body

    def dropped_settings(self, request: ModelRequest) -> list[tuple[str, str]]:
        """The settings of ``request`` its body leaves out, each with the reason."""
        return _settings(request)[1] if request.settings is not None else []

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

    def fold_body(self, body: Mapping[str, Any], fold: ResponseFold) -> None:
        """A whole message: each content block is read as the start of a streamed one."""
        fold.identify(body.get("model"))
        _fold_usage(body.get("usage"), fold)
        for index, block in enumerate(body.get("content") or ()):
            _fold_block(index, block, fold)
        _fold_stop(body, fold)
        fold.end()

    def fold_event(self, event: str | None, data: str, fold: ResponseFold) -> None:
        """One Messages stream event; content blocks are parts by their index."""
        payload = orjson.loads(data)  # a stream's events are many: the faster parser
        kind = payload.get("type") or event
        if kind == "content_block_delta":
            _fold_delta(payload["index"], payload.get("delta") or {}, fold)
        elif kind == "content_block_start":
            _fold_block(payload["index"], payload.get("content_block") or {}, fold)
        elif kind == "message_start":
            message = payload.get("message") or {}
            fold.identify(message.get("model"))
            _fold_usage(message.get("usage"), fold)
        elif kind == "message_delta":
            _fold_stop(payload.get("delta") or {}, fold)
            _fold_usage(payload.get("usage"), fold)
        elif kind == "message_stop":
            fold.end()
        elif kind == "error":
            raise stream_error(self.provider, payload)


def _files(attachments: Sequence[Attachment]) -> list[dict[str, Any]]:
    """Files as Anthropic's blocks: an image as an ``image``, a PDF as a ``document`` (named
    by its ``title``), each with a base64 source (the bare base64, no ``data:`` URL)."""
    blocks: list[dict[str, Any]] = []
    for file in attachments:
        source = {"type": "base64", "media_type": file.media_type, "data": file.base64()}
        if file.kind == "image":
            blocks.append({"type": "image", "source": source})
        else:
            block: dict[str, Any] = {"type": "document", "source": source}
            if file.name:
                block["title"] = file.name
            blocks.append(block)
    return blocks


def _mark_breakpoints(body: dict[str, Any]) -> None:
    """``cache_control`` on the last tool, the system prompt and the last block of the last two
    user turns: four at most, Anthropic's limit. The blocks are this request's own dicts; the
    last of a turn may be an image or a document (a message of files without text), which
    takes a breakpoint as a text block does. The blocks inside a tool result get none."""
    marked = [body["tools"][-1]] if body.get("tools") else []
    if body.get("system"):
        marked.append(body["system"][-1])
    ends = 0
    for turn in reversed(body["messages"]):
        if turn["role"] == "user" and turn["content"]:
            marked.append(turn["content"][-1])
            ends += 1
            if ends == 2:
                break
    for block in marked:
        block["cache_control"] = {"type": "ephemeral"}


def _max_tokens(request: ModelRequest) -> int:
    """The output cap; a thinking budget counts in it, so with no cap asked for the default
    room for the answer comes on top of the budget."""
    if request.max_output_tokens:
        return request.max_output_tokens
    thinking = request.settings.thinking if request.settings is not None else None
    return DEFAULT_MAX_TOKENS + (thinking if isinstance(thinking, int) else 0)


def _settings(request: ModelRequest) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The request's settings as Messages fields, and those it cannot take: the API's rules
    (thinking takes no temperature but 1, top_p only from 0.95, no forced tool use, and a
    budget under ``max_tokens``) decide rather than a request it would refuse."""
    settings = request.settings
    assert settings is not None
    fields: dict[str, Any] = {}
    dropped: list[tuple[str, str]] = []
    thinking = settings.thinking
    if thinking == "adaptive":
        fields["thinking"] = {"type": "adaptive"}
    elif thinking is not None:
        cap = _max_tokens(request)
        if thinking < cap:
            fields["thinking"] = {"type": "enabled", "budget_tokens": thinking}
        else:
            dropped.append(
                (
                    "thinking",
                    f"its budget ({thinking}) must be below the output cap ({cap}); "
                    "raise max_output_tokens",
                )
            )
    thinks = "thinking" in fields
    if settings.temperature is not None:
        if thinks and settings.temperature != 1:  # its default, which it takes said aloud
            dropped.append(("temperature", "Anthropic takes no temperature but 1 with thinking"))
        elif settings.temperature > 1:
            dropped.append(("temperature", "Anthropic's temperature goes from 0 to 1"))
        else:
            fields["temperature"] = settings.temperature
    if settings.top_p is not None:
        if thinks and settings.top_p < 0.95:
            dropped.append(("top_p", "with thinking, Anthropic takes top_p from 0.95 to 1"))
        elif "temperature" in fields:
            dropped.append(
                ("top_p", "Anthropic's current models take temperature or top_p, not both")
            )
        else:
            fields["top_p"] = settings.top_p
    if settings.stop:
        fields["stop_sequences"] = list(settings.stop)
    if settings.seed is not None:
        dropped.append(("seed", "Anthropic has no seed"))
    if settings.reasoning_effort is not None:
        dropped.append(("reasoning_effort", "Anthropic takes thinking, not reasoning_effort"))
    if request.tools:
        choice = _tool_choice(settings.tool_choice, settings.parallel_tool_calls)
        if choice is not None and thinks and choice["type"] in ("any", "tool"):
            dropped.append(("tool_choice", "Anthropic forces no tool call with thinking"))
            choice = _tool_choice(None, settings.parallel_tool_calls)
        if choice is not None:
            fields["tool_choice"] = choice
    return fields, dropped


def _tool_choice(choice: str | None, parallel: bool | None) -> dict[str, Any] | None:
    """``tool_choice`` as Anthropic writes it, parallel tool use switched inside it."""
    if choice is None and parallel is None:
        return None
    kinds = {"auto": "auto", "required": "any", "none": "none"}
    out: dict[str, Any] = {"type": kinds.get(choice or "auto", "tool")}
    if out["type"] == "tool":
        out["name"] = choice
    if parallel is not None and out["type"] != "none":
        out["disable_parallel_tool_use"] = not parallel
    return out


def _fold_block(index: int, block: Mapping[str, Any], fold: ResponseFold) -> None:
    """A content block: whole (unstreamed), or as a stream starts it (empty, or nearly)."""
    kind = block.get("type")
    if kind == "text":
        fold.text(index, block.get("text", ""))
    elif kind == "thinking":
        fold.thinking(index, block.get("thinking", ""), block.get("signature") or "")
    elif kind == "redacted_thinking":
        fold.redacted_thinking(index, block.get("data", ""))
    elif kind == "tool_use":
        fold.tool_call(
            index, call_id=block["id"], name=block["name"], arguments=block.get("input") or {}
        )


def _fold_delta(index: int, delta: Mapping[str, Any], fold: ResponseFold) -> None:
    kind = delta.get("type")
    if kind == "text_delta":
        fold.text(index, delta.get("text", ""))
    elif kind == "thinking_delta":
        fold.thinking(index, delta.get("thinking", ""))
    elif kind == "signature_delta":
        fold.thinking(index, signature=delta.get("signature", ""))
    elif kind == "input_json_delta":
        fold.tool_call(index, arguments=delta.get("partial_json", ""))


def _fold_stop(fields: Mapping[str, Any], fold: ResponseFold) -> None:
    reason = fields.get("stop_reason")
    if reason:
        fold.finish(_FINISH.get(reason, "stop"))


def _fold_usage(raw: Mapping[str, Any] | None, fold: ResponseFold) -> None:
    """Anthropic counts input without cache reads and writes; a stream's ``message_delta``
    repeats or updates what ``message_start`` said (a figure it leaves out stays)."""
    if raw:
        fold.usage(
            uncached_input_tokens=raw.get("input_tokens"),
            output_tokens=raw.get("output_tokens"),
            cache_read_tokens=raw.get("cache_read_input_tokens"),
            cache_write_tokens=raw.get("cache_creation_input_tokens"),
        )
