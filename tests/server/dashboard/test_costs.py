"""The costs page, ``/ui/costs``: spend per agent and per model on each UTC day, against the
limits, with the figures ``agentrunner cost`` prints."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agentrunner.core.ids import new_id
from agentrunner.interfaces.server.dashboard.money import money
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.server.dashboard.pages_html import Browser, Node, wait_for

PRICED = """
[prices."mockai:gpt-big"]
input_per_mtok = 5.0
output_per_mtok = 20.0

[budgets]
per_agent_daily_usd = 0.05
global_daily_usd = 10.0
"""
OLD_SPEND = 400_000  # ceo's, three days ago
TOKENS = {"input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 0, "cache_write_tokens": 0}


@pytest.fixture
def cost_browser(agent: Agent, project: Path, server: Any) -> Iterator[Browser]:
    """Two agents on two models of different prices, a per-agent and a global daily limit."""
    with (project / "agentrunner.toml").open("a") as config:
        config.write(PRICED)
    agent("ceo", "model: mockai:gpt-mock")
    agent("cto", "model: mockai:gpt-big")
    browser = Browser(server(token=None).url)
    yield browser
    browser.close()


def cost_cli(project: Path, days: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "agentrunner", "cost", "--json", "--days", str(days)],
        cwd=project,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def spend(browser: Browser, agent_id: str, thread_id: str) -> None:
    """A run of ``agent_id`` that spends, served by the server's worker."""
    browser.client.post("/threads", json={"agent_id": agent_id, "id": thread_id})
    started = browser.client.post(
        f"/threads/{thread_id}/runs", json={"agent_id": agent_id, "message": "Plan the week"}
    )
    assert started.status_code == 202, started.text
    run_id = started.json()["run_id"]
    wait_for(f"run {run_id}", lambda: browser.json(f"/runs/{run_id}")["status"] == "completed")


def write_cost(store_url: str, agent_id: str, micros: int, at: float, model: str) -> None:
    """A cost row of one request by ``agent_id`` at time ``at`` (another day than today's)."""
    from agentrunner.store import RunLog, open_store

    async def write() -> None:
        store = await open_store(store_url)
        try:
            run_id = new_id("run_")
            await store.batch(
                [
                    store.runs.insert_op(
                        run_id=run_id, agent_id=agent_id, thread_id=None, status="running"
                    )
                ]
            )
            log = RunLog(store, run_id, agent_id)
            log.cost(model, TOKENS, micros, False, at)
            await log.flush()
        finally:
            await store.close()

    asyncio.run(write())


def table_figures(page: Node) -> tuple[int, dict[str, int], dict[str, int]]:
    """The total, and the totals per agent and per model, as the table states them."""
    table = page.by_id("cost-table")

    def each(kind: str) -> dict[str, int]:
        return {
            row.attrs["data-name"]: int(row.attrs["data-micros"])
            for row in table.all("tr", data_kind=kind)
        }

    return (
        int(table.one("tr", data_kind="total").attrs["data-micros"]),
        each("agent-total"),
        each("model-total"),
    )


def test_the_figures_are_the_cost_commands_per_agent_and_model_over_two_windows(
    cost_browser: Browser, project: Path, mock: MockProvider, store_url: str
) -> None:
    for agent_id, runs in (("ceo", 2), ("cto", 1)):
        for n in range(runs):
            mock.queue(Reply(text="A plan.", input_tokens=1000, output_tokens=200))
            spend(cost_browser, agent_id, f"t-{agent_id}-{n}")
    now = time.time()
    write_cost(store_url, "ceo", OLD_SPEND, now - 3 * 86_400, "mockai:gpt-mock")
    write_cost(store_url, "cmo", 60_000, now, "x:m")  # over the per-agent daily limit

    shown: dict[int, tuple[Node, dict[str, Any]]] = {}
    for days in (1, 7):
        page = cost_browser.get(f"/ui/costs?days={days}")
        cli = cost_cli(project, days)
        shown[days] = (page, cli)
        total, agents, models = table_figures(page)
        assert total == cli["total"]["cost_micros"] > 0
        assert int(page.by_id("cost-total").attrs["data-micros"]) == total
        # each card once (a day's page showed "spent today" twice, issue 39)
        cards = page.one("section", aria_label="Totals").all(cls="panel")
        said = [card.one(cls="stat-label").text() for card in cards]
        assert len(set(said)) == len(said), said
        assert len(cards) == (2 if days == 1 else 3)  # the total, requests (and today)
        assert agents == {row["agent_id"]: row["cost_micros"] for row in cli["by_agent"]}
        assert models == {row["model"]: row["cost_micros"] for row in cli["by_model"]}
        assert set(agents) == {"ceo", "cto", "cmo"}
        assert sum(agents.values()) == total == sum(models.values())

        # the chart: one part per day of the window, newest first (a run of days with nothing
        # spent as one part), each bar saying its amount
        chart = page.by_id("cost-chart")
        parts = chart.all("section", cls="chart-day")
        assert parts[0].attrs["data-day"] == cli["until"]
        assert parts[-1].attrs.get("data-first", parts[-1].attrs["data-day"]) == cli["since"]

        def covers(part: Node) -> int:
            first = datetime.strptime(
                part.attrs.get("data-first", part.attrs["data-day"]), "%Y-%m-%d"
            )
            return (datetime.strptime(part.attrs["data-day"], "%Y-%m-%d") - first).days + 1

        assert sum(covers(part) for part in parts) == days
        assert len(parts) == (1 if days == 1 else 4)  # today, 2 days, the day of OLD_SPEND, 3 days
        for part in parts:
            bars = part.all("li", cls="bar-row")
            for bar in bars:
                assert (
                    bar.one(cls="bar-value").text().startswith(money(int(bar.attrs["data-micros"])))
                )
                assert bar.one(cls="bar-track").attrs["aria-hidden"] == "true"  # the words say it
            by_kind = {
                kind: [int(b.attrs["data-micros"]) for b in bars if b.attrs["data-kind"] == kind]
                for kind in ("day", "agent", "model")
            }
            if bars:
                [day_total] = by_kind["day"]
                assert sum(by_kind["agent"]) == day_total == sum(by_kind["model"])

    (today, one), (week, seven) = shown[1], shown[7]
    # two windows, two answers: the row of three days ago is in the week's only
    old_day = datetime.fromtimestamp(now - 3 * 86_400, UTC).strftime("%Y-%m-%d")
    assert table_figures(week)[0] - table_figures(today)[0] == OLD_SPEND
    assert table_figures(week)[1]["ceo"] - table_figures(today)[1]["ceo"] == OLD_SPEND
    assert [b.attrs["data-day"] for b in week.by_id("cost-table").all("tbody")] == [
        seven["until"],
        old_day,
    ]
    assert [b.attrs["data-day"] for b in today.by_id("cost-table").all("tbody")] == [one["until"]]
    assert one["since"] == one["until"] != seven["since"]
    # two models of different prices: a request to the dearer costs more
    per_request = {row["model"]: row["cost_micros"] / row["requests"] for row in one["by_model"]}
    assert per_request["mockai:gpt-big"] > per_request["mockai:gpt-mock"] > 0

    # today's limits: cmo's used up, said in words beside its color and on its bar
    limits = today.by_id("cost-limits")
    cmo = limits.one("li", data_agent="cmo")
    assert "state-exceeded" in cmo.classes and cmo.text().startswith("exceeded ")
    assert "state-ok" in limits.one("li", data_agent="ceo").classes
    assert "$0.0600 of $0.05 (120%)" in cmo.text()
    [over] = today.by_id("cost-chart").all("li", data_kind="agent", data_name="cmo")
    assert "over" in over.classes
    assert over.one(cls="bar-value").text() == "$0.0600: over the $0.05 daily limit (120%)"
    [ceo] = today.by_id("cost-chart").all("li", data_kind="agent", data_name="ceo")
    assert "over" not in ceo.classes and "of the $0.05 daily limit" in ceo.text()


def test_a_bad_days_value_is_a_page_that_says_what_is_allowed(cost_browser: Browser) -> None:
    for days in ("0", "367", "abc", "2.5", "", "-1"):
        response = cost_browser.client.get("/ui/costs", params={"days": days})
        assert response.status_code == 422, days
        assert response.headers["content-type"].startswith("text/html")
        assert "days must be a whole number from 1 to 366" in response.text
    assert cost_browser.get("/ui/costs?days=366").by_id("cost-chart")  # the most there is


def test_a_limit_that_cannot_pay_for_a_request_is_shown_exhausted_before_it_is_used_up(
    cost_browser: Browser, store_url: str
) -> None:
    """ceo has spent all but $0.0001 of its $0.05 a day — less than its smallest request
    costs: the costs page and the team page say it is exhausted, not 100 % used; cto, which
    has spent nothing, has its limit listed all the same."""
    write_cost(store_url, "ceo", 49_900, time.time(), "mockai:gpt-mock")
    limits = cost_browser.get("/ui/costs").by_id("cost-limits")
    ceo = limits.one("li", data_agent="ceo")
    assert "state-exceeded" in ceo.classes and "(100%)" in ceo.text()
    assert "$0.0001 left, less than the smallest request" in ceo.text()
    assert "nothing can be bought" in ceo.text()
    cto = limits.one("li", data_agent="cto")
    assert "state-ok" in cto.classes and "$0 of $0.05 (0%)" in cto.text()
    team = cost_browser.get("/").text()
    assert "the daily budget of agent 'ceo' of $0.0500 cannot pay for its smallest request" in team
