"""Agent files (Markdown + YAML frontmatter) → ``AgentSpec``.

Every problem is reported with the file and the line it is on, and the loader collects all the
problems of a file before raising, so ``agents validate`` prints them in one go.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from agentrunner.agents.approval import approval_rules
from agentrunner.agents.front_matter import parse_front_matter, split_front_matter
from agentrunner.agents.spec import (
    BACKOFFS,
    CAPABILITIES,
    PERSONA_PRESETS,
    TOP_LEVEL_KEYS,
    TRUST_LEVELS,
    AgentSpec,
    InputSpec,
    Limits,
    McpServerSpec,
    RetryPolicy,
)
from agentrunner.agents.templating import Template
from agentrunner.config import MIN_HISTORY_TOKENS, WHOLE_WINDOW
from agentrunner.config.schedules import Schedule
from agentrunner.errors import AgentFileErrors, AgentRunnerError, ErrorCode

if TYPE_CHECKING:
    from agentrunner.config.approval import Approval
    from agentrunner.core.model_settings import ModelSettings

__all__ = ["load_agent_file", "parse_agent_text", "run_fields"]

log = logging.getLogger("agentrunner.agents")

T = TypeVar("T")


def load_agent_file(
    path: Path,
    *,
    default_model: str | None = None,
    display: str | None = None,
    personas: Collection[str] = PERSONA_PRESETS,
    approval: Approval | None = None,
) -> AgentSpec:
    """Read and parse one agent file. Raises ``AgentFileErrors`` listing every problem.
    ``personas``: the names its ``persona:`` may give (the project's own with the presets);
    ``approval``: the project's ``[approval]``, which its ``approval:`` goes over."""
    shown = display or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AgentFileErrors(
            [AgentRunnerError(ErrorCode.RUNNER_IO, f"cannot read agent file: {exc}", file=shown)]
        ) from exc
    return parse_agent_text(
        text,
        agent_id=path.stem,
        file=shown,
        path=path,
        default_model=default_model,
        personas=personas,
        approval=approval,
    )


def parse_agent_text(
    text: str,
    *,
    agent_id: str,
    file: str,
    path: Path | None = None,
    default_model: str | None = None,
    personas: Collection[str] = PERSONA_PRESETS,
    approval: Approval | None = None,
) -> AgentSpec:
    front, body, body_line = split_front_matter(text, file)
    data, lines, duplicates = parse_front_matter(front, file) if front is not None else ({}, {}, [])
    reader = _Reader(file, lines)
    reader.problems.extend(duplicates)  # read on: the file's other problems are listed too
    spec = reader.build(agent_id, data, body, body_line, path, default_model, personas, approval)
    AgentFileErrors.raise_if_any(reader.problems, spec)
    for notice in reader.notices:
        log.warning("%s", notice)
    return replace(spec, digest=hashlib.sha256(text.encode()).hexdigest())


def run_fields(
    output_schema: Any = None, retry: Any = None
) -> tuple[Mapping[str, Any] | None, RetryPolicy | None]:
    """A run's caller's ``output_schema`` and ``retry``, read by the rules the agent file's
    keys are read by (None: not given); ``validation`` naming the field, for a caller's
    request rather than a file."""
    reader = _Reader("the run's request", {})
    schema = reader._output_schema(output_schema)
    policy = reader.section({"retry": retry}, "retry", RetryPolicy.KEYS, reader._retry, None)
    if reader.problems:
        problem = reader.problems[0]
        field = "output_schema" if "output_schema" in problem.message else "retry"
        raise AgentRunnerError(
            ErrorCode.VALIDATION, problem.message, hint=problem.hint, details={"field": field}
        )
    return schema, policy


def _nearest(word: str, choices: tuple[str, ...] | list[str]) -> str | None:
    found = difflib.get_close_matches(word, choices, n=1, cutoff=0.5)
    return found[0] if found else None


# The old name of `limits.max_steps`, still read (with a notice) so existing files keep working.
RENAMED_LIMIT = "max_turns"


class _Reader:
    """Reads typed fields out of the parsed frontmatter, collecting problems as it goes."""

    def __init__(self, file: str, lines: dict[str, int]) -> None:
        self.file = file
        self.lines = lines
        self.problems: list[AgentRunnerError] = []
        self.notices: list[str] = []

    def fail(
        self, key: str, message: str, hint: str | None = None, line: int | None = None
    ) -> None:
        self.problems.append(
            AgentRunnerError(
                ErrorCode.INVALID_SPECIFICATION,
                message,
                hint=hint,
                file=self.file,
                line=line if line is not None else self.lines.get(key, 1),
            )
        )

    def check_keys(
        self,
        data: Mapping[str, Any],
        allowed: tuple[str, ...],
        prefix: str = "",
        old_names: Mapping[str, str] = MappingProxyType({}),
    ) -> None:
        for key in data:
            if key in allowed or key in old_names:
                continue
            near = _nearest(str(key), [*allowed, *old_names])
            near = old_names.get(near, near) if near else near  # suggest the current name
            guess = f" (did you mean '{prefix}{near}'?)" if near else ""
            self.fail(
                f"{prefix}{key}",
                f"unknown key '{prefix}{key}'{guess}",
                hint=f"Valid keys{' under ' + prefix.rstrip('.') if prefix else ''}: "
                f"{', '.join(allowed)}.",
            )

    def typed(
        self,
        data: Mapping[str, Any],
        key: str,
        kind: type[T] | tuple[type, ...],
        default: T,
        what: str,
        prefix: str = "",
    ) -> T:
        value = data.get(key, default)
        if value is default or (value is None and default is None):
            return default
        ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return cast(T, float(value))
        if not ok:
            self.fail(f"{prefix}{key}", f"'{prefix}{key}' must be {what}, got {value!r}")
            return default
        return cast(T, value)

    def positive(
        self, data: Mapping[str, Any], key: str, kind: type[T], default: T, prefix: str
    ) -> T:
        what = "a positive integer" if kind is int else "a positive number"
        value = self.typed(data, key, kind, default, what, prefix)
        if value is not None and value is not default and value <= 0:  # type: ignore[operator]
            self.fail(f"{prefix}{key}", f"'{prefix}{key}' must be {what}, got {value!r}")
            return default
        return value

    def str_list(self, data: Mapping[str, Any], key: str) -> tuple[str, ...]:
        value = data.get(key)
        if value is None:
            return ()
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.fail(key, f"'{key}' must be a list of names, got {value!r}")
            return ()
        return tuple(dict.fromkeys(value))

    def choice(
        self,
        data: Mapping[str, Any],
        key: str,
        choices: tuple[str, ...],
        default: str,
        prefix: str = "",
    ) -> str:
        value = data.get(key, default)
        if value not in choices:
            near = _nearest(str(value), list(choices))
            hint = f"did you mean '{near}'?" if near else None
            self.fail(
                f"{prefix}{key}",
                f"'{prefix}{key}' must be one of {', '.join(choices)}, got {value!r}"
                + (f" ({hint})" if hint else ""),
                hint=hint,
            )
            return default
        return str(value)

    def section(
        self,
        data: Mapping[str, Any],
        key: str,
        keys: tuple[str, ...],
        build: Callable[[Mapping[str, Any]], T],
        default: T,
        old_names: Mapping[str, str] = MappingProxyType({}),
    ) -> T:
        value = data.get(key)
        if value is None:
            return default
        if not isinstance(value, dict):
            self.fail(key, f"'{key}' must be a mapping with keys {', '.join(keys)}, got {value!r}")
            return default
        self.check_keys(value, keys, f"{key}.", old_names)
        return build(value)

    def template(self, source: str, line: int) -> Template | None:
        try:
            return Template.parse(source, file=self.file, first_line=line)
        except AgentRunnerError as exc:
            self.problems.append(exc)
            return None

    # -- the whole file -------------------------------------------------------------------

    def build(
        self,
        agent_id: str,
        data: dict[str, Any],
        body: str,
        body_line: int,
        path: Path | None,
        default_model: str | None,
        personas: Collection[str] = PERSONA_PRESETS,
        approval_defaults: Approval | None = None,
    ) -> AgentSpec:
        self.check_keys(data, TOP_LEVEL_KEYS)
        name = self.typed(data, "name", str, agent_id, "a string")
        description = self.typed(data, "description", str, "", "a string")
        model = self.typed(data, "model", str, None, "a 'provider:model' string")
        if model is None and "model" not in data and default_model is None:
            self.fail(
                "model",
                "no model: the agent file has no 'model' and agentrunner.toml sets no "
                "[defaults] model",
                hint="Add e.g. 'model: openai:gpt-4.1-mini' (or 'model: test' to run offline).",
                line=1,
            )
        retry = self.section(data, "retry", RetryPolicy.KEYS, self._retry, RetryPolicy())
        limits = self.section(
            data, "limits", Limits.KEYS, self._limits, Limits(), {RENAMED_LIMIT: "max_steps"}
        )
        trust = self.choice(data, "trust", TRUST_LEVELS, "sandboxed")
        capabilities = self.str_list(data, "capabilities")
        for cap in capabilities:
            if cap not in CAPABILITIES:
                near = _nearest(cap, list(CAPABILITIES))
                self.fail(
                    "capabilities",
                    f"unknown capability '{cap}'" + (f" (did you mean '{near}'?)" if near else ""),
                    hint=f"capabilities: {', '.join(CAPABILITIES)}",
                )
        persona = self.typed(data, "persona", str, None, "a persona name")
        if persona is not None and persona not in personas:
            near = _nearest(persona, sorted(personas))
            self.fail(
                "persona",
                f"unknown persona preset '{persona}'"
                + (f" (did you mean '{near}'?)" if near else ""),
                hint=f"presets: {', '.join(sorted(personas))}; or add personas/{persona}.md",
            )
        system = self.template(body.strip("\n"), body_line + _leading_newlines(body))
        prompt_source = self.typed(data, "prompt_template", str, None, "a string")
        prompt_template = (
            self.template(prompt_source, self.lines.get("prompt_template", 1))
            if prompt_source is not None
            else None
        )
        approval, wrong = approval_rules(data.get("approval"), approval_defaults)
        schedule, timing = Schedule.parse(
            agent_id, data.get("schedule"), agent=agent_id, source=self.file
        )
        wrong = [*wrong, *((f"schedule.{k}".rstrip("."), m, h) for k, m, h in timing)]
        for key, message, hint in wrong:  # an unknown key's own line, else its block's
            block = self.lines.get(key.split(".")[0])
            self.fail(key, message, hint or None, self.lines.get(key) or block)
        spec_kwargs: dict[str, Any] = {
            "id": agent_id,
            "name": name,
            "path": path,
            "description": description,
            "model": model,
            "fallback": self.str_list(data, "fallback"),
            "retry": retry,
            "tools": self.str_list(data, "tools"),
            "capabilities": capabilities,
            "mcp_servers": self._mcp_servers(data.get("mcp_servers")),
            "reports_to": self.typed(data, "reports_to", str, None, "an agent id"),
            "trust": trust,
            "limits": limits,
            "output_schema": self._output_schema(data.get("output_schema")),
            "cache": self.typed(data, "cache", bool, False, "true or false"),
            "memory": self._memory(data.get("memory")),
            "enabled": self.typed(data, "enabled", bool, True, "true or false"),
            "inputs": self._inputs(data.get("inputs")),
            "prompt_template": prompt_template,
            "persona": persona,
            "model_settings": self._model_settings(data.get("model_settings")),
            "approval": approval,
            "schedule": schedule,
            "lines": MappingProxyType(dict(self.lines)),
            "notices": tuple(self.notices),
        }
        # Built even with problems (their fields at defaults, a broken body as empty): it is
        # what the file is, for the checks across files (reports_to) and against tools and models.
        return AgentSpec(system=system or Template.parse(""), **spec_kwargs)

    def _retry(self, value: Mapping[str, Any]) -> RetryPolicy:
        d = RetryPolicy()
        return RetryPolicy(
            max=self.positive(value, "max", int, d.max, "retry."),
            backoff=self.choice(value, "backoff", BACKOFFS, d.backoff, "retry."),  # type: ignore[arg-type]
            initial_delay_s=self.positive(
                value, "initial_delay_s", float, d.initial_delay_s, "retry."
            ),
            max_delay_s=self.positive(value, "max_delay_s", float, d.max_delay_s, "retry."),
        )

    def _limits(self, value: Mapping[str, Any]) -> Limits:
        d = Limits()
        p = "limits."
        key = "max_steps"
        if RENAMED_LIMIT in value:
            if "max_steps" in value:
                self.fail(
                    f"{p}{RENAMED_LIMIT}",
                    f"'{p}{RENAMED_LIMIT}' and '{p}max_steps' are the same limit; keep one",
                    hint=f"Delete '{p}{RENAMED_LIMIT}' (its old name).",
                )
            else:
                key = RENAMED_LIMIT
                line = self.lines.get(f"{p}{RENAMED_LIMIT}", 1)
                self.notices.append(
                    f"{self.file}:{line}: '{p}{RENAMED_LIMIT}' is now '{p}max_steps' (a run's "
                    "steps are its model requests); the old name still works, rename it"
                )
        return Limits(
            max_steps=self.positive(value, key, int, d.max_steps, p),
            max_budget_usd=self.positive(value, "max_budget_usd", float, d.max_budget_usd, p),
            max_tool_calls=self.positive(value, "max_tool_calls", int, d.max_tool_calls, p),
            max_tokens=self.positive(value, "max_tokens", int, d.max_tokens, p),
            max_output_tokens=self.positive(
                value, "max_output_tokens", int, d.max_output_tokens, p
            ),
            timeout_s=self.positive(value, "timeout_s", float, d.timeout_s, p),
            history_tokens=self._history_tokens(value),
        )

    def _history_tokens(self, limits: Mapping[str, Any]) -> int | None:
        """``limits.history_tokens``: a number of tokens, at least ``MIN_HISTORY_TOKENS``, or
        ``window``; None: ``[compaction] history_tokens`` applies."""
        key, value = "limits.history_tokens", limits.get("history_tokens")
        if value is None:
            return None
        if value == "window":
            return WHOLE_WINDOW
        if isinstance(value, bool) or not isinstance(value, int) or value < MIN_HISTORY_TOKENS:
            self.fail(
                key,
                f"'{key}' must be a whole number of tokens, at least {MIN_HISTORY_TOKENS}, or "
                f"'window', got {value!r}",
                hint="The most tokens of the thread's history one request carries, e.g. 16000 "
                "(default: [compaction] history_tokens in agentrunner.toml); window: what the "
                "model's context window has room for.",
            )
            return None
        return value

    def _mcp_servers(self, value: Any) -> Mapping[str, McpServerSpec]:
        if value is None:
            return MappingProxyType({})
        if not isinstance(value, dict):
            self.fail(
                "mcp_servers", "'mcp_servers' must map server names to {command, args} or {url}"
            )
            return MappingProxyType({})
        servers: dict[str, McpServerSpec] = {}
        for name, raw in value.items():
            key = f"mcp_servers.{name}"
            if not isinstance(raw, dict):
                self.fail(key, f"'{key}' must be a mapping with 'command' or 'url'")
                continue
            self.check_keys(raw, McpServerSpec.KEYS, f"{key}.")
            command = self.typed(raw, "command", str, None, "a string", f"{key}.")
            url = self.typed(raw, "url", str, None, "a string", f"{key}.")
            if (command is None) == (url is None):
                self.fail(key, f"'{key}' needs exactly one of 'command' (stdio) or 'url' (HTTP)")
            args = raw.get("args", [])
            if not isinstance(args, list):
                self.fail(f"{key}.args", f"'{key}.args' must be a list of strings")
                args = []
            env = raw.get("env", {})
            if not isinstance(env, dict):
                self.fail(f"{key}.env", f"'{key}.env' must map variable names to values")
                env = {}
            servers[str(name)] = McpServerSpec(
                command=command,
                args=tuple(str(a) for a in args),
                env=MappingProxyType({str(k): str(v) for k, v in env.items()}),
                url=url,
            )
        return MappingProxyType(servers)

    def _output_schema(self, value: Any) -> Mapping[str, Any] | None:
        if value is None:
            return None
        if not isinstance(value, dict):
            self.fail("output_schema", "'output_schema' must be a JSON Schema object or null")
            return None
        from jsonschema import SchemaError, validators  # only files that use it pay the import

        try:
            validators.validator_for(value).check_schema(value)
        except SchemaError as exc:
            self.fail("output_schema", f"'output_schema' is not a valid JSON Schema: {exc.message}")
            return None
        return MappingProxyType(value)

    def _model_settings(self, value: Any) -> ModelSettings | None:
        if value is None:
            return None
        from agentrunner.core.model_settings import settings_problems  # only files that set some

        settings, problems = settings_problems(value)
        for key, message, hint in problems:
            name = f"model_settings.{key}" if key else "model_settings"
            # an unknown setting's own line; a nested one's nearest line the file has
            line = self.lines.get(name) or self.lines.get(name.rsplit(".", 1)[0])
            self.fail(name, f"'{name}' {message}", hint=hint, line=line)
        return settings

    def _memory(self, value: Any) -> Mapping[str, str]:
        if value is None:
            return MappingProxyType({})
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            self.fail("memory", "'memory' must map block labels to text, e.g. {persona: '…'}")
            return MappingProxyType({})
        return MappingProxyType({str(k): v for k, v in value.items()})

    def _inputs(self, value: Any) -> Mapping[str, InputSpec]:
        if value is None:
            return MappingProxyType({})
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return MappingProxyType({v: InputSpec() for v in value})
        if not isinstance(value, dict):
            self.fail(
                "inputs",
                "'inputs' must be a list of names or map names to {description, required, default}",
            )
            return MappingProxyType({})
        out: dict[str, InputSpec] = {}
        for name, raw in value.items():
            key = f"inputs.{name}"
            if raw is None:
                out[str(name)] = InputSpec()
                continue
            if isinstance(raw, str):
                out[str(name)] = InputSpec(description=raw)
                continue
            if not isinstance(raw, dict):
                self.fail(
                    key, f"'{key}' must be a description or {{description, required, default}}"
                )
                continue
            self.check_keys(raw, InputSpec.KEYS, f"{key}.")
            out[str(name)] = InputSpec(
                description=self.typed(raw, "description", str, "", "a string", f"{key}."),
                required=self.typed(
                    raw, "required", bool, "default" not in raw, "true or false", f"{key}."
                ),
                default=raw.get("default"),
            )
        return MappingProxyType(out)


def _leading_newlines(body: str) -> int:
    return len(body) - len(body.lstrip("\n"))
