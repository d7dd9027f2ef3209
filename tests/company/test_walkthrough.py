"""The company walk-through end to end, every command a subprocess against the mock provider:
start → brief (the CEO delegates to the CTO and the CMO, the CTO to its engineer) → brief
--background → logs --follow → jobs → journal → cost → status → stop → the next session's
start, whose first request to the CEO carries the journal. Each agent answers on a model of
its own, so the scripts are per agent and the parallel delegations need no ordering."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentrunner.testing import MockProvider, MockProviderServer, Reply
from tests.company.conftest import Company

CONFIG = """\
[project]
agents_dir = "agents"

[defaults]
model = "mockai:ceo-mock"
title_model = "test"

[providers.mockai]
kind = "openai"
base_url = "{openai}"
api_key_env = "MOCK_KEY"

[journal]
model = "mockai:journal-mock"

[budgets]
per_agent_daily_usd = {agent_daily}
{prices}
"""

# Different prices per agent's model: a cost put on the wrong agent would show.
PRICES = {"ceo": 3.0, "cto": 2.0, "cmo": 1.5, "engineer": 1.0, "journal": 0.1}

AGENTS = {
    "ceo": "name: CEO\nmodel: mockai:ceo-mock\n---\nYou are the CEO. You delegate.",
    "cto": "name: CTO\nreports_to: ceo\nmodel: mockai:cto-mock\n---\nYou are the CTO.",
    "cmo": "name: CMO\nreports_to: ceo\nmodel: mockai:cmo-mock\n---\nYou are the CMO.",
    "engineer": "name: Engineer\nreports_to: cto\nmodel: mockai:engineer-mock\n---\nYou code.",
}


def make_company(root: Path, server: MockProviderServer, agent_daily: float = 5.0) -> Company:
    prices = "".join(
        f'\n[prices."mockai:{name}-mock"]\ninput_per_mtok = {usd}\noutput_per_mtok = {usd * 4}\n'
        for name, usd in PRICES.items()
    )
    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text(
        CONFIG.format(openai=server.openai_url, agent_daily=agent_daily, prices=prices)
    )
    for agent_id, text in AGENTS.items():
        (root / "agents" / f"{agent_id}.md").write_text(f"---\n{text}\n")
    return Company(root)


def script_delegation(mock: MockProvider, directive: str, answer: str, summary: str) -> None:
    """The CEO hands the directive to the CTO and the CMO at once; the CTO hands it on to its
    engineer; each answers; the CEO concludes; the journal model sums it up."""
    mock.queue(
        Reply(
            tool_calls=[
                ("delegate", {"agent": "cto", "task": f"Engineering for: {directive}"}),
                ("delegate", {"agent": "cmo", "task": f"Marketing for: {directive}"}),
            ]
        ),
        Reply(text=answer),
        model="ceo-mock",
    )
    mock.queue(
        Reply(tool_calls=[("delegate", {"agent": "engineer", "task": f"Build: {directive}"})]),
        Reply(text=f"CTO: built ({directive})"),
        model="cto-mock",
    )
    mock.queue(Reply(text=f"Engineer: shipped ({directive})"), model="engineer-mock")
    mock.queue(Reply(text=f"CMO: campaign ready ({directive})"), model="cmo-mock")
    mock.queue(Reply(text=summary), model="journal-mock")


def runs_of(company: Company) -> list[dict[str, Any]]:
    with contextlib.closing(
        sqlite3.connect(company.root / ".agentrunner" / "agentrunner.db")
    ) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("SELECT * FROM runs ORDER BY created_at, id")]


def tree_of(runs: list[dict[str, Any]], root_id: str) -> list[tuple[int, str, str | None]]:
    """(depth, agent, parent's agent) of the run ``root_id`` and its descendants."""
    by_id = {r["id"]: r for r in runs}
    members, frontier = [root_id], [root_id]
    while frontier:
        frontier = [r["id"] for r in runs if r["parent_run_id"] in frontier]
        members += frontier
    return sorted(
        (
            by_id[i]["depth"],
            by_id[i]["agent_id"],
            by_id[p]["agent_id"] if (p := by_id[i]["parent_run_id"]) else None,
        )
        for i in members
    )


TREE = [
    (0, "ceo", None),
    (1, "cmo", "ceo"),
    (1, "cto", "ceo"),
    (2, "engineer", "cto"),
]


def test_the_company_walk_through(
    tmp_path: Path, mock_server: MockProviderServer, mock: MockProvider
) -> None:
    company = make_company(tmp_path / "acme", mock_server)

    mock.queue(Reply(text="I am the CEO; my team is the CTO, the CMO and an engineer."),
               model="ceo-mock")  # fmt: skip
    started = company.ok("start")
    assert "I am the CEO" in started.out
    intro = mock.requests[-1].body
    assert "cto" in str(intro["messages"]) and "engineer" in str(intro["messages"])

    # a foreground brief: who speaks, their tool calls, a cost line
    script_delegation(mock, "Plan the launch", "Launch in May.", "Launch planned: May.")
    briefed = company.ok("brief", "Plan the launch")
    assert "Launch in May." in briefed.out
    for who in ("ceo ›", "cto ›", "cmo ›", "engineer ›", "→ delegate"):
        assert who in briefed.err, who
    assert "by agent: ceo $" in briefed.err and "by model:" in briefed.err

    # a background brief, followed
    script_delegation(mock, "Price it", "Pricing set.", "Pricing asked; set at $9.")
    queued = company.ok("brief", "--background", "Price it")
    job_id = queued.out.split()[-1]
    followed = company.ok("logs", job_id, "--follow")
    assert "Pricing set." in followed.out and "engineer ›" in followed.err

    # the delegation trees, as recorded
    runs = runs_of(company)
    roots = [r for r in runs if r["parent_run_id"] is None and r["agent_id"] == "ceo"]
    assert len(roots) == 3  # start, brief, background brief
    assert tree_of(runs, roots[1]["id"]) == TREE
    assert tree_of(runs, roots[2]["id"]) == TREE
    assert roots[2]["id"] == job_id
    # each delegate was handed its own task (read from what the mock received)
    asked = {
        model: [str(r.body["messages"]) for r in mock.requests if r.body.get("model") == model]
        for model in ("cmo-mock", "engineer-mock")
    }
    assert "Marketing for: Plan the launch" in asked["cmo-mock"][0]
    assert "Marketing for: Price it" in asked["cmo-mock"][1]
    assert "Build: Plan the launch" in asked["engineer-mock"][0]
    assert "Build: Price it" in asked["engineer-mock"][1]

    jobs = company.json("jobs")
    assert [(j["kind"], j["status"], j["background"]) for j in jobs] == [
        ("brief", "completed", True),
        ("brief", "completed", False),
        ("start", "completed", False),
    ]

    company.wait_for(
        "the background brief's journal entry", lambda: len(company.json("journal")) == 2
    )
    entries = company.json("journal")
    assert [(e["directive"], e["summary"]) for e in entries] == [
        ("Price it", "Pricing asked; set at $9."),
        ("Plan the launch", "Launch planned: May."),
    ]

    # money: per agent and per model add up to the total, which is what the runs cost
    cost = company.json("cost")
    by_agent = {row["agent_id"]: row["cost_micros"] for row in cost["by_agent"]}
    assert set(by_agent) == {"ceo", "cto", "cmo", "engineer"}
    assert all(micros > 0 for micros in by_agent.values())
    assert sum(by_agent.values()) == cost["total"]["cost_micros"]
    assert sum(row["cost_micros"] for row in cost["by_model"]) == cost["total"]["cost_micros"]
    root_runs_cost = sum(r["cost_micros"] for r in runs if r["parent_run_id"] is None)
    # the journal's requests are paid for too, on the CEO's account, with the brief they sum up
    journal_cost = next(
        row["cost_micros"] for row in cost["by_model"] if row["model"] == "mockai:journal-mock"
    )
    assert journal_cost > 0
    assert cost["total"]["cost_micros"] == root_runs_cost + journal_cost
    assert cost["session"]["cost_micros"] == cost["total"]["cost_micros"]  # all in this session
    # a delegate's cost is its own model's: the engineer's is priced lowest per token
    assert by_agent["engineer"] < by_agent["ceo"]

    status = company.json("status")
    assert [(a["agent_id"], a["depth"], a["state"]) for a in status["agents"]] == [
        ("ceo", 0, "idle"),
        ("cmo", 1, "idle"),
        ("cto", 1, "idle"),
        ("engineer", 2, "idle"),
    ]
    assert status["session"]["root_agent"] == "ceo" and status["jobs"] == []
    assert status["session"]["spent"]["cost_micros"] == root_runs_cost + journal_cost
    shown = company.ok("status").out
    assert "└── engineer" in shown and "session ses_" in shown

    stopped = company.ok("stop")
    assert "ended" in stopped.out
    assert company.json("status")["session"] is None

    # the next session's first request to the CEO carries the journal
    mock.queue(Reply(text="Back again."), model="ceo-mock")
    company.ok("start")
    opening = mock.requests[-1].body
    assert opening["model"] == "ceo-mock"
    first_user = next(m["content"] for m in opening["messages"] if m["role"] == "user")
    assert "Recent session history" in first_user
    assert "Launch planned: May." in first_user and "Pricing asked; set at $9." in first_user
    company.ok("stop")


def set_daily_limit(company: Company, usd: float) -> None:
    config = company.root / "agentrunner.toml"
    text = config.read_text()
    start = text.index("per_agent_daily_usd = ")
    end = text.index("\n", start)
    config.write_text(f"{text[:start]}per_agent_daily_usd = {usd:.6f}{text[end:]}")


def ceo_spent(company: Company) -> int:
    cost = company.json("cost")
    return next((r["cost_micros"] for r in cost["by_agent"] if r["agent_id"] == "ceo"), 0)


@pytest.mark.parametrize("used", [0.85, 0.95])
def test_a_daily_limit_reached_mid_session(
    tmp_path: Path, mock_server: MockProviderServer, mock: MockProvider, used: float
) -> None:
    """A session goes on until the CEO's daily limit is used up: with 80 % or more of it
    spent a brief warns before it starts — or, when what is left cannot pay for the CEO's
    smallest request, is refused before anything starts, not started to fail as a job; with
    all of it spent one is refused before anything starts — in the foreground and in the
    background — naming the limit; spend never passes it, and a refused brief records
    nothing."""
    company = make_company(tmp_path / "acme", mock_server)
    mock.queue(Reply(text="First answer. " * 20), model="ceo-mock")
    mock.queue(Reply(text="entry 1"), model="journal-mock")
    company.ok("brief", "Task 1")
    first = ceo_spent(company)
    assert first > 0

    set_daily_limit(company, first / used / 1e6)  # the limit is now `used` spent
    [ceo] = [use for use in company.json("cost")["limits"] if use["agent_id"] == "ceo"]
    runs_before = len(runs_of(company))
    mock.queue(Reply(text="Second answer."), model="ceo-mock")
    mock.queue(Reply(text="entry 2"), model="journal-mock")
    warned = company.run("brief", "Task 2")
    limit = f"the daily budget of agent 'ceo' of ${first / used / 1e6:.4f}"
    if ceo["left_micros"] < ceo["smallest_request_micros"]:
        assert ceo["state"] == "exceeded" and warned.code == 1, warned.err
        assert f"{limit} cannot pay for its smallest request" in warned.err
        assert "nothing was started" in warned.err and "ceo ›" not in warned.err
        assert len(runs_of(company)) == runs_before  # no job was made to fail
    else:
        assert f"{limit} is {used:.0%} used" in warned.err, warned.err
        # before the work: its first line (the CEO speaking, or the run refused at its
        # first request when its history makes it dearer than what is left)
        work = [warned.err.find(mark) for mark in ("ceo ›", "failed ·") if mark in warned.err]
        assert work and warned.err.index("warning:") < min(work)
    spent = ceo_spent(company)
    assert spent <= first / used + 1  # a run is held to what the limit leaves

    set_daily_limit(company, spent / 1e6)  # all of it spent
    runs_before = len(runs_of(company))
    for args in (["brief", "Task 3"], ["brief", "--background", "Task 4"]):
        refused = company.run(*args)
        assert refused.code == 1, refused.err
        assert "budget_exceeded" in refused.err and "nothing was started" in refused.err
        assert f"the daily budget of agent 'ceo' of ${spent / 1e6:.4f} is used up" in refused.err
    assert len(runs_of(company)) == runs_before  # nothing recorded, nothing queued
    assert ceo_spent(company) == spent


def test_ctrl_c_stops_a_foreground_brief_and_its_delegations(
    tmp_path: Path, mock_server: MockProviderServer, mock: MockProvider
) -> None:
    """Ctrl-C while the CTO is still answering: the brief, the CTO's delegated run and the
    command end as cancelled, with what was streamed kept and paid for; no journal entry is
    written for it, and the session goes on (the next brief runs)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    company = make_company(tmp_path / "acme", mock_server)
    mock.queue(
        Reply(tool_calls=[("delegate", {"agent": "cto", "task": "Build everything"})]),
        model="ceo-mock",
    )
    mock.queue(Reply(text="line " * 400, chunk_delay_s=0.02), model="cto-mock")
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentrunner", "brief", "Build it all"],
        cwd=company.root,
        env={**os.environ, "MOCK_KEY": "sk-mock-key"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    company.wait_for(
        "the CTO to be streaming",
        lambda: any(r.body.get("model") == "cto-mock" for r in mock.requests),
    )
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "cancelled" in err and "Traceback" not in err
    runs = runs_of(company)
    assert sorted((r["agent_id"], r["status"]) for r in runs) == [
        ("ceo", "cancelled"),
        ("cto", "cancelled"),
    ]
    cto = next(r for r in runs if r["agent_id"] == "cto")
    assert cto["cost_micros"] > 0  # what was streamed was paid for
    assert company.json("journal") == []

    mock.queue(Reply(text="Fresh start."), model="ceo-mock")
    mock.queue(Reply(text="entry"), model="journal-mock")
    assert "Fresh start." in company.ok("brief", "Something smaller").out
