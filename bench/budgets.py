"""Budgets against a priced mock: 200 runs across 4 agents, 8 at a time, under per-run, per-agent
daily, global daily and delegation-tree budgets set low enough to bite. Reports, for every
budget, its largest spend against its limit (the target: never above 1.0), how many runs each
refusal stopped, and what the budget holds add to a durable turn.

The mock bills each request's real size and cuts replies at the requested output cap, as a
provider does; its replies are long (they echo the message), so most runs would overspend.

    python bench/budgets.py [--runs 200] [--concurrency 8] [--turns 200]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pin_to_core, print_table, write_results
from engine import free_port, start_mock

LIMITS = {"per_run": 0.01, "lead_tree": 0.025, "agent_daily": 0.25, "global_daily": 0.80}
CONFIG = """\
[defaults]
model = "bench:gpt-pricey"
title_model = "test"

[providers.bench]
kind = "openai"
base_url = "{url}"

[prices."bench:gpt-pricey"]
input_per_mtok = 10.0
output_per_mtok = 40.0
{budgets}
"""
BUDGETS = f"""
[budgets]
per_run_usd = {LIMITS["per_run"]}
per_agent_daily_usd = {LIMITS["agent_daily"]}
global_daily_usd = {LIMITS["global_daily"]}
"""
LEAD = (
    "---\nname: Lead\ncapabilities: [agents]\n"
    f"limits: {{max_budget_usd: {LIMITS['lead_tree']}}}\n---\nYou lead and delegate.\n"
)
WORKER = "---\nname: {name}\nreports_to: lead\n---\nYou do the work.\n"


def project(root: Path, url: str, budgets: str) -> Path:
    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text(CONFIG.format(url=url, budgets=budgets))
    (root / "agents" / "lead.md").write_text(LEAD)
    for name in ("w1", "w2", "w3"):
        (root / "agents" / f"{name}.md").write_text(WORKER.format(name=name))
    return root


async def script(root: Path, runs: int, concurrency: int) -> dict[str, Any]:
    """The 200 runs, then the spend read back from the store and set against every limit."""
    from agentrunner import open_runner
    from agentrunner.errors import AgentRunnerError

    rng = random.Random(7)
    agents = ["lead", "w1", "w2", "w3"]
    gate = asyncio.Semaphore(concurrency)
    outcomes: dict[str, int] = {}
    async with await open_runner(root) as runner:

        async def one(n: int) -> None:
            agent = agents[n % 4]
            message = f"task {n}: " + "detail " * rng.randint(5, 80)
            async with gate:
                try:
                    await runner.run_agent(agent, f"{agent}-{n}", message)
                    key = "completed"
                except AgentRunnerError as exc:
                    key = str(exc.code)
            outcomes[key] = outcomes.get(key, 0) + 1

        started = time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(runs)))
        seconds = time.perf_counter() - started
        store = runner.store
        rows = await store.driver.fetch_all(
            "SELECT agent_id, SUM(cost_micros) AS micros FROM costs GROUP BY agent_id", {}
        )
        by_agent = {r["agent_id"]: int(r["micros"] or 0) for r in rows}
        top = [r for r in await store.runs.list(limit=runs * 4) if r.depth == 0]
        holds = await store.driver.fetch_all("SELECT COUNT(*) AS n FROM budget_holds", {})
    lead_runs = [r.cost_micros for r in top if r.agent_id == "lead"]
    other_runs = [r.cost_micros for r in top if r.agent_id != "lead"]
    ratios = {
        "per-run budget (worker runs)": max(other_runs, default=0) / 1e6 / LIMITS["per_run"],
        "delegation tree (lead runs and their children)": max(lead_runs, default=0)
        / 1e6
        / LIMITS["lead_tree"],
        "per-agent daily budget (the highest agent)": max(by_agent.values(), default=0)
        / 1e6
        / LIMITS["agent_daily"],
        "global daily budget": sum(by_agent.values()) / 1e6 / LIMITS["global_daily"],
    }
    return {
        "ratios": ratios,
        "outcomes": outcomes,
        "spent_usd_by_agent": {k: v / 1e6 for k, v in by_agent.items()},
        "holds_left": int(holds[0]["n"]),
        "seconds": seconds,
    }


async def turn_cost(url: str, turns: int) -> dict[str, float]:
    """A durable turn of a priced model with the daily budgets on against the same turn with no
    budget at all, interleaved: what reserving (and settling) each request costs a turn."""
    from agentrunner import open_runner

    samples: dict[str, list[float]] = {"no budgets": [], "daily budgets": []}
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        plain = project(Path(a), url, "")
        budgeted = project(Path(b), url, "[budgets]\nper_agent_daily_usd = 1000.0\n")
        async with await open_runner(plain) as free, await open_runner(budgeted) as held:
            for n in range(turns + 20):
                for name, runner in (("no budgets", free), ("daily budgets", held)):
                    begin = time.perf_counter()
                    await runner.run_agent("w1", f"t{n}", "A short question.")
                    if n >= 20:  # warmed up
                        samples[name].append(time.perf_counter() - begin)
    return {name: statistics.median(got) * 1e6 for name, got in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    port = free_port()
    mock = start_mock(port, "--count-input-tokens")
    pin_to_core(0)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            result = asyncio.run(
                script(project(Path(tmp), url, BUDGETS), args.runs, args.concurrency)
            )
        costs = asyncio.run(turn_cost(url, args.turns))
    finally:
        mock.terminate()
        mock.wait(timeout=10)
    worst = max(result["ratios"].values())
    print_table(
        f"{args.runs} runs across 4 agents, {args.concurrency} at a time: spend / limit",
        ["budget", "limit", "largest spend / limit", "target"],
        [
            [name, f"${limit:.3f}", f"{ratio:.3f}", "<= 1.0"]
            for (name, ratio), limit in zip(result["ratios"].items(), LIMITS.values(), strict=True)
        ],
    )
    print_table(
        "Outcomes",
        ["outcome", "runs"],
        sorted(result["outcomes"].items()),
    )
    print_table(
        "A durable turn of a priced model (median µs, interleaved)",
        ["budgets", "µs"],
        [[name, f"{us:.0f}"] for name, us in costs.items()],
    )
    print(
        f"\nlargest spend / limit: {worst:.3f} ({'within every limit' if worst <= 1 else 'OVER'})"
        f"; budget holds left behind: {result['holds_left']}"
    )
    write_results("budgets", {"args": vars(args), **result, "turn_us": costs, "worst": worst})


if __name__ == "__main__":
    main()
