"""Delegation follows the org chart: ``delegate(agent, task)`` is offered to an agent with
direct reports, runs the report as a child run under the caller's (its thread, budget and
depth limit), and refuses anyone else; a disabled agent is neither offered nor run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentRunner
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.runner.test_budgets import LONG, configure, spend


def org(agent: Agent, model: str = "") -> None:
    """ceo → cto → engineer, ceo → cmo."""
    front = f"model: {model}\n" if model else ""
    agent("ceo", front + "name: CEO\ndescription: Runs the company")
    agent("cto", front + "name: CTO\ndescription: Owns technology\nreports_to: ceo")
    agent("cmo", front + "name: CMO\ndescription: Owns marketing\nreports_to: ceo")
    agent("engineer", front + "name: Engineer\ndescription: Builds things\nreports_to: cto")


def offered(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The tools a request to the mock offered, by name."""
    return {t["function"]["name"]: t["function"] for t in body.get("tools", [])}


async def test_delegation_goes_two_levels_down_as_child_runs(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    org(agent)
    mock.queue(
        Reply(tool_calls=[("delegate", {"agent": "cto", "task": "Pick a database"})]),
        Reply(tool_calls=[("delegate", {"agent": "engineer", "task": "Benchmark two"})]),
        Reply(text="Postgres is 2x faster here."),
        Reply(text="We use Postgres."),
        Reply(text="Decision: Postgres."),
    )
    runner: AgentRunner = await open_runner()
    result = await runner.run_agent("ceo", "board", "Choose our stack")
    assert result.text == "Decision: Postgres."

    ceo_req, cto_req, eng_req = (r.body for r in mock.requests[:3])
    delegate = offered(ceo_req)["delegate"]
    assert delegate["parameters"]["properties"]["agent"]["enum"] == ["cmo", "cto"]
    assert "cto: Owns technology" in delegate["description"]
    assert offered(cto_req)["delegate"]["parameters"]["properties"]["agent"]["enum"] == ["engineer"]
    assert "delegate" not in offered(eng_req)  # no reports: nothing to delegate to
    assert cto_req["messages"][-1]["content"] == "Pick a database"
    assert eng_req["messages"][-1]["content"] == "Benchmark two"

    runs = {r.agent_id: r for r in await runner.store.runs.list(limit=20)}
    assert set(runs) == {"ceo", "cto", "engineer"}
    ceo, cto, eng = runs["ceo"], runs["cto"], runs["engineer"]
    assert (ceo.parent_run_id, cto.parent_run_id, eng.parent_run_id) == (None, ceo.id, cto.id)
    assert (ceo.depth, cto.depth, eng.depth) == (0, 1, 2)
    assert (ceo.thread_id, cto.thread_id, eng.thread_id) == (
        "board",
        "board.cto",
        "board.cto.engineer",
    )
    assert all(r.status == "completed" for r in runs.values())
    # Each run's cost includes its delegates': the tree's spend is the root's.
    by_agent = await spend(runner)
    assert set(by_agent) == {"ceo", "cto", "engineer"} and all(by_agent.values())
    assert eng.cost_micros == by_agent["engineer"]
    assert cto.cost_micros == by_agent["cto"] + by_agent["engineer"]
    assert ceo.cost_micros == result.cost_micros == sum(by_agent.values())


async def test_a_delegate_spends_from_the_trees_budget(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    configure(project, mock_server)
    agent("ceo", "model: mockai:gpt-pricey\nlimits: {max_budget_usd: 0.2}")
    agent("cto", "model: mockai:gpt-pricey\nreports_to: ceo\nlimits: {max_budget_usd: 5}")
    agent("engineer", "model: mockai:gpt-pricey\nreports_to: cto")
    mock.queue(
        Reply(tool_calls=[("delegate", {"agent": "cto", "task": "build"})], input_tokens=None),
        Reply(tool_calls=[("delegate", {"agent": "engineer", "task": "x"})], input_tokens=None),
        Reply(text=LONG, input_tokens=None),  # $2.00 if it were let through
        Reply(text="The engineer ran out of budget.", input_tokens=None),
        Reply(text="Done.", input_tokens=None),
    )
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as caught:  # the engineer spent what the tree had
        await runner.run_agent("ceo", "t", "build it")
    assert caught.value.code is ErrorCode.BUDGET_EXCEEDED
    engineer_cap = mock.requests[2].body["max_tokens"]
    assert engineer_cap < 500  # $0.20 less what was spent buys at most 500 output tokens
    assert sum((await spend(runner)).values()) <= 200_000
    runs = {r.agent_id: r for r in await runner.store.runs.list(limit=20)}
    assert {a: r.stop_reason for a, r in runs.items()} == dict.fromkeys(
        ("ceo", "cto", "engineer"), "budget_exceeded"
    )


async def test_delegating_to_someone_not_a_direct_report_is_refused(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    org(agent)
    mock.queue(
        Reply(tool_calls=[("delegate", {"agent": "engineer", "task": "skip the CTO"})]),
        Reply(tool_calls=[("delegate", {"agent": "ghost", "task": "anyone?"})]),
        Reply(text="I will ask the CTO instead."),
    )
    runner: AgentRunner = await open_runner()
    result = await runner.run_agent("ceo", "t", "Get it built")
    assert result.stop_reason == "end_turn"
    refusals = [m["content"] for m in mock.requests[-1].body["messages"] if m["role"] == "tool"]
    assert len(refusals) == 2
    for refused, who in zip(refusals, ("engineer", "ghost"), strict=True):
        assert "Invalid arguments for 'delegate'" in refused and who in refused
        assert "'cmo', 'cto'" in refused  # whom it may delegate to
    assert [r.agent_id for r in await runner.store.runs.list(limit=20)] == ["ceo"]


async def test_delegation_stops_at_the_depth_limit(agent: Agent, open_runner: Any) -> None:
    agent("a1", "model: test")
    for parent, child in (("a1", "a2"), ("a2", "a3"), ("a3", "a4"), ("a4", "a5")):
        agent(child, f"model: test\nreports_to: {parent}")
    runner: AgentRunner = await open_runner()
    result = await runner.run_agent("a1", "t", "pass it down")
    runs = sorted(await runner.store.runs.list(limit=20), key=lambda r: r.depth)
    assert [(r.agent_id, r.depth) for r in runs] == [("a1", 0), ("a2", 1), ("a3", 2), ("a4", 3)]
    refused = [
        m
        for m in await runner.store.runs.messages(runs[-1].id)
        if m.message_type == "tool_return_message" and m.is_error
    ]
    assert len(refused) == 1 and "delegation depth limit (3)" in refused[0].content
    assert result.stop_reason == "end_turn"


async def test_the_test_model_hands_on_the_task_it_was_given(
    agent: Agent, open_runner: Any
) -> None:
    org(agent, "test")
    runner: AgentRunner = await open_runner()
    for thread, directive in (("t1", "Plan the Q3 launch"), ("t2", "Cut hosting costs by 10%")):
        await runner.run_agent("ceo", thread, directive)
    delegated = {}
    for run in await runner.store.runs.list(limit=20):
        if run.agent_id == "cmo":  # the first report listed: neither message names one
            first = (await runner.store.messages.page(run.thread_id or ""))[0][1]
            delegated[run.thread_id] = first.content  # type: ignore[union-attr]
    assert delegated == {"t1.cmo": "Plan the Q3 launch", "t2.cmo": "Cut hosting costs by 10%"}
    # A report the message names is the one it goes to, and on down the chart from there.
    await runner.run_agent("ceo", "t3", "Ask the CTO which database to use")
    assert {r.thread_id for r in await runner.store.runs.list(limit=50)} >= {
        "t3",
        "t3.cto",
        "t3.cto.engineer",
    }


async def test_a_disabled_agent_is_neither_offered_nor_run(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    org(agent)
    agent("cmo", "name: CMO\nreports_to: ceo\nenabled: false")
    agent("ceo", "name: CEO\ncapabilities: [agents]")
    mock.queue(Reply(text="ok"))
    runner: AgentRunner = await open_runner()
    await runner.run_agent("ceo", "t", "who is there?")
    tools = offered(mock.requests[0].body)
    assert tools["delegate"]["parameters"]["properties"]["agent"]["enum"] == ["cto"]
    assert "cmo" not in tools["ask_agent"]["parameters"]["properties"]["agent"]["enum"]
    assert "cmo" not in tools["delegate"]["description"] + tools["ask_agent"]["description"]

    calls = {
        "run_agent": lambda: runner.run_agent("cmo", "t-cmo", "hi"),
        "run_task": lambda: runner.run_task("cmo", "hi"),
        "session_thread": lambda: runner.session_thread("cmo"),
    }
    for name, call in calls.items():
        with pytest.raises(AgentRunnerError) as refused:
            await call()
        error = refused.value
        assert error.code is ErrorCode.AGENT_DISABLED, name
        assert error.file and error.file.endswith("cmo.md") and error.line == 4
        assert "enabled: true" in (error.hint or "") and "cmo.md" in (error.hint or "")
    assert [r.agent_id for r in await runner.store.runs.list(limit=20)] == ["ceo"]
    assert await runner.store.threads.list(agent_id="cmo") == []  # nothing half-written


async def test_ask_agent_refuses_a_disabled_agent_it_is_asked_for(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("boss", "capabilities: [agents]")
    agent("off", "enabled: false")
    mock.queue(
        Reply(tool_calls=[("ask_agent", {"agent": "off", "message": "hello?"})]),
        Reply(text="nobody there"),
    )
    runner: AgentRunner = await open_runner()
    await runner.run_agent("boss", "t", "ask off")
    [result] = [m for m in mock.requests[-1].body["messages"] if m["role"] == "tool"]
    assert "not an agent you may ask" in result["content"] and "agents: none" in result["content"]
    assert [r.agent_id for r in await runner.store.runs.list(limit=20)] == ["boss"]


def test_naming_delegate_in_a_file_is_an_error_with_the_reason(agent: Agent, project: Path) -> None:
    from agentrunner.agents.project import load_project
    from agentrunner.runtime.compose import check_project

    agent("ceo", "name: CEO\ntools: [delegate]")
    agent("cto", "name: CTO\ntools: [delegate, memory_append]\nreports_to: ceo")
    problems = check_project(load_project(project)).problems
    assert [(p.code, Path(p.file or "").name, p.line) for p in problems] == [
        (ErrorCode.INVALID_SPECIFICATION, "ceo.md", 3),
        (ErrorCode.INVALID_SPECIFICATION, "cto.md", 3),
    ]
    assert "tool 'delegate' cannot be granted in an agent file" in problems[0].message
    assert "reports_to: ceo" in (problems[0].hint or "")
    assert "reports_to: cto" in (problems[1].hint or "")
