"""``agentrunner.toml``: found by walking up from the working directory (like git).

Environment variables override the file (``AGENTRUNNER_CONFIG``, ``AGENTRUNNER_DATABASE_URL``,
``AGENTRUNNER_AGENTS_DIR``, ``AGENTRUNNER_DEFAULT_MODEL``; for ``[telemetry]``
``AGENTRUNNER_TELEMETRY`` and the standard ``OTEL_*`` variables). Secrets never live in the file: a
provider names the environment variable that holds its key (``api_key_env``), and a key written
into the file is rejected.

Seed 002's config-extension registry lets other modules own a top-level section: reserved and
duplicate keys are rejected, partial values are shallow-merged with the extension's defaults, and
unknown top-level sections are preserved through load/save.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from agentrunner._paths import display_path
from agentrunner.errors import AgentRunnerError, ErrorCode

if TYPE_CHECKING:
    from agentrunner.model_settings import ModelSettings

__all__ = [
    "BUILTIN_PROVIDERS",
    "CONFIG_FILE",
    "DEFAULT_MAX_QUEUE",
    "MIN_HISTORY_TOKENS",
    "OPENAI_APIS",
    "OPENAI_KINDS",
    "PROVIDER_KINDS",
    "RESERVED_KEYS",
    "WHOLE_WINDOW",
    "Budgets",
    "ChannelConfig",
    "Config",
    "ConfigExtension",
    "ConfigExtensionRegistry",
    "PriceOverride",
    "ProviderConfig",
    "Telemetry",
    "default_extensions",
    "find_config_file",
    "load_config",
    "register_config_extension",
]

CONFIG_FILE = "agentrunner.toml"
PROVIDER_KINDS = ("openai", "openai-responses", "anthropic", "test")
# OpenAI's two APIs: `api = "chat"` (Chat Completions) or `"responses"` (the Responses API), in a
# [providers.NAME] table or for one model in [models."provider:model"], is the provider's kind.
OPENAI_APIS: Mapping[str, str] = MappingProxyType(
    {"chat": "openai", "responses": "openai-responses"}
)
OPENAI_KINDS = ("openai", "openai-responses")

_SECTION_KEYS: dict[str, tuple[str, ...]] = {
    "project": ("agents_dir", "state_dir"),
    "defaults": ("model", "persona", "title_model", "person", "chain_depth", "model_settings"),
    "workers": ("lease_s", "concurrency", "max_queue"),
    "server": ("allowed_hosts",),
    "cache": ("backend", "ttl_s", "max_mb"),
    "channels": (),
    "database": ("url",),
    "budgets": ("per_run_usd", "per_agent_daily_usd", "global_daily_usd", "allow_unpriced"),
    "providers": (),
    "aliases": (),
    "prices": (),
    "persona": ("preset", "overrides"),
    "extensions": ("modules",),
    "company": ("root",),
    "journal": ("model",),
    "models": (),
    "compaction": ("enabled", "model", "history_tokens"),
    "telemetry": ("enabled", "capture_content", "service_name", "endpoint", "metrics"),
    "security": ("secret_env",),
}
# Seed 002 reserves these for agentrunner besides its own sections: an extension cannot own them.
RESERVED_KEYS: frozenset[str] = frozenset(_SECTION_KEYS) | {"company", "agents", "settings"}
_PROVIDER_KEYS = (
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
_MODEL_KEYS = ("context_window", "api")
# A model's context window below this is a typo (a number of kilo-tokens written as tokens): the
# smallest models in use take 2,048.
MIN_CONTEXT_WINDOW = 1024
# History below this is a typo too, and leaves no room for a summary and a turn after it.
MIN_HISTORY_TOKENS = 1024
# [compaction] history_tokens by default: a request carries at most this much of its thread's
# history, so a long thread's requests cost alike however long it grows (docs/engine.md#history)
DEFAULT_HISTORY_TOKENS = 32_000
WHOLE_WINDOW = 2**62  # history_tokens = "window": what the context window has room for
_PRICE_KEYS = ("input_per_mtok", "output_per_mtok", "cache_read_per_mtok", "cache_write_per_mtok")
_SECRET_KEYS = ("api_key", "key", "token", "secret", "password")
_PASSWORD_IN_URL = re.compile(r"://[^/@:]+:[^/@]+@")
# A host name, an IPv4 address, or an IPv6 address in brackets (as a Host header writes it).
_HOST_NAME = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?|\[[0-9a-f:.]+\]")
DEFAULT_MAX_QUEUE = 1000
_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*)?")
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    """A model provider: its wire protocol (``kind``), endpoint and the variable holding its key."""

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
        "test": ProviderConfig("test", "test"),
    }
)


@dataclass(frozen=True, slots=True)
class Budgets:
    """Spending limits in US dollars (DESIGN decision 5); ``None`` means no limit.
    ``allow_unpriced``: a model with no known price may run under them, its cost uncounted
    (else such a run is refused: ``price_unknown``)."""

    per_run_usd: float | None = None
    per_agent_daily_usd: float | None = None
    global_daily_usd: float | None = None
    allow_unpriced: bool = False

    @property
    def daily(self) -> bool:
        """Whether a daily limit is set (an agent's, everyone's)."""
        return self.per_agent_daily_usd is not None or self.global_daily_usd is not None


@dataclass(frozen=True, slots=True)
class PriceOverride:
    """A model's price in US dollars per million tokens, overriding genai-prices."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0
    cache_read_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None


@dataclass(frozen=True, slots=True)
class Telemetry:
    """``[telemetry]`` with the standard ``OTEL_*`` variables applied: traces, and metrics
    unless ``metrics`` is off, sent over OTLP (HTTP, protobuf) when ``enabled``. Headers, such
    as a receiver's API key, come only from ``OTEL_EXPORTER_OTLP_HEADERS``, which the
    exporters read themselves."""

    enabled: bool = False
    capture_content: bool = False  # prompts, replies, tool arguments and results on spans
    service_name: str = "agentrunner"
    endpoint: str = "http://localhost:4318"  # the receiver's OTLP/HTTP base URL
    traces_endpoint: str | None = None  # OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: used as it is
    metrics: bool = True  # off for a receiver that takes only traces (Phoenix, Jaeger)
    metrics_endpoint: str | None = None  # OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: used as it is
    metric_interval_ms: int = 60_000  # OTEL_METRIC_EXPORT_INTERVAL: between two exports

    @property
    def traces_url(self) -> str:
        """Where spans are posted: the traces endpoint, or the base URL's ``/v1/traces``."""
        return self.traces_endpoint or self.endpoint.rstrip("/") + "/v1/traces"

    @property
    def metrics_url(self) -> str:
        """Where metrics are posted: the metrics endpoint, or the base URL's ``/v1/metrics``."""
        return self.metrics_endpoint or self.endpoint.rstrip("/") + "/v1/metrics"


@dataclass(frozen=True, slots=True)
class ChannelConfig:
    """A channel declared in ``[channels.NAME]``: created (and its members added) on open."""

    name: str
    private: bool = False
    members: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ConfigExtension:
    key: str
    defaults: Mapping[str, Any]
    validate: Callable[[Mapping[str, Any]], None] | None = None


class ConfigExtensionRegistry:
    """Top-level config sections owned by other modules (seed 002's ``registerConfigExtension``)."""

    def __init__(self) -> None:
        self._extensions: dict[str, ConfigExtension] = {}

    def register(
        self,
        key: str,
        defaults: Mapping[str, Any],
        validate: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> ConfigExtension:
        if key in RESERVED_KEYS:
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"config extension key '{key}' is reserved by agentrunner",
                hint=f"Reserved: {', '.join(sorted(RESERVED_KEYS))}.",
            )
        if key in self._extensions:
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"config extension '{key}' is already registered",
                hint="Register each extension once (e.g. at import time of its module).",
            )
        ext = ConfigExtension(key, MappingProxyType(dict(defaults)), validate)
        self._extensions[key] = ext
        return ext

    def __contains__(self, key: object) -> bool:
        return key in self._extensions

    def __len__(self) -> int:
        return len(self._extensions)

    def resolve(self, raw: Mapping[str, Any], file: str | None) -> dict[str, Mapping[str, Any]]:
        """Every registered section: the file's partial value shallow-merged over defaults."""
        out: dict[str, Mapping[str, Any]] = {}
        for key, ext in self._extensions.items():
            value = raw.get(key, {})
            if not isinstance(value, dict):
                raise _config_error(f"[{key}] must be a table", file)
            merged = {**ext.defaults, **value}
            if ext.validate is not None:
                try:
                    ext.validate(merged)
                except AgentRunnerError:
                    raise
                except Exception as exc:
                    raise _config_error(f"[{key}] is invalid: {exc}", file) from exc
            out[key] = MappingProxyType(merged)
        return out


default_extensions = ConfigExtensionRegistry()
register_config_extension = default_extensions.register


@dataclass(frozen=True, slots=True)
class Config:
    """The resolved project configuration. ``root`` is the project directory."""

    root: Path
    path: Path | None = None
    agents_dir: Path = Path("agents")
    state_dir: Path = Path(".agentrunner")
    default_model: str | None = None
    model_settings: ModelSettings | None = None  # [defaults] model_settings: every agent's
    default_persona: str = "professional"  # [persona] preset (or [defaults] persona)
    persona_overrides: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    extension_modules: tuple[str, ...] = ()  # [extensions] modules
    title_model: str | None = None
    database_url: str | None = None
    providers: Mapping[str, ProviderConfig] = field(default_factory=lambda: MappingProxyType({}))
    aliases: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    budgets: Budgets = Budgets()
    prices: Mapping[str, PriceOverride] = field(default_factory=lambda: MappingProxyType({}))
    channels: Mapping[str, ChannelConfig] = field(default_factory=lambda: MappingProxyType({}))
    person: str = "you"
    chain_depth: int = 3
    lease_s: float = 30.0
    worker_concurrency: int = 4
    max_queue: int = DEFAULT_MAX_QUEUE
    allowed_hosts: tuple[str, ...] = ()
    cache_ttl_s: float | None = None
    cache_max_bytes: int | None = None
    cache_backend: str = "file"
    company_root: str = "ceo"
    journal_model: str | None = None
    # [models."provider:model"] context_window: what the registry and genai-prices say, overridden
    context_windows: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    # [models."provider:model"] api: the kind a model of an OpenAI provider is spoken to in
    model_kinds: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    compaction: bool = True  # [compaction] enabled: summarize a thread that outgrew the window
    compaction_model: str | None = None  # [compaction] model; None: the agent's own
    # [compaction] history_tokens: the most tokens of its thread's history a request carries
    history_tokens: int = DEFAULT_HISTORY_TOKENS
    telemetry: Telemetry = Telemetry()
    # [security] secret_env: variables whose values are secrets, cut wherever provider keys are
    secret_env: tuple[str, ...] = ()
    extensions: Mapping[str, Mapping[str, Any]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    unknown: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    raw: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    text: str = field(default="", repr=False, compare=False)  # the file as read: for its lines

    @property
    def file(self) -> str:
        """The config file as errors name it."""
        return display_path(self.path) if self.path else CONFIG_FILE

    def line_of(self, section: str, key: str) -> int | None:
        """The line of ``[section] key`` in the file (1-based), for an error about a value that
        is found wrong only once it is used; None if it cannot be found."""
        return _key_line(self.text, section, key)

    @property
    def resolved_database_url(self) -> str:
        """The database URL; by default one SQLite file in the state directory."""
        return self.database_url or f"sqlite:///{self.state_dir / 'agentrunner.db'}"

    def with_extension(self, key: str, value: Mapping[str, Any]) -> Config:
        merged = {
            **self.extensions,
            key: MappingProxyType({**self.extensions.get(key, {}), **value}),
        }
        return replace(self, extensions=MappingProxyType(merged))

    def to_toml_dict(self) -> dict[str, Any]:
        """What ``save`` writes: the file as loaded, with extension sections as they are now."""
        data = dict(self.raw.items())
        for key, value in self.extensions.items():
            data[key] = dict(value)
        return data

    def save(self, path: Path | None = None) -> Path:
        """Write the config back (atomically); unknown sections survive the round trip."""
        import tomli_w

        target = path or self.path or self.root / CONFIG_FILE
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(tomli_w.dumps(self.to_toml_dict()), encoding="utf-8")
        tmp.replace(target)
        return target


def find_config_file(start: Path | None = None) -> Path | None:
    """The nearest ``agentrunner.toml`` at or above ``start`` (default: the working directory)."""
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / CONFIG_FILE
        if candidate.is_file():
            return candidate
    return None


def load_config(
    start: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    extensions: ConfigExtensionRegistry | None = None,
    required: bool = True,
) -> Config:
    """Find and load the project config.

    Raises ``runner_io`` outside a project (no ``agentrunner.toml`` at or above ``start``), so
    no command makes state in a directory that is not one; with ``required=False`` that case
    gives the defaults rooted at ``start``. Raises ``invalid_specification`` naming the file
    (and line where it can be found) for a bad file.
    """
    env = os.environ if env is None else env
    explicit = env.get("AGENTRUNNER_CONFIG")
    path = Path(explicit) if explicit else find_config_file(start)
    root = path.parent.resolve() if path else (start or Path.cwd()).resolve()
    if path is None and required:
        raise AgentRunnerError(
            ErrorCode.RUNNER_IO,
            f"not in an agentrunner project: no {CONFIG_FILE} in {root} or any directory above it",
            hint="Create a project with `agentrunner init [DIR]`, or cd into one "
            "(AGENTRUNNER_CONFIG may name a config file elsewhere).",
        )
    raw: dict[str, Any] = {}
    text = ""
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
            raw = tomllib.loads(text)
        except OSError as exc:
            raise AgentRunnerError(ErrorCode.RUNNER_IO, f"cannot read {path}: {exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise AgentRunnerError(
                ErrorCode.INVALID_SPECIFICATION,
                f"invalid TOML: {exc}",
                file=display_path(path),
                hint="Check the quoting and brackets on that line.",
            ) from exc
    return _build(raw, text, path, root, env, extensions or default_extensions)


def _build(
    raw: dict[str, Any],
    text: str,
    path: Path | None,
    root: Path,
    env: Mapping[str, str],
    extensions: ConfigExtensionRegistry,
) -> Config:
    file = display_path(path) if path else None

    def err(message: str, key: str | None = None, hint: str | None = None) -> AgentRunnerError:
        return _config_error(message, file, _line_of(text, key) if key else None, hint)

    for section, allowed in _SECTION_KEYS.items():
        value = raw.get(section, {})
        if not isinstance(value, dict):
            raise err(f"[{section}] must be a table", section)
        for key in value if allowed else ():
            if key not in allowed:
                near = difflib.get_close_matches(key, allowed, n=1)
                raise err(
                    f"unknown key '{section}.{key}'"
                    + (f" (did you mean '{section}.{near[0]}'?)" if near else ""),
                    key,
                    f"[{section}] accepts: {', '.join(allowed)}",
                )
    for section in raw:
        # An extension's own section (or one kept for a tool of the person's) is left alone; a
        # misspelt section of ours is not, or `[budgts]` would quietly turn the limits off.
        if section in RESERVED_KEYS or section in extensions:
            continue
        near = difflib.get_close_matches(str(section), sorted(RESERVED_KEYS), n=1, cutoff=0.75)
        if near:
            raise err(
                f"unknown section '[{section}]' (did you mean '[{near[0]}]'?)",
                str(section),
                f"agentrunner's sections: {', '.join(sorted(_SECTION_KEYS))}.",
            )
    project, defaults = raw.get("project", {}), raw.get("defaults", {})
    database, budgets = raw.get("database", {}), raw.get("budgets", {})
    providers = _providers(raw.get("providers", {}), err)

    db_url = env.get("AGENTRUNNER_DATABASE_URL") or database.get("url")
    if database.get("url") and _PASSWORD_IN_URL.search(str(database["url"])):
        raise err(
            "database.url holds a password; secrets never go in agentrunner.toml",
            "url",
            "Set AGENTRUNNER_DATABASE_URL in the environment instead.",
        )
    agents_dir = env.get("AGENTRUNNER_AGENTS_DIR") or project.get("agents_dir", "agents")
    state_dir = project.get("state_dir", ".agentrunner")
    cache = raw.get("cache", {})
    cache_ttl_s = _amount(cache.get("ttl_s"), "cache.ttl_s", "seconds", err)
    cache_max_mb = _amount(cache.get("max_mb"), "cache.max_mb", "megabytes", err)
    cache_backend = cache.get("backend", "file")
    if cache_backend not in ("file", "store"):
        raise err(
            f'cache.backend must be "file" or "store", got {cache_backend!r}',
            "backend",
            '"file" keeps results under the state directory; "store" in the database.',
        )
    return Config(
        root=root,
        path=path,
        agents_dir=(root / str(agents_dir)).resolve(),
        state_dir=(root / str(state_dir)).resolve(),
        default_model=env.get("AGENTRUNNER_DEFAULT_MODEL") or defaults.get("model"),
        model_settings=_model_settings(defaults.get("model_settings"), err),
        default_persona=_persona(raw.get("persona", {}), defaults, err),
        persona_overrides=MappingProxyType(_persona_overrides(raw.get("persona", {}), err)),
        extension_modules=_names(raw.get("extensions", {}).get("modules", []), err),
        title_model=defaults.get("title_model"),
        database_url=db_url,
        providers=MappingProxyType(providers),
        aliases=MappingProxyType({str(k): str(v) for k, v in raw.get("aliases", {}).items()}),
        budgets=_budgets(budgets, err),
        prices=MappingProxyType(_prices(raw.get("prices", {}), err)),
        channels=MappingProxyType(_channels(raw.get("channels", {}), err)),
        person=str(defaults.get("person", "you")),
        chain_depth=_count(defaults.get("chain_depth", 3), "defaults.chain_depth", err),
        lease_s=_amount(
            raw.get("workers", {}).get("lease_s"),
            "workers.lease_s",
            "seconds",
            err,
            "Leave it out for the default, 30 s.",
        )
        or 30.0,
        worker_concurrency=_count(
            raw.get("workers", {}).get("concurrency", 4), "workers.concurrency", err
        ),
        max_queue=_positive(
            raw.get("workers", {}).get("max_queue", DEFAULT_MAX_QUEUE), "workers.max_queue", err
        ),
        allowed_hosts=_hosts(raw.get("server", {}).get("allowed_hosts", []), err),
        cache_ttl_s=cache_ttl_s,
        cache_backend=cache_backend,
        cache_max_bytes=None if cache_max_mb is None else int(cache_max_mb * 1024 * 1024),
        company_root=_name(raw.get("company", {}).get("root", "ceo"), "company.root", err),
        journal_model=_optional_name(raw.get("journal", {}).get("model"), "journal.model", err),
        context_windows=MappingProxyType(_models(raw.get("models", {}), err)),
        model_kinds=MappingProxyType(
            _model_kinds(raw.get("models", {}), {**BUILTIN_PROVIDERS, **providers}, err)
        ),
        compaction=_flag(raw.get("compaction", {}), "enabled", True, "compaction", err),
        compaction_model=_optional_name(
            raw.get("compaction", {}).get("model"), "compaction.model", err
        ),
        history_tokens=_history_tokens(raw.get("compaction", {}).get("history_tokens"), err),
        telemetry=_telemetry(raw.get("telemetry", {}), env, err),
        secret_env=_variable_names(raw.get("security", {}).get("secret_env", []), err),
        extensions=MappingProxyType(extensions.resolve(raw, file)),
        unknown=MappingProxyType(
            {k: v for k, v in raw.items() if k not in RESERVED_KEYS and k not in extensions}
        ),
        raw=MappingProxyType(raw),
        text=text,
    )


_Err = Callable[..., AgentRunnerError]


def _providers(value: Mapping[str, Any], err: _Err) -> dict[str, ProviderConfig]:
    out: dict[str, ProviderConfig] = {}
    for name, table in value.items():
        if not isinstance(table, dict):
            raise err(f"[providers.{name}] must be a table", str(name))
        for key in table:
            if key in _SECRET_KEYS:
                raise err(
                    f"providers.{name}.{key}: secrets never go in agentrunner.toml",
                    key,
                    "Put the key in an environment variable and set "
                    f'api_key_env = "{name.upper()}_API_KEY".',
                )
            if key not in _PROVIDER_KEYS:
                near = difflib.get_close_matches(key, _PROVIDER_KEYS, n=1)
                raise err(
                    f"unknown key 'providers.{name}.{key}'"
                    + (f" (did you mean '{near[0]}'?)" if near else ""),
                    key,
                )
        # A built-in's table without an endpoint of its own changes only what it names.
        builtin = BUILTIN_PROVIDERS.get(str(name)) if "base_url" not in table else None
        kind = table.get("kind", builtin.kind if builtin else "openai")
        if kind not in PROVIDER_KINDS:
            raise err(
                f"providers.{name}.kind must be one of {', '.join(PROVIDER_KINDS)}, got {kind!r}"
                + _meant(kind, PROVIDER_KINDS),
                "kind",
            )
        if "api" in table:
            kind = _openai_kind(table["api"], kind, f"providers.{name}", err)
        if kind == "openai-responses" and table.get("api_version") is not None:
            raise err(
                f"providers.{name}: Azure OpenAI (api_version) is spoken to in Chat Completions "
                "only",
                "api_version",
                'Use kind = "openai" (api = "chat") for an Azure deployment.',
            )
        headers = table.get("headers", {})
        prompt_cache = table.get("prompt_cache")
        if prompt_cache is not None and not isinstance(prompt_cache, bool):
            raise err(
                f"providers.{name}.prompt_cache must be true or false, got {prompt_cache!r}",
                "prompt_cache",
                "false sends no prompt-cache hints (cache_control, prompt_cache_key).",
            )
        out[str(name)] = ProviderConfig(
            name=str(name),
            kind=kind,
            base_url=table.get("base_url", builtin.base_url if builtin else None),
            api_key_env=table.get("api_key_env", builtin.api_key_env if builtin else None),
            headers=MappingProxyType({str(k): str(v) for k, v in headers.items()}),
            timeout_s=float(table.get("timeout_s", 120.0)),
            api_version=table.get("api_version"),
            structured_output=_choice(
                table.get("structured_output", "native"), ("native", "prompted"), name, err
            ),
            prompt_cache=prompt_cache,
        )
    return out


_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")
_OTLP_HTTP = "http/protobuf"
_OTLP_ENDPOINT = "http://localhost:4318"  # OTLP/HTTP's own default


def _telemetry(table: Mapping[str, Any], env: Mapping[str, str], err: _Err) -> Telemetry:
    """``[telemetry]``, then the environment over it: ``AGENTRUNNER_TELEMETRY`` and
    ``OTEL_SDK_DISABLED`` (on or off), the OpenTelemetry SDK's ``OTEL_SERVICE_NAME``,
    ``OTEL_EXPORTER_OTLP_(TRACES_|METRICS_)ENDPOINT``, ``OTEL_METRICS_EXPORTER`` and
    ``OTEL_METRIC_EXPORT_INTERVAL``, and the GenAI conventions'
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``."""
    for key in ("enabled", "capture_content", "metrics"):
        if key in table and not isinstance(table[key], bool):
            raise err(f"telemetry.{key} must be true or false, got {table[key]!r}", key)
    endpoint = table.get("endpoint", _OTLP_ENDPOINT)
    if not isinstance(endpoint, str) or not re.match(r"https?://[^/\s]+", endpoint):
        raise err(
            f"telemetry.endpoint must be an http:// or https:// URL, got {endpoint!r}",
            "endpoint",
            'The receiver\'s OTLP/HTTP address, e.g. "http://localhost:4318" (Jaeger, a '
            'Collector) or "http://localhost:6006" (Phoenix); /v1/traces is added.',
        )
    if _PASSWORD_IN_URL.search(endpoint):
        raise err(
            "telemetry.endpoint holds a password; secrets never go in agentrunner.toml",
            "endpoint",
            "Give the receiver's credentials in OTEL_EXPORTER_OTLP_HEADERS instead.",
        )
    telemetry = Telemetry(
        enabled=_switch(env, "AGENTRUNNER_TELEMETRY", table.get("enabled", False)),
        capture_content=_switch(
            env,
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
            table.get("capture_content", False),
        ),
        service_name=env.get("OTEL_SERVICE_NAME")
        or _name(table.get("service_name", "agentrunner"), "telemetry.service_name", err),
        endpoint=env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or endpoint,
        traces_endpoint=env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or None,
        metrics=table.get("metrics", True),
        metrics_endpoint=env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or None,
    )
    if _switch(env, "OTEL_SDK_DISABLED", False):
        return replace(telemetry, enabled=False)
    if telemetry.enabled:  # the variables only telemetry that is on reads (other programs may)
        telemetry = replace(
            telemetry,
            metrics=_metrics_exporter(env, telemetry.metrics),
            metric_interval_ms=_export_interval(env),
        )
        # each signal's own variable wins over the general one, as in the SDK
        for signal in ("TRACES", "METRICS") if telemetry.metrics else ("TRACES",):
            named = [
                (variable, env[variable].strip().lower())
                for variable in (
                    f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL",
                    "OTEL_EXPORTER_OTLP_PROTOCOL",
                )
                if env.get(variable, "").strip()
            ]
            if named and named[0][1] != _OTLP_HTTP:
                variable, protocol = named[0]
                raise AgentRunnerError(
                    ErrorCode.VALIDATION,
                    f"{variable}={protocol}: agentrunner sends {signal.lower()} as OTLP over "
                    f"HTTP ({_OTLP_HTTP}) only",
                    hint=f"Unset {variable}, or set it to {_OTLP_HTTP}, and point the endpoint "
                    "at the receiver's OTLP/HTTP port (4318 for Jaeger and a Collector).",
                )
    return telemetry


def _metrics_exporter(env: Mapping[str, str], default: bool) -> bool:
    """``OTEL_METRICS_EXPORTER`` over ``[telemetry] metrics``: ``otlp`` sends metrics, ``none``
    does not; the SDK's other exporters are not set up here."""
    value = env.get("OTEL_METRICS_EXPORTER", "").strip().lower()
    if not value:
        return default
    if value in ("otlp", "none"):
        return value == "otlp"
    raise AgentRunnerError(
        ErrorCode.VALIDATION,
        f"OTEL_METRICS_EXPORTER={value}: agentrunner sends metrics over OTLP or not at all",
        hint="Set OTEL_METRICS_EXPORTER=otlp (a Collector can pass them on to Prometheus) or "
        "none, or unset it.",
    )


def _export_interval(env: Mapping[str, str]) -> int:
    """``OTEL_METRIC_EXPORT_INTERVAL``: milliseconds between two exports of the metrics."""
    value = env.get("OTEL_METRIC_EXPORT_INTERVAL", "").strip()
    if not value:
        return 60_000
    try:
        interval = int(value)
    except ValueError:
        interval = 0
    if interval <= 0:
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"OTEL_METRIC_EXPORT_INTERVAL must be a whole number of milliseconds above 0, "
            f"got {value!r}",
            hint="Set it to e.g. 60000 (a minute, the default), or unset it.",
        )
    return interval


def _switch(env: Mapping[str, str], variable: str, default: bool) -> bool:
    """An on/off environment variable over the file's value; anything else is an error."""
    value = env.get(variable, "")
    if not value.strip():  # set but empty reads as unset, as the OpenTelemetry SDK reads it
        return default
    if value.strip().lower() in _TRUE:
        return True
    if value.strip().lower() in _FALSE:
        return False
    raise AgentRunnerError(
        ErrorCode.VALIDATION,
        f"{variable} must be true or false, got {value!r}",
        hint=f"Set {variable}=true or {variable}=false, or unset it.",
    )


def _persona(persona: Mapping[str, Any], defaults: Mapping[str, Any], err: _Err) -> str:
    """``[persona] preset``, or its older spelling ``[defaults] persona``; not both, differing."""
    preset, older = persona.get("preset"), defaults.get("persona")
    for value, key in ((preset, "preset"), (older, "persona")):
        if value is not None and (not isinstance(value, str) or not value):
            raise err(f"the persona must be a name, got {value!r}", key)
    if preset is not None and older is not None and preset != older:
        raise err(
            f"[persona] preset = {preset!r} and [defaults] persona = {older!r} disagree",
            "preset",
            "Keep [persona] preset and remove [defaults] persona (its older spelling).",
        )
    return str(preset or older or "professional")


def _model_settings(value: Any, err: _Err) -> ModelSettings | None:
    """``[defaults] model_settings``, checked as an agent file's are (pydantic is imported only
    for a file that sets some)."""
    if value is None:
        return None
    from agentrunner.model_settings import settings_problems

    settings, problems = settings_problems(value)
    if problems:
        key, message, hint = problems[0]
        name = f"defaults.model_settings.{key}" if key else "defaults.model_settings"
        raise err(f"'{name}' {message}", key.split(".")[0] or "model_settings", hint)
    return settings


def _persona_overrides(persona: Mapping[str, Any], err: _Err) -> dict[str, str]:
    overrides = persona.get("overrides", {})
    if not isinstance(overrides, dict) or not all(
        isinstance(v, str) and v for v in overrides.values()
    ):
        raise err(
            "[persona.overrides] must map agent ids to persona names",
            "overrides",
            'e.g. [persona.overrides] with cto = "concise"',
        )
    return {str(k): v for k, v in overrides.items()}


def _names(value: Any, err: _Err) -> tuple[str, ...]:
    """``[extensions] modules``: Python module names (``pkg.mod`` or ``pkg.mod:function``)."""
    if not isinstance(value, list) or not all(
        isinstance(v, str) and _MODULE_NAME.fullmatch(v) for v in value
    ):
        raise err(
            "extensions.modules must be a list of Python module names",
            "modules",
            'e.g. modules = ["my_extension", "package.module:register"]',
        )
    return tuple(value)


def _variable_names(value: Any, err: _Err) -> tuple[str, ...]:
    """``[security] secret_env``: names of environment variables (never their values)."""
    hint = (
        'e.g. secret_env = ["VAULT_TOKEN", "GITHUB_TOKEN"]: the names only; the values stay in '
        "the environment"
    )
    if not isinstance(value, list):
        raise err(
            "security.secret_env must be a list of environment variable names", "secret_env", hint
        )
    for name in value:
        if not isinstance(name, str) or not _VARIABLE_NAME.fullmatch(name):
            raise err(
                f"security.secret_env: {name!r} is not an environment variable name",
                "secret_env",
                hint,
            )
    return tuple(value)


def _channels(value: Mapping[str, Any], err: _Err) -> dict[str, ChannelConfig]:
    out: dict[str, ChannelConfig] = {}
    for name, table in value.items():
        if not isinstance(table, dict):
            raise err(f"[channels.{name}] must be a table with members = [...]", str(name))
        for key in table:
            if key not in ("private", "members"):
                raise err(f"unknown key 'channels.{name}.{key}'", key, "Accepted: private, members")
        members = table.get("members", [])
        if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
            raise err(f"channels.{name}.members must be a list of names", "members")
        out[str(name)] = ChannelConfig(str(name), bool(table.get("private", False)), tuple(members))
    return out


def _name(value: Any, name: str, err: _Err) -> str:
    if not isinstance(value, str) or not value.strip():
        raise err(f"{name} must be a non-empty string, got {value!r}", name.rsplit(".", 1)[-1])
    return value.strip()


def _optional_name(value: Any, name: str, err: _Err) -> str | None:
    return None if value is None else _name(value, name, err)


def _count(value: Any, name: str, err: _Err) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise err(f"{name} must be a whole number, got {value!r}", name.rsplit(".", 1)[-1])
    return value


def _positive(value: Any, name: str, err: _Err) -> int:
    if _count(value, name, err) == 0:
        raise err(f"{name} must be at least 1, got 0", name.rsplit(".", 1)[-1])
    return int(value)


def _hosts(value: Any, err: _Err) -> tuple[str, ...]:
    """``[server] allowed_hosts``: names a server without a token answers as ``Host``."""
    if not isinstance(value, list) or not all(isinstance(h, str) for h in value):
        raise err("server.allowed_hosts must be a list of host names", "allowed_hosts")
    for host in value:
        if not _HOST_NAME.fullmatch(host.lower()):
            raise err(
                f"server.allowed_hosts: {host!r} is not a host name",
                "allowed_hosts",
                'Write names alone, e.g. "agents.internal" or "[fd00::1]": any port is accepted.',
            )
    return tuple(h.lower() for h in value)


def _choice(value: Any, choices: tuple[str, ...], name: str, err: _Err) -> str:
    if value not in choices:
        raise err(
            f"providers.{name}.structured_output must be one of {', '.join(choices)}, "
            f"got {value!r}",
            "structured_output",
        )
    return str(value)


def _prices(value: Mapping[str, Any], err: _Err) -> dict[str, PriceOverride]:
    out: dict[str, PriceOverride] = {}
    for model, table in value.items():
        if not isinstance(table, dict):
            raise err(f'[prices."{model}"] must be a table of per-million-token prices', str(model))
        for key in table:
            if key not in _PRICE_KEYS:
                raise err(
                    f"unknown key 'prices.{model}.{key}'",
                    key,
                    f"Accepted: {', '.join(_PRICE_KEYS)}",
                )
        out[str(model)] = PriceOverride(
            **{k: _usd(v, f"prices.{model}.{k}", err) for k, v in table.items()}
        )
    return out


def _models(value: Mapping[str, Any], err: _Err) -> dict[str, int]:
    """``[models."provider:model"]``: what agentrunner knows of a model, by its reference."""
    out: dict[str, int] = {}
    for model, table in value.items():
        if not isinstance(table, dict):
            raise err(f'[models."{model}"] must be a table, e.g. context_window = 8000', str(model))
        if ":" not in str(model):  # else it would name no model and be ignored
            raise err(
                f'[models."{model}"] must name a model as provider:model',
                str(model),
                'e.g. [models."openai:gpt-4.1-mini"] (the reference an agent file gives, not an '
                "alias).",
            )
        for key in table:
            if key not in _MODEL_KEYS:
                accepted = f"Accepted: {', '.join(_MODEL_KEYS)}"
                raise err(f"unknown key 'models.{model}.{key}'", key, accepted)
        window = table.get("context_window")
        if window is None:
            continue
        if isinstance(window, bool) or not isinstance(window, int) or window < MIN_CONTEXT_WINDOW:
            raise err(
                f"models.{model}.context_window must be a whole number of tokens, at least "
                f"{MIN_CONTEXT_WINDOW}, got {window!r}",
                "context_window",
                "The model's context window in tokens, as its provider states it (e.g. 128000).",
            )
        out[str(model)] = window
    return out


def _history_tokens(value: Any, err: _Err) -> int:
    """``[compaction] history_tokens``: the most tokens of a thread's history a request carries,
    or ``"window"``: what the model's context window has room for."""
    if value is None:
        return DEFAULT_HISTORY_TOKENS
    if value == "window":
        return WHOLE_WINDOW
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_HISTORY_TOKENS:
        raise err(
            f"compaction.history_tokens must be a whole number of tokens, at least "
            f'{MIN_HISTORY_TOKENS}, or "window", got {value!r}',
            "history_tokens",
            "The most tokens of a thread's history one request carries (default "
            f'{DEFAULT_HISTORY_TOKENS}); a thread that outgrows it is compacted. "window": what '
            "the model's context window has room for.",
        )
    return value


def _openai_kind(api: Any, kind: str, where: str, err: _Err) -> str:
    """The kind ``api`` makes a provider of ``kind``: OpenAI's providers only have a choice."""
    if api not in OPENAI_APIS:
        raise err(
            f"{where}.api must be one of {', '.join(OPENAI_APIS)}, got {api!r}"
            + _meant(api, OPENAI_APIS),
            "api",
            '"responses": OpenAI\'s Responses API; "chat": Chat Completions.',
        )
    if kind not in OPENAI_KINDS:
        raise err(
            f"{where}.api chooses between OpenAI's APIs; its provider's kind is {kind!r}",
            "api",
            f"api applies to providers of kind {' or '.join(OPENAI_KINDS)}.",
        )
    return OPENAI_APIS[api]


def _model_kinds(
    value: Mapping[str, Any], providers: Mapping[str, ProviderConfig], err: _Err
) -> dict[str, str]:
    """``[models."provider:model"] api``: the kind one model of an OpenAI provider takes."""
    out: dict[str, str] = {}
    for model, table in value.items():
        if not isinstance(table, dict) or "api" not in table:
            continue  # _models has said what is wrong with a table that is not one
        provider = providers.get(str(model).partition(":")[0])
        kind = provider.kind if provider is not None else "openai"
        out[str(model)] = _openai_kind(table["api"], kind, f'models."{model}"', err)
    return out


def _flag(table: Mapping[str, Any], key: str, default: bool, section: str, err: _Err) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise err(f"{section}.{key} must be true or false, got {value!r}", key)
    return value


def _budgets(table: Mapping[str, Any], err: _Err) -> Budgets:
    limits = {k: _usd(v, f"budgets.{k}", err) for k, v in table.items() if k != "allow_unpriced"}
    return Budgets(**limits, allow_unpriced=_flag(table, "allow_unpriced", False, "budgets", err))


def _usd(value: Any, name: str, err: _Err) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise err(
            f"{name} must be a non-negative number of dollars, got {value!r}",
            name.rsplit(".", 1)[-1],
        )
    return float(value)


def _amount(
    value: Any, name: str, unit: str, err: _Err, hint: str = "Leave it out for no limit."
) -> float | None:
    """An optional positive number of ``unit`` (absent: ``None``, no limit or the default)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise err(
            f"{name} must be a positive number of {unit}, got {value!r}",
            name.rsplit(".", 1)[-1],
            hint,
        )
    return float(value)


def _line_of(text: str, key: str) -> int | None:
    """Best-effort line of ``key = …`` or ``[….key]`` in the TOML text (tomllib gives none)."""
    pattern = re.compile(
        rf"^\s*(\[[^\]]*\b{re.escape(key)}\b[^\]]*\]|\"?{re.escape(key)}\"?\s*=)", re.M
    )
    match = pattern.search(text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def _key_line(text: str, section: str, key: str) -> int | None:
    """The line of ``key = …`` under ``[section]`` (or of ``section.key = …`` before any
    table, or of an inline ``section = {…}``)."""
    current: str | None = None
    key_pattern = re.compile(rf'^"?{re.escape(key)}"?\s*=')
    dotted = re.compile(rf"^{re.escape(section)}\s*\.\s*{re.escape(key)}\s*=")
    inline = re.compile(rf"^{re.escape(section)}\s*=\s*\{{")
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        header = re.match(r"^\[\s*([^\[\]]+?)\s*\]", stripped)
        if header:
            current = header.group(1).replace('"', "").replace(" ", "")
            continue
        found = (
            key_pattern.match(stripped)
            if current == section
            else current is None and (dotted.match(stripped) or inline.match(stripped))
        )
        if found:
            return number
    return None


def _config_error(
    message: str, file: str | None, line: int | None = None, hint: str | None = None
) -> AgentRunnerError:
    return AgentRunnerError(
        ErrorCode.INVALID_SPECIFICATION, message, hint=hint, file=file or CONFIG_FILE, line=line
    )


def _meant(value: Any, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for a misspelt choice, else nothing."""
    near = (
        difflib.get_close_matches(str(value), list(choices), n=1) if isinstance(value, str) else []
    )
    return f" (did you mean '{near[0]}'?)" if near else ""
