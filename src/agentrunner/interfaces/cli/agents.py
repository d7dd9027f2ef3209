"""``agentrunner agents list|show|validate``."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from agentrunner.core.paths import display_path
from agentrunner.interfaces.cli.console import Column, err, listing, out, print_error

if TYPE_CHECKING:
    from rich.tree import Tree

    from agentrunner.agents import AgentRegistry, AgentSpec
    from agentrunner.agents.project import Project
    from agentrunner.config import Config
    from agentrunner.errors import AgentRunnerError

__all__ = ["app"]

app = typer.Typer(help="Inspect and validate the project's agents.", no_args_is_help=True)


def _model_label(spec: AgentSpec, config: Config, *, verbose: bool = False) -> str:
    model = spec.model or config.default_model or "?"
    shown = escape(model)
    if model == "test" or model.startswith("test:"):
        shown += " [yellow](test model)[/]"
    if spec.model is None and verbose:
        shown += " [dim](project default)[/]"
    return shown


@app.command("list")
def list_agents() -> None:
    """A table of every agent: id, name, model, who it reports to, tools."""
    from agentrunner.agents.project import load_project

    project = load_project(strict=False)
    rows = []
    for spec in project.agents:
        grants = ", ".join((*spec.tools, *(f"[cyan]{c}[/]" for c in spec.capabilities)))
        rows.append(
            [
                f"[bold]{escape(spec.id)}[/]" + ("" if spec.enabled else " [dim](disabled)[/]"),
                escape(spec.name),
                _model_label(spec, project.config),
                escape(spec.reports_to or "—"),
                grants or "—",
                escape(spec.description),
            ]
        )
    listing(
        f"Agents in {escape(display_path(project.config.agents_dir))}/",
        [
            Column("id", whole=True),
            Column("name", drop=3),
            Column("model"),
            Column("reports to", whole=True, drop=4),
            Column("tools / capabilities", drop=1),
            Column("description", drop=2),
        ],
        rows,
    )
    _report_problems(project.agents)


@app.command("show")
def show(agent_id: str = typer.Argument(..., help="The agent id.")) -> None:
    """An agent's resolved definition, and its place in the org chart."""
    from rich.panel import Panel
    from rich.table import Table

    from agentrunner.agents.project import load_project

    project = load_project(strict=False)
    spec = project.agents.get(agent_id)
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold")
    fields.add_column(overflow="fold")
    rows: list[tuple[str, str]] = [
        ("name", escape(spec.name)),
        ("description", escape(spec.description) or "—"),
        ("file", escape(display_path(spec.path))),
        ("model", _model_label(spec, project.config, verbose=True)),
        ("fallback", escape(", ".join(spec.fallback)) or "—"),
        ("retry", f"max {spec.retry.max} attempts, {spec.retry.backoff} backoff"),
        ("tools", escape(", ".join(spec.tools)) or "—"),
        ("capabilities", escape(", ".join(spec.capabilities)) or "—"),
        ("mcp servers", escape(", ".join(spec.mcp_servers)) or "—"),
        ("trust", spec.trust),
        ("limits", _limits_text(spec)),
        ("model settings", _settings_text(spec, project.config)),
        ("persona", _persona_text(spec, project)),
        ("memory", escape(", ".join(spec.memory)) or "—"),
        ("inputs", escape(", ".join(p.dotted for p in spec.system.placeholders)) or "—"),
        ("output schema", "yes" if spec.output_schema else "—"),
        ("cache", "on" if spec.cache else "off"),
        ("enabled", "yes" if spec.enabled else "no"),
    ]
    for key, value in rows:
        fields.add_row(key, value)
    out.print(Panel(fields, title=f"[bold]{escape(spec.id)}[/]", title_align="left"))
    out.print(
        Panel(
            escape(spec.system.source) or "[dim](empty)[/]",
            title="system prompt template",
            title_align="left",
        )
    )
    chart = _org_chart(project.agents, spec)
    if chart is not None:
        out.print(chart)
    _report_problems(project.agents)


@app.command("validate")
def validate() -> None:
    """Check every agent file as a run would (tools, models, the org chart): one line per
    problem and a non-zero exit if any; keys missing from the environment are warnings."""
    from agentrunner.agents.project import load_project
    from agentrunner.runtime.compose import check_project

    # the loader logs a file's notices (an old key name); here they are listed as warnings
    logging.getLogger("agentrunner.agents").setLevel(logging.ERROR)
    project = load_project(strict=False)
    check = check_project(project)
    for problem in check.problems:
        err.print(escape(problem.one_line()))
    for warning in check.warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}")
    if check.problems:
        count = len(check.problems)
        err.print(
            f"[red]{count} problem{'s' if count > 1 else ''}[/] in "
            f"{escape(_where(check.problems, project.config))}"
        )
        raise typer.Exit(1)
    agents, schedules, evals = len(project.agents), check.schedules, check.evals
    timed = f" and {schedules} schedule{'s' if schedules != 1 else ''}" if schedules else ""
    measured = f" and {evals} eval file{'s' if evals != 1 else ''}" if evals else ""
    out.print(f"[green]✓[/] {agents} agent{'s' if agents != 1 else ''}{timed}{measured} valid")


def _where(problems: list[AgentRunnerError], config: Config) -> str:
    """Where the problems are: the agents directory, the config file, or both."""
    agents = display_path(config.agents_dir)
    evals = display_path(config.root / "evals")
    places = {
        config.file
        if problem.file == config.file
        else evals
        if (problem.file or "").startswith(evals)
        else agents
        for problem in problems
    }
    return " and ".join(sorted(places, key=lambda place: place != agents))


def _persona_text(spec: AgentSpec, project: Project) -> str:
    personas = project.personas
    name = personas.name_for(spec)
    if spec.id in personas.overrides:
        why = "[persona.overrides]"
    elif spec.persona:
        why = "agent file"
    else:
        why = "project default"
    source = personas.source(name)
    shown = f"{escape(name)} [dim]({escape(why)}; {escape(source)})[/]"
    return shown if source != "unknown" else f"{shown} [yellow]no such persona[/]"


def _limits_text(spec: AgentSpec) -> str:
    limits = spec.limits
    parts = [f"max_steps {limits.max_steps}"]
    if limits.max_budget_usd is not None:
        parts.append(f"max_budget_usd {limits.max_budget_usd:g}")
    if limits.max_tool_calls is not None:
        parts.append(f"max_tool_calls {limits.max_tool_calls}")
    if limits.max_tokens is not None:
        parts.append(f"max_tokens {limits.max_tokens}")
    return ", ".join(parts)


def _settings_text(spec: AgentSpec, config: Config) -> str:
    """The model settings its runs ask for: its file's over ``[defaults]``' (a run's own go
    over both)."""
    if spec.model_settings is None and config.model_settings is None:
        return "—"
    from agentrunner.core.model_settings import merge_settings

    merged = merge_settings(config.model_settings, spec.model_settings)
    shown = merged.to_dict() if merged is not None else {}
    return escape(", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in shown.items()))


def _org_chart(agents: AgentRegistry, focus: AgentSpec) -> Tree | None:
    """The whole team the agent belongs to, from its top, with the agent highlighted."""
    from rich.tree import Tree

    top = agents.chain_of_command(focus.id)[-1]
    if top.id == focus.id and not agents.direct_reports(focus.id):
        return None

    def label(spec: AgentSpec) -> str:
        text = f"{escape(spec.id)} [dim]({escape(spec.name)})[/]"
        return f"[bold reverse] {text} [/]" if spec.id == focus.id else text

    tree = Tree(f"[bold]org chart[/]  {label(top)}")

    def add(node: Tree, spec: AgentSpec) -> None:
        for report in agents.direct_reports(spec.id):
            add(node.add(label(report)), report)

    add(tree, top)
    return tree


def _report_problems(agents: AgentRegistry) -> None:
    """Commands that still work with some bad files say so, and exit non-zero."""
    if not agents.problems:
        return
    for problem in agents.problems:
        print_error(problem)
    err.print("[dim]run `agentrunner agents validate` for the full list[/]")
    raise typer.Exit(1)
