"""Spend as people see it — ``agentrunner cost``, ``status`` and the budget check before a
brief (``spend.preflight``) — read from one place, the store's cost rows: the figures add up,
agree with what the runs recorded, and split days at UTC midnight."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentRunner
from agentrunner.config import Budgets
from agentrunner.core.ids import new_id
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.run.spend import preflight, spend_report
from agentrunner.store import RunLog, Store
from agentrunner.testing import Fault, MockProvider, Reply
from tests.runner.conftest import Agent

SQLITE_ONLY = pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
TOKENS = {"input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 0, "cache_write_tokens": 0}


def run_cli(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrunner", *args],
        cwd=project,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def spent(store: Store, agent_id: str, micros: int, at: float, model: str = "x:m") -> None:
    """One run of ``agent_id`` that made one request costing ``micros`` at time ``at``."""
    run_id = new_id()
    await store.threads.open(f"t-{agent_id}", agent_id)
    await store.batch(
        [
            store.runs.insert_op(
                run_id=run_id, agent_id=agent_id, thread_id=f"t-{agent_id}", status="running"
            )
        ]
    )
    log = RunLog(store, run_id, agent_id)
    log.cost(model, TOKENS, micros, False, at)
    await log.flush()
    await store.batch(
        [
            store.runs.finish_op(
                run_id, status="completed", stop_reason="end_turn", cost_micros=micros
            )
        ]
    )


def midnight() -> float:
    """The start of today (UTC)."""
    now = datetime.now(UTC)
    return now.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


# -- the figures add up ----------------------------------------------------------------------


async def test_cost_json_adds_up_over_many_runs_of_several_agents_on_two_models(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path
) -> None:
    agent("ceo", "model: mockai:gpt-mock")
    agent("cto", "model: mockant:claude-mock")
    agent("cmo", "model: mockai:gpt-mock")
    runner: AgentRunner = await open_runner()
    plan = [("ceo", n) for n in range(1, 5)] + [("cto", n) for n in range(1, 4)] + [("cmo", 9)]
    for agent_id, n in plan:
        mock.queue(Reply(text="Plan " * n, input_tokens=30 * n, output_tokens=7 * n))
        await runner.run_agent(agent_id, f"t-{agent_id}", "go")
    runs = await runner.store.runs.list(limit=100)

    shown = await asyncio.to_thread(run_cli, project, "cost", "--json")
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    total = report["total"]["cost_micros"]
    by_agent = {r["agent_id"]: r["cost_micros"] for r in report["by_agent"]}
    by_model = {r["model"]: r["cost_micros"] for r in report["by_model"]}
    # test:test: each new thread's title (free), charged to the run that opened the thread
    assert set(by_model) == {"mockai:gpt-mock", "mockant:claude-mock", "test:test"}
    assert set(by_agent) == {"ceo", "cto", "cmo"} and all(by_agent.values())
    assert sum(by_agent.values()) == sum(by_model.values()) == total > 0
    assert sum(r.cost_micros for r in runs if r.depth == 0) == total  # what the runs recorded
    for agent_id in by_agent:
        assert by_agent[agent_id] == sum(r.cost_micros for r in runs if r.agent_id == agent_id)
    requests = sum(r["requests"] for r in report["by_agent"])
    assert requests == report["total"]["requests"] == sum(r["requests"] for r in report["by_model"])
    assert [r["day"] for r in report["by_day"]] == [report["until"]]
    assert report["by_day"][0]["cost_micros"] == total
    # The runtime's own daily tally (what the daily budgets are enforced against) agrees.
    assert await runner.store.costs.spent_today() == total

    # One agent: that agent's figures, and two agents give two different answers.
    ceo = json.loads(
        (await asyncio.to_thread(run_cli, project, "cost", "--json", "--agent", "ceo")).stdout
    )
    cto = json.loads(
        (await asyncio.to_thread(run_cli, project, "cost", "--json", "--agent", "cto")).stdout
    )
    assert ceo["total"]["cost_micros"] == by_agent["ceo"] != cto["total"]["cost_micros"]
    assert [r["agent_id"] for r in ceo["by_agent"]] == ["ceo"]
    assert {r["model"] for r in cto["by_model"]} == {"mockant:claude-mock", "test:test"}
    shown = await asyncio.to_thread(run_cli, project, "cost")
    assert shown.returncode == 0, shown.stderr
    assert f"total ${total / 1e6:.4f}" in shown.stdout and "mockant:claude-mock" in shown.stdout


async def test_days_are_split_at_utc_midnight(
    store: Store, project_dir: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request a millisecond before midnight (UTC) is yesterday's: not in today's figures,
    nor against today's limits; ``--days 2`` has both days, each with its own."""
    start = midnight()
    await spent(store, "ceo", 400_000, start - 0.001)
    await spent(store, "ceo", 30_000, start)
    await spent(store, "cto", 5_000, start + 1, model="x:n")
    await spent(store, "cto", 999_000, start - 2 * 86_400)  # three days ago: outside both
    monkeypatch.setenv("AGENTRUNNER_DATABASE_URL", store_url)
    (project_dir / "agentrunner.toml").write_text("[budgets]\nper_agent_daily_usd = 0.5\n")
    today = json.loads((await asyncio.to_thread(run_cli, project_dir, "cost", "--json")).stdout)
    two = json.loads(
        (await asyncio.to_thread(run_cli, project_dir, "cost", "--json", "--days", "2")).stdout
    )
    yesterday = datetime.fromtimestamp(start - 1, UTC).strftime("%Y-%m-%d")
    assert (today["days"], today["since"], today["until"]) == (1, today["until"], today["until"])
    assert today["total"]["cost_micros"] == 35_000
    assert {r["agent_id"]: r["cost_micros"] for r in today["by_agent"]} == {
        "ceo": 30_000,
        "cto": 5_000,
    }
    assert (two["since"], two["until"]) == (yesterday, today["until"])
    assert two["total"]["cost_micros"] == 435_000
    assert {r["day"]: r["cost_micros"] for r in two["by_day"]} == {
        today["until"]: 35_000,
        yesterday: 400_000,
    }
    assert {r["model"]: r["cost_micros"] for r in two["by_model"]} == {
        "x:m": 430_000,
        "x:n": 5_000,
    }
    # The limits are today's, whatever the span: ceo's 430,000 over two days is not 86 %.
    for report in (today, two):
        ceo = next(u for u in report["limits"] if u["agent_id"] == "ceo")
        assert (ceo["spent_micros"], ceo["state"]) == (30_000, "ok")


# -- the budget check before a brief ---------------------------------------------------------


@pytest.mark.parametrize(
    ("budgets", "named"),
    [
        (Budgets(per_agent_daily_usd=1.0), "the daily budget of agent 'ceo' of $1.0000"),
        (Budgets(global_daily_usd=1.0), "the global daily budget of $1.0000"),
    ],
)
async def test_preflight_warns_at_80_percent_and_refuses_at_100(
    store: Store, budgets: Budgets, named: str
) -> None:
    now = time.time()
    await spent(store, "ceo", 790_000, now)
    assert await preflight(store, budgets, "ceo") == []  # 79 %: nothing to say

    await spent(store, "ceo", 10_000, now)  # 80 %
    [warning] = await preflight(store, budgets, "ceo")
    assert warning.state == "warning"
    assert warning.message() == f"{named} is 80% used: $0.8000 spent today (UTC)"

    await spent(store, "ceo", 199_999, now)  # a micro-dollar short of 100 %: still a warning
    [warning] = await preflight(store, budgets, "ceo")
    assert warning.state == "warning" and "is 100% used" in warning.message()

    await spent(store, "ceo", 1, now)  # 100 %
    with pytest.raises(AgentRunnerError) as refused:
        await preflight(store, budgets, "ceo")
    assert refused.value.code is ErrorCode.BUDGET_EXCEEDED
    assert (
        refused.value.message
        == f"{named} is used up: $1.0000 spent today (UTC); nothing was started"
    )
    assert "agentrunner.toml" in (refused.value.hint or "")
    assert "next day (UTC)" in (refused.value.hint or "")


async def test_preflight_reads_each_agents_own_day(store: Store) -> None:
    """The root's own limit refuses; a team member's used-up limit only warns (the brief can
    go on without it); another agent's spend, or yesterday's, does not count against it."""
    budgets = Budgets(per_agent_daily_usd=0.1)
    now = time.time()
    await spent(store, "cto", 100_000, now)
    await spent(store, "ceo", 100_000, midnight() - 1)  # yesterday
    await spent(store, "ceo", 50_000, now)
    [warning] = await preflight(store, budgets, "ceo", team=["cto", "cmo"])
    assert (warning.agent_id, warning.state) == ("cto", "exceeded")
    assert "the daily budget of agent 'cto'" in warning.message()
    with pytest.raises(AgentRunnerError) as refused:
        await preflight(store, budgets, "cto", team=["ceo"])
    assert "the daily budget of agent 'cto' of $0.1000" in refused.value.message
    assert await preflight(store, Budgets(), "cto") == []  # no limits: nothing to check
    # The same figures as the report that `cost` and `status` print.
    report = await spend_report(store, budgets, agents=["ceo", "cto"])
    assert {a: s.micros for a, s in report.today.items()} == {"ceo": 50_000, "cto": 100_000}
    assert [(u.agent_id, u.state) for u in report.warnings] == [("cto", "exceeded")]


async def test_a_limit_that_cannot_pay_the_agents_smallest_request_is_exhausted(
    store: Store,
) -> None:
    """77 % of a daily limit used, $0.0046 left: exhausted for an agent whose smallest request
    costs $0.0088 (shown so, and a brief to it refused before anything starts), not for one
    whose smallest costs $0.0040. Each agent's limit is listed before it has spent anything."""
    budgets = Budgets(per_agent_daily_usd=0.02, global_daily_usd=1.0)
    await spent(store, "writer", 15_400, time.time())
    floors = {"writer": 8_800, "idle": 4_000}
    report = await spend_report(store, budgets, agents=["writer", "idle"], floors=floors)
    uses = {(use.key, use.agent_id): use for use in report.limits}
    writer = uses[("per_agent_daily_usd", "writer")]
    assert writer.state == "exceeded" and round(writer.percent or 0) == 77
    assert writer.message() == (
        "the daily budget of agent 'writer' of $0.0200 cannot pay for its smallest request "
        "($0.0088): $0.0046 left, $0.0154 spent today (UTC)"
    )
    assert writer.to_dict()["left_micros"] == 4_600
    assert writer.to_dict()["smallest_request_micros"] == 8_800
    idle = uses[("per_agent_daily_usd", "idle")]  # listed though it has spent nothing
    assert (idle.spent, idle.state) == (0, "ok")
    assert uses[("global_daily_usd", None)].state == "ok"
    assert [use.agent_id for use in report.warnings] == ["writer"]
    cheaper = await spend_report(store, budgets, agents=["writer"], floors={"writer": 4_000})
    assert [use.state for use in cheaper.limits] == ["ok", "ok"]  # 77 %, and it can pay
    with pytest.raises(AgentRunnerError) as refused:
        await preflight(store, budgets, "writer", floors=floors)
    assert refused.value.code is ErrorCode.BUDGET_EXCEEDED
    assert refused.value.message.endswith("; nothing was started")
    assert "cannot pay for its smallest request ($0.0088)" in refused.value.message
    assert await preflight(store, budgets, "writer", floors={"writer": 4_600}) == []
    # The global limit, against the smallest request of the agent the work is for.
    everyone = Budgets(global_daily_usd=0.02)
    with pytest.raises(AgentRunnerError) as refused:
        await preflight(store, everyone, "writer", floors=floors)
    assert (
        "the global daily budget of $0.0200 cannot pay for the smallest request of agent "
        "'writer' ($0.0088)" in refused.value.message
    )
    assert await preflight(store, everyone, "idle", floors=floors) == []  # 77 %: it can pay


@pytest.mark.parametrize("days", [0, -1, 367, "7", True])
async def test_a_report_over_no_days_is_a_validation_error(store: Store, days: Any) -> None:
    with pytest.raises(AgentRunnerError) as caught:
        await spend_report(store, Budgets(), days=days)
    assert caught.value.code is ErrorCode.VALIDATION
    assert "days must be a whole number from 1 to 366" in caught.value.message


# -- status ----------------------------------------------------------------------------------


@SQLITE_ONLY
async def test_status_shows_the_org_chart_with_each_agents_state(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path
) -> None:
    agent("boss", "name: Boss\nmodel: mockai:gpt-mock")
    agent("busy", "name: Busy\nreports_to: boss")
    agent("broke", "name: Broke\nreports_to: boss")
    agent("intern", "name: Intern\nreports_to: busy\nenabled: false")
    agent("solo", "name: Solo")
    with (project / "agentrunner.toml").open("a") as config:
        config.write("\n[budgets]\nper_agent_daily_usd = 0.002\n")
    runner: AgentRunner = await open_runner()
    mock.queue(Reply(text="Done", input_tokens=800, output_tokens=400))  # $0.0016: 80 %
    await runner.run_agent("boss", "t-boss", "hello")
    mock.queue(Reply(fault=Fault.http(400, error_type="invalid_request_error")))
    with pytest.raises(AgentRunnerError):
        await runner.run_agent("broke", "t-broke", "hello")
    # 60 s of streaming, cancelled once status is read: two CLI runs of status took more than
    # the 8 s this had on a loaded machine, and the run had ended before its cancel
    mock.queue(Reply(text="word " * 3000, chunk_delay_s=0.02))
    working = asyncio.ensure_future(runner.run_agent("busy", "t-busy", "a long story"))
    try:
        deadline = time.monotonic() + 30
        while (await runner.store.agent_states.get("busy")).status != "working":
            assert time.monotonic() < deadline, "the run never started"
            await asyncio.sleep(0.05)
        shown = await asyncio.to_thread(run_cli, project, "status")
        as_json = await asyncio.to_thread(run_cli, project, "status", "--json")
    finally:
        working.cancel()
        with pytest.raises(asyncio.CancelledError):
            await working
    assert shown.returncode == 0, shown.stderr
    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    agents = {a["agent_id"]: a for a in report["agents"]}
    assert [a["agent_id"] for a in report["agents"]] == ["boss", "broke", "busy", "intern", "solo"]
    assert {a: (v["state"], v["depth"]) for a, v in agents.items()} == {
        "boss": ("idle", 0),
        "broke": ("error", 1),
        "busy": ("working", 1),
        "intern": ("disabled", 2),
        "solo": ("idle", 0),
    }
    [busy_run] = await runner.store.runs.list(agent_id="busy")
    assert agents["busy"]["run_id"] == busy_run.id
    [broke_run] = await runner.store.runs.list(agent_id="broke")
    assert (agents["broke"]["run_id"], agents["broke"]["last_run_id"]) == (None, broke_run.id)
    [boss_run] = await runner.store.runs.list(agent_id="boss")
    assert agents["boss"]["spent_today_micros"] == boss_run.cost_micros == 1600
    assert report["spent_today"]["cost_micros"] == 1600
    # 80 % used, and the $0.0004 left is less than boss's smallest request (its prompt and
    # the delegate tool its reports give it) costs: exhausted, not a warning
    [warning] = report["warnings"]
    assert warning.startswith(
        "the daily budget of agent 'boss' of $0.0020 cannot pay for its smallest request ($0.0"
    )
    assert warning.endswith("): $0.0004 left, $0.0016 spent today (UTC)")
    assert report["org_chart"] is True and report["session"] is None

    lines = shown.stdout.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("─"))
    end = next(i for i, line in enumerate(lines) if line.startswith("today (UTC)"))
    tree = [line.split()[:3] for line in lines[rule + 1 : end]]
    assert tree == [
        ["boss", "idle", "—"],
        ["├──", "broke", "error"],
        ["└──", "busy", "working"],
        ["└──", "intern", "disabled"],
        ["solo", "idle", "—"],
    ]
    assert "Org chart" in shown.stdout and broke_run.id in shown.stdout
    assert busy_run.id in shown.stdout and "$0.0016" in shown.stdout
    assert f"! {warning}" in shown.stdout
    assert "no live workers" in shown.stdout and "Traceback" not in shown.stderr
    # Once the run is cancelled, the agent is idle: a person stopped the work, nothing is
    # wrong with the agent (it said "stopped" until its next run, issue 39).
    after = json.loads((await asyncio.to_thread(run_cli, project, "status", "--json")).stdout)
    busy = {a["agent_id"]: a for a in after["agents"]}["busy"]
    assert (busy["state"], busy["run_id"], busy["last_run_id"]) == ("idle", None, busy_run.id)
    assert "stopped" not in (await asyncio.to_thread(run_cli, project, "status")).stdout


@SQLITE_ONLY
async def test_a_limit_is_shown_exhausted_exactly_when_the_budget_refuses_a_request(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path
) -> None:
    """Spend added a little at a time under a daily limit: at each step what `status` shows of
    the agent's limit and what the budget does with its smallest request (a one-character
    message on a new thread) agree — exhausted exactly when refused, well before 100 %. Then a
    brief to it is refused before a job is made, in the foreground and in the background, and
    `status` and `cost` say why."""
    from agentrunner.workspace.company.brief import brief, queue_brief
    from agentrunner.workspace.status import project_status

    agent("writer", "model: mockai:gpt-mock", "You write careful, sourced reports. " * 45)
    agent("idle", "model: mockai:gpt-mock")  # it never runs: its limit is listed all the same
    with (project / "agentrunner.toml").open("a") as config:
        config.write(
            '\n[budgets]\nper_agent_daily_usd = 0.004\n\n[company]\nroot = "writer"\n'
            '\n[journal]\nmodel = "test"\n'
        )
    runner: AgentRunner = await open_runner()
    seen = []
    for step in range(12):
        floors = await runner.smallest_requests()
        shown = await project_status(
            runner.store, runner.agents, runner.config.budgets, floors=floors
        )
        [use] = [use for use in shown.limits if use.agent_id == "writer"]
        [outcome] = await asyncio.gather(
            runner.run_agent("writer", f"t{step}", "."), return_exceptions=True
        )
        refused = isinstance(outcome, AgentRunnerError)
        assert not refused or outcome.code is ErrorCode.BUDGET_EXCEEDED, outcome
        seen.append((use.state, round(use.percent or 0), refused))
        assert (use.state == "exceeded") == refused, seen
        if refused:
            break
        await spent(runner.store, "writer", 400, time.time())
    assert len(seen) > 2 and seen[-1][2] and seen[-1][1] < 100, seen
    runs = len(await runner.store.runs.list(limit=1000))
    with pytest.raises(AgentRunnerError) as foreground:
        await brief(runner, "Write the quarterly report.")
    with pytest.raises(AgentRunnerError) as background:
        await queue_brief(runner.config, runner.store, "Write the quarterly report.")
    for refusal in (foreground.value, background.value):
        assert refusal.code is ErrorCode.BUDGET_EXCEEDED
        assert "cannot pay for its smallest request" in refusal.message
        assert refusal.message.endswith("nothing was started")
    assert len(await runner.store.runs.list(limit=1000)) == runs  # no job was made
    status = json.loads((await asyncio.to_thread(run_cli, project, "status", "--json")).stdout)
    assert any("cannot pay for its smallest request" in w for w in status["warnings"])
    cost = json.loads((await asyncio.to_thread(run_cli, project, "cost", "--json")).stdout)
    limits = {use["agent_id"]: use for use in cost["limits"] if use["agent_id"]}
    assert limits["writer"]["state"] == "exceeded"
    assert limits["writer"]["smallest_request_micros"] > limits["writer"]["left_micros"] > 0
    assert (limits["idle"]["spent_micros"], limits["idle"]["state"]) == (0, "ok")
    shown = (await asyncio.to_thread(run_cli, project, "cost")).stdout
    assert "exhausted: $0.0" in shown and "less than the smallest request" in shown


# -- the commands, as a person runs them -----------------------------------------------------


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("cost", "--agent", "ceoo"), ("agent_not_found", "Agent 'ceoo'", "Did you mean 'ceo'")),
        (("cost", "--agent", "nobody"), ("agent_not_found", "Agent 'nobody'", "agents list")),
        (("cost", "--days", "0"), ("validation", "--days must be a whole number", "got 0")),
        (("cost", "--days", "x"), ("validation", "--days must be a whole number", "got 'x'")),
        (("cost", "--days", "400"), ("validation", "from 1 to 366", "got 400")),
    ],
)
def test_cost_refuses_what_it_cannot_answer_with_a_plain_error(
    agent: Agent, project: Path, args: tuple[str, ...], expected: tuple[str, ...]
) -> None:
    agent("ceo")
    agent("cto")
    done = run_cli(project, *args)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and done.stdout == ""
    first, hint = done.stderr.splitlines()[:2]
    assert first.startswith(f"error: {expected[0]}: ") and expected[1] in first
    assert hint.lstrip().startswith("hint:")
    assert all(part in done.stderr for part in expected[2:])


@SQLITE_ONLY
async def test_cost_of_an_agent_whose_file_is_gone_still_shows_what_it_spent(
    agent: Agent, project: Path, open_runner: Any, mock: MockProvider
) -> None:
    """Money spent stays spent: an agent removed since still has its figures."""
    path = agent("temp", "model: mockai:gpt-mock")
    agent("ceo")
    runner: AgentRunner = await open_runner()
    mock.queue(Reply(text="Done", input_tokens=100))
    await runner.run_agent("temp", "t", "go")
    path.unlink()
    shown = await asyncio.to_thread(run_cli, project, "cost", "--agent", "temp", "--json")
    assert shown.returncode == 0, shown.stderr
    [run] = await runner.store.runs.list(agent_id="temp")
    assert json.loads(shown.stdout)["total"]["cost_micros"] == run.cost_micros > 0


@SQLITE_ONLY
def test_status_of_a_project_without_an_org_chart_is_a_plain_listing(
    agent: Agent, project: Path
) -> None:
    agent("alpha")
    agent("beta", "name: Beta\nenabled: false")
    (project / "agents" / "broken.md").write_text("---\nmodel: [\n---\nBody\n")
    shown = run_cli(project, "status")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("Agents") and "Org chart" not in shown.stdout
    assert not any(mark in shown.stdout for mark in ("├", "└", "│"))
    rows = [line.split()[:3] for line in lines if line.startswith(("alpha", "beta"))]
    assert rows == [["alpha", "idle", "—"], ["beta", "disabled", "—"]]
    assert "1 agent file(s) left out for their problems" in shown.stdout
    assert "today (UTC): $0.0000 spent" in shown.stdout
    wrong = run_cli(project, "status", "--days", "2")
    assert wrong.returncode == 2 and "No such option: --days" in wrong.stderr
    assert "Traceback" not in wrong.stderr
