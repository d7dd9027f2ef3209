"""What a run has spent so far, the same wherever it is shown: ``runs list``, ``runs show``,
``GET /runs/{id}`` and the run's page. While it runs, what its finished requests (and those of
the runs it delegated to) cost; once it has ended, its settled total. Both are its cost rows'
sum, which is what the assertions compare with (read per agent by ``Costs.summary``, the
figures of ``agentrunner cost``, not by the function under test)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.server.dashboard.pages_html import Browser, wait_for
from tests.server.dashboard.test_jobs import brief, job_browser
from tests.server.dashboard.test_runs import run, settled

__all__ = ["job_browser"]  # a fixture, used here

# At the mock's prices ($1 and $2 a million tokens in and out), in micro-dollars.
HELPER_FIRST = 1000 * 1 + 500 * 2  # 2,000
WRITER_FIRST = 3000 * 1 + 100 * 2  # 3,200
HELD_S = 120  # a reply held this long holds its run running until the test cancels it


@pytest.fixture
def browser(server: Any) -> Iterator[Browser]:
    browser = Browser(server(token=None).url)
    yield browser
    browser.close()


def cli(project: Path, *args: str) -> str:
    """``agentrunner ARGS`` in its own process, as a person runs it (a wide terminal)."""
    done = subprocess.run(
        [sys.executable, "-m", "agentrunner", *args],
        cwd=project,
        env={**os.environ, "COLUMNS": "250"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def cost_rows_by_agent() -> dict[str, int]:
    """Each agent's cost rows summed (micro-dollars), as ``agentrunner cost`` reads them."""

    async def read() -> dict[str, int]:
        from agentrunner.store import open_store

        store = await open_store(os.environ["AGENTRUNNER_DATABASE_URL"])
        try:
            day = datetime.now(UTC).strftime("%Y-%m-%d")
            by_agent: dict[str, int] = {}
            for row in await store.costs.summary(since=day):
                by_agent[row["agent_id"]] = by_agent.get(row["agent_id"], 0) + row["cost_micros"]
            return by_agent
        finally:
            await store.close()

    return asyncio.run(read())


def shown_everywhere(project: Path, browser: Browser, run_id: str) -> dict[str, str]:
    """What each place shows the run has spent, as it says it: the JSON forms' ``cost_usd``
    written as the text forms write money ($, four places), the text forms' figure."""
    listed = {r["id"]: r for r in json.loads(cli(project, "runs", "list", "--json"))}
    table = next(line for line in cli(project, "runs", "list").splitlines() if run_id in line)
    shown = cli(project, "runs", "show", run_id)
    page = browser.get(f"/ui/runs/{run_id}").by_id("run-cost").text()
    return {
        "runs list --json": _usd(listed[run_id]["cost_usd"]),
        "runs show --json": _usd(
            json.loads(cli(project, "runs", "show", run_id, "--json"))["run"]["cost_usd"]
        ),
        "GET /runs/{id}": _usd(browser.json(f"/runs/{run_id}")["cost_usd"]),
        "runs list": next(cell for cell in table.split() if cell.startswith("$")),
        "runs show": shown.partition(" · cost ")[2].split()[0],
        "/ui/runs/{id}": page.split()[0],
    }


def said(micros: int) -> dict[str, str]:
    """``micros`` as every place should show it."""
    money = f"${micros / 1e6:.4f}"
    return dict.fromkeys(
        [
            "runs list --json",
            "runs show --json",
            "GET /runs/{id}",
            "runs list",
            "runs show",
            "/ui/runs/{id}",
        ],
        money,
    )


def _usd(usd: float | None) -> str:
    return "unknown" if usd is None else f"${usd:.4f}"


def _held(mock: MockProvider, requests: int) -> None:
    """Wait until the mock has been asked ``requests`` requests: the last one is held, so its
    run's earlier requests have all been charged (a run's rows are written before its tools
    run, and each held request here follows a tool call)."""
    wait_for(f"{requests} model requests", lambda: len(mock.requests) >= requests)


def test_a_running_run_shows_what_its_finished_requests_cost_wherever_it_is_shown(
    project: Path, agent: Agent, browser: Browser, mock: MockProvider
) -> None:
    agent("helper", "capabilities: [notes]")
    agent("writer", "capabilities: [notes]")
    note = ("note_create", {"title": "Plan", "body": "Ship on Monday"})
    mock.queue(
        Reply(tool_calls=[note], input_tokens=1000, output_tokens=500),
        Reply(text="Still thinking.", delay_s=HELD_S),
    )
    helper = run(browser, "helper", "t-helper", "Plan the launch")
    _held(mock, 2)
    mock.queue(
        Reply(tool_calls=[note], input_tokens=3000, output_tokens=100),
        Reply(text="Still writing.", delay_s=HELD_S),
    )
    writer = run(browser, "writer", "t-writer", "Write the launch post")
    _held(mock, 4)

    rows = cost_rows_by_agent()
    assert rows == {"helper": HELPER_FIRST, "writer": WRITER_FIRST}
    runs = {"helper": helper, "writer": writer}
    shown = {agent_id: shown_everywhere(project, browser, runs[agent_id]) for agent_id in runs}
    for agent_id, run_id in runs.items():
        assert browser.json(f"/runs/{run_id}")["status"] == "running"
        assert shown[agent_id] == said(rows[agent_id])
        page = browser.get(f"/ui/runs/{run_id}").by_id("run-cost").text()
        assert page.endswith("so far"), page
    # two runs, two figures: each its own
    assert shown["helper"] != shown["writer"]

    for run_id in (helper, writer):
        assert browser.client.post(f"/runs/{run_id}/cancel").status_code == 200
        assert settled(browser, run_id) == "cancelled"
    # settled: the run's own total, which is still its cost rows' sum (the held request,
    # cut off, charged what it sent), shown alike everywhere
    rows = cost_rows_by_agent()
    assert rows["helper"] > HELPER_FIRST and rows["writer"] > WRITER_FIRST
    for agent_id, run_id in runs.items():
        assert shown_everywhere(project, browser, run_id) == said(rows[agent_id])
        assert "so far" not in browser.get(f"/ui/runs/{run_id}").by_id("run-cost").text()


def test_a_delegations_finished_requests_count_in_its_callers_spend_so_far(
    project: Path, agent: Agent, browser: Browser, mock: MockProvider
) -> None:
    """A run's settled total counts the runs it delegated to; so does what it has spent so
    far, from the moment each of their requests is charged."""
    agent("boss", "capabilities: [agents]")
    agent("cto", "capabilities: [notes]")
    mock.queue(
        Reply(
            tool_calls=[("ask_agent", {"agent": "cto", "message": "Is it ready?"})],
            input_tokens=1000,
            output_tokens=500,
        ),
        Reply(
            tool_calls=[("note_create", {"title": "Check", "body": "The build"})],
            input_tokens=3000,
            output_tokens=100,
        ),
        Reply(text="Still checking.", delay_s=HELD_S),  # the CTO, held
    )
    boss = run(browser, "boss", "t-boss", "Ask the CTO")
    _held(mock, 3)

    rows = cost_rows_by_agent()
    assert rows == {"boss": HELPER_FIRST, "cto": WRITER_FIRST}
    assert shown_everywhere(project, browser, boss) == said(HELPER_FIRST + WRITER_FIRST)

    assert browser.client.post(f"/runs/{boss}/cancel").status_code == 200
    assert settled(browser, boss) == "cancelled"
    rows = cost_rows_by_agent()
    assert shown_everywhere(project, browser, boss) == said(rows["boss"] + rows["cto"])


def test_a_running_jobs_spend_so_far_is_its_runs_wherever_it_is_shown(
    job_browser: Browser, project: Path, store_url: str, mock: MockProvider
) -> None:
    """A job is a run: `jobs`, `jobs --json`, the jobs page and the job's page say what its
    run and its delegations have spent so far, then its settled total."""
    mock.queue(
        Reply(
            tool_calls=[("ask_agent", {"agent": "cto", "message": "Is v2 ready?"})],
            input_tokens=1000,
            output_tokens=500,
        ),
        Reply(text="It is.", input_tokens=3000, output_tokens=100),  # the CTO's answer
        Reply(text="Releasing.", delay_s=HELD_S),  # the CEO's next step, held
    )
    job = brief(project, store_url, "Release v2")
    _held(mock, 3)

    def shown() -> dict[str, str]:
        listed = {j["id"]: j for j in json.loads(cli(project, "jobs", "--json"))}
        table = next(line for line in cli(project, "jobs").splitlines() if job in line)
        row = job_browser.get("/ui/jobs").by_id("jobs").one("tr", data_job=job)
        return {
            "jobs --json": _usd(listed[job]["cost_usd"]),
            "jobs": next(cell for cell in table.split() if cell.startswith("$")),
            "/ui/jobs": row.all("td")[-1].text(),
            "/ui/jobs/{id}": job_browser.get(f"/ui/jobs/{job}").by_id("job-cost").text().split()[0],
            "GET /runs/{id}": _usd(job_browser.json(f"/runs/{job}")["cost_usd"]),
        }

    rows = cost_rows_by_agent()
    assert rows == {"ceo": HELPER_FIRST, "cto": WRITER_FIRST}
    money = f"${(HELPER_FIRST + WRITER_FIRST) / 1e6:.4f}"
    running = shown()
    assert running == dict.fromkeys(running, money)
    assert "so far" in job_browser.get(f"/ui/jobs/{job}").by_id("job-cost").text()

    assert job_browser.post(f"/ui/jobs/{job}/stop").status_code == 303
    assert settled(job_browser, job) == "cancelled"
    rows = cost_rows_by_agent()
    money = f"${(rows['ceo'] + rows['cto']) / 1e6:.4f}"
    ended = shown()
    assert ended == dict.fromkeys(ended, money)
