"""What a newcomer to the dashboard tripped over, over HTTP: a running run's and job's cost so
far, a cancelled run said once, a delegation cut off, money written one way on every page,
limits without needless zeros, the costs chart against the limits, hints with code, the icon."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentrunner.interfaces.server.dashboard.costs import chart
from agentrunner.interfaces.server.dashboard.money import money
from agentrunner.run.spend import Spend, SpendReport
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.server.dashboard.pages_html import Browser, wait_for
from tests.server.dashboard.test_runs import run, settled, tool_calls


@pytest.fixture
def loopback(server: Any) -> Iterator[Browser]:
    browser = Browser(server(token=None).url)
    yield browser
    browser.close()


def test_a_cancelled_delegation_is_said_once_and_its_call_cut_off(
    agent: Agent, loopback: Browser, mock: MockProvider
) -> None:
    agent("boss", "capabilities: [agents]")
    agent("cto")
    mock.queue(
        Reply(
            tool_calls=[("ask_agent", {"agent": "cto", "message": "Is it ready?"})],
            input_tokens=1000,
            output_tokens=500,
        ),
        Reply(text="Still checking.", delay_s=60),  # the CTO, stopped with its caller
    )
    parent = run(loopback, "boss", "t-boss", "Ask the CTO")

    def asked() -> bool:
        calls = tool_calls(loopback.get(f"/ui/runs/{parent}"))
        return bool(calls and calls[0].all(cls="child-run"))

    wait_for("the delegation to start", asked)
    running = loopback.get(f"/ui/runs/{parent}")
    # the first step's cost and tokens so far ($0.002 at $1 and $2 a million), not "$0"
    assert running.by_id("run-cost").text() == "$0.0020 so far"
    assert running.by_id("run-tokens").text() == "input 1,000 · output 500 so far"
    step = running.by_id("step-1").one("p", cls="muted").text()
    assert "· ·" not in step
    [call] = tool_calls(running)
    assert call.one("h3").one(cls="badge").text() == "running"
    child = call.one(cls="child-run")
    child_id = child.one("a").attrs["href"].removeprefix("/ui/runs/")
    assert child.one("a").text() == child_id  # not "run run_…"
    form = running.by_id("cancel-run")
    assert form.attrs["data-confirm"].startswith("Cancel this run?")

    cancelled = loopback.post(f"/ui/runs/{parent}/cancel")
    assert cancelled.headers["location"] == f"/ui/runs/{parent}?cancel=requested"
    assert settled(loopback, parent) == "cancelled"
    after = loopback.get(cancelled.headers["location"])
    said = after.by_id("run-error").text()
    assert said.lower().count("cancelled") == 1, said
    assert after.by_id("run-end").text().lower().count("cancelled") == 2  # heading + reason
    assert not after.has_id("cancel-said")  # it ended: the request is behind it
    [call] = tool_calls(after)
    assert call.one("h3").one(cls="badge").text() == "cut off"
    assert "not yet" not in call.one(cls="tool-result").text()
    assert "cancelled before this call returned" in call.one(cls="tool-result").text()
    # a finished run's own figures, not "so far"
    assert "so far" not in after.by_id("run-cost").text()


def test_a_cancel_requested_banner_stays_while_the_run_goes_on(
    agent: Agent, loopback: Browser, mock: MockProvider
) -> None:
    agent("helper")
    mock.queue(Reply(text="word " * 400, chunk_delay_s=0.05))
    slow = run(loopback, "helper", "t-slow", "Write at length")
    wait_for("the run to start", lambda: loopback.json(f"/runs/{slow}")["status"] == "running")
    # the page a cancel sends back to, while it still runs: said, and kept by its stream
    page = loopback.get(f"/ui/runs/{slow}?cancel=requested")
    if loopback.json(f"/runs/{slow}")["status"] == "running":
        assert page.by_id("cancel-said").text().startswith("Cancel requested")
        assert "cancel=requested" in page.by_id("run-follow").attrs["sse-connect"]
    plain = loopback.get(f"/ui/runs/{slow}")
    assert not plain.has_id("cancel-said")
    # cancelled now, or the server's shutdown waits out the rest of its 20 s reply
    assert loopback.client.post(f"/runs/{slow}/cancel").status_code == 200


def test_limits_lose_needless_zeros_and_spend_keeps_its_four_places() -> None:
    assert money(20_000_000, trim=True) == "$20"
    assert money(500_000, trim=True) == "$0.5"
    assert money(1_250_000, trim=True) == "$1.25"
    assert money(20_000_000) == "$20.0000"
    assert money(15_600) == "$0.0156"


def _report(days: dict[str, int], agents: dict[tuple[str, str], int]) -> SpendReport:
    """A report of ``days`` (a day of 0: nothing spent), one model spending it all."""
    spent = {day: micros for day, micros in days.items() if micros}
    models = {(day, "mockai:gpt-mock"): micros for day, micros in spent.items()}
    return SpendReport(
        since=min(days),
        until=max(days),
        days=len(days),
        agent=None,
        by_day={d: Spend(micros=m, requests=1) for d, m in spent.items()},
        by_day_agent={k: Spend(micros=m, requests=1) for k, m in agents.items()},
        by_day_model={k: Spend(micros=m, requests=1) for k, m in models.items()},
        by_agent={},
        by_model={},
        total=Spend(micros=sum(days.values()), requests=len(days)),
        limits=[],
    )


def test_bars_with_a_limit_are_drawn_against_it_and_models_against_the_day() -> None:
    report = _report(
        {"2026-03-01": 0, "2026-03-06": 1_500_000},
        {("2026-03-06", "ceo"): 1_200_000, ("2026-03-06", "cto"): 300_000},
    )
    [today, *rest] = chart(report, agent_limit=1_000_000, global_limit=20_000_000)
    bars = {bar.name: bar for bar in today.bars}
    everyone, ceo, cto = bars["all agents"], bars["ceo"], bars["cto"]
    model = bars["mockai:gpt-mock"]
    assert everyone.width == pytest.approx(7.5)  # $1.50 of $20: not a full bar
    assert everyone.words == "$1.5000 (8% of the $20 daily limit)"
    assert (ceo.width, ceo.over) == (100.0, True)
    assert ceo.words == "$1.2000: over the $1 daily limit (120%)"
    assert (cto.width, cto.over) == (pytest.approx(30.0), False)
    assert model.width == 100.0 and model.limit is None
    assert model.words == "$1.5000 (100% of the day's spend)"
    # the four days with nothing spent before it are one part of the chart
    assert [(part.day, part.first, part.bars) for part in rest] == [
        ("2026-03-05", "2026-03-01", [])
    ]


def test_one_empty_day_alone_is_its_own_part() -> None:
    report = _report(
        {"2026-03-04": 100, "2026-03-05": 0, "2026-03-06": 200},
        {("2026-03-04", "ceo"): 100, ("2026-03-06", "ceo"): 200},
    )
    parts = chart(report, agent_limit=None, global_limit=None)
    assert [(part.day, part.first) for part in parts] == [
        ("2026-03-06", None),
        ("2026-03-05", None),
        ("2026-03-04", None),
    ]
    assert parts[0].bars[1].words == "$0.0002 (100% of the day's spend)"  # no limit


def test_the_costs_page_words_and_its_bad_days_page(
    agent: Agent, project: Path, loopback: Browser
) -> None:
    agent("ceo")
    today = loopback.get("/ui/costs?days=1")
    week = loopback.get("/ui/costs?days=7")
    assert "spent today (UTC)" in today.by_id("main").text()
    assert "spent in the last 7 days" in week.by_id("main").text()
    assert "these 1 day" not in today.by_id("main").text()
    year = loopback.get("/ui/costs?days=366")
    parts = year.by_id("cost-chart").all("section", cls="chart-day")
    assert len(parts) == 1
    assert re.fullmatch(r"nothing spent \d{4}-\d\d-\d\d … \d{4}-\d\d-\d\d", parts[0].text())
    bad = loopback.get("/ui/costs?days=0", status=422)
    assert bad.one("a", aria_current="page").text() == "Costs"
    assert bad.by_id("problem-back").attrs["href"] == "/ui/costs?days=7"
    other = loopback.get("/ui/runs/run_nothere", status=404)
    assert not other.all("a", aria_current="page")
    assert other.by_id("problem-back").attrs["href"] == "/"


def test_money_is_written_one_way_on_the_team_page(
    agent: Agent, loopback: Browser, mock: MockProvider
) -> None:
    agent("ceo")
    mock.queue(Reply(text="Done.", input_tokens=12_000, output_tokens=1_800))  # $0.0156
    ran = run(loopback, "ceo", "t-money", "Work")
    assert settled(loopback, ran) == "completed"
    team = loopback.get("/")
    assert team.by_id("agent-ceo").all(cls="meta")[-1].text() == "$0.0156 today"
    assert "$0.0156" in team.one(cls="grid").text()
    assert "$0.02" not in team.by_id("team").text()


def test_hints_show_their_code_as_code() -> None:
    from agentrunner.interfaces.server.dashboard.templating import code_spans

    said = code_spans("Create it with `agentrunner channels create <x>` & go")
    assert str(said) == (
        "Create it with <code>agentrunner channels create &lt;x&gt;</code> &amp; go"
    )
    assert str(code_spans("a lone ` tick <b>")) == "a lone ` tick &lt;b&gt;"
    assert str(code_spans(None)) == ""


def test_a_problem_page_and_a_refused_post_show_code(
    agent: Agent, project: Path, loopback: Browser
) -> None:
    agent("ceo")
    missing = loopback.client.get("/ui/channels/nowhere")
    assert missing.status_code == 404
    assert "`" not in missing.text.split("<main", 1)[1]
    assert "<code>agentrunner channels" in missing.text


def test_the_icon_is_served_and_linked_even_before_logging_in(server: Any) -> None:
    for token in (None, "icon-token-9f2"):
        srv = server(token=token)
        browser = Browser(srv.url)
        try:
            icon = browser.client.get("/favicon.ico")
            assert icon.status_code == 200, icon.text
            assert icon.headers["content-type"] == "image/svg+xml"
            assert icon.content.startswith(b"<svg")
            assert browser.client.get("/ui/static/icon.svg").content == icon.content
            first = browser.client.get("/login" if token else "/")
            assert '<link rel="icon" href="/ui/static/icon.svg"' in first.text
        finally:
            browser.close()
