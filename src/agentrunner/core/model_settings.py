"""Model settings: what an agent file, ``[defaults]`` or one run asks of the model besides the
conversation — sampling (``temperature``, ``top_p``, ``seed``, ``stop``), the output cap, tool
choice, reasoning effort and extended thinking, and a per-provider passthrough (``extra``).

Checked here once, whatever they came through (types and ranges by pydantic; an unknown setting
named, with the one meant), and merged field by field: a run's over the agent's over the
project's. Provider-neutral: each wire adapter (``engine/wire_*``) maps them to its provider's
fields and names those its provider cannot take, which the turn leaves out with a warning.

pydantic is imported with this module, and this module only where settings are written, so a
project that sets none does not pay for it.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentrunner.core.inputs import TEXT_PATTERN
from agentrunner.core.paths import display_path
from agentrunner.errors import AgentRunnerError, ErrorCode

__all__ = [
    "EXTRA_RESERVED",
    "REASONING_EFFORTS",
    "SETTINGS",
    "TOOL_CHOICES",
    "ModelSettings",
    "Problem",
    "RunSettings",
    "SettingsFile",
    "merge_settings",
    "model_settings",
    "parse_assignments",
    "settings_problems",
    "tool_choice_problem",
    "unknown_providers",
]

SETTINGS: tuple[str, ...] = (
    "temperature",
    "top_p",
    "max_output_tokens",
    "stop",
    "seed",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning_effort",
    "thinking",
    "extra",
)
TOOL_CHOICES: tuple[str, ...] = ("auto", "required", "none")
REASONING_EFFORTS: tuple[str, ...] = ("none", "minimal", "low", "medium", "high", "xhigh")
MIN_THINKING_TOKENS = 1024  # Anthropic's floor for a thinking budget
# What agentrunner builds itself: an ``extra`` that replaced it would break the request.
EXTRA_RESERVED: tuple[str, ...] = (
    "model",
    "messages",
    "system",
    "tools",
    "stream",
    "stream_options",
)

# A seed: an integer every JSON reader holds exactly (JavaScript's and a double's, 2**53), so
# the schema's bounds mean the same read as numbers: int64's, 2**63 - 1 read as a double, is
# 2**63, which is past them (a schema-valid request the server refused). No seed needs more.
_SEED = {"ge": -(2**53), "le": 2**53}
_TOKENS = 2**31 - 1

# What each setting must be, in words, for an error that names it.
# What a whole number out of range is told besides.
_RANGES: dict[str, str] = {"seed": f" from {-(2**53)} to {2**53}"}
_EXPECTED: dict[str, str] = {
    "temperature": "a number from 0 to 2",
    "top_p": "a number from 0 to 1",
    "max_output_tokens": f"a positive integer (at most {_TOKENS})",
    "stop": "a string or a list of non-empty strings",
    "seed": "a whole number",
    "tool_choice": f"{', '.join(TOOL_CHOICES)} or the name of one of the agent's tools",
    "parallel_tool_calls": "true or false",
    "reasoning_effort": f"one of {', '.join(REASONING_EFFORTS)}",
    "thinking": f"a budget in tokens (at least {MIN_THINKING_TOKENS}) or 'adaptive'",
    "extra": "a mapping of provider names to the fields to add to their request bodies",
}


# What the schema (the HTTP API's) states of texts and of ``extra``, as of a run's ``input``:
# no NUL in a string, integers of 64 bits; ``extra``'s values are any JSON (the schema names
# the plain ones).
_TEXT = {"pattern": TEXT_PATTERN}
_EXTRA_SCHEMA: dict[str, Any] = {
    "propertyNames": _TEXT,
    "additionalProperties": {
        "type": "object",
        "propertyNames": {**_TEXT, "not": {"enum": list(EXTRA_RESERVED)}},
        "additionalProperties": {
            "anyOf": [
                {"type": "string", **_TEXT},
                {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1},
                {"type": "boolean"},
                {"type": "null"},
            ]
        },
    },
}


class ModelSettings(BaseModel):
    """Settings for the model requests of a run; ``None`` leaves a setting to the provider.

    ``extra`` maps a provider's name (``openai``, ``anthropic``, or one of ``[providers]``) to
    fields merged into that provider's request bodies, so a fallback to another provider is
    not sent fields it does not know."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(ge=0, le=1)] | None = None
    max_output_tokens: Annotated[int, Field(gt=0, le=_TOKENS)] | None = None
    stop: tuple[Annotated[str, Field(min_length=1, json_schema_extra=_TEXT)], ...] | None = None
    seed: Annotated[int, Field(**_SEED)] | None = None
    tool_choice: Annotated[str, Field(min_length=1, json_schema_extra=_TEXT)] | None = None
    parallel_tool_calls: bool | None = None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    thinking: (
        Annotated[int, Field(ge=MIN_THINKING_TOKENS, le=_TOKENS)] | Literal["adaptive"] | None
    ) = None
    extra: Annotated[dict[str, dict[str, Any]], Field(json_schema_extra=_EXTRA_SCHEMA)] | None = (
        None
    )

    @field_validator("max_output_tokens", "seed", "thinking", mode="before")
    @classmethod
    def _whole(cls, value: Any) -> Any:
        """``42.0`` is the integer 42, as JSON has it (a JSON Schema ``integer`` allows it)."""
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value

    @field_validator("stop", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        if isinstance(value, str):
            return (value,)
        return tuple(value) if isinstance(value, list) else value

    @property
    def forces_tool(self) -> bool:
        """Whether ``tool_choice`` makes the model call a tool (``required`` or a name)."""
        return self.tool_choice is not None and self.tool_choice not in ("auto", "none")

    def to_dict(self) -> dict[str, Any]:
        """The settings that are set, as JSON: how a queued run keeps them, and a cache key."""
        return self.model_dump(exclude_none=True, mode="json")

    def extra_for(self, provider: str) -> dict[str, Any]:
        """The fields ``extra`` adds to ``provider``'s request bodies."""
        return dict((self.extra or {}).get(provider) or {})


Problem = tuple[str, str, str | None]
"""A setting that is wrong: its dotted key under the settings, what is wrong, a hint."""


def settings_problems(raw: Any) -> tuple[ModelSettings | None, list[Problem]]:
    """``raw`` checked as settings: the settings that are right (the bad ones left out, so what
    can be checked of the rest still is, as ``agents validate`` does; ``None`` when ``raw`` is
    ``None`` or not a mapping) and every problem, each naming its setting."""
    if raw is None:
        return None, []
    if isinstance(raw, ModelSettings):
        return raw, []
    if not isinstance(raw, Mapping):
        return None, [("", f"must be a mapping of settings, got {raw!r}", _known())]
    try:
        settings = ModelSettings.model_validate(dict(raw))
    except ValidationError as exc:
        found = _problems(exc)
        bad = {key.split(".")[0] for key, _, _ in found}
        rest, _ = settings_problems({k: v for k, v in raw.items() if k not in bad})
        return rest, found
    problems: list[Problem] = [
        (f"extra.{provider}.{key}", f"is built by agentrunner; {_instead(key)}", None)
        for provider, fields in (settings.extra or {}).items()
        for key in fields
        if key in EXTRA_RESERVED
    ]
    if problems:
        extra = {
            provider: {k: v for k, v in fields.items() if k not in EXTRA_RESERVED}
            for provider, fields in (settings.extra or {}).items()
        }
        settings = settings.model_copy(update={"extra": extra})
    return settings, problems


def model_settings(
    raw: Any, *, where: str = "model_settings", code: ErrorCode = ErrorCode.VALIDATION
) -> ModelSettings | None:
    """``raw`` as settings, or its first problem raised as ``code`` (``validation`` for what
    a caller passed) naming ``where.<setting>``, with ``details["invalid"]`` the same name."""
    settings, problems = settings_problems(raw)
    if problems:
        key, message, hint = problems[0]
        name = f"{where}.{key}" if key else where
        raise AgentRunnerError(
            code, f"'{name}' {message}", hint=hint or _known(), details={"invalid": name}
        )
    return settings


def merge_settings(*layers: ModelSettings | None) -> ModelSettings | None:
    """The layers merged, the later over the earlier, setting by setting (``extra`` field by
    field for each provider); ``None`` when no layer sets anything."""
    values: dict[str, Any] = {}
    extra: dict[str, dict[str, Any]] = {}
    for layer in layers:
        if layer is None:
            continue
        for name in SETTINGS:
            value = getattr(layer, name)
            if value is None:
                continue
            if name == "extra":
                for provider, fields in value.items():
                    extra[provider] = {**extra.get(provider, {}), **fields}
            else:
                values[name] = value
    if extra:
        values["extra"] = extra
    return ModelSettings.model_validate(values) if values else None


def tool_choice_problem(settings: ModelSettings | None, tools: Iterable[str]) -> str | None:
    """What is wrong with ``tool_choice`` for a run offered ``tools``, or ``None``: a name must
    be one of them, and ``required`` needs at least one."""
    if settings is None or not settings.forces_tool:
        return None
    names = sorted(tools)
    choice = settings.tool_choice
    if choice == "required":
        return None if names else "is 'required', but the agent has no tools"
    if choice in names:
        return None
    near = difflib.get_close_matches(str(choice), names, n=1, cutoff=0.5)
    offered = f"its tools: {', '.join(names)}" if names else "it has no tools"
    return f"names '{choice}', which is not one of the agent's tools ({offered})" + (
        f"; did you mean '{near[0]}'?" if near else ""
    )


def unknown_providers(
    settings: ModelSettings | None, providers: Collection[str]
) -> list[tuple[str, str]]:
    """Each provider ``extra`` names that is not one of ``providers`` (the project's), with
    what is wrong: its fields would reach no request."""
    found = []
    for provider in (settings.extra if settings else None) or {}:
        if provider not in providers:
            near = difflib.get_close_matches(provider, list(providers), n=1)
            guess = f" (did you mean '{near[0]}'?)" if near else ""
            found.append(
                (provider, f"names provider '{provider}', which the project does not have{guess}")
            )
    return found


class SettingsFile(Protocol):
    """An agent file as far as its settings go (an ``AgentSpec``): what it set, and where."""

    @property
    def model_settings(self) -> ModelSettings | None: ...

    @property
    def path(self) -> Path | None: ...

    def line_of(self, key: str) -> int | None: ...


_TOOL_CHOICE_HINT = "Name one of the agent's tools, or auto, required (with tools) or none."


@dataclass(frozen=True, slots=True)
class RunSettings:
    """One run's settings: ``merged``, the run's own (``run``) over its agent file's
    (``agent``) over ``[defaults]``' (of ``config_file``), setting by setting. A setting that
    names what the run will not have is refused as an error of whoever set it: the caller's
    (``validation``), else the agent file's at its line, else the config file's
    (``invalid_specification``), with ``details["invalid"]`` naming it."""

    merged: ModelSettings
    run: ModelSettings | None
    agent: SettingsFile
    config_file: str

    @classmethod
    def of(
        cls,
        defaults: ModelSettings | None,
        agent: SettingsFile,
        run: ModelSettings | None,
        config_file: str,
    ) -> RunSettings | None:
        """The run's settings; ``None`` when no layer sets any."""
        merged = merge_settings(defaults, agent.model_settings, run)
        return None if merged is None else cls(merged, run, agent, config_file)

    @property
    def names_a_tool(self) -> bool:
        """Whether ``tool_choice`` names a tool (rather than ``auto``, ``required``, ``none``)."""
        return self.merged.forces_tool and self.merged.tool_choice != "required"

    def refuse_before_run(
        self,
        providers: Collection[str],
        tools: tuple[Collection[str], Collection[str]] | None,
    ) -> None:
        """Refuse, before the run writes anything, settings that name what it will not have:
        an ``extra`` for a provider the project lacks (its fields would reach no request,
        unsaid); a ``tool_choice`` naming none of the tools it is granted. ``tools``: the
        names it is granted, and those it is offered by name (which an error lists); None
        while not known (its MCP servers' tools are known once they run: ``for_tools``)."""
        for provider, problem in unknown_providers(self.merged, providers):
            hint = f"extra is keyed by provider: {', '.join(sorted(providers))}."
            raise self.error(f"extra.{provider}", problem, hint)
        if tools is None or not self.names_a_tool or self.merged.tool_choice in tools[0]:
            return
        refused = tool_choice_problem(self.merged, tools[1])
        if refused is not None:
            raise self.error("tool_choice", refused)

    def for_tools(self, tools: Iterable[str]) -> ModelSettings:
        """The settings for a run offered ``tools`` (its MCP servers' too, known only once
        they run): a ``tool_choice`` naming none of them is refused."""
        problem = tool_choice_problem(self.merged, tools)
        if problem is not None:
            raise self.error("tool_choice", problem)
        return self.merged

    def error(self, key: str, problem: str, hint: str = _TOOL_CHOICE_HINT) -> AgentRunnerError:
        """``problem`` of the setting at ``key`` (``tool_choice``, ``extra.openai``) as an
        error of whoever set it."""
        name, field = key.split(".")[0], f"model_settings.{key}"

        def sets(layer: ModelSettings | None) -> bool:
            if layer is None or getattr(layer, name) is None:
                return False
            return name != "extra" or key.split(".")[1] in (layer.extra or {})

        code, file, line = ErrorCode.VALIDATION, None, None  # the caller's
        if not sets(self.run):  # the file's, or else [defaults]'
            code = ErrorCode.INVALID_SPECIFICATION
            agent = self.agent
            if sets(agent.model_settings):
                if agent.path is not None:
                    file = display_path(agent.path)
                    line = agent.line_of(field) or agent.line_of(f"model_settings.{name}")
            else:
                file = self.config_file
        return AgentRunnerError(
            code,
            f"'model_settings.{name}' {problem}",
            hint=hint,
            file=file,
            line=line,
            details={"invalid": field},
        )


def parse_assignments(assignments: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs (``run --set``) as raw settings. A value is read as TOML
    (``0.2``, ``42``, ``false``, ``["END"]``, ``"text"``) and, where it is not TOML, as the
    text it is (``tool_choice=auto``); ``extra.PROVIDER.FIELD`` sets one field of ``extra``.
    Raises ``validation`` for a pair without ``=`` or an unknown key."""
    raw: dict[str, Any] = {}
    for pair in assignments:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"--set {pair!r}: expected KEY=VALUE",
                hint="e.g. --set temperature=0.2 --set tool_choice=auto",
                details={"invalid": "--set"},
            )
        path = key.split(".")
        if path[0] not in SETTINGS:
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"--set {key}: '{key}' {_unknown(key)}",
                hint=_known(),
                details={"invalid": "--set"},
            )
        if len(path) > 1 and (path[0] != "extra" or len(path) != 3 or not all(path)):
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"--set {key}: only extra takes a dotted key, as extra.PROVIDER.FIELD",
                hint="e.g. --set extra.anthropic.top_k=40",
                details={"invalid": "--set"},
            )
        value = _toml_value(text.strip())
        if path[0] == "extra":
            provider = raw.setdefault("extra", {}).setdefault(path[1], {})
            provider[path[2]] = value
        else:
            raw[key] = value
    return raw


def _toml_value(text: str) -> Any:
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text  # a bare word: the text itself


def _problems(exc: ValidationError) -> list[Problem]:
    """One problem per setting, in words of ours: pydantic reports a union (``thinking``) once
    for each of its members."""
    found: dict[str, Problem] = {}
    for error in exc.errors():
        loc = [str(part) for part in error["loc"]]
        name = loc[0] if loc else ""
        if name in found:
            continue
        if error["type"] == "extra_forbidden":
            found[name] = (name, _unknown(name), _known())
        elif name == "extra" and len(loc) > 1:
            found[name] = (
                ".".join(loc[:2]),
                f"must map field names to values, got {error['input']!r}",
                "e.g. extra: {anthropic: {top_k: 40}}",
            )
        else:
            expected = _EXPECTED[name]
            if error["type"] in ("greater_than_equal", "less_than_equal"):
                expected += _RANGES.get(name, "")
            found[name] = (name, f"must be {expected}, got {error['input']!r}", None)
    return list(found.values())


def _unknown(name: str) -> str:
    near = difflib.get_close_matches(name, SETTINGS, n=1, cutoff=0.5)
    return (
        f"is not a model setting (did you mean '{near[0]}'?)"
        if near
        else ("is not a model setting")
    )


def _instead(key: str) -> str:
    if key == "system":
        return "it is the agent's prompt"
    return "leave it out of extra"


def _known() -> str:
    return f"Model settings: {', '.join(SETTINGS)}."
