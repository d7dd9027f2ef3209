"""OpenAI Chat Completions ↔ agentrunner messages. Pure translation, no I/O.

Serves OpenAI and every compatible server (Ollama, vLLM, llama.cpp, LM Studio, OpenRouter,
Groq, DeepSeek, Gemini's compatible endpoint, Azure): differences are the URL shape, the
auth header, the name of the output-token limit and whether ``prompt_cache_key`` is sent, all
chosen by ``OpenAIWire``'s options.

Images and PDFs go as the API documents them: in a user message, after its text, an image as
an ``image_url`` part (a data URL, with its ``detail``) and a PDF as a ``file`` part (a data
URL and a file name). A tool message takes text only: a tool's files are named in its text
("… (attached below)"), and one user message after the step's last tool message carries them
(``TOOL_FILES``, then the parts).

OpenAI caches prompt prefixes by itself (from 1,024 tokens, in 128-token steps); what makes it
pay is a request that starts as the last one did, which the turn and the runner keep so, and
``prompt_cache_key``: one per conversation, so its requests are routed to where its prefix is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, assert_never

import orjson

from agentrunner.core.json_text import json_text
from agentrunner.engine.failures import FailureKind, ProviderError, stream_error
from agentrunner.engine.fold import ResponseFold
from agentrunner.engine.messages import (
    AssistantMessage,
    Attachment,
    FinishReason,
    ModelRequest,
    ToolResult,
    UserMessage,
)
from agentrunner.engine.tools import is_strict_schema

__all__ = ["TOOL_FILES", "OpenAIWire"]

# What the user message carrying a step's tool files says before them.
TOOL_FILES = "Files returned by the tool calls above:"

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}
# Part ids: one choice holds one text, one reasoning and one refusal; tool calls go by index.
_TEXT, _REASONING, _REFUSAL = "text", "reasoning", "refusal"


@dataclass
class OpenAIWire:
    """Builds request bodies and reads responses for one OpenAI-compatible provider."""

    provider: str
    _: KW_ONLY
    max_tokens_field: str = "max_tokens"
    native_structured_output: bool = True
    azure_api_version: str | None = None
    prompt_cache_key: bool = False  # send the request's cache_key (OpenAI knows the field)

    @property
    def embeddings(self) -> bool:
        # Azure's is under each deployment's own path: not spoken here yet
        return self.azure_api_version is None

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
        files: list[Attachment] = []  # the step's tool results', for the user message after
        for message in request.messages:
            if files and not isinstance(message, ToolResult):
                messages.append(_tool_files(files))
                files = []
            match message:
                case UserMessage():
                    content: str | list[dict[str, Any]] = message.content
                    if message.attachments:
                        content = _parts(message.content, message.attachments)
                    messages.append({"role": "user", "content": content})
                case ToolResult():
                    call_id, text = message.call_id, message.content
                    if message.attachments:
                        text = _naming(text, message.attachments)
                        files += message.attachments
                    messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
                case AssistantMessage():
                    messages.append(_assistant(message))
                case _:
                    assert_never(message)
        if files:
            messages.append(_tool_files(files))
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
        if request.settings is not None:
            body.update(self._settings(request)[0])
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
        if self.prompt_cache_key and request.cache_key:
            body["prompt_cache_key"] = request.cache_key
        body["stream"] = request.stream
        if request.stream:
            body["stream_options"] = {"include_usage": True}
        if request.settings is not None and request.settings.extra:
            body.update(request.settings.extra_for(self.provider))
        return body

    def dropped_settings(self, request: ModelRequest) -> list[tuple[str, str]]:
        """The settings of ``request`` its body leaves out, each with the reason."""
        return self._settings(request)[1] if request.settings is not None else []

    def _settings(self, request: ModelRequest) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """The request's settings as Chat Completions fields, and those it cannot take."""
        settings = request.settings
        assert settings is not None
        fields: dict[str, Any] = {}
        dropped: list[tuple[str, str]] = []
        for name in ("temperature", "top_p", "seed", "reasoning_effort"):
            value = getattr(settings, name)
            if value is not None:
                fields[name] = value
        if settings.stop:
            fields["stop"] = list(settings.stop)
        if request.tools:  # the API refuses both in a request without tools
            choice = settings.tool_choice
            if choice is not None:
                fields["tool_choice"] = (
                    choice
                    if choice in ("auto", "required", "none")
                    else {"type": "function", "function": {"name": choice}}
                )
            if settings.parallel_tool_calls is not None:
                fields["parallel_tool_calls"] = settings.parallel_tool_calls
        if settings.thinking is not None:
            dropped.append(
                ("thinking", f"{self.provider} takes reasoning_effort, not a thinking budget")
            )
        return fields, dropped

    def fold_body(self, body: Mapping[str, Any], fold: ResponseFold) -> None:
        """A ``chat.completion``: its one message is read as one big delta."""
        choices = body.get("choices") or []
        if not choices:
            raise ProviderError(
                FailureKind.UNKNOWN, "response has no choices", provider=self.provider
            )
        fold.identify(body.get("model"))
        _fold_choice(choices[0], choices[0].get("message"), fold)
        _fold_usage(body.get("usage"), fold)
        fold.end()

    def fold_event(self, event: str | None, data: str, fold: ResponseFold) -> None:
        """One ``chat.completion.chunk`` (or the ``[DONE]`` that ends the stream)."""
        if data == "[DONE]":
            fold.end()
            return
        chunk = orjson.loads(data)  # a stream's events are many: the faster parser
        if "error" in chunk:
            raise stream_error(self.provider, chunk)
        if not fold.model:
            fold.identify(chunk.get("model"))
        usage = chunk.get("usage")
        if usage:
            _fold_usage(usage, fold)
        for choice in chunk.get("choices") or ():
            _fold_choice(choice, choice.get("delta"), fold)


def _parts(text: str, attachments: Sequence[Attachment]) -> list[dict[str, Any]]:
    """A user message's text, then its files: an image as an ``image_url`` (a data URL, with
    the detail asked for), a PDF as a ``file`` (a data URL, with a name: the API wants one)."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for file in attachments:
        if file.kind == "image":
            parts.append(
                {"type": "image_url", "image_url": {"url": file.data_url(), "detail": file.detail}}
            )
        else:
            parts.append(
                {
                    "type": "file",
                    "file": {"filename": file.name or "file.pdf", "file_data": file.data_url()},
                }
            )
    return parts


def _naming(text: str, attachments: Sequence[Attachment]) -> str:
    """A tool message's text, and a line for each file it returned: a tool message takes text
    only, so its files follow in a user message (``_tool_files``)."""
    lines = [f"{file.label} (attached below)" for file in attachments]
    return "\n".join([text, *lines] if text else lines)


def _tool_files(attachments: Sequence[Attachment]) -> dict[str, Any]:
    """The user message after a step's tool messages: the files its tools returned, in order."""
    return {"role": "user", "content": _parts(TOOL_FILES, attachments)}


def _assistant(message: AssistantMessage) -> dict[str, Any]:
    """A reply sent back. Tool calls without text go with an empty text: OpenAI takes a null
    beside them too, but llama.cpp's server refuses a null and fails without the field."""
    text = message.text if message.tool_calls else message.text or None
    out: dict[str, Any] = {"role": "assistant", "content": text}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.raw_arguments
                    if call.raw_arguments is not None
                    else json_text(call.arguments),
                },
            }
            for call in message.tool_calls
        ]
    return out


def _fold_choice(
    choice: Mapping[str, Any], delta: Mapping[str, Any] | None, fold: ResponseFold
) -> None:
    """A choice's delta (streamed) or its whole message (unstreamed): the same fields."""
    if delta:
        content = delta.get("content")
        if content:
            fold.text(_TEXT, content)
            if len(delta) == 1:  # most of a stream: a piece of text and nothing else
                delta = None
    if delta:
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning and isinstance(reasoning, str):
            fold.thinking(_REASONING, reasoning)
        refusal = delta.get("refusal")
        if refusal:
            fold.refusal(_REFUSAL, refusal)
        calls = delta.get("tool_calls")
        if calls:
            for position, call in enumerate(calls):
                function = call.get("function") or {}
                fold.tool_call(
                    call.get("index", position),
                    call_id=call.get("id") or "",
                    name=function.get("name") or "",
                    arguments=function.get("arguments") or "",
                )
    finish = choice.get("finish_reason")
    if finish:
        fold.finish(_FINISH.get(finish, "stop"))
        fold.end()  # servers that send no [DONE] end with the finish reason


def _fold_usage(raw: Mapping[str, Any] | None, fold: ResponseFold) -> None:
    """``prompt_tokens`` include the cached ones; ``completion_tokens`` the reasoning ones."""
    if not raw:
        return
    cached = (raw.get("prompt_tokens_details") or {}).get("cached_tokens")
    reasoning = (raw.get("completion_tokens_details") or {}).get("reasoning_tokens")
    fold.usage(
        input_tokens=raw.get("prompt_tokens") or 0,
        output_tokens=raw.get("completion_tokens") or 0,
        cache_read_tokens=cached or 0,
        reasoning_tokens=reasoning or 0,
    )
