"""The project's own sections — ``[project]``, ``[defaults]``, ``[persona]``, ``[extensions]``,
``[database]``, ``[security]``, ``[company]``, ``[journal]``, ``[compaction]`` — each a typed
class that reads and checks its table; and ``SECTIONS``, every section agentrunner owns."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from agentrunner.config.approval import Approval
from agentrunner.config.attachments import Attachments
from agentrunner.config.guards import GuardSettings
from agentrunner.config.providers import Aliases, Models, Providers
from agentrunner.config.retention import Retention
from agentrunner.config.schedules import Schedules
from agentrunner.config.serving import Cache, Channels, Server, Workers
from agentrunner.config.source import Table
from agentrunner.config.spending import Budgets, Prices
from agentrunner.config.telemetry import Telemetry
from agentrunner.config.values import count, flag, holds_password, name, optional_name, positive

if TYPE_CHECKING:
    from agentrunner.core.model_settings import ModelSettings

__all__ = [
    "DEFAULT_HISTORY_TOKENS",
    "MIN_HISTORY_TOKENS",
    "RESERVED_KEYS",
    "SECTIONS",
    "WHOLE_WINDOW",
    "AgentModels",
    "Compaction",
    "Company",
    "Database",
    "Defaults",
    "Embeddings",
    "ExtensionModules",
    "Journal",
    "Persona",
    "Project",
    "Security",
]

# History below this is a typo, and leaves no room for a summary and a turn after it.
MIN_HISTORY_TOKENS = 1024
# [compaction] history_tokens by default: a request carries at most this much of its thread's
# history, so a long thread's requests cost alike however long it grows (docs/engine.md#history)
DEFAULT_HISTORY_TOKENS = 32_000
WHOLE_WINDOW = 2**62  # history_tokens = "window": what the context window has room for
_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*)?")
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class Project:
    """``[project]``: where the agent files and the runtime's state are, resolved against the
    project directory (``AGENTRUNNER_AGENTS_DIR`` over ``agents_dir``)."""

    NAME: ClassVar[str] = "project"
    KEYS: ClassVar[tuple[str, ...]] = ("agents_dir", "state_dir")

    agents_dir: Path
    state_dir: Path

    @classmethod
    def read(cls, table: Table, env: Mapping[str, str], root: Path) -> Project:
        agents_dir = env.get("AGENTRUNNER_AGENTS_DIR") or table.get("agents_dir", "agents")
        state_dir = table.get("state_dir", ".agentrunner")
        return cls((root / str(agents_dir)).resolve(), (root / str(state_dir)).resolve())


@dataclass(frozen=True, slots=True)
class Defaults:
    """``[defaults]``: what agents get when their files say nothing
    (``AGENTRUNNER_DEFAULT_MODEL`` over ``model``)."""

    NAME: ClassVar[str] = "defaults"
    KEYS: ClassVar[tuple[str, ...]] = (
        "model",
        "persona",
        "title_model",
        "person",
        "chain_depth",
        "model_settings",
    )

    model: str | None
    persona: str | None  # [persona] preset's older spelling
    title_model: str | None
    person: str
    chain_depth: int
    model_settings: ModelSettings | None

    @classmethod
    def read(cls, table: Table, env: Mapping[str, str]) -> Defaults:
        return cls(
            model=env.get("AGENTRUNNER_DEFAULT_MODEL") or table.get("model"),
            persona=_persona_name(table, "persona"),
            title_model=table.get("title_model"),
            person=str(table.get("person", "you")),
            chain_depth=count(table, "chain_depth", 3),
            model_settings=_model_settings(table),
        )


def _model_settings(table: Table) -> ModelSettings | None:
    """``[defaults] model_settings``, checked as an agent file's are (pydantic is imported only
    for a file that sets some)."""
    value = table.get("model_settings")
    if value is None:
        return None
    from agentrunner.core.model_settings import settings_problems

    settings, problems = settings_problems(value)
    if problems:
        key, message, hint = problems[0]
        raise table.source.error(
            (*table.path, "model_settings", *(key.split(".") if key else ())),
            f"'{table.name('model_settings')}{'.' + key if key else ''}' {message}",
            hint,
        )
    return settings


def _persona_name(table: Table, key: str) -> str | None:
    value = table.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise table.error(key, f"the persona must be a name, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Persona:
    """``[persona]``: every agent's tone (``preset``, or ``[defaults] persona``, its older
    spelling; not both, differing), and agents' own (``[persona.overrides]``)."""

    NAME: ClassVar[str] = "persona"
    KEYS: ClassVar[tuple[str, ...]] = ("preset", "overrides")

    preset: str
    overrides: Mapping[str, str]

    @classmethod
    def read(cls, table: Table, older: str | None) -> Persona:
        preset = _persona_name(table, "preset")
        if preset is not None and older is not None and preset != older:
            raise table.error(
                "preset",
                f"[persona] preset = {preset!r} and [defaults] persona = {older!r} disagree",
                "Keep [persona] preset and remove [defaults] persona (its older spelling).",
            )
        return cls(preset or older or "professional", MappingProxyType(_overrides(table)))


def _overrides(table: Table) -> dict[str, str]:
    overrides = table.get("overrides", {})
    wrong = (
        [k for k, v in overrides.items() if not isinstance(v, str) or not v]
        if isinstance(overrides, dict)
        else []
    )
    if not isinstance(overrides, dict) or wrong:
        raise table.source.error(
            (*table.path, "overrides", *(str(k) for k in wrong[:1])),
            "[persona.overrides] must map agent ids to persona names",
            'e.g. [persona.overrides] with cto = "concise"',
        )
    return {str(k): v for k, v in overrides.items()}


@dataclass(frozen=True, slots=True)
class ExtensionModules:
    """``[extensions] modules``: Python module names (``pkg.mod`` or ``pkg.mod:function``)
    whose ``register(extensions)`` is called."""

    NAME: ClassVar[str] = "extensions"
    KEYS: ClassVar[tuple[str, ...]] = ("modules",)

    modules: tuple[str, ...]

    @classmethod
    def read(cls, table: Table) -> ExtensionModules:
        value = table.get("modules", [])
        if not isinstance(value, list) or not all(
            isinstance(v, str) and _MODULE_NAME.fullmatch(v) for v in value
        ):
            raise table.error(
                "modules",
                "extensions.modules must be a list of Python module names",
                'e.g. modules = ["my_extension", "package.module:register"]',
            )
        return cls(tuple(value))


@dataclass(frozen=True, slots=True)
class Database:
    """``[database] url`` (``AGENTRUNNER_DATABASE_URL`` over it); ``None``: one SQLite file in
    the state directory. A password in the file's URL is refused."""

    NAME: ClassVar[str] = "database"
    KEYS: ClassVar[tuple[str, ...]] = ("url", "pool_size", "pooled", "listen_url")

    url: str | None
    # The most connections a process's pool opens on PostgreSQL (its listener is one more);
    # None: a worker's half its concurrency (at least 2), other processes' 16.
    pool_size: int | None = None
    # ``url`` is a transaction pooler's (PgBouncer's): no prepared statements, and LISTEN on
    # ``listen_url`` (AGENTRUNNER_DATABASE_LISTEN_URL over it), a session of PostgreSQL's own.
    pooled: bool = False
    listen_url: str | None = None

    @classmethod
    def read(cls, table: Table, env: Mapping[str, str]) -> Database:
        url = table.get("url")
        if url and holds_password(str(url)):
            raise table.error(
                "url",
                "database.url holds a password; secrets never go in agentrunner.toml",
                "Set AGENTRUNNER_DATABASE_URL in the environment instead.",
            )
        size = None
        if table.get("pool_size") is not None:
            size = positive(table, "pool_size", 1, "Leave it out for the default.")
        listen = table.get("listen_url")
        if listen is not None and (not isinstance(listen, str) or holds_password(listen)):
            raise table.error(
                "listen_url",
                "database.listen_url must be a URL without a password",
                "Set AGENTRUNNER_DATABASE_LISTEN_URL in the environment for one with a password.",
            )
        return cls(
            env.get("AGENTRUNNER_DATABASE_URL") or url,
            size,
            flag(table, "pooled", False),
            env.get("AGENTRUNNER_DATABASE_LISTEN_URL") or listen,
        )


@dataclass(frozen=True, slots=True)
class Security:
    """``[security] secret_env``: names of environment variables (never their values) whose
    values are secrets, cut wherever provider keys are."""

    NAME: ClassVar[str] = "security"
    KEYS: ClassVar[tuple[str, ...]] = ("secret_env",)

    secret_env: tuple[str, ...]

    @classmethod
    def read(cls, table: Table) -> Security:
        value = table.get("secret_env", [])
        hint = (
            'e.g. secret_env = ["VAULT_TOKEN", "GITHUB_TOKEN"]: the names only; the values stay '
            "in the environment"
        )
        if not isinstance(value, list):
            raise table.error(
                "secret_env",
                "security.secret_env must be a list of environment variable names",
                hint,
            )
        for variable in value:
            if not isinstance(variable, str) or not _VARIABLE_NAME.fullmatch(variable):
                raise table.error(
                    "secret_env",
                    f"security.secret_env: {variable!r} is not an environment variable name",
                    hint,
                )
        return cls(tuple(value))


@dataclass(frozen=True, slots=True)
class Company:
    """``[company] root``: the agent a company's work starts from."""

    NAME: ClassVar[str] = "company"
    KEYS: ClassVar[tuple[str, ...]] = ("root",)

    root: str

    @classmethod
    def read(cls, table: Table) -> Company:
        return cls(name(table, "root", "ceo"))


@dataclass(frozen=True, slots=True)
class Journal:
    """``[journal] model``: the model that writes a company's journal (``None``: the root's)."""

    NAME: ClassVar[str] = "journal"
    KEYS: ClassVar[tuple[str, ...]] = ("model",)

    model: str | None

    @classmethod
    def read(cls, table: Table) -> Journal:
        return cls(optional_name(table, "model"))


@dataclass(frozen=True, slots=True)
class Embeddings:
    """``[embeddings] model``: the model that embeds each settled run's messages, for the
    ``recall`` capability (``None``: nothing is embedded, and ``recall`` is refused)."""

    NAME: ClassVar[str] = "embeddings"
    KEYS: ClassVar[tuple[str, ...]] = ("model",)

    model: str | None

    @classmethod
    def read(cls, table: Table) -> Embeddings:
        return cls(optional_name(table, "model"))


@dataclass(frozen=True, slots=True)
class Compaction:
    """``[compaction]``: whether a thread that outgrew the window is summarized (``enabled``),
    by which model (``None``: the agent's own), and the most tokens of its history a request
    carries (``history_tokens``, or ``"window"``: what the context window has room for)."""

    NAME: ClassVar[str] = "compaction"
    KEYS: ClassVar[tuple[str, ...]] = ("enabled", "model", "history_tokens")

    enabled: bool
    model: str | None
    history_tokens: int

    @classmethod
    def read(cls, table: Table) -> Compaction:
        return cls(
            flag(table, "enabled", True), optional_name(table, "model"), _history_tokens(table)
        )


def _history_tokens(table: Table) -> int:
    value: Any = table.get("history_tokens")
    if value is None:
        return DEFAULT_HISTORY_TOKENS
    if value == "window":
        return WHOLE_WINDOW
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_HISTORY_TOKENS:
        raise table.error(
            "history_tokens",
            f"compaction.history_tokens must be a whole number of tokens, at least "
            f'{MIN_HISTORY_TOKENS}, or "window", got {value!r}',
            "The most tokens of a thread's history one request carries (default "
            f'{DEFAULT_HISTORY_TOKENS}); a thread that outgrows it is compacted. "window": what '
            "the model's context window has room for.",
        )
    return value


@dataclass(frozen=True, slots=True)
class AgentModels:
    """``[agents.NAME]``: what the project says of one agent — its ``model``, for an agent file
    that names none (the file's own ``model:`` wins; ``[defaults] model`` is for the rest)."""

    NAME: ClassVar[str] = "agents"
    KEYS: ClassVar[tuple[str, ...]] = ()  # a table of named tables, each checking its own
    AGENT_KEYS: ClassVar[tuple[str, ...]] = ("model",)

    by_agent: Mapping[str, str]
    lines: Mapping[str, int | None]  # where each is written, for a problem with it

    @classmethod
    def read(cls, table: Table) -> AgentModels:
        models: dict[str, str] = {}
        lines: dict[str, int | None] = {}
        for entry in table.entries('[agents.{name}] must be a table, e.g. model = "fast"'):
            entry.check_entry_keys(cls.AGENT_KEYS)
            agent = entry.path[-1]
            model = optional_name(entry, "model")
            if model is not None:
                models[agent] = model
                lines[agent] = entry.source.line_of(*entry.path, "model")
        return cls(MappingProxyType(models), MappingProxyType(lines))


class Section(Protocol):
    """What every section class says of itself: its name and the keys it takes (``()`` for a
    table of named tables, or of any names, whose entries are checked by the section)."""

    NAME: ClassVar[str]
    KEYS: ClassVar[tuple[str, ...]]


# agentrunner's sections, in the order their tables and keys are checked.
SECTIONS: tuple[type[Section], ...] = (
    Project,
    Defaults,
    AgentModels,
    Workers,
    Server,
    Cache,
    Embeddings,
    Channels,
    Database,
    Budgets,
    Providers,
    Aliases,
    Prices,
    Persona,
    ExtensionModules,
    Company,
    Journal,
    Models,
    Compaction,
    Telemetry,
    Security,
    Approval,
    GuardSettings,
    Attachments,
    Retention,
    Schedules,
)
# Seed 002 reserves these for agentrunner besides its own sections: an extension cannot own them.
RESERVED_KEYS: frozenset[str] = frozenset(s.NAME for s in SECTIONS) | {
    "company",
    "agents",
    "settings",
}
