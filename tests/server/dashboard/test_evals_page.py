"""``/ui/evals`` (issue 45, item 2): each eval's history — the pass rate of each of its runs,
drawn against its threshold and said in words, with the runs listed — and one eval run's page,
its cases each linked to the run that answered it. Evals run here as ``agentrunner eval``
runs them, against the mock provider; the pages read what they stored, on both back ends."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentrunner.agents.evals import load_eval
from agentrunner.runtime.compose import open_workspace
from agentrunner.testing import MockProvider, Reply
from agentrunner.workspace.evals import EvalReport, run_eval
from tests.runner.conftest import Agent
from tests.server.dashboard.pages_html import Browser


@pytest.fixture
def browser(server: Any) -> Iterator[Browser]:
    opened = Browser(server(token=None).url)
    yield opened
    opened.close()


def _eval(project: Path, name: str, words: list[str]) -> Path:
    cases = [
        {"name": f"says {w}", "message": f"Say {w}.", "expect": {"contains": w}} for w in words
    ]
    path = project / "evals" / f"{name}.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"agent": "clerk", "threshold": 0.75, "cases": cases}))
    return path


def _run(project: Path, path: Path, models: list[str | None] | None = None) -> EvalReport:
    async def go() -> EvalReport:
        spec = await asyncio.to_thread(load_eval, path, agents=["clerk"])
        ws = await open_workspace(project)
        try:
            return await run_eval(ws.runner, spec, models=models or [None], concurrency=1)
        finally:
            await ws.close()

    return asyncio.run(go())


def test_an_evals_history_is_its_pass_rate_at_each_run_against_its_threshold(
    agent: Agent, project: Path, mock: MockProvider, browser: Browser
) -> None:
    agent("clerk", "model: mockai:gpt-mock")
    words = ["red", "green", "blue", "gold"]
    path = _eval(project, "colours", words)
    mock.queue(*(Reply(text="no") for _ in range(2)), model="gpt-mock")
    first = _run(project, path)  # two of four: 50 %
    second = _run(project, path)  # the echo holds every word: 100 %
    mock.queue(Reply(text="no"), model="gpt-other")
    third = _run(project, path, [None, "mockai:gpt-other"])  # 100 % and 75 %
    other = _run(project, _eval(project, "other", ["one"]))

    page = browser.get("/ui/evals")
    sections = {s.attrs["data-eval"]: s for s in page.all("section", cls="eval-history")}
    assert sorted(sections) == ["colours", "other"]
    colours = sections["colours"]
    said = colours.one(cls="history-said").text()
    assert said == ("mockai:gpt-mock: 50% → 100% → 100%; mockai:gpt-other: 75% (threshold 75%)"), (
        said
    )
    lines = colours.all("polyline")
    assert len(lines) == 2
    assert lines[0].attrs["points"].split() == ["0.0,30.0", "120.0,0.0", "240.0,0.0"]
    assert lines[1].attrs["points"] == "240.0,15.0"  # its only run, the newest
    threshold = colours.one("line", cls="threshold")
    assert threshold.attrs["y1"] == threshold.attrs["y2"] == "15.0"  # 75 %
    rows = [r.attrs["data-eval-run"] for r in colours.all("tr") if "data-eval-run" in r.attrs]
    assert rows == [third.eval_run_id, second.eval_run_id, first.eval_run_id]
    newest = colours.one("tr", **{"data-eval-run": str(third.eval_run_id)}).text()
    assert "passed" in newest and "mockai:gpt-other 75%" in newest  # 75 % reaches 75 %
    assert len(sections["other"].all("tr", **{"data-eval-run": str(other.eval_run_id)})) == 1
    assert other.eval_run_id not in colours.text()

    run_page = browser.get(f"/ui/evals/{third.eval_run_id}")
    cases = run_page.all("tr", **{"data-passed": "false"})
    assert [c.attrs["data-case"] for c in cases] == ["says red"]  # gpt-other's "no"
    [failed] = cases
    assert "the answer has no 'red'" in failed.text()
    link = failed.one("a").attrs["href"]
    [outcome] = [o for o in third.reports[1].outcomes if not o.passed]
    assert link == f"/ui/runs/{outcome.run_id}"
    browser.get(link)  # the case's run is an ordinary run, with its page
    assert len(run_page.all("tr", **{"data-passed": "true"})) == 7
    variants = run_page.one("table", id="eval-variants").text()
    assert "4/4" in variants and "3/4" in variants
    missing = browser.get("/ui/evals/eval_nope", status=404)
    assert "no eval run 'eval_nope'" in missing.text()


def test_no_eval_yet_says_how_to_run_one(browser: Browser, project: Path) -> None:
    page = browser.get("/ui/evals")
    assert "agentrunner eval NAME" in page.one(id="evals").text()
    nav = [a.text() for a in page.one("nav").all("a")]
    assert "Evals" in nav
