"""``agentrunner.toml``: found by walking up from the working directory (like git).

Each section is a typed class that reads and checks its own table (as httpx's ``Timeout`` and
``Limits`` check their arguments), and every error about a value is located by its section and
key — ``details["config_key"]``, and the line where that key of that section is written:

    source      the file as read; ``Table``, ``line_of`` (the one line-finder), errors
    values      the kinds of value a key holds (a name, a count, dollars, a flag, ...)
    sections    [project] [defaults] [persona] [extensions] [database] [security] [company]
                [journal] [compaction]; ``SECTIONS``, every section agentrunner owns
    serving     [workers] [server] [cache] [channels.NAME]
    providers   [providers.NAME] [models."provider:model"] [aliases]
    spending    [budgets] [prices."provider:model"]
    telemetry   [telemetry], with the standard ``OTEL_*`` variables over it
    approval    [approval], and the reading of an agent file's ``approval:`` block
    guards      [guards], the built-in guards a project turns on (write_paths)
    attachments [attachments], how large files given with messages may be
    retention   [retention], how long a settled run's rows are kept
    registry    seed 002's config-extension registry
    loading     ``Config``, ``find_config_file``, ``load_config``

Environment variables override the file (``AGENTRUNNER_CONFIG``, ``AGENTRUNNER_DATABASE_URL``,
``AGENTRUNNER_AGENTS_DIR``, ``AGENTRUNNER_DEFAULT_MODEL``; for ``[telemetry]``
``AGENTRUNNER_TELEMETRY`` and the standard ``OTEL_*`` variables). Secrets never live in the file: a
provider names the environment variable that holds its key (``api_key_env``), and a key written
into the file is rejected.

Seed 002's config-extension registry lets other modules own a top-level section: reserved and
duplicate keys are rejected, partial values are shallow-merged with the extension's defaults, and
unknown top-level sections are preserved through load/save.
"""

from agentrunner.config.loading import Config, find_config_file, load_config
from agentrunner.config.providers import (
    BUILTIN_PROVIDERS,
    MIN_CONTEXT_WINDOW,
    OPENAI_APIS,
    OPENAI_KINDS,
    PROVIDER_KINDS,
    ProviderConfig,
)
from agentrunner.config.registry import (
    ConfigExtension,
    ConfigExtensionRegistry,
    default_extensions,
    register_config_extension,
)
from agentrunner.config.schedules import Schedule
from agentrunner.config.sections import (
    DEFAULT_HISTORY_TOKENS,
    MIN_HISTORY_TOKENS,
    RESERVED_KEYS,
    WHOLE_WINDOW,
)
from agentrunner.config.serving import DEFAULT_MAX_QUEUE, ChannelConfig
from agentrunner.config.source import CONFIG_FILE
from agentrunner.config.spending import Budgets, PriceOverride
from agentrunner.config.telemetry import Telemetry

__all__ = [
    "BUILTIN_PROVIDERS",
    "CONFIG_FILE",
    "DEFAULT_HISTORY_TOKENS",
    "DEFAULT_MAX_QUEUE",
    "MIN_CONTEXT_WINDOW",
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
    "Schedule",
    "Telemetry",
    "default_extensions",
    "find_config_file",
    "load_config",
    "register_config_extension",
]
