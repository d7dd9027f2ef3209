"""``agentrunner init`` and ``agentrunner render``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from agentrunner.interfaces.cli.console import err, out

if TYPE_CHECKING:
    from agentrunner.core.model_settings import ModelSettings

__all__ = ["SET_HELP", "init", "parse_input", "parse_settings", "read_message", "render"]

SET_HELP = (
    "A model setting for this run, KEY=VALUE (repeat): temperature=0.2, tool_choice=auto, "
    "thinking=4000, extra.PROVIDER.FIELD=…; values are TOML, a bare word is text."
)


def init(
    directory: Path = typer.Argument(Path("."), help="Where to create the project."),
    template: str = typer.Option(
        "basic",
        "--template",
        "-t",
        help="basic (one assistant), company (a CEO, its C-suite and their teams), office.",
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        "-m",
        help="The project's model (default: local:smollm2 where agentrunner[local] is "
        "installed, else the built-in test model).",
    ),
) -> None:
    """Create agentrunner.toml and an agents/ directory from a template."""
    from agentrunner.runtime.scaffold import create_project, describe_model, starting_model

    model = model or starting_model(template)
    written = create_project(directory, template, model)
    article = "an" if template[0] in "aeiou" else "a"
    out.print(
        f"[green]Created[/] {article} [bold]{template}[/] project in "
        f"[bold]{escape(str(directory))}[/]:"
    )
    for path in written:
        out.print(f"  {escape(str(path))}")
    said = describe_model(model, template)
    out.print(f"Model: [bold]{escape(model)}[/] ({escape(said)})")
    where = "" if directory.resolve() == Path.cwd() else f"cd {directory} && "
    first = {"company": "agentrunner start", "office": 'agentrunner post general "Hello"'}
    out.print(f"\nNext: [bold]{escape(where)}{first.get(template, 'agentrunner agents list')}[/]")


def render(
    agent_id: str = typer.Argument(..., help="The agent id (its file name without .md)."),
    input: str = typer.Option(
        "{}", "--input", "-i", help="Input object: JSON text, @file.json, or - for stdin."
    ),
) -> None:
    """Print an agent's system prompt rendered with an input object."""
    from agentrunner.agents.project import load_project

    values = parse_input(input)
    spec = load_project().agents.get(agent_id)
    sys.stdout.write(spec.render_system(values).text + "\n")
    prompt = spec.render_prompt(values)
    if prompt is not None:
        err.print("[dim]--- user prompt (prompt_template) ---[/]")
        sys.stdout.write(prompt.text + "\n")


def parse_input(text: str, option: str = "--input") -> Any:
    """``option`` (``--input``) as JSON text, ``@path`` or ``-`` (stdin); errors name the
    source."""
    from agentrunner.errors import AgentRunnerError, ErrorCode

    source = option
    if text == "-":
        text, source = sys.stdin.read(), "stdin"
    elif text.startswith("@"):
        path = Path(text[1:])
        try:
            text, source = path.read_text(encoding="utf-8"), str(path)
        except OSError as exc:
            raise AgentRunnerError(
                ErrorCode.RUNNER_IO, f"cannot read {option} file {path}: {exc.strerror or exc}"
            ) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"{source} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            hint='Pass a JSON object, e.g. --input \'{"topic": "tides"}\' or --input @input.json.'
            if option == "--input"
            else f"Pass JSON, or @file for a file of it, to {option}.",
        ) from exc


def parse_settings(assignments: list[str]) -> ModelSettings | None:
    """``--set KEY=VALUE`` options as checked model settings (``validation`` naming a bad
    one); ``None`` with none given."""
    if not assignments:
        return None
    from agentrunner.core.model_settings import model_settings, parse_assignments

    return model_settings(parse_assignments(assignments))


def read_message(text: str) -> str:
    """A message argument: ``-`` reads stdin, ``@path`` a file (a message too long for an
    argument), without their last newlines; ``@@…`` is a literal ``@…``; anything else is the
    message itself. A message that
    is empty after all is refused: a model would be asked nothing."""
    from agentrunner.errors import AgentRunnerError, ErrorCode

    if text == "-":
        text = sys.stdin.read().rstrip("\r\n")  # the input's last newline ends it, not the message
    elif text.startswith("@@"):
        text = text[1:]
    elif text == "@":
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            "@ names no file",
            hint="Write @file to send a file's text (e.g. @question.md), or @@ to send an @.",
        )
    elif text.startswith("@") and not any(c.isspace() for c in text):
        path = Path(text[1:])
        try:
            text = path.read_text(encoding="utf-8").rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
            raise AgentRunnerError(
                ErrorCode.RUNNER_IO,
                f"cannot read the message file {path}: {reason or exc}",
                hint="To send text that starts with @, write @@ (e.g. @@cfo: numbers?).",
            ) from exc
    if not text.strip():
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            "the message is empty",
            hint="Pass the message as an argument, - for stdin, or @file (e.g. @question.md).",
        )
    return text
