"""The composition root: what builds a runner, a task runner and a workspace from a project's
configuration. Construction lives here, not on the classes it builds (no ``AgentRunner.open``):
the modules below never import this one, so the layers stay a straight line."""

from __future__ import annotations

import asyncio
import contextlib
import difflib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrunner.agents.approval import FILE_TOOLS, UnmatchedName, unmatched_names
from agentrunner.agents.project import Project, load_project
from agentrunner.config import CONFIG_FILE
from agentrunner.core.paths import display_path
from agentrunner.engine.budget import price_unknown
from agentrunner.engine.engine import Engine
from agentrunner.engine.models import ModelRegistry
from agentrunner.errors import AgentFileErrors, AgentRunnerError, ErrorCode
from agentrunner.run.budgets import binding_budget
from agentrunner.run.capabilities.builtin import builtin_capabilities
from agentrunner.run.capabilities.mcp import unset_variables
from agentrunner.run.capabilities.scope import RuntimeFiles
from agentrunner.run.compaction import configured_model_error
from agentrunner.run.effects import PostRunEffects
from agentrunner.run.extensions import Extensions, load_extensions
from agentrunner.run.prompt import PromptBuilder
from agentrunner.run.runner import AgentRunner
from agentrunner.store.store import open_project_store
from agentrunner.telemetry.setup import start_tracing
from agentrunner.workspace.channels.service import CHANNEL_TOOLS
from agentrunner.workspace.project_schedules import check_schedule, project_schedules
from agentrunner.workspace.tasks.cache import open_cache
from agentrunner.workspace.tasks.task import Outcome, TaskRunner
from agentrunner.workspace.workspace import Workspace

if TYPE_CHECKING:
    from agentrunner.agents.spec import AgentSpec
    from agentrunner.engine.models import ResolvedModel
    from agentrunner.run.capabilities.registry import CapabilityRegistry

__all__ = [
    "ProjectCheck",
    "Workspace",
    "check_project",
    "execute",
    "open_runner",
    "open_task_runner",
    "open_workspace",
    "runner_with_tasks",
]


async def open_runner(
    start: Path | None = None,
    *,
    database_url: str | None = None,
    worker: int | bool | None = None,
) -> AgentRunner:
    """Load the project at (or above) ``start`` and open its store (migrating it) and engine.
    ``worker``: the process serves runs, at that concurrency (True: ``[workers]``'), and its
    store's pool is sized to it (``pool_size``)."""
    # Reading the config and agent files and resolving the runtime's own paths is file system
    # work: on a thread, so a runner opened inside a running application stalls nothing.
    # Extensions are imported there too (an import reads files, and runs the module).
    project, runtime_files, extensions = await asyncio.to_thread(_load, start)
    config = project.config
    store = await open_project_store(
        config, url=database_url, tables=extensions.tables, worker=worker
    )
    models = ModelRegistry.from_config(config)
    engine = Engine(models, tracing=start_tracing(config.telemetry, models.secrets))
    return AgentRunner(
        config=config,
        agents=project.agents,
        store=store,
        engine=engine,
        prompt=PromptBuilder(personas=project.personas, providers=extensions.context_providers),
        capabilities=builtin_capabilities(),
        effects=PostRunEffects(
            engine,
            store,
            title_model=config.title_model,
            budgets=config.budgets,
            embedding_model=config.embedding_model,
        ),
        runtime_files=runtime_files,
        handlers=extensions.message_handlers,
        guards=extensions.guards,
    )


def _load(start: Path | None) -> tuple[Project, RuntimeFiles, Extensions]:
    project = load_project(start)
    extensions = load_extensions(project.config)
    project = replace(project, config=extensions.apply(project.config))
    return project, RuntimeFiles.of(project.config, project.agents), extensions


async def open_task_runner(start: Path | None = None) -> TaskRunner:
    """A task runner for the project at (or above) ``start``, over a runner of its own (closed
    with it) and the configured result cache."""
    runner = await open_runner(start)
    return TaskRunner(runner, open_cache(runner.app.config, runner.app.store), owns_runner=True)


@contextlib.asynccontextmanager
async def runner_with_tasks(
    start: Path | None = None,
) -> AsyncIterator[tuple[AgentRunner, TaskRunner]]:
    """The project's runner and a task runner over it, as a long-lived interface (stdio, MCP)
    serves both; on exit the result cache is flushed, then the runner closed."""
    runner = await open_runner(start)
    tasks = TaskRunner(runner, open_cache(runner.app.config, runner.app.store))
    try:
        yield runner, tasks
    finally:
        try:
            await tasks.close()
        finally:
            await runner.close()


async def execute(
    agent: str,
    input: Mapping[str, Any],
    *,
    model: str | None = None,
    fallback: Sequence[str] = (),
    cache: bool | None = None,
    model_settings: Mapping[str, Any] | None = None,
) -> Outcome:
    """Run ``agent`` once on ``input`` in the project at or above the working directory;
    ``model_settings`` win over the agent file's.

    A project that cannot be loaded (a broken agent file is ``invalid_specification``, an
    unreadable one ``runner_io``) is a failed outcome too, never a raised error.
    """
    try:
        tasks = await open_task_runner()
    except AgentRunnerError as exc:
        return Outcome.failure(agent, exc, model)
    async with tasks:
        return await tasks.execute(
            agent,
            input,
            model=model,
            fallback=fallback,
            cache=cache,
            model_settings=model_settings,
        )


async def open_workspace(
    start: Path | None = None,
    *,
    database_url: str | None = None,
    worker: int | bool | None = None,
) -> Workspace:
    """The runner plus channels; channels declared in ``agentrunner.toml`` exist afterwards.
    ``worker``: as ``open_runner``'s."""
    workspace = Workspace(await open_runner(start, database_url=database_url, worker=worker))
    try:
        for channel in workspace.app.config.channels.values():
            await workspace.channels.create(
                channel.name, private=channel.private, members=list(channel.members)
            )
    except BaseException:
        await workspace.close()
        raise
    return workspace


@dataclass
class ProjectCheck:
    """``problems``: every problem of every agent file that a run would reject, in file and
    line order. ``warnings``: what would fail only in this environment (a missing key)."""

    problems: list[AgentRunnerError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    schedules: int = 0  # the project's schedules, each checked
    evals: int = 0  # the project's eval files, each read


def check_project(project: Project) -> ProjectCheck:
    """Check the project's agents against what runs use: the files themselves (as loaded), the
    tools the capabilities provide, the models the configured providers serve (the agents' and
    ``[compaction] model``), the persona configuration (warnings) and the extensions (imported
    and registered, as a run would)."""
    check = ProjectCheck(list(project.agents.problems))
    config = project.config
    try:  # the project's extensions, loaded as a run loads them
        load_extensions(config)
    except AgentRunnerError as exc:
        check.problems.append(exc)
    check.warnings.extend(
        project.personas.warnings(
            {*project.agents.ids(), *project.agents.partial},
            display_path(config.path) if config.path else CONFIG_FILE,
        )
    )
    capabilities = builtin_capabilities()
    models = ModelRegistry.from_config(project.config)
    specs = [*project.agents, *project.agents.partial.values()]
    every_tool = frozenset(capabilities.every_tool_name) | set(CHANNEL_TOOLS)
    _project_approval_names(check, project, specs, every_tool)
    for spec in specs:
        file = display_path(spec.path)
        check.warnings.extend(spec.notices)
        _approval_names(check, spec, capabilities, every_tool)
        # the loader already refused capabilities it does not know: each problem once
        seen = {problem.one_line() for problem in check.problems}
        check.problems.extend(p for p in capabilities.problems(spec) if p.one_line() not in seen)
        budget = binding_budget(spec, config.budgets)
        for key, ref in spec.model_refs(project.config.default_model):
            where = _model_place(project, spec, key, file)  # the file, or the project's
            try:
                resolved = models.resolve(ref)
            except AgentRunnerError as exc:
                exc.file, exc.line = where
                check.problems.append(exc)
                continue
            if budget is not None and _unpriced(models, resolved):  # its runs are refused
                unpriced = price_unknown(resolved.ref, budget)
                unpriced.file, unpriced.line = where
                check.problems.append(unpriced)
            variable = resolved.provider.api_key_env
            if variable and not models.has_credential(resolved):
                check.warnings.append(
                    f"{where[0]}: {variable} is not set in this environment; runs on {ref} "
                    "would fail (provider_auth)"
                )
        check.problems.extend(_settings_problems(spec, capabilities, models))
        for key, variable in unset_variables(spec):
            check.warnings.append(
                f"{file}: {key} needs {variable}, which is not set in this environment; runs "
                "would fail (validation)"
            )
    if config.compaction_model:  # else every run's compaction would fail on it
        try:
            resolved = models.resolve(config.compaction_model)
        except AgentRunnerError as exc:
            check.problems.append(configured_model_error(config, exc))
        else:
            budget = binding_budget(None, config.budgets)
            if budget is not None and _unpriced(models, resolved):
                unpriced = price_unknown(resolved.ref, budget)
                check.problems.append(configured_model_error(config, unpriced))
    _embeddings(check, project, models, specs)
    _schedules(check, project)
    _agent_models(check, project)
    _evals(check, project, every_tool, models)
    check.problems.sort(key=lambda p: (p.file or "", p.line or 0))
    return check


def _model_place(project: Project, spec: AgentSpec, key: str, file: str) -> tuple[str, int]:
    """Where an agent's model ``key`` is written: its file's line, or, for a model its file
    does not name, the project's ``[agents.NAME] model``."""
    config = project.config
    if key == "model" and spec.line_of(key) is None and spec.id in config.agent_models:
        shown = display_path(config.path) if config.path else CONFIG_FILE
        return shown, config.agent_model_lines.get(spec.id) or 1
    return file, spec.line_of(key) or 1


def _embeddings(
    check: ProjectCheck, project: Project, models: ModelRegistry, specs: list[AgentSpec]
) -> None:
    """``[embeddings] model``: one that is unknown, or of a provider with no embeddings API,
    is a problem at its line (every run's embeddings would fail on it); an agent granted
    ``recall`` with none set, a warning (its recalls would be refused)."""
    config = project.config
    shown = display_path(config.path) if config.path else CONFIG_FILE
    line = config.line_of("embeddings", "model")
    if config.embedding_model is None:
        for spec in specs:
            if "recall" in spec.capabilities:
                check.warnings.append(
                    f"{display_path(spec.path)}: agent '{spec.id}' may recall, but no "
                    f"[embeddings] model is set in {shown}: nothing is embedded to recall"
                )
        return
    try:
        resolved = models.resolve(config.embedding_model)
    except AgentRunnerError as exc:
        check.problems.append(
            AgentRunnerError(
                exc.code, f"[embeddings] model: {exc.message}", hint=exc.hint, file=shown, line=line
            )
        )
        return
    budget = binding_budget(None, config.budgets)
    if config.budgets.daily and _unpriced(models, resolved):  # each embedding refused
        unpriced = price_unknown(resolved.ref, budget or "the daily budget")
        unpriced.file, unpriced.line = shown, line
        check.problems.append(unpriced)
    variable = resolved.provider.api_key_env
    if variable and not models.has_credential(resolved):
        check.warnings.append(
            f"{shown}:{line}: {variable} is not set in this environment; embedding with "
            f"{resolved.ref} would fail (provider_auth)"
        )
    if resolved.provider.kind == "anthropic" or resolved.provider.api_version is not None:
        check.problems.append(
            AgentRunnerError(
                ErrorCode.VALIDATION,
                f"[embeddings] model: {resolved.ref} cannot embed texts: provider "
                f"'{resolved.provider.name}' has no embeddings API agentrunner speaks",
                hint='Name a model of an OpenAI-compatible provider (kind = "openai").',
                file=shown,
                line=line,
            )
        )


def _agent_models(check: ProjectCheck, project: Project) -> None:
    """``[agents.NAME] model``: one naming no agent is a problem at its line (a misspelt name
    would leave its agent on the default model unsaid); one for an agent whose file names its
    own model is a warning (the file's wins)."""
    config = project.config
    shown = display_path(config.path) if config.path else CONFIG_FILE
    ids = {*project.agents.ids(), *project.agents.partial}
    for name, model in config.agent_models.items():
        line = config.agent_model_lines.get(name)
        if name not in ids:
            near = difflib.get_close_matches(name, sorted(ids), n=1)
            meant = f" (did you mean '{near[0]}'?)" if near else ""
            check.problems.append(
                AgentRunnerError(
                    ErrorCode.INVALID_SPECIFICATION,
                    f"[agents.{name}] names no agent{meant}",
                    hint="Its name is an agent file's name without .md: see `agentrunner agents "
                    "list`.",
                    file=shown,
                    line=line,
                )
            )
            continue
        spec = project.agents.partial.get(name) or project.agents.get(name)
        if spec.model is not None and spec.model != model and spec.line_of("model"):
            check.warnings.append(
                f"{shown}:{line}: [agents.{name}] model = {model!r} is not used: "
                f"{display_path(spec.path)} names its own model ({spec.model}), which wins"
            )


def _evals(
    check: ProjectCheck,
    project: Project,
    tools: frozenset[str] | set[str],
    models: ModelRegistry,
) -> None:
    """Each eval file in the project's ``evals/`` read as ``agentrunner eval`` reads it, its
    judges' models checked as it checks them (``judge_model_problems``: a key not set here is
    a warning); a tool its checks name that no capability has is a warning (an MCP server's
    tools are known only once it connects), since ``tool_not_called`` on a misspelt name
    always passes."""
    from agentrunner.agents.evals import eval_files, load_eval  # only `validate` pays it
    from agentrunner.workspace.eval_checks import judge_model_problems

    for path in eval_files(project.config.root):
        check.evals += 1
        try:
            spec = load_eval(path, agents=project.agents.ids())
        except AgentFileErrors as errors:
            check.problems.extend(errors.problems)
            continue
        except AgentRunnerError as exc:
            check.problems.append(exc)
            continue
        problems, keyless = judge_model_problems(models, spec)
        check.problems.extend(problems)
        check.warnings.extend(f"{k.one_line()} (eval would fail)" for k in keyless)
        for case in spec.cases:
            for named in case.checks:
                if named.kind not in ("tool_called", "tool_not_called"):
                    continue
                value = named.value
                names = [value["name"]] if isinstance(value, dict) else list(value)
                if named.kind == "tool_called" and isinstance(value, str):
                    names = [value]
                for name in names:
                    if name not in tools:
                        near = difflib.get_close_matches(name, sorted(tools), n=1)
                        meant = f" (did you mean '{near[0]}'?)" if near else ""
                        check.warnings.append(
                            f"{display_path(path)}: case '{case.name}': {named.kind} names "
                            f"'{name}', which no capability provides{meant}"
                        )


def _schedules(check: ProjectCheck, project: Project) -> None:
    """Each schedule checked against the project (``schedules.check_schedule``), its problems
    located at their keys: in agentrunner.toml, or in its agent's file."""
    config = project.config
    try:
        schedules = project_schedules(config, project.agents)
    except AgentRunnerError as exc:
        check.problems.append(exc)
        return
    check.schedules = len(schedules)
    for schedule in schedules.values():
        own = schedule.name not in config.schedules
        spec = project.agents.get(schedule.agent) if own else None
        for key, message, stops in check_schedule(config, project.agents, schedule):
            if spec is not None:
                line = spec.line_of(f"schedule.{key}") or spec.line_of("schedule")
                file = display_path(spec.path)
            else:
                file = display_path(config.path) if config.path else CONFIG_FILE
                line = config.line_of("schedules", schedule.name, key)
            if stops:
                check.problems.append(
                    AgentRunnerError(
                        ErrorCode.INVALID_SPECIFICATION,
                        f"schedule '{schedule.name}': {message}",
                        file=file,
                        line=line,
                        hint="See docs/schedules.md.",
                    )
                )
            else:
                check.warnings.append(f"{file}:{line}: schedule '{schedule.name}': {message}")


def _approval_names(
    check: ProjectCheck,
    spec: AgentSpec,
    capabilities: CapabilityRegistry,
    every_tool: frozenset[str],
) -> None:
    """What a file's ``approval.tools`` names that none of the agent's tools can match: a
    ``SERVER/TOOL`` naming none of its MCP servers, or a misspelt tool, is a problem (the rule
    would ask for nothing); a name no tool validate knows has is a warning (a tool a run is
    given from Python may have it). The project's ``[approval] tools``: below, once."""
    rules = spec.approval
    if rules is None or rules.tools_from != FILE_TOOLS:
        return
    try:
        granted = capabilities.grant(spec) | set(CHANNEL_TOOLS)
    except AgentRunnerError:  # its tools are wrong: reported on their own
        granted = frozenset(spec.tools) | set(CHANNEL_TOOLS)
    file = display_path(spec.path)
    line = spec.line_of(FILE_TOOLS) or spec.line_of("approval")
    for name in unmatched_names(
        rules.tools,
        tools=granted,
        every_tool=every_tool,
        servers=list(spec.mcp_servers),
        whose="the agent's",
    ):
        _report_unmatched(check, name, FILE_TOOLS, file, line, certain=("server", "typo"))


def _project_approval_names(
    check: ProjectCheck, project: Project, specs: list[AgentSpec], every_tool: frozenset[str]
) -> None:
    """``[approval] tools`` against every tool any agent may be given: a misspelt tool is a
    problem; a name no tool has, or a server no agent declares, a warning (rules for every
    agent may be written before the agent they are for)."""
    config = project.config
    if config.approval is None or not config.approval.tools:
        return
    servers = {server for spec in specs for server in spec.mcp_servers}
    for name in unmatched_names(
        config.approval.tools,
        tools=every_tool,
        every_tool=every_tool,
        servers=servers,
        whose="any agent's",
    ):
        line = config.line_of("approval", "tools")
        _report_unmatched(check, name, "[approval] tools", config.file, line, certain=("typo",))


def _report_unmatched(
    check: ProjectCheck,
    name: UnmatchedName,
    key: str,
    file: str,
    line: int | None,
    *,
    certain: tuple[str, ...],
) -> None:
    """A name of an approval rule that can match nothing (a ``certain`` kind) as a problem;
    one that may match a tool only a run knows of as a warning."""
    if name.kind in certain:
        check.problems.append(
            AgentRunnerError(
                ErrorCode.INVALID_SPECIFICATION,
                f"{key}: {name.message}",
                hint=name.hint,
                file=file,
                line=line,
            )
        )
        return
    unless = (
        "an agent declares that server"
        if name.kind == "server"
        else "a run is given such a tool from Python"
    )
    check.warnings.append(
        f"{file}{f':{line}' if line else ''}: {key}: {name.message}; it asks for nothing "
        f"unless {unless}"
    )


def _unpriced(models: ModelRegistry, model: ResolvedModel) -> bool:
    """Whether a budget would refuse ``model``: its price unknown, and that not allowed."""
    prices = models.prices
    return prices.refused(model.provider.name, model.name)


def _settings_problems(
    spec: AgentSpec, capabilities: CapabilityRegistry, models: ModelRegistry
) -> list[AgentRunnerError]:
    """What a file's ``model_settings`` name that is not there: a ``tool_choice`` naming no
    tool the agent is granted (its MCP servers' tools are known only once they run), an
    ``extra`` for a provider the project does not have."""
    settings = spec.model_settings
    if settings is None:
        return []
    from agentrunner.core.model_settings import tool_choice_problem, unknown_providers

    found = []
    file = display_path(spec.path) if spec.path else None

    def problem(key: str, message: str, hint: str) -> AgentRunnerError:
        line = spec.line_of(f"model_settings.{key}") or spec.line_of("model_settings")
        return AgentRunnerError(
            ErrorCode.INVALID_SPECIFICATION, message, hint=hint, file=file, line=line
        )

    if settings.forces_tool and not spec.mcp_servers:
        try:
            granted = capabilities.grant(spec)
        except AgentRunnerError:  # its tools are wrong: reported on their own
            granted = None
        # the tools every agent is granted (delegate) are offered only where a run calls
        # for them: accepted, not listed
        named = set(capabilities.tool_names)
        wrong = (
            granted is not None
            and settings.tool_choice not in granted
            and tool_choice_problem(settings, [t for t in granted if t in named])
        )
        if wrong:
            hint = "Name one of its tools, or auto, required (with tools) or none."
            found.append(problem("tool_choice", f"'model_settings.tool_choice' {wrong}", hint))
    for provider, wrong in unknown_providers(settings, models.providers):
        hint = f"extra is keyed by provider: {', '.join(sorted(models.providers))}."
        found.append(problem(f"extra.{provider}", f"'model_settings.extra' {wrong}", hint))
    return found
