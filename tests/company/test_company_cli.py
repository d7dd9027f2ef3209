"""`agentrunner start|brief|stop|journal|jobs|logs|kill` as subprocesses, against the mock
provider (agents on `gpt-mock`, the journal on `journal-mock`, each with its own script)."""

from __future__ import annotations

import os
import signal
from typing import Any

from agentrunner.testing import Fault, MockProvider, Reply
from tests.company.conftest import Company

JOURNAL = "journal-mock"


def delegating(directive_answer: str, cto_answer: str = "Built and tested.") -> list[Reply]:
    """The CEO asks the CTO, the CTO answers, the CEO concludes."""
    return [
        Reply(tool_calls=[("ask_agent", {"agent": "cto", "message": "Build it"})]),
        Reply(text=cto_answer),
        Reply(text=directive_answer),
    ]


def system_of(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "system")


def user_texts(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def ceo_requests(mock: MockProvider) -> list[dict[str, Any]]:
    return [
        r.body
        for r in mock.requests
        if r.body.get("model") == "gpt-mock" and "You are the CEO" in system_of(r.body)
    ]


# -- start ---------------------------------------------------------------------------------------


def test_start_opens_one_session_and_the_root_confirms_its_team(
    company: Company, mock: MockProvider
) -> None:
    mock.queue(Reply(text="I am the CEO; cto and cmo report to me."))
    done = company.ok("start")
    assert "I am the CEO; cto and cmo report to me." in done.out
    for line in ("ceo Chief Executive", "cto Chief Technology Officer", "engineer Engineer"):
        assert line in done.out  # the org chart
    assert "session ses_" in done.out and "completed" in done.err
    [intro] = ceo_requests(mock)
    assert "Introduce yourself" in user_texts(intro)[-1]
    assert "- cto (Chief Technology Officer)" in user_texts(intro)[-1]
    assert "  - engineer (Engineer)" in user_texts(intro)[-1]  # the CTO's report, below it
    assert "Recent session history" not in str(intro)  # no journal yet

    again = company.run("start")
    assert again.code == 1
    assert "session_active" in again.err and "a company session is active already" in again.err
    assert "agentrunner stop" in again.err and "start --resume" in again.err
    assert len(ceo_requests(mock)) == 1  # nothing ran

    resumed = company.ok("start", "--resume")
    assert "resuming session" in resumed.err and "ceo Chief Executive" in resumed.out
    assert len(ceo_requests(mock)) == 1
    [job] = company.json("jobs")
    assert (job["kind"], job["status"]) == ("start", "completed")


def test_start_without_a_root_agent_names_the_file_and_the_template(company: Company) -> None:
    for agent_id in ("ceo", "cto", "cmo", "engineer"):  # a project that is no company
        (company.root / "agents" / f"{agent_id}.md").unlink()
    (company.root / "agents" / "assistant.md").write_text("---\nname: Assistant\n---\nHelp.\n")
    done = company.run("start")
    assert done.code == 1
    assert "agent_not_found" in done.err and "agents/ceo.md" in done.err
    assert "init --template company" in done.err
    toml = company.root / "agentrunner.toml"
    toml.write_text(toml.read_text() + '\n[company]\nroot = "boss"\n')
    other = company.run("brief", "anything")
    assert other.code == 1 and "agents/boss.md" in other.err
    assert "init --template company" in other.err


def test_a_root_typo_suggests_the_agent_meant(company: Company) -> None:
    toml = company.root / "agentrunner.toml"
    toml.write_text(toml.read_text() + '\n[company]\nroot = "ceoo"\n')
    done = company.run("start")
    assert done.code == 1 and "agents/ceoo.md" in done.err
    assert "Did you mean 'ceo'?" in done.err and "init --template" not in done.err


def test_a_start_that_fails_leaves_no_session_behind(company: Company, mock: MockProvider) -> None:
    """A disabled root is refused before anything is opened; an introduction that fails ends
    the session it opened: either way the next start goes ahead."""
    ceo = company.root / "agents" / "ceo.md"
    text = ceo.read_text()
    ceo.write_text(text.replace("name: Chief Executive", "name: Chief Executive\nenabled: false"))
    refused = company.run("start")
    assert refused.code == 1 and "agent_disabled" in refused.err
    assert company.json("jobs") == [] and company.json("status")["session"] is None
    ceo.write_text(text)

    mock.queue(Reply(fault=Fault.http(401, error_type="authentication_error")))
    failed = company.run("start")
    assert failed.code == 1 and "provider_auth" in failed.err
    assert company.json("status")["session"] is None
    mock.queue(Reply(text="Hello, I am the CEO."))
    assert "Hello, I am the CEO." in company.ok("start").out
    assert company.json("status")["session"] is not None


# -- brief and the journal ---------------------------------------------------------------------


def test_two_briefs_stream_delegation_and_leave_their_own_journal_entries(
    company: Company, mock: MockProvider
) -> None:
    mock.queue(*delegating("Launch planned for May."))
    mock.queue(Reply(text="Asked for a launch plan; the CTO built it; May it is."), model=JOURNAL)
    first = company.ok("brief", "Plan the launch")
    assert "Launch planned for May." in first.out
    assert "ceo ›" in first.err and "→ ask_agent" in first.err
    assert "cto › answered" in first.err
    assert "started session ses_" in first.err  # no session was active: brief opened one
    assert "completed" in first.err and "by agent: ceo $" in first.err
    assert "cto $" in first.err and "by model: mockai:gpt-mock $" in first.err
    assert "journal: Asked for a launch plan" in first.err

    mock.queue(Reply(text="Hiring two engineers."))
    mock.queue(Reply(text="Asked to hire; two engineers approved."), model=JOURNAL)
    (company.root / "directive.txt").write_text("Hire engineers\n")
    second = company.ok("brief", "@directive.txt")
    assert "Hiring two engineers." in second.out and "started session" not in second.err

    entries = company.json("journal")
    # from @directive.txt, without the last newline of the file
    assert [e["directive"] for e in entries] == ["Hire engineers", "Plan the launch"]
    assert entries[1]["summary"] == "Asked for a launch plan; the CTO built it; May it is."
    assert entries[0]["summary"] == "Asked to hire; two engineers approved."
    assert entries[0]["session_id"] == entries[1]["session_id"]
    assert entries[1]["cost_usd"] > 0
    jobs = company.json("jobs")
    assert [(j["kind"], j["directive"]) for j in jobs] == [
        ("brief", "Hire engineers"),
        ("brief", "Plan the launch"),
    ]
    # the journal's model was asked about each brief, with what came of it, and no tools
    asked = [r.body for r in mock.requests if r.body.get("model") == JOURNAL]
    assert len(asked) == 2 and all("tools" not in body for body in asked)
    assert "Plan the launch" in user_texts(asked[0])[0] and "cto" in user_texts(asked[0])[0]
    assert "Hire engineers" in user_texts(asked[1])[0]
    # the second brief went to the same session thread: the CEO saw the first one
    assert "Plan the launch" in str(ceo_requests(mock)[-1]["messages"])

    search = company.ok("journal", "--search", "ENGINEERS")
    assert "Hire engineers" in search.out and "Plan the launch" not in search.out
    assert len(company.json("journal", "--limit", "1")) == 1


def test_the_next_session_starts_with_the_journal_in_the_user_position(
    company: Company, mock: MockProvider
) -> None:
    mock.queue(Reply(text="Plan done."))
    mock.queue(Reply(text="The board asked for a plan; the CEO wrote it."), model=JOURNAL)
    company.ok("brief", "Write the plan")
    stopped = company.ok("stop")
    assert "ended" in stopped.out
    assert "nothing to stop" in company.ok("stop").err

    mock.queue(Reply(text="Hello again."))
    company.ok("start")
    first = ceo_requests(mock)[-1]
    opening = user_texts(first)[0]
    assert "Recent session history" in opening
    assert "The board asked for a plan; the CEO wrote it." in opening
    assert "Write the plan" in opening and "Introduce yourself" in opening
    assert "board asked" not in system_of(first)  # model-written: never the system prompt
    assert len(first["messages"]) == 2  # a new thread: system + this message


def test_a_journal_that_cannot_be_written_warns_and_the_brief_succeeds(
    company: Company, mock: MockProvider
) -> None:
    mock.queue(Reply(text="Done anyway."))
    mock.queue(Reply(fault=Fault.http(400, error_type="invalid_request_error")), model=JOURNAL)
    done = company.ok("brief", "Do the thing")
    assert "Done anyway." in done.out
    assert "warning: the journal entry was not written: validation" in done.err
    assert company.json("journal") == []
    assert company.json("jobs")[0]["status"] == "completed"

    # stop writes the entry the last brief is missing
    mock.queue(Reply(text="The thing was asked for and done."), model=JOURNAL)
    company.ok("stop")
    [entry] = company.json("journal")
    assert entry["directive"] == "Do the thing"
    assert entry["summary"] == "The thing was asked for and done."


def test_a_failed_brief_fails_the_command_with_its_job(
    company: Company, mock: MockProvider
) -> None:
    mock.queue(Reply(fault=Fault.http(401, error_type="authentication_error")))
    done = company.run("brief", "Try")
    assert done.code == 1 and "provider_auth" in done.err
    assert "failed" in done.err and "job run_" in done.err
    assert done.err.count("mock fault: HTTP 401") == 1  # said once, by the error line + hint
    assert "provider_auth" in company.ok("logs").err  # the job's log keeps why it failed
    [job] = company.json("jobs")
    assert (job["status"], job["error"]["code"]) == ("failed", "provider_auth")
    assert company.json("journal") == []
    refused = company.run("start")  # the brief opened the session; its failure is not this one's
    assert refused.code == 1 and "session_active" in refused.err
    assert "provider_auth" not in refused.err and "job run_" not in refused.err


def test_brief_reads_the_directive_from_stdin_and_refuses_an_empty_one(
    company: Company, mock: MockProvider
) -> None:
    mock.queue(Reply(text="Read it."))
    mock.queue(Reply(text="Summary."), model=JOURNAL)
    company.ok("brief", "-", stdin="From standard input")
    assert company.json("jobs")[0]["directive"] == "From standard input"
    empty = company.run("brief", "  ")
    assert empty.code == 1 and "validation" in empty.err


# -- background jobs -----------------------------------------------------------------------------


def test_background_brief_logs_follow_and_jobs(company: Company, mock: MockProvider) -> None:
    mock.queue(
        Reply(tool_calls=[("ask_agent", {"agent": "cto", "message": "Ship it"})], delay_s=0.5),
        Reply(text="Shipped."),
        Reply(text="The release is out."),
    )
    mock.queue(Reply(text="A release was asked for; the CTO shipped it."), model=JOURNAL)
    queued = company.ok("brief", "--background", "Release v2")
    job_id = queued.out.split()[-1]
    assert job_id.startswith("run_") and "logs " + job_id in queued.err
    assert "a worker was started (pid" in queued.err

    followed = company.ok("logs", job_id, "--follow")
    assert "The release is out." in followed.out
    assert "ceo ›" in followed.err and "→ ask_agent" in followed.err
    assert "cto › answered" in followed.err
    assert "completed · " in followed.err and f"job {job_id}" in followed.err
    assert "by agent: ceo $" in followed.err and "cto $" in followed.err

    job = company.job(job_id)
    assert (job["status"], job["kind"], job["background"]) == ("completed", "brief", True)
    assert job["directive"] == "Release v2" and job["cost_usd"] > 0
    # the worker writes the background brief's journal entry
    company.wait_for("the journal entry", lambda: bool(company.json("journal")))
    [entry] = company.json("journal")
    assert (entry["run_id"], entry["summary"]) == (
        job_id,
        "A release was asked for; the CTO shipped it.",
    )
    listed = company.ok("jobs")
    assert job_id in listed.out and "brief (bg)" in listed.out and "Release v2" in listed.out
    missing = company.run("logs", "run_nope")
    assert missing.code == 1 and "no job 'run_nope'" in missing.err


def test_logs_prints_the_lines_the_foreground_brief_printed(
    company: Company, mock: MockProvider
) -> None:
    mock.queue(*delegating("All done."))
    mock.queue(Reply(text="Summary."), model=JOURNAL)
    live = company.ok("brief", "Do it all")
    replayed = company.ok("logs")  # the newest job
    assert replayed.out == live.out
    lines = [
        line
        for line in live.err.splitlines()
        if not line.startswith(("journal:", "started session"))
    ]
    assert replayed.err.splitlines() == lines


def test_kill_a_running_background_job(company: Company, mock: MockProvider) -> None:
    mock.queue(Reply(text="too late", delay_s=60))
    job_id = company.ok("brief", "--background", "Think forever").out.split()[-1]
    company.wait_for("the job to run", lambda: company.job(job_id)["status"] == "running")
    # `status` says it runs (seed 002, issue 46 item 7): its job, and its agent working on it
    status = company.json("status")
    assert [(j["id"], j["status"]) for j in status["jobs"]] == [(job_id, "running")]
    ceo = next(a for a in status["agents"] if a["agent_id"] == "ceo")
    assert (ceo["state"], ceo["run_id"]) == ("working", job_id)
    assert job_id in company.ok("status").out
    killed = company.ok("kill", job_id)
    assert f"job {job_id}: cancelled" in killed.out
    assert company.json("status")["jobs"] == []
    job = company.job(job_id)
    assert job["status"] == "cancelled"
    assert company.json("journal") == []
    # its error says its code once (it said "cancelled: cancelled: cancelled on request")
    [said] = [
        line for line in company.ok("runs", "show", job_id).out.splitlines() if "error" in line
    ]
    assert said.count("cancelled") == 1, said


def test_jobs_says_what_a_running_job_has_spent_so_far(
    company: Company, mock: MockProvider
) -> None:
    """A job's own figure is written as it ends; until then `jobs` shows what its finished
    steps cost (it said $0.0000 for as long as a job ran)."""

    def spend(job_id: str) -> float:
        [line] = [line for line in company.ok("jobs").out.splitlines() if job_id in line]
        return float(line.split("$")[1].split()[0])

    seen = []
    for tokens in (1_000, 5_000):  # one step paid for, the next waiting on the model
        mock.queue(
            Reply(tool_calls=[("no_such_tool", {})], input_tokens=tokens),
            Reply(text="too late", delay_s=60),
        )
        job_id = company.ok("brief", "--background", f"Spend {tokens}").out.split()[-1]
        company.wait_for("its first step to be paid", lambda j=job_id: spend(j) > 0)  # type: ignore[misc]
        assert company.job(job_id)["status"] == "running"
        seen.append((job_id, spend(job_id)))
        company.ok("kill", job_id)
    (first, cheap), (second, dear) = seen
    assert 0 < cheap < dear  # five times the input tokens, a larger figure
    # killed: the figures they settled, the request cut off paid for too (its input was sent)
    assert spend(first) >= cheap and spend(second) >= dear


def test_kill_of_a_completed_job_leaves_it_completed(company: Company, mock: MockProvider) -> None:
    mock.queue(Reply(text="Finished."))
    mock.queue(Reply(text="Summary."), model=JOURNAL)
    company.ok("brief", "Quick one")
    job_id = company.json("jobs")[0]["id"]
    done = company.ok("kill", job_id[:-4])  # the beginning of its id will do
    assert "had already ended (completed); left as it was" in done.err
    assert company.job(job_id)["status"] == "completed"
    missing = company.run("kill", "run_nope")
    assert missing.code == 1 and "not_found" in missing.err and "agentrunner jobs" in missing.err


def test_a_killed_worker_process_is_healed_with_the_reason(
    company: Company, mock: MockProvider
) -> None:
    mock.queue(Reply(text="never", delay_s=60))
    job_id = company.ok("brief", "--background", "Hang").out.split()[-1]
    company.wait_for("the job to run", lambda: company.job(job_id)["status"] == "running")
    [pid] = company.worker_pids()
    assert company.job(job_id)["worker_id"].endswith(f":{pid}")  # the worker serving it
    os.kill(pid, signal.SIGKILL)
    company.wait_for("the worker to die", lambda: not _alive(pid))

    healed = company.ok("jobs")
    assert f"healed job {job_id}" in healed.err and f"pid {pid}" in healed.err
    job = company.job(job_id)
    assert (job["status"], job["error"]["code"]) == ("failed", "worker_lost")
    assert f"its process (pid {pid} on " in job["error"]["message"]
    assert "is gone" in job["error"]["message"]
    assert "healed" not in company.ok("jobs").err  # once

    # the next background brief starts a new worker (the dead one is not counted)
    mock.queue(Reply(text="Back."))
    mock.queue(Reply(text="Summary."), model=JOURNAL)
    again = company.ok("brief", "--background", "Again")
    assert "a worker was started" in again.err
    next_id = again.out.split()[-1]
    company.wait_for("the next job", lambda: company.job(next_id)["status"] == "completed")


def _alive(pid: int) -> bool:
    from agentrunner.workspace.company.jobs import process_alive

    return process_alive(pid)


# -- stop ----------------------------------------------------------------------------------------


def test_stop_kills_the_sessions_jobs_and_ends_it(company: Company, mock: MockProvider) -> None:
    mock.queue(Reply(text="Hi, I am the CEO."))
    company.ok("start")
    session_id = company.json("jobs")[0]["session_id"]
    mock.queue(Reply(text="slow", delay_s=60))
    job_id = company.ok("brief", "--background", "Take your time").out.split()[-1]
    company.wait_for("the job to run", lambda: company.job(job_id)["status"] == "running")

    stopped = company.ok("stop")
    assert f"killed job {job_id}" in stopped.err
    assert f"session {session_id} ended" in stopped.out
    assert company.job(job_id)["status"] == "cancelled"

    mock.queue(Reply(text="A new day."))
    company.ok("start")  # no longer refused
    newest = company.json("jobs")[0]
    assert newest["session_id"] != session_id and newest["kind"] == "start"


def test_a_background_brief_on_postgresql(company_on_postgres: Company, mock: MockProvider) -> None:
    """The same jobs over PostgreSQL: the worker wakes on NOTIFY, the rows are the same."""
    company = company_on_postgres
    mock.queue(*delegating("Done on PostgreSQL."))
    mock.queue(Reply(text="Asked and done, on PostgreSQL."), model=JOURNAL)
    job_id = company.ok("brief", "--background", "Use the big database").out.split()[-1]
    followed = company.ok("logs", job_id, "--follow")
    assert "Done on PostgreSQL." in followed.out and "cto › answered" in followed.err
    assert company.job(job_id)["status"] == "completed"
    company.wait_for("the journal entry", lambda: bool(company.json("journal")))
    assert company.json("journal")[0]["summary"] == "Asked and done, on PostgreSQL."
    assert "ended" in company.ok("stop").out


def test_a_job_left_running_by_a_dead_brief_does_not_keep_the_worker_alive(
    company: Company, mock: MockProvider
) -> None:
    import subprocess
    import sys

    mock.queue(Reply(text="never", delay_s=60))
    brief = subprocess.Popen(
        [sys.executable, "-m", "agentrunner", "brief", "Hang in the foreground"],
        cwd=company.root,
        env={**os.environ, "MOCK_KEY": "sk-mock-key"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    company.wait_for("the brief to run", lambda: len(mock.requests) == 1)
    stale = company.json("jobs")[0]["id"]
    assert company.status_of(stale) == "running"
    brief.kill()  # kill -9: its job is left marked running
    brief.wait()

    mock.queue(Reply(text="Quick."))
    mock.queue(Reply(text="Summary."), model=JOURNAL)
    job_id = company.ok("brief", "--background", "Quick one").out.split()[-1]
    # no command that heals runs meanwhile: the worker heals the stale job itself, then finds
    # nothing to do and leaves
    company.wait_for("the quick job", lambda: company.status_of(job_id) == "completed")
    company.wait_for("the worker to leave", lambda: not company.worker_pids(), within_s=60)
    assert company.status_of(stale) == "failed"
    job = company.job(stale)
    assert (job["status"], job["error"]["code"]) == ("failed", "worker_lost")
    assert f"pid {brief.pid} " in job["error"]["message"]
