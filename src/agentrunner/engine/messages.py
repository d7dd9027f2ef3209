"""The engine's normalized protocol: messages, requests, responses, usage.

Wire adapters translate these to and from provider JSON; nothing above the engine sees wire
formats. Every type here round-trips through plain JSON (``to_dict`` / ``message_from_dict``) so
the store can keep a thread's history and replay it to any provider.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from agentrunner.core.model_settings import ModelSettings

__all__ = [
    "IMAGE_TYPES",
    "PDF_TYPE",
    "AssistantMessage",
    "Attachment",
    "FinishReason",
    "InputKind",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "TextDelta",
    "Thinking",
    "ThinkingDelta",
    "ToolCall",
    "ToolDefinition",
    "ToolResult",
    "Usage",
    "UserMessage",
    "message_from_dict",
    "needed_inputs",
    "prompt_cache_key",
    "text_and_files",
]

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
PDF_TYPE = "application/pdf"
InputKind = Literal["text", "image", "pdf"]

FinishReason = Literal["stop", "tool_calls", "length", "content_filter", "stop_sequence", "error"]


@dataclass(slots=True)
class Usage:
    """Tokens of one response (or a sum). ``input_tokens`` includes cache reads and writes,
    whatever the provider's own convention, so prices apply to one definition. ``estimated``:
    some of it is agentrunner's estimate, not the provider's count (a request cut off before
    the provider reported its usage)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    requests: int = 0
    estimated: bool = False
    reasoning_tokens: int = 0  # of ``output_tokens``: what the model reasoned, billed as output

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.requests += other.requests
        self.estimated = self.estimated or other.estimated
        self.reasoning_tokens += other.reasoning_tokens

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        """A ``to_dict``'s usage again (a run's row, going on after a wait)."""
        return cls(
            int(data.get("input_tokens", 0)),
            int(data.get("output_tokens", 0)),
            int(data.get("cache_read_tokens", 0)),
            int(data.get("cache_write_tokens", 0)),
            int(data.get("requests", 0)),
            bool(data.get("estimated", False)),
            int(data.get("reasoning_tokens", 0)),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "requests": self.requests,
        }
        if self.estimated:
            out["estimated"] = True
        if self.reasoning_tokens:
            out["reasoning_tokens"] = self.reasoning_tokens
        return out


@dataclass(slots=True)
class ToolCall:
    """A call the model asked for. ``raw_arguments`` is kept when they were not valid JSON.
    ``item_id``: the provider's id of the output item that carried the call (the Responses
    API's ``fc_…``, besides its ``call_id``), replayed to that provider with it."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw_arguments: str | None = None
    item_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.raw_arguments is not None:
            out["raw_arguments"] = self.raw_arguments
        if self.item_id is not None:
            out["item_id"] = self.item_id
        return out


@dataclass(slots=True)
class Thinking:
    """A reasoning block, replayed only to ``provider`` and only with what lets it be:
    ``signature`` (Anthropic's signature; the Responses API's ``encrypted_content``).

    ``id``: the Responses API's reasoning item (``rs_…``). One item is one ``Thinking`` per
    part of its summary, each with the item's id (the first with its encrypted content): so
    its summary goes back as it came, part by part."""

    text: str
    provider: str
    signature: str | None = None
    redacted: str | None = None
    id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "text": self.text,
            "provider": self.provider,
            "signature": self.signature,
            "redacted": self.redacted,
        }
        if self.id is not None:
            out["id"] = self.id
        return out


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file a message carries, an image or a PDF, known by the sha256 of its bytes.

    Messages, their rows, events and run records hold only this reference (name, type, size,
    digest, and what the edge read of it: pixels or pages); the bytes are kept once in the
    store's attachments, whichever messages name them. ``data``: the bytes themselves, carried
    from the edge that read them to the store that keeps them, and loaded again just before a
    request is built (``Attachments.hydrate``); never part of ``to_dict``. ``detail``: what
    OpenAI is asked to see of an image (``auto``, ``low``, ``high``)."""

    sha256: str
    media_type: str
    size: int
    name: str = ""
    width: int | None = None
    height: int | None = None
    pages: int | None = None
    detail: str = "auto"
    data: bytes | None = field(default=None, compare=False, repr=False)

    @property
    def kind(self) -> InputKind:
        return "pdf" if self.media_type == PDF_TYPE else "image"

    @property
    def label(self) -> str:
        """How a person (and a model that is not sent the file) is told of it."""
        shape = f"{self.width}x{self.height}" if self.width else f"{self.pages or 0} pages"
        name = self.name or self.sha256[:12]
        return (
            f"[{self.kind}: {name}, {self.media_type}, {shape}, {self.size} bytes, "
            f"sha256 {self.sha256[:12]}]"
        )

    def base64(self) -> str:
        """The bytes as base64, for a wire; a reference whose bytes were not loaded is a bug
        of whoever built the request, said as such."""
        if self.data is None:
            raise ValueError(f"attachment {self.sha256[:12]} was not loaded before the request")
        return base64.b64encode(self.data).decode("ascii")

    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.base64()}"

    def with_data(self, data: bytes) -> Attachment:
        return replace(self, data=data)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sha256": self.sha256,
            "media_type": self.media_type,
            "size": self.size,
            "name": self.name,
        }
        if self.width is not None:
            out["width"], out["height"] = self.width, self.height
        if self.pages is not None:
            out["pages"] = self.pages
        if self.detail != "auto":
            out["detail"] = self.detail
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Attachment:
        return cls(
            str(data["sha256"]),
            str(data["media_type"]),
            int(data["size"]),
            str(data.get("name") or ""),
            data.get("width"),
            data.get("height"),
            data.get("pages"),
            str(data.get("detail") or "auto"),
        )


def _attachments(data: Mapping[str, Any]) -> tuple[Attachment, ...]:
    given = data.get("attachments")
    return tuple(Attachment.from_dict(a) for a in given) if given else ()


def needed_inputs(messages: Iterable[Message]) -> dict[InputKind, Attachment]:
    """The kinds of input beyond text ``messages`` carry, each with the first file of it:
    what a model must take to be sent them (``[models."p:m"] input``)."""
    needs: dict[InputKind, Attachment] = {}
    for message in messages:
        for a in message.attachments:
            needs.setdefault(a.kind, a)
    return needs


@dataclass(slots=True)
class UserMessage:
    """What a person (or the runtime on their behalf) said.

    ``unsent``: no model was ever sent it — the run it came with ended before its first model
    request (refused by a budget, say). It is kept in the thread for people and left out of
    what models are sent (``engine.history``), then and later (DESIGN decision 11)."""

    content: str
    role: Literal["user"] = "user"
    unsent: bool = False
    attachments: tuple[Attachment, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": "user", "content": self.content}
        if self.unsent:
            out["unsent"] = True
        if self.attachments:  # a text-only message's row is what it always was
            out["attachments"] = [a.to_dict() for a in self.attachments]
        return out


def text_and_files(message: UserMessage | ToolResult) -> str:
    """What a person reads of a message: its text, then a line naming each of its files."""
    if not message.attachments:
        return message.content
    return "\n".join([message.content, *(a.label for a in message.attachments)])


@dataclass(slots=True)
class AssistantMessage:
    """What the model said: thinking, then text, then tool calls (the order both APIs use).

    ``interrupted``: the turn stopped here before it finished (cancelled, failed, or cut off by
    a budget); ``text`` is what was streamed until then. Models are sent such a message with a
    short neutral note instead (``engine.history``), never the error that stopped it.

    ``text_id``: the provider's id of the output item that carried the text (the Responses
    API's ``msg_…``), replayed to that provider with it: a reasoning item sent back must be
    followed by the item it came with, known by its id. ``phase``: what that item said the
    text is (the Responses API's ``commentary`` or ``final_answer``), sent back with it."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    thinking: list[Thinking] = field(default_factory=list)
    model: str | None = None
    provider: str | None = None
    interrupted: bool = False
    text_id: str | None = None
    phase: str | None = None
    role: Literal["assistant"] = "assistant"

    @property
    def attachments(self) -> tuple[Attachment, ...]:
        """None: a model's reply carries no files (every message answers ``attachments``)."""
        return ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            out["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.thinking:
            out["thinking"] = [t.to_dict() for t in self.thinking]
        if self.model:
            out["model"] = self.model
        if self.provider:
            out["provider"] = self.provider
        if self.interrupted:
            out["interrupted"] = True
        if self.text_id is not None:
            out["text_id"] = self.text_id
        if self.phase is not None:
            out["phase"] = self.phase
        return out


@dataclass(slots=True)
class ToolResult:
    """The answer to one tool call; ``is_error`` results go back to the model as errors.
    ``attachments``: the images or PDFs the tool returned (an MCP tool's image content)."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    role: Literal["tool"] = "tool"
    attachments: tuple[Attachment, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "role": "tool",
            "call_id": self.call_id,
            "name": self.name,
            "content": self.content,
            "is_error": self.is_error,
        }
        if self.attachments:
            out["attachments"] = [a.to_dict() for a in self.attachments]
        return out


Message = UserMessage | AssistantMessage | ToolResult


def message_from_dict(data: Mapping[str, Any]) -> Message:
    role = data.get("role")
    if role == "user":
        return UserMessage(
            str(data["content"]), unsent=bool(data.get("unsent")), attachments=_attachments(data)
        )
    if role == "assistant":
        return AssistantMessage(
            text=str(data.get("content") or ""),
            tool_calls=[
                ToolCall(
                    c["id"],
                    c["name"],
                    dict(c.get("arguments") or {}),
                    c.get("raw_arguments"),
                    c.get("item_id"),
                )
                for c in data.get("tool_calls", ())
            ],
            thinking=[
                Thinking(
                    t.get("text", ""),
                    t["provider"],
                    t.get("signature"),
                    t.get("redacted"),
                    t.get("id"),
                )
                for t in data.get("thinking", ())
            ],
            model=data.get("model"),
            provider=data.get("provider"),
            interrupted=bool(data.get("interrupted")),
            text_id=data.get("text_id"),
            phase=data.get("phase"),
        )
    if role == "tool":
        return ToolResult(
            str(data["call_id"]),
            str(data.get("name", "")),
            str(data["content"]),
            bool(data.get("is_error")),
            attachments=_attachments(data),
        )
    raise ValueError(f"unknown message role {role!r}")


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """What the model sees of a tool: name, description, JSON Schema of its arguments.
    ``writes``: calling it changes what outlasts the run (memory, notes, files); no provider is
    sent it, the ``test`` model calls such a tool only when asked to by name."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    writes: bool = False


@dataclass(slots=True)
class ModelRequest:
    """One request to a model, provider-neutral. ``cache_key``: the same for every request of
    one conversation (``prompt_cache_key``), so a provider that routes by it finds the prefix
    the last request left in its prompt cache. ``settings``: what the run asks of the model
    (its ``max_output_tokens`` already folded into ``max_output_tokens``); each wire maps them
    and leaves out what its provider cannot take."""

    model: str
    system: str
    messages: Sequence[Message]
    tools: Sequence[ToolDefinition] = ()
    max_output_tokens: int | None = None
    output_schema: Mapping[str, Any] | None = None
    output_schema_name: str = "output"
    stream: bool = True
    cache_key: str | None = None
    settings: ModelSettings | None = None


def prompt_cache_key(scope: str) -> str:
    """The prompt-cache key of a conversation (a thread's id, or an agent's for runs on no
    thread): a digest, so what goes to the provider is short and names nothing of ours."""
    return "agentrunner-" + hashlib.blake2b(scope.encode(), digest_size=12).hexdigest()


@dataclass(slots=True)
class ModelResponse:
    message: AssistantMessage
    usage: Usage
    finish_reason: FinishReason
    model: str


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    text: str
