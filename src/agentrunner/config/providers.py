"""``[providers.NAME]``, ``[models."provider:model"]`` and ``[aliases]``: who serves models, in
which of its APIs, and what agentrunner knows of each model."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from agentrunner.config.source import Table, meant

__all__ = [
    "BUILTIN_PROVIDERS",
    "MIN_CONTEXT_WINDOW",
    "OPENAI_APIS",
    "OPENAI_KINDS",
    "PROVIDER_KINDS",
    "Aliases",
    "Models",
    "ProviderConfig",
    "Providers",
]

PROVIDER_KINDS = ("openai", "openai-responses", "anthropic", "local", "test")
# OpenAI's two APIs: `api = "chat"` (Chat Completions) or `"responses"` (the Responses API), in a
# [providers.NAME] table or for one model in [models."provider:model"], is the provider's kind.
OPENAI_APIS: Mapping[str, str] = MappingProxyType(
    {"chat": "openai", "responses": "openai-responses"}
)
OPENAI_KINDS = ("openai", "openai-responses")
_SECRET_KEYS = ("api_key", "key", "token", "secret", "password")
_STRUCTURED_OUTPUT = ("native", "prompted")
# A model's context window below this is a typo (a number of kilo-tokens written as tokens): the
# smallest models in use take 2,048.
MIN_CONTEXT_WINDOW = 1024


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    """A model provider: its wire protocol (``kind``), endpoint and the variable holding its key."""

    KEYS: ClassVar[tuple[str, ...]] = (
        "kind",
        "base_url",
        "api_key_env",
        "headers",
        "timeout_s",
        "api_version",
        "structured_output",
        "prompt_cache",
        "api",
    )

    name: str
    kind: str
    base_url: str | None = None
    api_key_env: str | None = None
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    timeout_s: float = 120.0
    api_version: str | None = None
    structured_output: str = "native"
    # Prompt-cache hints (Anthropic's cache_control breakpoints, OpenAI's prompt_cache_key):
    # None is the default, on for Anthropic's wire and for OpenAI itself, off for other
    # OpenAI-compatible servers (which may refuse a field they do not know).
    prompt_cache: bool | None = None

    @classmethod
    def read(cls, table: Table) -> ProviderConfig:
        """One ``[providers.NAME]`` table. A built-in provider's table without an endpoint of
        its own changes only what it names; a key written into it is refused."""
        name = table.path[-1]
        _check_provider_keys(table)
        builtin = BUILTIN_PROVIDERS.get(name) if "base_url" not in table else None
        kind = table.get("kind", builtin.kind if builtin else "openai")
        if kind not in PROVIDER_KINDS:
            raise table.error(
                "kind",
                f"{table.name('kind')} must be one of {', '.join(PROVIDER_KINDS)}, got {kind!r}"
                + meant(kind, PROVIDER_KINDS),
            )
        if "api" in table:
            kind = openai_kind(table, kind, table.name())
        if kind == "openai-responses" and table.get("api_version") is not None:
            raise table.error(
                "api_version",
                f"{table.name()}: Azure OpenAI (api_version) is spoken to in Chat Completions only",
                'Use kind = "openai" (api = "chat") for an Azure deployment.',
            )
        prompt_cache = table.get("prompt_cache")
        if prompt_cache is not None and not isinstance(prompt_cache, bool):
            raise table.error(
                "prompt_cache",
                f"{table.name('prompt_cache')} must be true or false, got {prompt_cache!r}",
                "false sends no prompt-cache hints (cache_control, prompt_cache_key).",
            )
        structured_output = table.get("structured_output", "native")
        if structured_output not in _STRUCTURED_OUTPUT:
            raise table.error(
                "structured_output",
                f"{table.name('structured_output')} must be one of "
                f"{', '.join(_STRUCTURED_OUTPUT)}, got {structured_output!r}",
            )
        headers = table.get("headers", {})
        return cls(
            name=name,
            kind=kind,
            base_url=table.get("base_url", builtin.base_url if builtin else None),
            api_key_env=table.get("api_key_env", builtin.api_key_env if builtin else None),
            headers=MappingProxyType({str(k): str(v) for k, v in headers.items()}),
            timeout_s=float(table.get("timeout_s", 120.0)),
            api_version=table.get("api_version"),
            structured_output=structured_output,
            prompt_cache=prompt_cache,
        )


def _check_provider_keys(table: Table) -> None:
    for key in table.values:
        if key in _SECRET_KEYS:
            raise table.error(
                key,
                f"{table.name(key)}: secrets never go in agentrunner.toml",
                "Put the key in an environment variable and set "
                f'api_key_env = "{table.path[-1].upper()}_API_KEY".',
            )
        if key not in ProviderConfig.KEYS:
            near = difflib.get_close_matches(key, ProviderConfig.KEYS, n=1)
            raise table.error(
                key,
                f"unknown key '{table.name(key)}'"
                + (f" (did you mean '{near[0]}'?)" if near else ""),
            )


# What agentrunner knows without a [providers.NAME] table. A table named after one of them that
# gives no base_url changes only what it names (`[providers.openai] api = "chat"`); one with a
# base_url is a provider of its own. OpenAI is spoken to in its Responses API (engine.md says
# why), every OpenAI-compatible server in Chat Completions, which they all serve.
BUILTIN_PROVIDERS: Mapping[str, ProviderConfig] = MappingProxyType(
    {
        "openai": ProviderConfig(
            "openai", "openai-responses", "https://api.openai.com/v1", "OPENAI_API_KEY"
        ),
        "anthropic": ProviderConfig(
            "anthropic", "anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY"
        ),
        "ollama": ProviderConfig("ollama", "openai", "http://127.0.0.1:11434/v1", None),
        "openrouter": ProviderConfig(
            "openrouter", "openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"
        ),
        "groq": ProviderConfig("groq", "openai", "https://api.groq.com/openai/v1", "GROQ_API_KEY"),
        "deepseek": ProviderConfig(
            "deepseek", "openai", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"
        ),
        "gemini": ProviderConfig(
            "gemini",
            "openai",
            "https://generativelanguage.googleapis.com/v1beta/openai",
            "GEMINI_API_KEY",
        ),
        "local": ProviderConfig("local", "local"),  # a GGUF model in-process (llama.cpp)
        "test": ProviderConfig("test", "test"),
    }
)


def openai_kind(table: Table, kind: str, where: str) -> str:
    """The kind the table's ``api`` makes a provider of ``kind``: OpenAI's providers alone have
    a choice."""
    api: Any = table.get("api")
    if api not in OPENAI_APIS:
        raise table.error(
            "api",
            f"{where}.api must be one of {', '.join(OPENAI_APIS)}, got {api!r}"
            + meant(api, OPENAI_APIS),
            '"responses": OpenAI\'s Responses API; "chat": Chat Completions.',
        )
    if kind not in OPENAI_KINDS:
        raise table.error(
            "api",
            f"{where}.api chooses between OpenAI's APIs; its provider's kind is {kind!r}",
            f"api applies to providers of kind {' or '.join(OPENAI_KINDS)}.",
        )
    return OPENAI_APIS[api]


@dataclass(frozen=True, slots=True)
class Providers:
    """``[providers]``: the file's providers by name (the built-ins are not among them)."""

    NAME: ClassVar[str] = "providers"
    KEYS: ClassVar[tuple[str, ...]] = ()  # a table of named tables, each checking its own

    by_name: Mapping[str, ProviderConfig]

    @classmethod
    def read(cls, table: Table) -> Providers:
        return cls(table.each("[providers.{name}] must be a table", ProviderConfig.read))


@dataclass(frozen=True, slots=True)
class Models:
    """``[models."provider:model"]``: what agentrunner knows of a model, by its reference —
    its context window (over what the registry and genai-prices say), and for a model of an
    OpenAI provider the kind (``api``) it is spoken to in."""

    NAME: ClassVar[str] = "models"
    KEYS: ClassVar[tuple[str, ...]] = ()  # a table of named tables, each checking its own
    MODEL_KEYS: ClassVar[tuple[str, ...]] = ("context_window", "api", "input")
    INPUTS: ClassVar[tuple[str, ...]] = ("text", "image", "pdf")

    context_windows: Mapping[str, int]
    kinds: Mapping[str, str]
    inputs: Mapping[str, frozenset[str]]

    @classmethod
    def read(cls, table: Table, providers: Mapping[str, ProviderConfig]) -> Models:
        """``providers``: every provider a model may name, the built-ins included."""
        windows: dict[str, int] = {}
        kinds: dict[str, str] = {}
        inputs: dict[str, frozenset[str]] = {}
        for entry in table.entries('[models."{name}"] must be a table, e.g. context_window = 8000'):
            model = entry.path[-1]
            if ":" not in model:  # else it would name no model and be ignored
                raise entry.error(
                    None,
                    f'[models."{model}"] must name a model as provider:model',
                    'e.g. [models."openai:gpt-4.1-mini"] (the reference an agent file gives, '
                    "not an alias).",
                )
            entry.check_entry_keys(cls.MODEL_KEYS)
            window = _context_window(entry)
            if window is not None:
                windows[model] = window
            if "api" in entry:
                provider = providers.get(model.partition(":")[0])
                kind = provider.kind if provider is not None else "openai"
                kinds[model] = openai_kind(entry, kind, f'models."{model}"')
            if "input" in entry:
                inputs[model] = _inputs(entry, cls.INPUTS)
        return cls(MappingProxyType(windows), MappingProxyType(kinds), MappingProxyType(inputs))


def _inputs(table: Table, known: tuple[str, ...]) -> frozenset[str]:
    given = table.get("input")
    if (
        not isinstance(given, list)
        or not all(isinstance(k, str) and k in known for k in given)
        or "text" not in given
    ):
        raise table.error(
            "input",
            f"{table.name('input')} must list what the model takes, among "
            f"{', '.join(known)} (text always), got {given!r}",
            'e.g. input = ["text", "image", "pdf"] for a model that reads images and PDFs.',
        )
    return frozenset(given)


def _context_window(table: Table) -> int | None:
    window = table.get("context_window")
    if window is None:
        return None
    if isinstance(window, bool) or not isinstance(window, int) or window < MIN_CONTEXT_WINDOW:
        raise table.error(
            "context_window",
            f"{table.name('context_window')} must be a whole number of tokens, at least "
            f"{MIN_CONTEXT_WINDOW}, got {window!r}",
            "The model's context window in tokens, as its provider states it (e.g. 128000).",
        )
    return window


@dataclass(frozen=True, slots=True)
class Aliases:
    """``[aliases]``: short names for model references (``fast = "openai:gpt-4.1-mini"``)."""

    NAME: ClassVar[str] = "aliases"
    KEYS: ClassVar[tuple[str, ...]] = ()  # any name

    by_name: Mapping[str, str]

    @classmethod
    def read(cls, table: Table) -> Aliases:
        return cls(MappingProxyType({str(k): str(v) for k, v in table.values.items()}))
