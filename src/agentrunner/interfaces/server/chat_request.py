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
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from agentrunner.core.inputs import check_input, check_text, invalid
from agentrunner.core.model_settings import ModelSettings, settings_problems
from agentrunner.engine.messages import AssistantMessage, Message, UserMessage
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.interfaces.server.fields import Id, Text

__all__ = [
    "IGNORED",
    "REFUSED",
    "SETTINGS",
    "ChatMessage",
    "ChatRequest",
    "ChatRun",
    "Refused",
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


class ContentPart(BaseModel):
    """A part of a message's content: ``text`` parts reach the agent; other parts of a
    message that is sent are refused (an assistant's are not sent)."""

    model_config = ConfigDict(extra="ignore")

    type: str = Field(max_length=50)
    text: Text | None = None


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
class ChatRun:
    """What a chat completion runs: the new input, the client's context (its system
    messages), the run's model settings, whether a stream ends with the usage, and the
    client's earlier turns (a new thread's history; one that exists has its own)."""

    message: str
    context: str | None
    settings: ModelSettings | None
    include_usage: bool
    earlier: tuple[Message, ...] = ()


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
    message, context, earlier = _conversation(request.messages)
    options = request.stream_options
    return ChatRun(
        message,
        context,
        _settings(request),
        include_usage=options is None or options.include_usage is not False,
        earlier=earlier,
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


def _conversation(
    messages: Sequence[ChatMessage],
) -> tuple[str, str | None, tuple[Message, ...]]:
    """The new input (the user messages after the last assistant message), the client's
    context (its system and developer messages, in order) and the turns before the new input,
    a role's consecutive texts as one message (as a thread holds them)."""
    context: list[str] = []
    turns: list[tuple[str, str]] = []
    for n, message in enumerate(messages):
        if message.role in ("tool", "function"):
            raise invalid(
                f"messages.{n}.role",
                f"is '{message.role}': a result of a client's own tool, which is not taken",
                _TOOLS,
            )
        text = _text(message, n)
        if message.role in ("system", "developer"):
            if text.strip():
                context.append(text)
        elif turns and turns[-1][0] == message.role:
            turns[-1] = (message.role, "\n\n".join(t for t in (turns[-1][1], text) if t.strip()))
        else:
            turns.append((message.role, text))
    said = turns.pop()[1] if turns and turns[-1][0] == "user" else ""
    if not said.strip():
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            "messages has no user message with text after the last assistant message",
            hint="End messages with what the user says now.",
            details={"invalid": "messages"},
        )
    for _, text in turns:
        check_text(text, "messages")
    check_text(said, "messages")
    earlier = tuple(
        UserMessage(text) if role == "user" else AssistantMessage(text=text)
        for role, text in turns
        if text.strip()
    )
    return said, "\n\n".join(context) or None, earlier


def _text(message: ChatMessage, n: int) -> str:
    """A message's text: its content, or its text parts; any other part is refused (it
    would reach the agent as nothing)."""
    if message.content is None or isinstance(message.content, str):
        return message.content or ""
    for k, part in enumerate(message.content):
        if part.type != "text":
            raise invalid(
                f"messages.{n}.content.{k}.type",
                f"is '{part.type}': only text reaches an agent through this endpoint",
                "Send the text; give an agent files through its tools.",
            )
    return "".join(part.text or "" for part in message.content)
