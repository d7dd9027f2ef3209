"""The Typer application: global options and command registration.

Command modules import the library lazily inside each command, so ``agentrunner --help`` loads
no provider, store or HTTP code.
"""

from __future__ import annotations

from enum import StrEnum

import typer

from agentrunner._version import __version__
from agentrunner.interfaces.cli import (
    agents,
    approvals,
    company,
    cost,
    evals,
    forks,
    gc,
    project,
    run,
    schedules,
    serve,
    tasks,
    threads_runs,
    workspace,
)

__all__ = ["app"]

app = typer.Typer(
    name="agentrunner",
    help="Run LLM agents defined in Markdown files: durable, observable, budget-safe.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


class LogFormat(StrEnum):
    text = "text"
    json = "json"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"agentrunner {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_show_version, is_eager=True, help="Print the version."
    ),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks and debug log lines."),
    log_format: LogFormat = typer.Option(
        LogFormat.text,
        "--log-format",
        envvar="AGENTRUNNER_LOG_FORMAT",
        case_sensitive=False,
        help="How agentrunner logs on stderr: text (warnings and errors) or json (one object "
        "per line, INFO and up: what agents decided, with run and trace ids).",
    ),
) -> None:
    """agentrunner: agents as Markdown files, run from the CLI, Python or HTTP."""
    from agentrunner.interfaces.cli.console import print_logs

    print_logs(log_format.value, debug=debug)


app.command("init")(project.init)
app.command("render")(project.render)
app.command("run")(run.run)
app.command("chat")(run.chat)
app.command("post")(workspace.post)
app.command("dm")(workspace.dm)
app.command("worker")(workspace.worker)
app.command("status")(workspace.status)
app.command("approvals")(approvals.approvals)
app.command("approve")(approvals.approve)
app.command("deny")(approvals.deny)
app.command("answer")(approvals.answer)
app.command("grants")(approvals.grants)
app.command("cost")(cost.cost)
app.command("gc")(gc.gc)
app.command("serve")(serve.serve)
app.command("token")(serve.new_token)
app.command("stdio")(serve.stdio)
app.command("mcp")(serve.mcp)
app.command("exec")(tasks.exec_command)
app.command("start")(company.start)
app.command("brief")(company.brief)
app.command("stop")(company.stop)
app.command("journal")(company.journal)
app.command("jobs")(company.jobs)
app.command("logs")(company.logs)
app.command("kill")(company.kill)
app.command("serve-briefs", hidden=True)(company.serve_briefs)
app.add_typer(tasks.cache_app, name="cache")
app.add_typer(workspace.channels_app, name="channels")
app.add_typer(agents.app, name="agents")
app.command("eval")(evals.eval_command)
app.add_typer(evals.evals_app, name="evals")
threads_runs.threads_app.command("fork")(forks.threads_fork)
threads_runs.threads_app.command("rewind")(forks.threads_rewind)
app.add_typer(threads_runs.threads_app, name="threads")
threads_runs.runs_app.command("replay")(forks.runs_replay)
app.add_typer(threads_runs.runs_app, name="runs")
app.add_typer(schedules.app, name="schedules")
