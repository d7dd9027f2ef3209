"""Deciding on a terminal (issue 41): ``run``, ``chat`` and a foreground ``brief`` ask inline
when their run waits, decide, and go on with the run in the same process; Ctrl-C at the
question leaves the run waiting. Driven through a pseudo-terminal, as a person types."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.runner.conftest import Agent
from tests.runner.test_cli_run import cli
from tests.terminal import DEADLINE_S, Terminal

CLERK = "model: test\ncapabilities: [notes]\napproval:\n  tools: [note_create]"


def _run(project: Path, *args: str) -> Terminal:
    return Terminal(project, *args)


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    code, out, err = cli(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def _results(capsys: pytest.CaptureFixture[str], run_id: str) -> dict[str, str]:
    """Each tool's result, as the run's record shows it."""
    shown = _json(capsys, "runs", "show", run_id)
    return {
        m["tool_name"]: m["content"]
        for m in shown["messages"]
        if m["type"] == "tool_return_message"
    }


def _answer(capsys: pytest.CaptureFixture[str], run_id: str) -> str:
    """The run's last answer (the test model's lists what each tool told it)."""
    shown = _json(capsys, "runs", "show", run_id)
    return str([m for m in shown["messages"] if m["type"] == "assistant_message"][-1]["content"])


def _only_run(capsys: pytest.CaptureFixture[str], thread: str | None = None) -> dict[str, Any]:
    runs = _json(capsys, "runs", "list", *(["--thread", thread] if thread else []))
    return dict(runs[0])


def test_yes_on_a_terminal_goes_on_with_the_run_here(
    agent: Agent, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("clerk", CLERK)
    term = _run(project, "run", "clerk", "note_create: the plan for Monday")
    try:
        asked = term.expect("decide › ")
        assert "clerk wants to run note_create" in asked and '"title": "example"' in asked
        assert "[y]es" in asked and "[e]dit" in asked
        term.type("s\n")  # the arguments whole, then asked again
        assert '  "body": "example"' in term.expect("decide › ")
        term.type("y\n")
        code, shown = term.end()
    finally:
        term.close()
    assert code == 0, shown
    went_on = shown[shown.index("approved note_create") :]
    assert "[test model] I called note_create" in went_on  # the rest of the run, printed here
    assert "end_turn" in went_on and "Traceback" not in shown
    run = _only_run(capsys)
    assert run["status"] == "completed"
    assert _results(capsys, run["id"])["note_create"] == "example"  # the note was created
    assert _json(capsys, "approvals") == []


def test_no_with_a_reason_and_edited_arguments_differ(
    agent: Agent, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("clerk", CLERK)
    denied = _run(project, "run", "clerk", "note_create: draft", "--new")
    try:
        denied.expect("decide › ")
        denied.type("n\n")
        denied.expect("reason (Enter for none) › ")
        denied.type("not on Mondays\n")
        code, shown = denied.end()
    finally:
        denied.close()
    assert code == 0, shown
    assert "denied note_create" in shown
    first = _only_run(capsys)
    # what the model was told, and by whom
    assert "- note_create: error: denied by ana: not on Mondays" in _answer(capsys, first["id"])

    edited = _run(project, "run", "clerk", "note_create: draft", "--new")
    try:
        edited.expect("decide › ")
        edited.type("e\n")
        edited.expect("arguments (JSON; Enter keeps them) › ")
        edited.type("[1, 2]\n")  # not an object: said, and asked again
        assert "must be a JSON object" in edited.expect("decide › ")
        edited.type("e\n")
        edited.expect("› ")
        edited.type('{"title": "final", "body": "the real plan"}\n')
        code, shown = edited.end()
    finally:
        edited.close()
    assert code == 0, shown
    assert "approved note_create (arguments edited)" in shown
    second = _only_run(capsys)
    assert second["id"] != first["id"] and second["thread_id"] != first["thread_id"]
    assert _results(capsys, second["id"])["note_create"] == "final"  # the edited note
    assert "- note_create: (run with arguments edited by ana" in _answer(capsys, second["id"])
    [request] = _json(capsys, "runs", "show", second["id"])["approvals"]
    assert request["edited"] and request["arguments_used"]["title"] == "final"
    assert request["arguments"]["title"] == "example"  # what the model asked, kept


def test_ctrl_c_at_the_question_leaves_the_run_waiting(
    agent: Agent, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("clerk", CLERK)
    term = _run(project, "run", "clerk", "note_create: later")
    try:
        term.expect("decide › ")
        term.type("\x03")  # the terminal's Ctrl-C
        code, shown = term.end()
    finally:
        term.close()
    assert code == 3, shown  # it waits, as a run without a terminal does
    assert "agentrunner approve ap_" in shown and "Traceback" not in shown
    run = _only_run(capsys)
    assert run["status"] == "waiting"  # neither lost nor cancelled
    [pending] = _json(capsys, "approvals")
    assert pending["run_id"] == run["id"] and pending["status"] == "pending"
    code, out, err = cli(capsys, "approve", pending["id"])  # decided later, elsewhere
    assert code == 0, err
    assert "[test model] I called note_create" in out
    assert _only_run(capsys)["status"] == "completed"


def test_chat_asks_inline_and_the_session_goes_on(
    agent: Agent, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("clerk", CLERK)
    term = _run(project, "chat", "clerk")
    try:
        term.expect("you › ")
        term.type("note_create: groceries\n")
        term.expect("decide › ")
        term.type("a\n")  # always, on this thread
        assert "[test model] I called note_create" in term.expect("you › ")
        term.type("note_create: more groceries\n")  # granted: no question this time
        assert "decide ›" not in term.expect("you › ")
        term.type("/exit\n")
        code, shown = term.end()
    finally:
        term.close()
    assert code == 0, shown
    runs = _json(capsys, "runs", "list")
    assert [r["status"] for r in runs] == ["completed", "completed"]
    [decided] = _json(capsys, "runs", "show", runs[1]["id"])["approvals"]
    assert decided["always"] == "thread" and decided["decided_by"] == "ana"
    assert _json(capsys, "runs", "show", runs[0]["id"])["approvals"] == []


def test_ctrl_c_at_a_chat_question_leaves_it_waiting_and_the_session_goes_on(
    agent: Agent, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("clerk", CLERK)
    term = _run(project, "chat", "clerk")
    try:
        term.expect("you › ")
        term.type("note_create: groceries\n")
        term.expect("decide › ")
        term.type("\x03")
        assert "agentrunner approve ap_" in term.expect("you › ")
        term.type("and milk\n")  # read once, by the one reader: the held thread says why
        assert "error: thread_waiting:" in term.expect("you › ")
        term.type("/exit\n")
        code, shown = term.end()
    finally:
        term.close()
    assert code == 0, shown
    [run] = _json(capsys, "runs", "list")
    assert run["status"] == "waiting"


def test_chat_without_a_terminal_says_the_thread_waits_and_goes_on(
    agent: Agent, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("clerk", CLERK)
    done = subprocess.run(
        [sys.executable, "-m", "agentrunner", "chat", "clerk"],
        input="note_create: one\nand another thing\n/exit\n",
        capture_output=True,
        text=True,
        cwd=project,
        timeout=DEADLINE_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "waiting for a decision on note_create" in done.stderr
    assert "agentrunner approve ap_" in done.stderr
    # the next line on the held thread: refused with its error, and the session went on
    assert "error: thread_waiting:" in done.stderr and "Traceback" not in done.stderr
    [run] = _json(capsys, "runs", "list")
    assert run["status"] == "waiting"


def test_approve_prints_the_answer_as_the_agent_said_it(
    agent: Agent, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("clerk", CLERK)
    code, _, err = cli(capsys, "run", "clerk", "note_create: [bold] is not markup")
    assert code == 3, err  # no terminal here: it waits, and says how to decide
    [pending] = _json(capsys, "approvals")
    code, out, err = cli(capsys, "approve", pending["id"])
    assert code == 0, err
    assert out.startswith("[test model] I called note_create")  # brackets printed, not eaten
