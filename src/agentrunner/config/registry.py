"""Seed 002's config-extension registry: top-level sections owned by other modules. Reserved and
duplicate keys are refused; a section's value in the file is shallow-merged over the extension's
defaults, then checked by the extension."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from agentrunner.config.sections import RESERVED_KEYS
from agentrunner.config.source import Source
from agentrunner.errors import AgentRunnerError, ErrorCode

__all__ = [
    "ConfigExtension",
    "ConfigExtensionRegistry",
    "default_extensions",
    "register_config_extension",
]


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

    def resolve(
        self, raw: Mapping[str, Any], file: str | None, text: str = ""
    ) -> dict[str, Mapping[str, Any]]:
        """Every registered section: the file's partial value shallow-merged over defaults. An
        error names the section, at its line in ``text`` (the file as read) where it is there."""
        source = Source(file, text)
        out: dict[str, Mapping[str, Any]] = {}
        for key, ext in self._extensions.items():
            value = raw.get(key, {})
            if not isinstance(value, dict):
                raise source.error((key,), f"[{key}] must be a table")
            merged = {**ext.defaults, **value}
            if ext.validate is not None:
                try:
                    ext.validate(merged)
                except AgentRunnerError:
                    raise
                except Exception as exc:
                    raise source.error((key,), f"[{key}] is invalid: {exc}") from exc
            out[key] = MappingProxyType(merged)
        return out


default_extensions = ConfigExtensionRegistry()
register_config_extension = default_extensions.register
