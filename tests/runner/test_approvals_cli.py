"""The approval commands as a person uses them (issue 41): ``run`` exits 3 and prints how to
decide; ``approvals``, ``approve`` (``--always``, ``--arguments``), ``deny``, ``answer`` and
``grants``; a wrong id or bad JSON is a clear error, no traceback."""

from __future__ import annotations

import json

import pytest

from tests.runner.conftest import Agent
from tests.runner.test_cli_run import cli

CLERK = "model: test\ncapabilities: [notes]\napproval:\n  tools: [note_create]"


def _pending(capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    code, out, err = cli(capsys, "approvals", "--json")
    assert code == 0, err
    listed: list[dict[str, object]] = json.loads(out)
    return listed


def test_run_waits_and_each_decision_goes_on(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("clerk", CLERK)
    code, out, err = cli(capsys, "run", "clerk", "note_create: the plan")
    assert code == 3, err
    [asked] = _pending(capsys)
    assert f"agentrunner approve {asked['id']}" in err and "note_create" in err
    # a second message on the held thread is refused, saying why
    code, _, err = cli(capsys, "run", "clerk", "anything else?")
    assert code == 1 and "thread_waiting" in err and "Traceback" not in err
    # denied with a reason: served here (no worker), the model is told who and why
    code, out, err = cli(capsys, "deny", str(asked["id"])[:10], "--reason", "not now")
    assert code == 0, err
    assert "denied by" in out and "not now" in out
    assert _pending(capsys) == []
    # a late decision on it is refused, naming the first
    code, _, err = cli(capsys, "approve", str(asked["id"]))
    assert code == 1 and "approval_decided" in err and "denied" in err

    # approved with edited arguments: they ran, and were recorded as edited
    assert cli(capsys, "run", "clerk", "note_create: again")[0] == 3
    [second] = _pending(capsys)
    edited = json.dumps({"title": "edited", "body": "by hand"})
    code, out, err = cli(capsys, "approve", str(second["id"]), "--arguments", edited)
    assert code == 0, err
    assert "note_create: (run with arguments edited by" in out
    assert '"title": "edited"' in out


def test_always_grants_until_revoked_and_bad_input_is_a_clear_error(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("clerk", CLERK)
    assert cli(capsys, "run", "clerk", "note_create: one")[0] == 3
    [asked] = _pending(capsys)
    code, _, err = cli(capsys, "approve", str(asked["id"]), "--arguments", "{nope")
    assert code == 1 and "not valid JSON" in err and "Traceback" not in err
    code, _, err = cli(capsys, "approve", "ap_nosuch")
    assert code == 1 and "no approval request 'ap_nosuch'" in err
    assert cli(capsys, "approve", str(asked["id"]), "--always")[0] == 0
    # on this thread, note_create needs no yes now
    code, out, err = cli(capsys, "run", "clerk", "note_create: two")
    assert code == 0, err
    code, out, err = cli(capsys, "grants", "--json")
    [grant] = json.loads(out)
    assert grant["tool"] == "note_create" and grant["scope"] == "thread"
    assert cli(capsys, "grants", "--revoke", grant["id"])[0] == 0
    assert cli(capsys, "run", "clerk", "note_create: three")[0] == 3  # it asks again
    code, _, err = cli(capsys, "grants", "--revoke", grant["id"])
    assert code == 1 and "no grant" in err


def test_a_question_is_answered_from_the_cli(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("planner", "model: test\ncapabilities: [person]")
    assert cli(capsys, "run", "planner", "plan the review")[0] == 3
    [asked] = _pending(capsys)
    assert asked["kind"] == "question"
    code, _, err = cli(capsys, "approve", str(asked["id"]))
    assert code == 1 and "give the answer" in err
    code, out, err = cli(capsys, "answer", str(asked["id"]), "example")
    assert code == 0, err
    assert "ask_person: example" in out
