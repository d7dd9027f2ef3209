"""Budgets are never overshot: per run, per delegation tree, per agent per day, in all per day —
across concurrent runs in one process and in several (DESIGN decision 9).

A priced mock ($100 in / $400 out per million tokens) that bills the request's real size and
cuts replies at the requested output cap, as providers do. Spend is read back from the store
and summed: the invariant is over every run, not one run's value.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentRunner, RunAgentOverrides
from agentrunner.engine import AssistantMessage, ToolResult, UserMessage
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.runtime.compose import open_runner as open_project_runner
from agentrunner.testing import MockProvider, MockProviderServer, Reply
from tests.runner.conftest import CONFIG, Agent

PRICEY = """
[prices."mockai:gpt-pricey"]
input_per_mtok = 100.0
output_per_mtok = 400.0
"""
LONG = "word " * 4000  # 5,000 output tokens: $2.00, far more than any budget here


def configure(project: Path, mock_server: MockProviderServer, budgets: str = "") -> None:
    extra = PRICEY + (f"\n[budgets]\n{budgets}\n" if budgets else "")
    (project / "agentrunner.toml").write_text(
        CONFIG.format(
            openai=mock_server.openai_url, anthropic=mock_server.anthropic_url, extra=extra
        )
    )


async def spend(runner: AgentRunner) -> dict[str, int]:
    """Micro-dollars per agent from the cost rows (one per request), checked against the day's
    totals and the runs' own figures; and no budget hold is left behind."""
    rows = await runner.store.driver.fetch_all(
        "SELECT agent_id, SUM(cost_micros) AS micros FROM costs GROUP BY agent_id", {}
    )
    by_agent = {r["agent_id"]: int(r["micros"]) for r in rows if r["micros"]}
    days = await runner.store.driver.fetch_all(
        "SELECT agent_id, SUM(cost_micros) AS micros FROM cost_totals GROUP BY agent_id", {}
    )
    assert {r["agent_id"]: int(r["micros"]) for r in days if r["micros"]} == by_agent
    runs = await runner.store.runs.list(limit=1000)
    # A run's cost includes the runs it started: the top-level runs add up to everything.
    assert sum(r.cost_micros for r in runs if r.depth == 0) == sum(by_agent.values())
    holds = await runner.store.driver.fetch_all("SELECT COUNT(*) AS n FROM budget_holds", {})
    assert holds[0]["n"] == 0  # every hold was settled
    return by_agent


async def test_one_reply_cannot_overshoot_the_run_budget(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    configure(project, mock_server, "per_run_usd = 0.05")
    agent("writer", "model: mockai:gpt-pricey")
    mock.queue(Reply(text=LONG, input_tokens=None))
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as caught:
        await runner.run_agent("writer", "t", "Write me a novel")
    assert caught.value.code is ErrorCode.BUDGET_EXCEEDED
    assert "the reply was cut off at" in caught.value.message
    cap = mock.requests[-1].body["max_tokens"]
    assert 32 <= cap < 125  # $0.05 buys at most 125 output tokens at $400/M
    [run] = await runner.store.runs.list(thread_id="t")
    assert (run.status, run.stop_reason) == ("failed", "budget_exceeded")
    assert 0 < run.cost_micros <= 50_000
    last = (await runner.store.messages.page("t"))[-1][1]
    assert last.interrupted and last.text.startswith("word word")  # type: ignore[union-attr]
    assert (await spend(runner)) == {"writer": run.cost_micros}


@pytest.mark.parametrize(
    ("budgets", "named", "hint"),
    [
        ("per_run_usd = 0.05", "the per-run budget of $0.0500", "max_budget_usd"),
        (
            "per_run_usd = 1.0\nper_agent_daily_usd = 0.03",
            "the daily budget of agent 'writer' of $0.0300",
            "next day",
        ),
        # a daily budget with room for the whole reply: the run's own still lowers the cap
        (
            "per_run_usd = 0.05\nper_agent_daily_usd = 10.0",
            "the per-run budget of $0.0500",
            "max_budget_usd",
        ),
        # a daily budget alone, without room for the whole reply: it lowers the cap
        ("per_agent_daily_usd = 0.03", "the daily budget of agent 'writer' of $0.0300", "next day"),
    ],
)
async def test_a_reply_cut_off_names_the_budget_that_cut_it(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    project: Path,
    mock_server: Any,
    budgets: str,
    named: str,
    hint: str,
) -> None:
    configure(project, mock_server, budgets)
    agent("writer", "model: mockai:gpt-pricey")
    mock.queue(Reply(text=LONG, input_tokens=None))
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as caught:
        await runner.run_agent("writer", "t", "Write me a novel")
    message = caught.value.message
    assert "the reply was cut off at" in message and named in message, message
    # a person reads `budget_exceeded: the reply was cut off…`: the code, not an echo of it
    assert "budget exceeded" not in caught.value.one_line()
    assert "spent" in message  # what was spent of it before this reply
    assert hint in (caught.value.hint or "")
    other = "next day" if hint == "max_budget_usd" else "max_budget_usd"
    assert other not in (caught.value.hint or "")  # the hint fits the budget that cut it


async def test_a_budget_too_small_for_a_minimal_reply_sends_nothing(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    configure(project, mock_server, "per_run_usd = 0.01")
    agent("writer", "model: mockai:gpt-pricey")
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as caught:
        await runner.run_agent("writer", "t", "x" * 2000)  # ~700 input tokens: $0.07
    message = caught.value.message
    assert caught.value.code is ErrorCode.BUDGET_EXCEEDED
    assert "the per-run budget of $0.0100 has $0.0100 left ($0.0000 spent)" in message
    assert "needs at least $0.0" in message and "minimal reply of 32 tokens" in message
    assert "budget exceeded" not in caught.value.one_line()  # the code says it, once
    assert not mock.requests  # refused before sending: nothing was spent
    [run] = await runner.store.runs.list(thread_id="t")
    assert run.cost_micros == 0 and run.stop_reason == "budget_exceeded"
    assert await runner.store.runs.steps(run.id) == []  # a refused request is not a step


async def test_concurrent_runs_of_one_agent_never_spend_the_same_remainder(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    configure(project, mock_server, "per_agent_daily_usd = 0.30")
    agent("spender", "model: mockai:gpt-pricey")
    mock.queue(*(Reply(text="word " * 500, input_tokens=None) for _ in range(12)))
    runner: AgentRunner = await open_runner()
    outcomes = await asyncio.gather(
        *(runner.run_agent("spender", f"t{n}", "spend") for n in range(12)),
        return_exceptions=True,
    )
    completed = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, AgentRunnerError)]
    assert len(completed) + len(refused) == 12 and completed and refused
    assert {o.code for o in refused} == {ErrorCode.BUDGET_EXCEEDED}
    assert any("the daily budget of agent 'spender'" in o.message for o in refused)
    spent = (await spend(runner))["spender"]
    assert spent <= 300_000 and spent >= 250_000 * len(completed)


async def test_the_global_daily_budget_holds_across_agents(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    configure(project, mock_server, "global_daily_usd = 0.50")
    for name in ("a", "b", "c", "d"):
        agent(name, "model: mockai:gpt-pricey")
    mock.count_input_tokens = True
    mock.queue(*(Reply(text="word " * 300, input_tokens=None) for _ in range(40)))
    runner: AgentRunner = await open_runner()
    await asyncio.gather(
        *(runner.run_agent(name, f"{name}{n}", "spend") for name in "abcd" for n in range(5)),
        return_exceptions=True,
    )
    assert sum((await spend(runner)).values()) <= 500_000


async def test_a_delegation_tree_stays_within_the_callers_budget(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    configure(project, mock_server)
    agent("boss", "model: mockai:gpt-pricey\ncapabilities: [agents]\nlimits: {max_budget_usd: 0.2}")
    for name in ("w1", "w2", "w3"):
        agent(name, "model: mockai:gpt-pricey")
    # The boss asks all three at once; each would answer at length ($0.40 apiece).
    asks = [("ask_agent", {"agent": w, "message": "report"}) for w in ("w1", "w2", "w3")]
    mock.queue(Reply(tool_calls=asks))  # type: ignore[arg-type]
    mock.queue(*(Reply(text="word " * 1000, input_tokens=None) for _ in range(3)))
    mock.queue(Reply(text="Summary.", input_tokens=None))
    runner: AgentRunner = await open_runner()
    [outcome] = await asyncio.gather(
        runner.run_agent("boss", "t", "get reports"), return_exceptions=True
    )
    assert not isinstance(outcome, BaseException) or (
        isinstance(outcome, AgentRunnerError) and outcome.code is ErrorCode.BUDGET_EXCEEDED
    )
    spent = await spend(runner)
    assert sum(spent.values()) <= 200_000
    assert sum(v for k, v in spent.items() if k != "boss") > 0  # the children did spend


SCRIPT = """
import asyncio, sys
from agentrunner import open_runner
from agentrunner.errors import AgentRunnerError

async def main():
    async with await open_runner() as runner:
        async def one(n):
            try:
                await runner.run_agent("spender", f"{sys.argv[1]}-{n}", "spend")
            except AgentRunnerError:
                pass
        await asyncio.gather(*(one(n) for n in range(4)))

asyncio.run(main())
"""


def test_processes_sharing_a_database_share_its_daily_budget(
    agent: Agent, project: Path, mock: MockProvider, mock_server: Any
) -> None:
    """Six processes, four runs each, one daily budget: the holds are in the database."""
    configure(project, mock_server, "per_agent_daily_usd = 0.40")
    agent("spender", "model: mockai:gpt-pricey")
    mock.queue(*(Reply(text="word " * 400, input_tokens=None) for _ in range(24)))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, f"p{n}"], cwd=project, env=os.environ.copy()
        )
        for n in range(6)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0] * 6

    async def check() -> int:
        async with await open_project_runner(project) as runner:
            return (await spend(runner)).get("spender", 0)

    spent = asyncio.run(check())
    assert 0 < spent <= 400_000


@pytest.mark.parametrize("number", [2**64, -(10**30) - 7])
async def test_a_tool_call_with_an_integer_past_64_bits_is_run_priced_and_kept(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    project: Path,
    mock_server: Any,
    number: int,
) -> None:
    # JSON takes any integer; a model may send one past 64 bits (an id, a big sum). The request
    # sized for its budget hold, the message stored and the history sent again all carry it.
    from agentrunner.engine import tool

    seen: list[int] = []

    @tool
    async def add_one(n: int) -> str:
        """Adds one."""
        seen.append(n)
        return str(n + 1)

    configure(project, mock_server, "per_run_usd = 1.0\nper_agent_daily_usd = 5.0")
    agent("counter", "model: mockai:gpt-pricey")
    mock.queue(Reply(tool_calls=[("add_one", f'{{"n": {number}}}')]), Reply(text="done"))
    runner: AgentRunner = await open_runner()
    done = await runner.run_agent(
        "counter", "t", "add one", overrides=RunAgentOverrides(tools=(add_one,))
    )
    assert done.stop_reason == "end_turn" and seen == [number]
    # The history sent with the second request carries the number as the model wrote it.
    sent = mock.requests[-1].body["messages"]
    said = next(m for m in sent if m.get("tool_calls"))["tool_calls"][0]["function"]["arguments"]
    assert json.loads(said) == {"n": number}
    stored = [m for _, m, _, _ in await runner.store.messages.page("t")]
    call = next(m for m in stored if isinstance(m, AssistantMessage) and m.tool_calls)
    assert call.tool_calls[0].arguments == {"n": number}
    assert next(m for m in stored if isinstance(m, ToolResult)).content == str(number + 1)
    assert (await spend(runner))["counter"] > 0


async def test_messages_refused_before_any_request_are_never_sent_later(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    project: Path,
    mock_server: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Fourteen runs on one thread under a daily limit: what is spent stays within it; every
    run refused before its first request keeps its message in the thread, for people, and no
    later request carries it — not the next run that can pay, and not the refusals between,
    which each need what the first of them needed (no message piles up on the next)."""
    configure(project, mock_server, "per_agent_daily_usd = 0.06")
    agent("writer", "model: mockai:gpt-pricey")
    mock.count_input_tokens = True  # each request billed at its real size
    runner: AgentRunner = await open_runner()
    said, refused, needed = [], [], set()
    for n in range(14):
        text = f"note {n:02d}: remember this"
        [outcome] = await asyncio.gather(
            runner.run_agent("writer", "t", text), return_exceptions=True
        )
        if not isinstance(outcome, BaseException):
            said.append(text)
            continue
        assert isinstance(outcome, AgentRunnerError), outcome
        assert outcome.code is ErrorCode.BUDGET_EXCEEDED, outcome
        refused.append((text, len(mock.requests)))
        needed.add(outcome.message.split("needs at least ")[-1])
    assert said and len(refused) >= 10
    assert sum((await spend(runner)).values()) <= 60_000
    assert len(needed) == 1, needed  # each refusal needed as much as the first
    # The day's limit raised: the next run pays, and is sent what was said, nothing refused.
    await runner.close()
    configure(project, mock_server, "per_agent_daily_usd = 1.00")
    runner = await open_runner()
    await runner.run_agent("writer", "t", "note 99: and this")
    for text, sent_before in refused:
        assert all(text not in json.dumps(r.body) for r in mock.requests[sent_before:]), text
    last = json.dumps(mock.requests[-1].body)
    assert all(text in last for text in said) and "note 99" in last
    # People still see every refused message, in its place in the thread.
    page = [m for _, m, _, _ in await runner.store.messages.page("t")]
    kept = [m for m in page if isinstance(m, UserMessage) and m.unsent]
    assert [m.content for m in kept] == [text for text, _ in refused]
    from tests.runner.test_cli_run import cli

    code, out, err = await asyncio.to_thread(cli, capsys, "threads", "show", "t")
    assert code == 0, err
    assert all(text in out for text, _ in refused)
    assert out.count("not sent to the model") == len(refused)


async def test_a_brief_refused_before_any_request_is_not_sent_with_the_next(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    """A foreground brief the budget refuses before its first request stays in the session's
    thread for people; the next brief's request does not carry it."""
    from agentrunner.workspace.company.brief import brief

    configure(project, mock_server, 'per_agent_daily_usd = 0.05\n\n[journal]\nmodel = "test"')
    agent("ceo", "model: mockai:gpt-pricey")
    mock.count_input_tokens = True
    runner: AgentRunner = await open_runner()
    long = "Plan the quarter, in detail: " + "every market, every product. " * 120
    with pytest.raises(AgentRunnerError) as refused:
        await brief(runner, long)  # ~1,200 input tokens: $0.12, more than the day has
    assert refused.value.code is ErrorCode.BUDGET_EXCEEDED and not mock.requests
    done = await brief(runner, "Say hello.")
    assert done.result is not None and done.result.stop_reason == "end_turn"
    [sent] = mock.requests
    assert "Say hello." in json.dumps(sent.body) and "every market" not in json.dumps(sent.body)
    page = [m for _, m, _, _ in await runner.store.messages.page(done.session.thread_id)]
    assert [m.content for m in page if isinstance(m, UserMessage) and m.unsent] == [long]


@pytest.mark.parametrize(
    ("budgets", "named"),
    [
        ("per_run_usd = 1.0", "the per-run budget"),
        ("per_agent_daily_usd = 1.0", "the daily budget of agent 'guess'"),
        ("global_daily_usd = 1.0", "the global daily budget"),
    ],
)
async def test_a_model_of_unknown_price_is_refused_under_any_budget(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    project: Path,
    mock_server: Any,
    budgets: str,
    named: str,
) -> None:
    """A budget cannot bound what it cannot price: a run on a model with no known price is
    refused before its first request, naming the model and the table that prices it; with
    `[budgets] allow_unpriced = true` it runs, its cost reported unknown. A priced model under
    the same budget runs as before."""
    configure(project, mock_server, budgets)
    agent("guess", "model: mockai:gpt-unlisted")  # no [prices] entry, unknown to genai-prices
    agent("known", "model: mockai:gpt-pricey")
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as refused:
        await runner.run_agent("guess", "t", "hello")
    error = refused.value
    assert error.code is ErrorCode.PRICE_UNKNOWN and not error.retryable
    assert "mockai:gpt-unlisted" in error.message and named in error.message
    assert '[prices."mockai:gpt-unlisted"]' in error.message
    assert "allow_unpriced = true" in (error.hint or "")
    assert not mock.requests  # nothing was sent
    [run] = await runner.store.runs.list(thread_id="t")
    assert (run.status, run.error_code) == ("failed", "price_unknown")
    assert (await runner.run_agent("known", "k", "hello")).cost_micros > 0
    await runner.close()

    configure(project, mock_server, f"{budgets}\nallow_unpriced = true")
    runner = await open_runner()
    done = await runner.run_agent("guess", "t", "hello again")
    assert done.stop_reason == "end_turn" and not done.cost_known


def test_agents_validate_names_a_model_a_budget_cannot_price(
    agent: Agent, project: Path, mock_server: Any
) -> None:
    """Before any run: each agent whose model (or fallback) has no known price while a budget
    is in force, at the file and line that names the model; a budget in the agent file alone
    counts too; none with the models priced, no budget, or allow_unpriced."""
    from tests.runner.test_spend import run_cli

    configure(project, mock_server)
    agent("guess", "model: mockai:gpt-pricey\nfallback: [mockai:gpt-unlisted]")
    agent("capped", "model: mockai:gpt-unlisted\nlimits: {max_budget_usd: 0.5}")
    agent("free", "model: mockai:gpt-unlisted")
    done = run_cli(project, "agents", "validate")
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if "price_unknown" in line]
    assert lines == [
        "agents/capped.md:2: price_unknown: no price is known for mockai:gpt-unlisted, so "
        "max_budget_usd of agent 'capped' cannot bound what its requests cost: price it "
        'with [prices."mockai:gpt-unlisted"] in agentrunner.toml'
    ], done.stderr
    configure(project, mock_server, "per_agent_daily_usd = 1.0")
    done = run_cli(project, "agents", "validate")
    lines = [line for line in done.stderr.splitlines() if "price_unknown" in line]
    flagged = sorted(line.split(":")[0] for line in lines)
    assert flagged == ["agents/capped.md", "agents/free.md", "agents/guess.md"], done.stderr
    configure(project, mock_server, "per_agent_daily_usd = 1.0\nallow_unpriced = true")
    done = run_cli(project, "agents", "validate")
    assert done.returncode == 0 and "price_unknown" not in done.stderr, done.stderr
    # [compaction] model, which every run's compaction pays for under the run's budgets
    agent("guess", "model: mockai:gpt-pricey")
    for name in ("capped", "free"):
        (project / "agents" / f"{name}.md").unlink()
    configure(
        project,
        mock_server,
        'global_daily_usd = 1.0\n\n[compaction]\nmodel = "mockai:gpt-unlisted"',
    )
    done = run_cli(project, "agents", "validate")
    [line] = [line for line in done.stderr.splitlines() if "price_unknown" in line]
    assert line.startswith("agentrunner.toml:") and "[compaction] model: no price is known" in line
