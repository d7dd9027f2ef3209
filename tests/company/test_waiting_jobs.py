"""A company job that waits for a person (issue 41): `jobs` and `status` say what it waits on;
a foreground `brief` on a terminal asks, goes on here and writes its journal entry; without
one it prints the commands that decide it and exits 3."""

from __future__ import annotations

import os

from agentrunner.testing import MockProvider, Reply
from tests.company.conftest import Company
from tests.company.test_company_cli import JOURNAL, delegating
from tests.terminal import Terminal

RULE = "approval:\n  tools: [ask_agent]\n"


def _needs_approval(company: Company) -> None:
    ceo = company.root / "agents" / "ceo.md"
    ceo.write_text(ceo.read_text().replace("capabilities:", RULE + "capabilities:", 1))


def test_jobs_and_status_say_what_a_waiting_job_waits_on(
    company: Company, mock: MockProvider
) -> None:
    _needs_approval(company)
    mock.queue(*delegating("Launch planned for May."))
    mock.queue(Reply(text="Planned the launch."), model=JOURNAL)
    waits = company.run("brief", "Plan the launch")  # no terminal here
    assert waits.code == 3, waits.err
    assert "waiting for a decision on ask_agent" in waits.err
    assert "journal:" not in waits.err  # written once the brief completes
    [pending] = company.json("approvals")
    job_id = pending["run_id"]

    [job] = company.json("jobs")
    assert job["id"] == job_id and job["status"] == "waiting"
    assert [(w["id"], w["tool"]) for w in job["waiting_on"]] == [(pending["id"], "ask_agent")]
    listed = company.ok("jobs").out
    assert f"job {job_id} waits for a decision on ask_agent ({pending['id']})" in listed
    assert f"agentrunner approve {pending['id']}" in listed

    status = company.json("status")
    ceo = next(a for a in status["agents"] if a["agent_id"] == "ceo")
    assert ceo["state"] == "waiting" and ceo["run_id"] == job_id
    assert [j["id"] for j in status["jobs"]] == [job_id]
    [waiting] = status["waiting"]
    assert waiting["run_id"] == job_id and waiting["approvals"][0]["id"] == pending["id"]
    shown = company.ok("status").out
    assert f"waiting {job_id} · ceo · ask_agent ({pending['id']})" in shown

    decided = company.ok("approve", pending["id"])  # no worker: it goes on in approve
    assert "Launch planned for May." in decided.out
    [job] = company.json("jobs")
    assert job["status"] == "completed" and job["waiting_on"] == []
    assert "waits for a decision" not in company.ok("jobs").out
    status = company.json("status")
    assert status["waiting"] == [] and status["jobs"] == []
    assert next(a for a in status["agents"] if a["agent_id"] == "ceo")["state"] == "idle"


def test_a_foreground_brief_on_a_terminal_asks_goes_on_and_writes_its_journal(
    company: Company, mock: MockProvider
) -> None:
    _needs_approval(company)
    mock.queue(*delegating("Launch planned for May."))
    mock.queue(Reply(text="Asked for a plan; approved; May."), model=JOURNAL)
    env = {"MOCK_KEY": "sk-mock-key", **os.environ}
    term = Terminal(company.root, "brief", "Plan the launch", env=env)
    try:
        asked = term.expect("decide › ")
        assert "ceo wants to run ask_agent" in asked and '"agent": "cto"' in asked
        term.type("y\n")
        code, shown = term.end()
    finally:
        term.close()
    assert code == 0, shown
    went_on = shown[shown.index("approved ask_agent") :]
    assert "cto › answered" in went_on  # its delegation, printed as it ran here
    assert "Launch planned for May." in went_on
    assert "completed" in went_on and "journal: Asked for a plan; approved; May." in went_on
    [job] = company.json("jobs")
    assert job["status"] == "completed"
    [entry] = company.json("journal")
    assert entry["run_id"] == job["id"] and entry["directive"] == "Plan the launch"


def test_stop_cancels_a_job_that_waits_for_a_person(company: Company, mock: MockProvider) -> None:
    _needs_approval(company)
    mock.queue(*delegating("Launch planned for May."))
    assert company.run("brief", "Plan the launch").code == 3
    [pending] = company.json("approvals")
    stopped = company.ok("stop")
    assert f"killed job {pending['run_id']} (cancelled)" in stopped.err
    assert company.json("approvals") == []  # nothing is left waiting on an ended session
    assert company.job(pending["run_id"])["status"] == "cancelled"
    late = company.run("approve", pending["id"])
    assert late.code == 1 and "approval_decided" in late.err
