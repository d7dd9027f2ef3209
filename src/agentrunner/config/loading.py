"""``Config``, the resolved project configuration, and finding and loading it: each section read
by its own class, the sections the file must not have refused first."""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from agentrunner.config.approval import Approval
from agentrunner.config.attachments import Attachments
from agentrunner.config.guards import GuardSettings
from agentrunner.config.providers import (
    BUILTIN_PROVIDERS,
    Aliases,
    Models,
    ProviderConfig,
    Providers,
)
from agentrunner.config.registry import ConfigExtensionRegistry, default_extensions
from agentrunner.config.retention import Retention
from agentrunner.config.schedules import Schedule, Schedules
from agentrunner.config.sections import (
    DEFAULT_HISTORY_TOKENS,
    RESERVED_KEYS,
    SECTIONS,
    AgentModels,
    Compaction,
    Company,
    Database,
    Defaults,
    Embeddings,
    ExtensionModules,
    Journal,
    Persona,
    Project,
    Security,
)
from agentrunner.config.serving import (
    DEFAULT_MAX_QUEUE,
    Cache,
    ChannelConfig,
    Channels,
    Server,
    Workers,
)
from agentrunner.config.source import CONFIG_FILE, Source, Table, line_of
from agentrunner.config.spending import Budgets, PriceOverride, Prices
from agentrunner.config.telemetry import Telemetry
from agentrunner.core.attachments import AttachmentLimits
from agentrunner.core.paths import display_path
from agentrunner.errors import AgentRunnerError, ErrorCode

if TYPE_CHECKING:
    from agentrunner.core.model_settings import ModelSettings

__all__ = ["Config", "find_config_file", "load_config"]


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


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
    persona_overrides: Mapping[str, str] = field(default_factory=_empty)
    extension_modules: tuple[str, ...] = ()  # [extensions] modules
    title_model: str | None = None
    database_url: str | None = None
    database_pool_size: int | None = None  # [database] pool_size: None, the process's own
    database_pooled: bool = False  # [database] pooled: the URL is a transaction pooler's
    database_listen_url: str | None = None  # [database] listen_url: LISTEN's own session
    providers: Mapping[str, ProviderConfig] = field(default_factory=_empty)
    aliases: Mapping[str, str] = field(default_factory=_empty)
    budgets: Budgets = field(default_factory=Budgets)
    prices: Mapping[str, PriceOverride] = field(default_factory=_empty)
    channels: Mapping[str, ChannelConfig] = field(default_factory=_empty)
    # [schedules.NAME]: agents that run on their own (an agent file's schedule: is its own)
    schedules: Mapping[str, Schedule] = field(default_factory=_empty)
    # [agents.NAME] model: an agent's model when its file names none (its own wins)
    agent_models: Mapping[str, str] = field(default_factory=_empty)
    agent_model_lines: Mapping[str, int | None] = field(default_factory=_empty)
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
    embedding_model: str | None = None  # [embeddings] model: None, nothing is embedded
    # [models."provider:model"] context_window: what the registry and genai-prices say, overridden
    context_windows: Mapping[str, int] = field(default_factory=_empty)
    # [models."provider:model"] api: the kind a model of an OpenAI provider is spoken to in
    model_kinds: Mapping[str, str] = field(default_factory=_empty)
    # [models."provider:model"] input: what a model takes (text, image, pdf), over its family's
    model_inputs: Mapping[str, frozenset[str]] = field(default_factory=_empty)
    compaction: bool = True  # [compaction] enabled: summarize a thread that outgrew the window
    compaction_model: str | None = None  # [compaction] model; None: the agent's own
    # [compaction] history_tokens: the most tokens of its thread's history a request carries
    history_tokens: int = DEFAULT_HISTORY_TOKENS
    telemetry: Telemetry = field(default_factory=Telemetry)
    # [security] secret_env: variables whose values are secrets, cut wherever provider keys are
    secret_env: tuple[str, ...] = ()
    # [approval]: which tools need a person's yes, every agent's (its file's approval: over it)
    approval: Approval | None = None
    # [guards]: the built-in guards turned on for every agent (write_paths)
    guards: GuardSettings = field(default_factory=GuardSettings)
    # [attachments]: how large a file given with a message, and a message's files, may be
    attachments: AttachmentLimits = field(default_factory=AttachmentLimits)
    # [retention]: how long a settled run's rows are kept (docs/retention.md)
    retention: Retention = field(default_factory=Retention)
    extensions: Mapping[str, Mapping[str, Any]] = field(default_factory=_empty)
    unknown: Mapping[str, Any] = field(default_factory=_empty)
    raw: Mapping[str, Any] = field(default_factory=_empty)
    text: str = field(default="", repr=False, compare=False)  # the file as read: for its lines

    @property
    def file(self) -> str:
        """The config file as errors name it."""
        return display_path(self.path) if self.path else CONFIG_FILE

    def line_of(self, section: str, *keys: str) -> int | None:
        """The line of ``[section] key`` (or of a named table's key: ``"providers", "local",
        "kind"``) in the file (1-based), for an error about a value that is found wrong only
        once it is used; None if it is not written there."""
        return line_of(self.text, (section, *keys))

    def pool_size(self, worker: int | bool | None = None) -> int | None:
        """The most connections a process's store pool opens on PostgreSQL: ``[database]
        pool_size``; else, for a worker (``worker``: its concurrency, True: ``[workers]``'),
        half its concurrency and at least 2 — at concurrency 4, 2 served 40 runs of 200 ms as
        fast as 16, with 3 connections in all (its listener the third) instead of 6 —; else
        None, the driver's 16."""
        if self.database_pool_size is not None:
            return self.database_pool_size
        if worker is None or worker is False:
            return None
        concurrency = self.worker_concurrency if worker is True else int(worker)
        return max(2, (concurrency + 1) // 2)

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
    gives the defaults rooted at ``start``. Raises ``invalid_specification`` naming the file,
    and the section, key and line of the value (``details["config_key"]``), for a bad file.
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
    source = Source(display_path(path) if path else None, text)
    return _build(raw, source, path, root, env, extensions or default_extensions)


def _check_sections(
    raw: Mapping[str, Any], source: Source, extensions: ConfigExtensionRegistry
) -> None:
    """Each of agentrunner's sections a table of the keys it takes; no misspelt section."""
    for section in SECTIONS:
        value = raw.get(section.NAME, {})
        if not isinstance(value, dict):
            raise source.error((section.NAME,), f"[{section.NAME}] must be a table")
        if section.KEYS:
            source.table(section.NAME, value).check_keys(section.KEYS)
    for name in raw:
        # An extension's own section (or one kept for a tool of the person's) is left alone; a
        # misspelt section of ours is not, or `[budgts]` would quietly turn the limits off.
        if name in RESERVED_KEYS or name in extensions:
            continue
        near = difflib.get_close_matches(str(name), sorted(RESERVED_KEYS), n=1, cutoff=0.75)
        if near:
            raise source.error(
                (str(name),),
                f"unknown section '[{name}]' (did you mean '[{near[0]}]'?)",
                f"agentrunner's sections: {', '.join(sorted(s.NAME for s in SECTIONS))}.",
            )


def _build(
    raw: dict[str, Any],
    source: Source,
    path: Path | None,
    root: Path,
    env: Mapping[str, str],
    extensions: ConfigExtensionRegistry,
) -> Config:
    _check_sections(raw, source, extensions)

    def table(name: str) -> Table:
        return source.table(name, raw.get(name, {}))

    providers = Providers.read(table("providers")).by_name
    database = Database.read(table("database"), env)
    project = Project.read(table("project"), env, root)
    cache = Cache.read(table("cache"))
    defaults = Defaults.read(table("defaults"), env)
    persona = Persona.read(table("persona"), defaults.persona)
    modules = ExtensionModules.read(table("extensions"))
    budgets = Budgets.read(table("budgets"))
    prices = Prices.read(table("prices"))
    channels = Channels.read(table("channels"))
    schedules = Schedules.read(table("schedules"))
    agent_models = AgentModels.read(table("agents"))
    workers = Workers.read(table("workers"))
    server = Server.read(table("server"))
    company, journal = Company.read(table("company")), Journal.read(table("journal"))
    models = Models.read(table("models"), {**BUILTIN_PROVIDERS, **providers})
    compaction = Compaction.read(table("compaction"))
    telemetry = Telemetry.read(table("telemetry"), env)
    security = Security.read(table("security"))
    return Config(
        root=root,
        path=path,
        agents_dir=project.agents_dir,
        state_dir=project.state_dir,
        default_model=defaults.model,
        model_settings=defaults.model_settings,
        default_persona=persona.preset,
        persona_overrides=persona.overrides,
        extension_modules=modules.modules,
        title_model=defaults.title_model,
        database_url=database.url,
        database_pool_size=database.pool_size,
        database_pooled=database.pooled,
        database_listen_url=database.listen_url,
        providers=providers,
        aliases=Aliases.read(table("aliases")).by_name,
        budgets=budgets,
        prices=prices.by_model,
        channels=channels.by_name,
        schedules=schedules.by_name,
        agent_models=agent_models.by_agent,
        agent_model_lines=agent_models.lines,
        person=defaults.person,
        chain_depth=defaults.chain_depth,
        lease_s=workers.lease_s,
        worker_concurrency=workers.concurrency,
        max_queue=workers.max_queue,
        allowed_hosts=server.allowed_hosts,
        cache_ttl_s=cache.ttl_s,
        cache_backend=cache.backend,
        cache_max_bytes=cache.max_bytes,
        company_root=company.root,
        journal_model=journal.model,
        embedding_model=Embeddings.read(table("embeddings")).model,
        context_windows=models.context_windows,
        model_kinds=models.kinds,
        model_inputs=models.inputs,
        compaction=compaction.enabled,
        compaction_model=compaction.model,
        history_tokens=compaction.history_tokens,
        telemetry=telemetry,
        secret_env=security.secret_env,
        approval=Approval.read(table("approval")),
        guards=GuardSettings.read(table("guards")),
        attachments=Attachments.read(table("attachments")),
        retention=Retention.read(table("retention")),
        extensions=MappingProxyType(extensions.resolve(raw, source.file, source.text)),
        unknown=MappingProxyType(
            {k: v for k, v in raw.items() if k not in RESERVED_KEYS and k not in extensions}
        ),
        raw=MappingProxyType(raw),
        text=source.text,
    )
