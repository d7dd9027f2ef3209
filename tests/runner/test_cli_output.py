"""What only real output shows (issue 43): a streamed answer that does not end in a newline is
ended before anything else is printed, on stdout or on stderr (a log line, the end line, an
error, the next turn); and a model's text — markup, entities, backslashes, emoji codes — is
shown as the model wrote it wherever the CLI shows it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentrunner.interfaces.cli import console
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.runner.test_cli_run import cli

UNPRICED = "mockai:gpt-unpriced"  # no [prices] entry and none known: "no price known" is logged
_END_LINE = re.compile(r"^[\d,]+ tokens · ")

# Each ends differently in backslashes: Rich's escape() doubles a last one where no markup
# follows it, and drops one of two where markup does.
MARKUP = [
    "[bold]x[/bold] &amp; &lt;b&gt; <b> :smile: [red] C:\\new\\",
    "[red]alert[/red] \\[dim] :x: [/] [link=https://e.x]y[/link] two\\\\",
]


def _merged(project: Path, *args: str, stdin: str | None = None) -> tuple[int, list[str]]:
    """``agentrunner ARGS`` with stdout and stderr in one stream, as a terminal shows them."""
    done = subprocess.run(
        [sys.executable, "-m", "agentrunner", *args],
        cwd=project,
        env={**os.environ, "COLUMNS": "400"},
        input=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stdout.split("\n")


@pytest.mark.parametrize("answer", ["It launched on time.", "It launched on time.\n"])
def test_a_streamed_answer_is_ended_before_a_log_line_a_tool_call_or_the_end_line(
    agent: Agent, mock: MockProvider, project: Path, answer: str
) -> None:
    """A real model's answer did not end in a newline, and the pricing warning ran into it:
    "…launch period.no price known…"."""
    agent("helper", "capabilities: [notes]")
    mock.queue(
        Reply(text="Let me note it.", tool_calls=[("note_create", {"title": "T", "body": "B"})]),
        Reply(text=answer),
    )
    code, lines = _merged(project, "run", "helper", "launch?", "--model", UNPRICED)
    assert code == 0, lines
    assert lines[-1] == ""  # the output ends with its last line's newline
    lines = lines[:-1]
    assert "" not in lines, lines  # no blank line: a text ending in a newline gets no second
    assert "Let me note it." in lines and "It launched on time." in lines, lines
    warnings = [line for line in lines if "no price known" in line]
    assert warnings == [
        f"warning: no price known for {UNPRICED}: its cost is reported as unknown. Add "
        f'[prices."{UNPRICED}"] to agentrunner.toml to price it.'
    ], lines
    others = set(lines) - {"Let me note it.", "It launched on time.", *warnings}
    assert all(line.startswith(("→ note_create", "← ")) or _END_LINE.match(line) for line in others)
    assert _END_LINE.match(lines[-1]) and "cost unknown" in lines[-1], lines


def test_chat_ends_each_answer_before_its_next_line(
    agent: Agent, mock: MockProvider, project: Path
) -> None:
    agent("helper")
    mock.queue(Reply(text="First [bold]answer[/bold]"), Reply(text="Second answer.\n"))
    code, lines = _merged(project, "chat", "helper", "--model", UNPRICED, stdin="one\ntwo\n")
    assert code == 0, lines
    assert lines[-1] == "" and "" not in lines[:-1], lines
    first = next(i for i, line in enumerate(lines) if line.endswith("First [bold]answer[/bold]"))
    assert lines[first + 1].startswith("warning: no price known for"), lines
    assert _END_LINE.match(lines[first + 2]), lines
    second = next(i for i, line in enumerate(lines) if line.endswith("Second answer."))
    assert _END_LINE.match(lines[second + 1]), lines  # warned once, for the first


def test_an_error_after_a_streamed_answer_starts_on_its_own_line(
    agent: Agent, mock: MockProvider, project: Path
) -> None:
    """The answer streamed, then the run failed (here: its next request was refused)."""
    from agentrunner.testing import Fault

    agent("helper", "capabilities: [notes]")
    mock.queue(
        Reply(text="Working on it", tool_calls=[("note_create", {"title": "T", "body": "B"})]),
        Reply(fault=Fault.http(401)),
    )
    code, lines = _merged(project, "run", "helper", "go")
    assert code == 1, lines
    assert "Working on it" in lines, lines
    assert any(line.startswith("error: provider_auth") for line in lines), lines


@pytest.mark.parametrize("text", MARKUP)
def test_a_models_text_is_printed_as_written_by_run_runs_show_and_threads_show(
    agent: Agent,
    mock: MockProvider,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    text: str,
) -> None:
    monkeypatch.setattr(console.out, "width", 400)
    agent("helper", "capabilities: [notify]")
    mock.queue(Reply(tool_calls=[("notify_user", {"message": text})]), Reply(text=text))
    code, out, err = cli(capsys, "run", "helper", "say it")
    assert code == 0, err
    assert out == text + "\n"  # streamed as it came, its line ended once
    errs = err.splitlines()
    assert f"🔔 {text}" in errs, err
    assert f"→ notify_user {json.dumps({'message': text}, ensure_ascii=False)}" in errs, err

    mock.queue(Reply(text=text))
    code, out, err = cli(capsys, "run", "helper", "again", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["text"] == text

    code, out, err = cli(capsys, "runs", "show", result["run_id"])
    assert code == 0, err
    assert f"  assistant: {text}" in out.splitlines(), out

    code, out, err = cli(capsys, "threads", "show", result["thread_id"])
    assert code == 0, err
    assert out.splitlines().count(text) == 2, out  # the two answers, each on its own line


@pytest.mark.parametrize("text", MARKUP)
def test_a_summary_a_dm_reply_exec_and_an_answer_are_printed_as_written(
    agent: Agent,
    mock: MockProvider,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    text: str,
) -> None:
    monkeypatch.setattr(console.out, "width", 400)
    agent("helper")
    code, out, err = cli(capsys, "run", "helper", "Remember this.", "--json")
    assert code == 0, err
    thread_id = json.loads(out)["thread_id"]
    mock.queue(Reply(text=text))
    code, out, err = cli(capsys, "threads", "compact", thread_id)
    assert code == 0, err
    assert text in out.splitlines(), out
    code, out, err = cli(capsys, "threads", "show", thread_id)
    assert code == 0 and text in out.splitlines(), out

    mock.queue(Reply(text=text))
    code, out, err = cli(capsys, "dm", "helper", "hi")
    assert code == 0, err
    [line] = out.splitlines()
    assert line.split(" ", 1)[1] == f"helper: {text}", out

    mock.queue(Reply(text=text))
    code, out, err = cli(capsys, "exec", "helper", "-i", '{"q": 1}', "--no-cache")
    assert code == 0, err
    assert out == text + "\n"

    # the answer of a run that waited for a person, served by `answer`
    agent("planner", "capabilities: [person]")
    mock.queue(Reply(tool_calls=[("ask_person", {"question": "Which one?"})]), Reply(text=text))
    assert cli(capsys, "run", "planner", "plan the review")[0] == 3
    [asked] = json.loads(cli(capsys, "approvals", "--json")[1])
    code, out, err = cli(capsys, "answer", str(asked["id"]), "the first")
    assert code == 0, err
    assert out == text + "\n"


_LOGS = """
import logging, sys
from agentrunner.interfaces.cli import console
console.print_logs("text", debug="--debug" in sys.argv)
console.stream(sys.argv[1])
try:
    1 / 0
except ZeroDivisionError:
    logging.getLogger("agentrunner.somewhere").exception("it broke [bold]here[/bold]")
logging.getLogger("a.library").warning("careful: %s", "[red]")
"""


@pytest.mark.parametrize("streamed", ["partial answer", "whole answer\n"])
def test_a_log_record_is_said_on_its_own_line_as_the_clis_warning_never_a_traceback(
    streamed: str,
) -> None:
    """Any logger's record no handler takes (agentrunner's, a library's) is printed as the CLI
    says its own warnings: after the streamed line, its words as said, one line each."""
    done = subprocess.run(
        [sys.executable, "-c", _LOGS, streamed],
        env={**os.environ, "NO_COLOR": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout
    assert done.stdout.split("\n") == [
        streamed.rstrip("\n"),
        "error: it broke [bold]here[/bold] (ZeroDivisionError: division by zero)",
        "warning: careful: [red]",
        "",
    ]
    debug = subprocess.run(
        [sys.executable, "-c", _LOGS, streamed, "--debug"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Traceback" in debug.stderr and "ZeroDivisionError" in debug.stderr  # --debug
