"""``AgentSpec``: the typed, immutable form of an agent file.

Pure data plus the two rules that belong to the definition itself: which keys exist (for the
loader's "did you mean" hints) and that a tool grant and a trust level can only be narrowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from agentrunner.agents.templating import Rendered, Template

if TYPE_CHECKING:
    from agentrunner.agents.approval import ApprovalRules
    from agentrunner.config.schedules import Schedule
    from agentrunner.core.model_settings import ModelSettings

__all__ = [
    "BACKOFFS",
    "CAPABILITIES",
    "PERSONA_PRESETS",
    "TOP_LEVEL_KEYS",
    "TRUST_LEVELS",
    "AgentSpec",
    "InputSpec",
    "Limits",
    "McpServerSpec",
    "RetryPolicy",
    "Trust",
]

Trust = Literal["sandboxed", "workspace", "full"]
Backoff = Literal["exponential", "linear", "none"]

TRUST_LEVELS: tuple[str, ...] = ("sandboxed", "workspace", "full")
BACKOFFS: tuple[str, ...] = ("exponential", "linear", "none")
CAPABILITIES: tuple[str, ...] = ("memory", "recall", "notes", "files", "notify", "person", "agents")

# Seed 002: a preset appends tone guidelines to every agent's prompt; `professional` is the
# default when the config names none. A project adds its own, or replaces one of these, with a
# file `personas/NAME.md` (``agents.personas``).
PERSONA_PRESETS: Mapping[str, str] = MappingProxyType(
    {
        "professional": "Tone: professional and precise. Lead with the answer, then the "
        "reasoning. No filler, no exclamation marks.",
        "friendly": "Tone: warm and approachable. Plain words, short sentences, and a kind "
        "word where it fits.",
        "concise": "Tone: terse. Answer in as few words as the task allows; use lists over "
        "paragraphs.",
        "direct": "Tone: candid and decisive. State your recommendation first and own it; flag "
        "risks bluntly.",
        "academic": "Tone: scholarly and careful. Define terms, separate evidence from "
        "inference, state your confidence and what would change your mind.",
    }
)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Attempts on each model of the fallback chain (seed 001: ``max_attempts = retry.max``)."""

    max: int = 2
    backoff: Backoff = "exponential"
    initial_delay_s: float = 0.5
    max_delay_s: float = 20.0

    KEYS = ("max", "backoff", "initial_delay_s", "max_delay_s")


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-run limits, checked before every model request."""

    max_steps: int = 10  # model requests (each with the tool calls it asks for) in one run
    max_budget_usd: float | None = None
    max_tool_calls: int | None = None
    max_tokens: int | None = None
    max_output_tokens: int | None = None
    timeout_s: float = 600.0  # the run's deadline: requests, retries, waits and tool calls
    history_tokens: int | None = None  # over [compaction] history_tokens: history a request carries

    KEYS = (
        "max_steps",
        "max_budget_usd",
        "max_tool_calls",
        "max_tokens",
        "max_output_tokens",
        "timeout_s",
        "history_tokens",
    )


@dataclass(frozen=True, slots=True)
class McpServerSpec:
    """An MCP server: a local command (stdio) or a URL (streamable HTTP)."""

    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    url: str | None = None

    KEYS = ("command", "args", "env", "url")


@dataclass(frozen=True, slots=True)
class InputSpec:
    """A declared input: documents a placeholder and may give it a default."""

    description: str = ""
    required: bool = True
    default: Any = None

    KEYS = ("description", "required", "default")


TOP_LEVEL_KEYS: tuple[str, ...] = (
    "name",
    "description",
    "model",
    "fallback",
    "retry",
    "tools",
    "capabilities",
    "mcp_servers",
    "reports_to",
    "trust",
    "limits",
    "output_schema",
    "cache",
    "memory",
    "enabled",
    "inputs",
    "prompt_template",
    "persona",
    "model_settings",
    "approval",
    "schedule",
)


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """One agent, as its file defines it. ``id`` is the file name without ``.md``.

    ``system`` is the Markdown body (the persona), a template rendered with the caller's
    ``input`` into the system role; ``prompt_template`` (optional) renders into the user
    position for one-shot tasks.
    """

    id: str
    name: str
    system: Template
    path: Path | None = None
    description: str = ""
    model: str | None = None
    fallback: tuple[str, ...] = ()
    retry: RetryPolicy = RetryPolicy()
    tools: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = ()
    mcp_servers: Mapping[str, McpServerSpec] = field(default_factory=lambda: MappingProxyType({}))
    reports_to: str | None = None
    trust: Trust = "sandboxed"
    limits: Limits = Limits()
    output_schema: Mapping[str, Any] | None = None
    cache: bool = False
    memory: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    enabled: bool = True
    inputs: Mapping[str, InputSpec] = field(default_factory=lambda: MappingProxyType({}))
    prompt_template: Template | None = None
    persona: str | None = None
    model_settings: ModelSettings | None = None  # the file's; a run's and [defaults]' merge in
    # Which tool calls need a person's yes: the file's approval: over [approval], merged when
    # the file is loaded; None when none does (a run then checks nothing)
    approval: ApprovalRules | None = None
    # The agent's own schedule (schedule:, named after it): when it runs on its own
    schedule: Schedule | None = None
    lines: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}), compare=False)
    digest: str = field(default="", compare=False)  # of the file's text: changes with any edit
    # What the file says in an old way that is still accepted (a renamed key): shown by
    # `agents check` and logged once when the file is loaded, never a reason to refuse it.
    notices: tuple[str, ...] = field(default=(), compare=False)

    @property
    def models(self) -> tuple[str, ...]:
        """The fallback chain in order: primary first."""
        return ((self.model,) if self.model else ()) + self.fallback

    def model_refs(self, default: str | None) -> list[tuple[str, str]]:
        """The chain a run tries, primary first, each model with the key of the file that
        names it (``model`` or ``fallback``); ``default`` stands in for a missing ``model``."""
        primary = self.model or default
        refs = [("model", primary)] if primary else []
        return refs + [("fallback", ref) for ref in self.fallback]

    def summary(self) -> dict[str, Any]:
        """What the HTTP API, stdio and MCP say of an agent (docs/http-api.md)."""
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "model": self.model,
            "fallback": list(self.fallback),
            "tools": list(self.tools),
            "capabilities": list(self.capabilities),
            "reports_to": self.reports_to,
            "enabled": self.enabled,
        }

    def line_of(self, key: str) -> int | None:
        """File line where ``key`` (dotted, e.g. ``limits.max_steps``) was written."""
        return self.lines.get(key)

    def input_defaults(self) -> dict[str, Any]:
        return {k: v.default for k, v in self.inputs.items() if v.default is not None}

    def with_defaults(self, input: Mapping[str, Any]) -> Mapping[str, Any]:
        """``input`` with declared ``inputs`` defaults filled in for missing top-level keys."""
        defaults = self.input_defaults()
        if not defaults or not isinstance(input, Mapping):
            return input
        return {**defaults, **input}

    def render_system(self, input: Mapping[str, Any]) -> Rendered:
        """The persona body rendered with ``input`` (seed 004 rules, errors name file:line)."""
        return self.system.render_with_values(self.with_defaults(input))

    def render_prompt(self, input: Mapping[str, Any]) -> Rendered | None:
        """The user-position ``prompt_template`` rendered with ``input``, if the agent has one."""
        if self.prompt_template is None:
            return None
        return self.prompt_template.render_with_values(self.with_defaults(input))

    def narrow_trust(self, caller: Trust | None) -> Trust:
        """The trust of a run of this agent started by a run with ``caller``'s trust: the lower
        of the two (sandboxed < workspace < full), as its tool grant is the intersection."""
        if caller is None or TRUST_LEVELS.index(self.trust) <= TRUST_LEVELS.index(caller):
            return self.trust
        return caller
