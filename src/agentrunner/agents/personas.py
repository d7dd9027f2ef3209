"""Personas (seed 002): the tone guidance appended to each agent's system prompt.

A persona is a built-in preset (``PERSONA_PRESETS``) or the project's own ``personas/NAME.md``
(whose text is the guidance; a file named like a preset replaces it). Which one an agent gets,
first match wins: ``[persona.overrides]`` for its id in ``agentrunner.toml``, the agent file's
``persona:``, ``[persona] preset`` (``[defaults] persona`` is the older spelling), then
``professional``. A preset or override naming no persona, and an override for an agent that
does not exist, are warnings (``warnings``): the agent runs without tone guidance rather than
the project refusing to start, as seed 002 says — but never silently.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from agentrunner.agents.spec import PERSONA_PRESETS, AgentSpec
from agentrunner.core.paths import display_path

__all__ = ["DEFAULT_PERSONA", "PERSONAS_DIR", "Personas"]

log = logging.getLogger("agentrunner.agents.personas")

DEFAULT_PERSONA = "professional"
PERSONAS_DIR = "personas"


@dataclass(frozen=True, slots=True)
class Personas:
    """Every persona by name, the project's choice and per-agent overrides."""

    texts: Mapping[str, str] = field(default_factory=lambda: PERSONA_PRESETS)
    preset: str = DEFAULT_PERSONA
    overrides: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    files: Mapping[str, Path] = field(default_factory=lambda: MappingProxyType({}))
    problems: tuple[str, ...] = ()  # files that could not be read

    @classmethod
    def load(
        cls,
        root: Path,
        *,
        preset: str = DEFAULT_PERSONA,
        overrides: Mapping[str, str] | None = None,
    ) -> Personas:
        """The built-in presets and ``root/personas/*.md``."""
        texts = dict(PERSONA_PRESETS)
        files: dict[str, Path] = {}
        problems: list[str] = []
        folder = root / PERSONAS_DIR
        if folder.is_dir():
            for path in sorted(folder.glob("*.md")):
                try:
                    text = path.read_text(encoding="utf-8").strip()
                except (OSError, UnicodeDecodeError) as exc:
                    problems.append(f"{display_path(path)}: cannot read persona: {exc}")
                    continue
                texts[path.stem], files[path.stem] = text, path
        return cls(
            MappingProxyType(texts),
            preset,
            MappingProxyType(dict(overrides or {})),
            MappingProxyType(files),
            tuple(problems),
        )

    def names(self) -> frozenset[str]:
        return frozenset(self.texts)

    def name_for(self, agent: AgentSpec) -> str:
        """The persona ``agent`` gets (which may name none; see ``warnings``)."""
        return self.overrides.get(agent.id) or agent.persona or self.preset

    def tone(self, agent: AgentSpec) -> str | None:
        """The guidance for ``agent``'s system prompt; None for a name that is no persona."""
        return self.texts.get(self.name_for(agent)) or None

    def source(self, name: str) -> str:
        """Where persona ``name`` comes from, for people: its file, or built-in."""
        path = self.files.get(name)
        if path is not None:
            return display_path(path)
        return "built-in" if name in self.texts else "unknown"

    def warnings(
        self, agent_ids: Collection[str], config_file: str = "agentrunner.toml"
    ) -> list[str]:
        """What the configuration names that does not exist, one line each."""
        out = list(self.problems)
        if self.preset not in self.texts:
            out.append(
                f"{config_file}: [persona] preset {self.preset!r} is not a persona"
                f"{self._near(self.preset)}; agents without their own get no tone guidance "
                f"({self._known()})"
            )
        for agent_id, name in self.overrides.items():
            if agent_id not in agent_ids:
                near = difflib.get_close_matches(agent_id, list(agent_ids), n=1)
                out.append(
                    f"{config_file}: [persona.overrides] names agent {agent_id!r}, which does "
                    "not exist" + (f" (did you mean {near[0]!r}?)" if near else "")
                )
            elif name not in self.texts:
                out.append(
                    f"{config_file}: [persona.overrides] {agent_id} = {name!r} is not a persona"
                    f"{self._near(name)}; {agent_id} gets no tone guidance ({self._known()})"
                )
        return out

    def log_warnings(self, agent_ids: Collection[str], config_file: str) -> None:
        for warning in self.warnings(agent_ids, config_file):
            log.warning("%s", warning)

    def _near(self, name: str) -> str:
        near = difflib.get_close_matches(name, list(self.texts), n=1)
        return f" (did you mean {near[0]!r}?)" if near else ""

    def _known(self) -> str:
        own = sorted(self.files)
        known = f"built-in: {', '.join(PERSONA_PRESETS)}"
        return known + (f"; {PERSONAS_DIR}/: {', '.join(own)}" if own else "")
