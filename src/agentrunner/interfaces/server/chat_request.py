"""A Chat Completions request as agentrunner takes it, field by field: each field of OpenAI's
create request is honoured, left out for a stated reason, or refused with 422 ``validation``
naming it — never dropped unsaid (docs/http-api.md's table says the same in words; a test
checks that every field of the official client's request is one of the three).

- **Honoured**: ``model`` (an agent id), ``messages``, ``stream``, ``stream_options``, ``user``
  (the thread), and the sampling and length fields, which become the run's model settings
  (``SETTINGS``), checked by the rules the REST API's ``model_settings`` are checked by.
- **Left out** (``IGNORED``): fields nothing the client gets back depends on.
- **Refused** (``REFUSED``): fields asking for what an agent's run does not do — the client's
  own tools, several choices, log probabilities, audio… — unless the value asks for no more
  than it does anyway (``n: 1``, ``logprobs: false``, ``response_format: {"type": "text"}``).
- **Unknown** fields are refused too, as OpenAI refuses them: a field this endpoint does not
  know is one it would otherwise drop unsaid.

A ``system`` (or ``developer``) message is context from the client: sent in the user position,
marked as the caller's, never in the system role (DESIGN decision 1). The new input is the user
messages after the last assistant message. Earlier turns are the thread's: a thread that exists
already holds them, and a new one is opened with the client's earlier turns as its history
(``ChatRun.earlier``), as a client that keeps the conversation itself expects.

A user message's ``image_url`` and ``file`` parts are its files (``SentFile``): data URLs only
(agentrunner fetches nothing), read by ``SentFile.entry`` and checked by ``attach`` when the
endpoint makes them files (``openai_compat``), the new input's for the run and an earlier
turn's for the history a new thread is opened with.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from agentrunner.core.inputs import check_input, check_text, invalid
from agentrunner.core.model_settings import ModelSettings, settings_problems
from agentrunner.engine.messages import AssistantMessage, Attachment, Message, UserMessage
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.interfaces.server.fields import Id, Text
from agentrunner.run.attachment_entries import AttachmentEntry, data_url_bytes

__all__ = [
    "IGNORED",
    "REFUSED",
    "SETTINGS",
    "ChatMessage",
    "ChatRequest",
    "ChatRun",
    "Refused",
    "SentFile",
    "chat_run",
]

# The fields that become the run's model settings, and the setting each becomes (both caps
# given: the lower, the cap the client believes in force either way).
SETTINGS: dict[str, str] = {
    "temperature": "temperature",
    "top_p": "top_p",
    "max_tokens": "max_output_tokens",
    "max_completion_tokens": "max_output_tokens",
    "stop": "stop",
    "seed": "seed",
    "reasoning_effort": "reasoning_effort",
}

_FIELDS = "What each field of the request takes: docs/http-api.md (OpenAI-compatible)."
_CACHE = "agentrunner sets the provider's prompt-cache hints itself, keyed by the conversation"
# The fields left out, and why.
IGNORED: dict[str, str] = {
    "metadata": "tags for OpenAI's stored completions, which a run is not one of",
    "store": "OpenAI's stored completions (distillation, evals); agentrunner keeps every "
    "conversation in its thread either way",
    "safety_identifier": "an end user's id for OpenAI's abuse detection, which the agent's "
    "model need not be OpenAI's",
    "prompt_cache_key": _CACHE,
    "prompt_cache_options": _CACHE,
    "prompt_cache_retention": _CACHE,
}


@dataclass(frozen=True, slots=True)
class Refused:
    """A field refused: what is wrong with asking for it (after the field's name in the
    message), what to do instead, and the values that ask for no more than a run does."""

    problem: str
    hint: str
    takes: Callable[[Any], bool] = lambda value: False


_TOOLS = (
    "The agent's tools are its own (its file's tools:) and run on the server; "
    "use the REST API for more control over a run."
)
_OWN = "is not something an agent's run does"
REFUSED: dict[str, Refused] = {
    "tools": Refused("is a client's own tools, which an agent's run never calls back", _TOOLS),
    "tool_choice": Refused("chooses among a client's own tools, which are not taken", _TOOLS),
    "parallel_tool_calls": Refused("is for a client's own tools, which are not taken", _TOOLS),
    "functions": Refused("is a client's own tools (the old spelling), not taken", _TOOLS),
    "function_call": Refused("chooses among a client's own tools, which are not taken", _TOOLS),
    "n": Refused(
        "asks for more than one choice; a run gives one answer",
        "Leave n out, or send 1; ask again for another answer.",
        lambda value: value == 1,
    ),
    "logprobs": Refused(
        "asks for log probabilities, which a run does not return",
        "Leave logprobs out, or send false.",
        lambda value: value is False,
    ),
    "top_logprobs": Refused(
        "asks for log probabilities, which a run does not return", "Leave top_logprobs out."
    ),
    "logit_bias": Refused(
        "biases tokens by id, which are the model's own, and an agent's model may be any",
        "Leave logit_bias out.",
        lambda value: value == {},
    ),
    "presence_penalty": Refused(
        f"{_OWN}: agentrunner's model settings have no penalties",
        "Leave presence_penalty out, or send 0.",
        lambda value: value == 0,
    ),
    "frequency_penalty": Refused(
        f"{_OWN}: agentrunner's model settings have no penalties",
        "Leave frequency_penalty out, or send 0.",
        lambda value: value == 0,
    ),
    "response_format": Refused(
        "asks for structured output; an agent's answer is text, or its file's output_schema",
        'Leave response_format out, or send {"type": "text"}; a structured answer is what '
        "an agent file's output_schema asks of its agent.",
        lambda value: value == {"type": "text"},
    ),
    "service_tier": Refused(
        "asks a provider for a processing tier, which is not one of a run's model settings",
        'Leave service_tier out, or send "auto" or "default".',
        lambda value: value in ("auto", "default"),
    ),
    "modalities": Refused(
        "asks for output besides text; an agent answers in text",
        'Leave modalities out, or send ["text"].',
        lambda value: value == ["text"],
    ),
    "audio": Refused("asks for audio output; an agent answers in text", "Leave audio out."),
    "prediction": Refused(f"(a predicted output) {_OWN}", "Leave prediction out."),
    "web_search_options": Refused(
        "is a web search tool of OpenAI's; an agent's tools are its file's", _TOOLS
    ),
    "verbosity": Refused(
        f"{_OWN}: agentrunner's model settings have no verbosity", "Leave verbosity out."
    ),
    "moderation": Refused(f"(OpenAI's moderation of the request) {_OWN}", "Leave moderation out."),
}


_SETTING_SCHEMAS: dict[str, Any] = ModelSettings.model_json_schema()["properties"]
_STOP = _SETTING_SCHEMAS["stop"]["anyOf"]


def _setting_schema(setting: str) -> Any:
    """The JSON Schema of a setting, as ``ModelSettings`` states it."""
    return WithJsonSchema(_SETTING_SCHEMAS[setting])


def _left_out(name: str) -> Any:
    return WithJsonSchema({"description": f"left out: {IGNORED[name]}"})


def _refused(name: str) -> Any:
    said = (
        f"refused (422), but for the values docs/http-api.md lists: {name} {REFUSED[name].problem}"
    )
    return WithJsonSchema({"description": said})


Setting = Any
Unused = Annotated[Any, WithJsonSchema({"description": "left out: not sent again"})]


class ImageUrl(BaseModel):
    model_config = ConfigDict(extra="ignore")

    url: str = Field(description="the image as a base64 data URL (a web address is refused)")
    detail: str | None = Field(default=None, description="auto, low or high")


class FileData(BaseModel):
    model_config = ConfigDict(extra="ignore")

    filename: str | None = None
    file_data: str | None = Field(
        default=None, description="the file as a base64 data URL (data:application/pdf;base64,…)"
    )
    file_id: str | None = Field(
        default=None, description="refused: a file uploaded to OpenAI, which agentrunner lacks"
    )


class ContentPart(BaseModel):
    """A part of a message's content: ``text`` parts reach the agent, and a user message's
    ``image_url`` and ``file`` parts are its files; other parts of a message that is sent are
    refused (an assistant's are not sent)."""

    model_config = ConfigDict(extra="ignore")

    type: str = Field(max_length=50)
    text: Text | None = None
    image_url: ImageUrl | None = None
    file: FileData | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: Text | Annotated[list[ContentPart], Field(max_length=100)] | None = None
    name: Id | None = Field(default=None, description="left out: the thread says who is who")
    # An assistant message's own fields: earlier turns are the thread's, not sent again.
    refusal: Unused = None
    audio: Unused = None
    tool_calls: Unused = None
    function_call: Unused = None
    tool_call_id: Unused = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    include_usage: bool | None = Field(
        default=None, description="false: no last chunk with the usage (sent by default)"
    )
    include_obfuscation: bool | None = Field(
        default=None, description="left out: the chunks carry no obfuscation padding"
    )


class ChatRequest(BaseModel):
    """OpenAI's chat completion request, every field of it declared (unknown ones are
    refused by ``chat_run``, naming the field meant): see the module's docstring and
    docs/http-api.md for what each does here."""

    # kept, for chat_run to refuse with the field meant; the schema says none is taken
    model_config = ConfigDict(extra="allow", json_schema_extra={"additionalProperties": False})

    model: Id = Field(description="an agent id")
    messages: list[ChatMessage] = Field(min_length=1, max_length=1000)
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: Id | None = Field(default=None, description="the thread: <agent>-<user>")
    # the run's model settings, checked by the library's rules
    temperature: Annotated[Setting, _setting_schema("temperature")] = None
    top_p: Annotated[Setting, _setting_schema("top_p")] = None
    max_tokens: Annotated[Setting, _setting_schema("max_output_tokens")] = None
    max_completion_tokens: Annotated[Setting, _setting_schema("max_output_tokens")] = None
    stop: Annotated[Setting, WithJsonSchema({"anyOf": [_STOP[0]["items"], *_STOP]})] = None
    seed: Annotated[Setting, _setting_schema("seed")] = None
    reasoning_effort: Annotated[Setting, _setting_schema("reasoning_effort")] = None
    # left out
    metadata: Annotated[Any, _left_out("metadata")] = None
    store: Annotated[Any, _left_out("store")] = None
    safety_identifier: Annotated[Any, _left_out("safety_identifier")] = None
    prompt_cache_key: Annotated[Any, _left_out("prompt_cache_key")] = None
    prompt_cache_options: Annotated[Any, _left_out("prompt_cache_options")] = None
    prompt_cache_retention: Annotated[Any, _left_out("prompt_cache_retention")] = None
    # refused, unless the value asks for what a run does anyway
    tools: Annotated[Any, _refused("tools")] = None
    tool_choice: Annotated[Any, _refused("tool_choice")] = None
    parallel_tool_calls: Annotated[Any, _refused("parallel_tool_calls")] = None
    functions: Annotated[Any, _refused("functions")] = None
    function_call: Annotated[Any, _refused("function_call")] = None
    n: Annotated[Any, _refused("n")] = None
    logprobs: Annotated[Any, _refused("logprobs")] = None
    top_logprobs: Annotated[Any, _refused("top_logprobs")] = None
    logit_bias: Annotated[Any, _refused("logit_bias")] = None
    presence_penalty: Annotated[Any, _refused("presence_penalty")] = None
    frequency_penalty: Annotated[Any, _refused("frequency_penalty")] = None
    response_format: Annotated[Any, _refused("response_format")] = None
    service_tier: Annotated[Any, _refused("service_tier")] = None
    modalities: Annotated[Any, _refused("modalities")] = None
    audio: Annotated[Any, _refused("audio")] = None
    prediction: Annotated[Any, _refused("prediction")] = None
    web_search_options: Annotated[Any, _refused("web_search_options")] = None
    verbosity: Annotated[Any, _refused("verbosity")] = None
    moderation: Annotated[Any, _refused("moderation")] = None


@dataclass(frozen=True, slots=True)
class SentFile:
    """A user message's ``image_url`` or ``file`` part (``where``: ``messages.N.content.K``),
    as the client sent it: the bytes are read by ``entry`` and checked by ``attach``. A part
    with no name (an ``image_url`` has none) is given its type's (``image.png``)."""

    where: str
    kind: Literal["image_url", "file"]
    url: str | None
    name: str = ""
    detail: str = "auto"
    file_id: str | None = None

    @property
    def url_field(self) -> str:
        """The field that carries its data URL."""
        if self.kind == "image_url":
            return f"{self.where}.image_url.url"
        return f"{self.where}.file.file_data"

    def entry(self) -> AttachmentEntry:
        """The file's bytes, from its data URL; ``validation`` naming the field for a file
        of OpenAI's (``file_id``), a part without its URL, a web address or a URL that is not
        base64."""
        if self.file_id is not None:
            raise invalid(
                f"{self.where}.file.file_id",
                "names a file uploaded to OpenAI, which agentrunner does not have",
                "Send the file's bytes in file_data, as a data URL "
                "(data:application/pdf;base64,…).",
            )
        if self.url is None:
            raise invalid(
                self.url_field,
                "is required: the file's bytes, as a data URL",
                "Send data:<type>;base64,<bytes>.",
            )
        data = data_url_bytes(self.url, self.url_field)
        return AttachmentEntry(self.name, data, None, self.detail, self.where)


@dataclass(frozen=True, slots=True)
class ChatRun:
    """What a chat completion runs: the new input, the client's context (its system
    messages), the run's model settings, whether a stream ends with the usage, and the
    client's earlier turns (a new thread's history; one that exists has its own).

    ``files``: the new input's files as sent; ``earlier_files``: each earlier turn's (one per
    message of ``earlier``). The endpoint makes them ``attachments`` and the earlier turns'
    ``UserMessage.attachments`` (``openai_compat``), checked by ``attach``."""

    message: str
    context: str | None
    settings: ModelSettings | None
    include_usage: bool
    earlier: tuple[Message, ...] = ()
    files: tuple[SentFile, ...] = ()
    earlier_files: tuple[tuple[SentFile, ...], ...] = ()
    attachments: tuple[Attachment, ...] = ()


def chat_run(request: ChatRequest) -> ChatRun:
    """The run ``request`` asks for; ``validation`` naming the field (``details["invalid"]``)
    for one it asks what a run does not do, or a setting that breaks its rules. Nothing is
    written before this returns."""
    for name in request.model_extra or {}:
        near = difflib.get_close_matches(name, list(ChatRequest.model_fields), n=1, cutoff=0.7)
        raise invalid(
            name,
            "is not a field of a chat completion request",
            f"Did you mean '{near[0]}'?" if near else _FIELDS,
        )
    for name, refused in REFUSED.items():
        value = getattr(request, name)
        if value is not None and not refused.takes(value):
            raise invalid(name, refused.problem, refused.hint)
    if request.stream_options is not None and not request.stream:
        raise invalid(
            "stream_options", "is only for a streamed answer", "Send stream: true with it."
        )
    said, context, earlier = _conversation(request.messages)
    options = request.stream_options
    return ChatRun(
        said.text,
        context,
        _settings(request),
        include_usage=options is None or options.include_usage is not False,
        earlier=tuple(
            UserMessage(t.text) if t.role == "user" else AssistantMessage(text=t.text)
            for t in earlier
        ),
        files=tuple(said.files),
        earlier_files=tuple(tuple(t.files) for t in earlier),
    )


def _settings(request: ChatRequest) -> ModelSettings | None:
    """The fields of ``SETTINGS`` as the run's settings, each checked as the REST API checks
    a run's ``model_settings`` (its problem named by the request's field)."""
    values: dict[str, Any] = {}
    for name, setting in SETTINGS.items():
        raw = getattr(request, name)
        if raw is None:
            continue
        checked, problems = settings_problems(check_input({setting: raw}, name))
        if problems or checked is None:
            _, problem, hint = problems[0]
            raise invalid(name, problem, hint or _FIELDS)
        value = getattr(checked, setting)
        values[setting] = min(values[setting], value) if setting in values else value
    return ModelSettings(**values) if values else None


@dataclass(slots=True)
class _Turn:
    """A role's consecutive messages, as a thread holds them: their texts and files."""

    role: str
    text: str
    files: list[SentFile]


def _conversation(
    messages: Sequence[ChatMessage],
) -> tuple[_Turn, str | None, list[_Turn]]:
    """The new input (the user messages after the last assistant message), the client's
    context (its system and developer messages, in order) and the turns before the new input,
    a role's consecutive texts and files as one message (as a thread holds them)."""
    context: list[str] = []
    turns: list[_Turn] = []
    for n, message in enumerate(messages):
        if message.role in ("tool", "function"):
            raise invalid(
                f"messages.{n}.role",
                f"is '{message.role}': a result of a client's own tool, which is not taken",
                _TOOLS,
            )
        text, files = _content(message, n)
        if message.role in ("system", "developer"):
            if text.strip():
                context.append(text)
        elif turns and turns[-1].role == message.role:
            last = turns[-1]
            last.text = "\n\n".join(t for t in (last.text, text) if t.strip())
            last.files += files
        else:
            turns.append(_Turn(message.role, text, files))
    said = turns.pop() if turns and turns[-1].role == "user" else _Turn("user", "", [])
    if not said.text.strip() and not said.files:
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            "messages has no user message with text or files after the last assistant message",
            hint="End messages with what the user says now.",
            details={"invalid": "messages"},
        )
    for turn in turns:
        check_text(turn.text, "messages")
    check_text(said.text, "messages")
    return said, "\n\n".join(context) or None, [t for t in turns if t.text.strip() or t.files]


_PARTS = "Send text parts, and a user message's images and PDFs as image_url or file parts."


def _content(message: ChatMessage, n: int) -> tuple[str, list[SentFile]]:
    """A message's text (its content, or its text parts) and, a user message's, its files;
    any other part is refused (it would reach the agent as nothing)."""
    if message.content is None or isinstance(message.content, str):
        return message.content or "", []
    files: list[SentFile] = []
    for k, part in enumerate(message.content):
        where = f"messages.{n}.content.{k}"
        if part.type in ("image_url", "file") and message.role == "user":
            files.append(_sent_file(part, where))
        elif part.type != "text":
            taken = "only text" if message.role != "user" else "only text, image_url and file"
            raise invalid(
                f"{where}.type",
                f"is '{part.type}': {taken} parts of a {message.role} message reach an agent "
                "through this endpoint",
                _PARTS,
            )
    return "".join(part.text or "" for part in message.content if part.type == "text"), files


def _sent_file(part: ContentPart, where: str) -> SentFile:
    if part.type == "image_url":
        image = part.image_url
        if image is None:
            return SentFile(where, "image_url", None)
        return SentFile(where, "image_url", image.url, detail=image.detail or "auto")
    file = part.file or FileData()
    return SentFile(where, "file", file.file_data, file.filename or "", file_id=file.file_id)
