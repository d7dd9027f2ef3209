"""A thread's title is a model request too: it is charged to the run that asked for it (a cost
row with the run, in `cost` and the daily budgets) and refused, not made, past a daily limit."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent

TITLE_PRICES = """
[prices."mockai:gpt-title"]
input_per_mtok = 10.0
output_per_mtok = 20.0
"""


def _titled_by(project: Path, model: str, extra: str = "") -> None:
    toml = project / "agentrunner.toml"
    text = toml.read_text().replace('title_model = "test"', f'title_model = "{model}"')
    toml.write_text(text + TITLE_PRICES + extra)


def _today() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")


async def test_a_titles_request_is_charged_to_the_run_that_asked_for_it(
    project: Path, agent: Agent, open_runner: Callable[[], Any], mock: MockProvider
) -> None:
    _titled_by(project, "mockai:gpt-title")
    agent("ceo")
    runner = await open_runner()
    titles = []
    for n, (message, title_tokens) in enumerate([("Plan the launch", 50), ("Hire", 80)]):
        mock.queue(Reply(text=f"Answer {n}", input_tokens=100, output_tokens=10), model="gpt-mock")
        mock.queue(
            Reply(text=f"Title {n}", input_tokens=title_tokens, output_tokens=5),
            model="gpt-title",
        )
        result = await runner.run_agent("ceo", f"thread-{n}", message)
        await runner.effects.drain()
        titles.append((await runner.store.threads.get(f"thread-{n}")).title)
        assert result.text == f"Answer {n}"
    assert titles == ["Title 0", "Title 1"]
    spent = await runner.store.costs.summary(since=_today())
    by_model = {(r["agent_id"], r["model"]): r["cost_micros"] for r in spent}
    # the agent's requests (1 and 2 per mtok) and the titles' (10 and 20 per mtok)
    assert by_model == {
        ("ceo", "mockai:gpt-mock"): 2 * (100 * 1 + 10 * 2),
        ("ceo", "mockai:gpt-title"): (50 * 10 + 5 * 20) + (80 * 10 + 5 * 20),
    }
    assert await runner.store.costs.spent_today("ceo") == 240 + 600 + 900


async def test_past_the_daily_limit_the_title_is_not_asked_for(
    project: Path, agent: Agent, open_runner: Callable[[], Any], mock: MockProvider
) -> None:
    # $0.000400 a day: the agent's request (120 micros) fits; the title's worst case
    # (its input at 10 per mtok and 32 output tokens at 20: over 640 micros) does not.
    _titled_by(project, "mockai:gpt-title", "\n[budgets]\nper_agent_daily_usd = 0.000400\n")
    agent("ceo")
    runner = await open_runner()
    mock.queue(Reply(text="Answer", input_tokens=100, output_tokens=10), model="gpt-mock")
    mock.queue(Reply(text="A title", input_tokens=50, output_tokens=5), model="gpt-title")
    await runner.run_agent("ceo", "thread-0", "Plan the launch")
    await runner.effects.drain()
    assert [r.body["model"] for r in mock.requests] == ["gpt-mock"]  # no title request made
    assert (await runner.store.threads.get("thread-0")).title is None
    assert await runner.store.costs.spent_today("ceo") == 120
