"""The templates on the offline ``test`` model stay short and readable: a directive to the
company's CEO goes down the org chart as one chain of delegations, and a post in the office
gets one round of replies, not a cascade."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentrunner.runtime.compose import open_runner, open_workspace
from agentrunner.runtime.scaffold import create_project


@pytest.fixture
def make(tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setenv("AGENTRUNNER_DATABASE_URL", store_url)

    def made(template: str) -> Path:
        root = tmp_path / template
        create_project(root, template, "test")
        monkeypatch.chdir(root)
        return root

    return made


@pytest.mark.parametrize(
    ("directive", "tree"),
    [
        (  # no report named: the CEO delegates to the first listed, who hands it on
            "Plan the launch",
            [(0, "ceo", None), (1, "cfo", "ceo"), (2, "analyst", "cfo")],
        ),
        (  # the CTO named: it hands the task on to its engineer
            "Ask the CTO for a build plan",
            [(0, "ceo", None), (1, "cto", "ceo"), (2, "engineer", "cto")],
        ),
        (  # the CMO named: the CMO has no one to hand it on to
            "Ask the CMO for a launch plan",
            [(0, "ceo", None), (1, "cmo", "ceo")],
        ),
    ],
)
async def test_a_directive_to_the_company_is_one_chain_down_the_org_chart(
    make: object, directive: str, tree: list[tuple[int, str, str | None]]
) -> None:
    """The CEO delegates once, to the report the directive names (else the first); that
    report hands it on to its own report where it has one. Nothing else runs."""
    root = await asyncio.to_thread(make, "company")  # type: ignore[arg-type]
    runner = await open_runner(root)
    try:
        result = await runner.run_agent("ceo", "board", directive)
        runs = await runner.store.runs.list(limit=100)
        # what each was handed: the directive, as the CEO got it
        handed = {
            (await runner.store.messages.page(r.thread_id or ""))[0][1].content  # type: ignore[union-attr]
            for r in runs
        }
    finally:
        await runner.close()
    assert result.stop_reason == "end_turn" and all(r.status == "completed" for r in runs)
    agent_of = {r.id: r.agent_id for r in runs}
    shape = sorted((r.depth, r.agent_id, agent_of.get(r.parent_run_id or "")) for r in runs)
    assert shape == sorted(tree, key=lambda t: (t[0], t[1], t[2] or ""))
    assert handed == {directive}


async def test_a_post_in_the_office_gets_one_round_of_replies(make: object) -> None:
    root = await asyncio.to_thread(make, "office")  # type: ignore[arg-type]
    ws = await open_workspace(root)
    try:
        channel = await ws.channels.channel("general")
        posted = await ws.channels.post(channel, "you", "Good morning, team")
        await ws.worker(concurrency=1).run(until_idle=True)
        said = await ws.runner.store.channels.after(channel.id, posted.message.id, 1000)
        runs = await ws.runner.store.runs.list(limit=1000)
    finally:
        await ws.close()
    agents = ["accountant", "manager", "reception", "sales"]
    assert sorted(m.sender for m in said) == agents  # each says one thing
    assert all(m.content == "[test model] Re: Good morning, team" for m in said)
    # …and each hears the others' replies (a reply queued behind one already waiting is
    # coalesced with it) and lets them be: nothing is said at depth 2.
    assert {m.depth for m in said} == {1}
    assert len(agents) < len(runs) <= len(agents) ** 2
    assert all(r.status == "completed" for r in runs)
