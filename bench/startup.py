"""Cold start of the CLI: `agentrunner --help`, `agentrunner agents list` on 200 agents, and
`agentrunner brief --background` in a company (the time until the job id is printed: the brief
is queued and a detached worker started when none is alive; the worker's own work is not timed),
with no worker alive (each sample starts one, waited out before the next) and with one alive.

Each sample is a fresh process (nothing cached in memory between runs); the figure reported is
the median wall time. Targets (issues 2 and 25): --help <= 0.3 s, agents list < 0.6 s,
brief --background <= 0.5 s.

    python bench/startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, summary, write_results

TARGETS = {
    "import agentrunner": 0.25,
    "agentrunner --help": 0.3,
    "agentrunner agents list (200)": 0.6,
    "agentrunner brief --background (starts a worker)": 0.5,
    "agentrunner brief --background (a worker alive)": 0.5,
}
COMPANY = {
    "ceo": "name: CEO\ncapabilities: [agents]\n---\nYou run the company.\n",
    "cto": "name: CTO\nreports_to: ceo\n---\nYou build.\n",
}

AGENT = """\
---
name: Agent {n}
description: Benchmark agent number {n}
model: openai:gpt-4.1-mini
fallback: [anthropic:claude-haiku-4-5]
tools: [read_file, ask_agent]
capabilities: [memory, agents]
reports_to: {boss}
limits: {{max_steps: 8, max_budget_usd: 0.10}}
memory: {{persona: "diligent"}}
---
You are agent {n} of {{{{input.company}}}}. Focus: {{{{ input.focus? }}}}.
"""


def make_project(root: Path, count: int) -> None:
    (root / "agentrunner.toml").write_text('[defaults]\nmodel = "test"\n')
    agents = root / "agents"
    agents.mkdir()
    for n in range(count):
        boss = "null" if n == 0 else f"agent{(n - 1) // 5:03d}"
        (agents / f"agent{n:03d}.md").write_text(AGENT.format(n=n, boss=boss))


def make_company(root: Path) -> None:
    """A company on the offline `test` model: what a background brief's worker will run."""
    root.mkdir()
    (root / "agentrunner.toml").write_text('[defaults]\nmodel = "test"\n')
    (root / "agents").mkdir()
    for agent_id, text in COMPANY.items():
        (root / "agents" / f"{agent_id}.md").write_text(f"---\n{text}")


def wait_for_workers(root: Path, within_s: float = 60.0) -> None:
    """The detached workers the briefs started serve until idle: let them finish before the
    project is deleted under them."""
    import sqlite3

    db = root / ".agentrunner" / "agentrunner.db"
    deadline = time.monotonic() + within_s
    while db.exists() and time.monotonic() < deadline:
        with sqlite3.connect(db) as conn:
            if not conn.execute("SELECT COUNT(*) FROM workers").fetchone()[0]:
                return
        time.sleep(0.2)


def time_command(
    cmd: list[str], cwd: Path, runs: int, between: Callable[[], None] | None = None
) -> list[float]:
    env = {**os.environ, "COLUMNS": "200"}
    subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, check=True)  # warm the disk cache
    samples = []
    for _ in range(runs):
        if between is not None:
            between()
        start = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, check=True)
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--agents", type=int, default=200)
    args = parser.parse_args()
    exe = Path(sys.executable).parent / "agentrunner"
    cli = [str(exe)] if exe.exists() else [sys.executable, "-m", "agentrunner"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_project(root, args.agents)
        commands = {
            "import agentrunner": [sys.executable, "-c", "import agentrunner"],
            "agentrunner --help": [*cli, "--help"],
            f"agentrunner agents list ({args.agents})": [*cli, "agents", "list"],
        }
        results = {
            name: summary(time_command(cmd, root, args.runs)) for name, cmd in commands.items()
        }
        company = root / "company"
        make_company(company)
        brief = [*cli, "brief", "--background", "Plan the week"]
        # No worker alive: each brief starts one (waited out between samples, so its start-up
        # does not compete with the next sample for the CPU).
        results["agentrunner brief --background (starts a worker)"] = summary(
            time_command(brief, company, args.runs, between=lambda: wait_for_workers(company))
        )
        # A worker alive (`agentrunner worker`): the brief is only queued.
        worker = subprocess.Popen(
            [*cli, "worker"], cwd=company, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            time.sleep(3)  # it has registered
            results["agentrunner brief --background (a worker alive)"] = summary(
                time_command(brief, company, args.runs)
            )
        finally:
            worker.terminate()
            worker.wait(timeout=60)
            wait_for_workers(company)
    rows = []
    for name, stats in results.items():
        target = TARGETS.get(name)
        verdict = "—" if target is None else ("ok" if stats["median_s"] < target else "SLOW")
        rows.append(
            [name, stats["median_s"], stats["p95_s"], stats["min_s"], target or "—", verdict]
        )
    print_table(
        f"CLI cold start ({args.runs} fresh processes each)",
        ["command", "median s", "p95 s", "min s", "target s", "verdict"],
        rows,
    )
    write_results(
        "startup",
        {"runs": args.runs, "agents": args.agents, "results": results, "targets": TARGETS},
    )


if __name__ == "__main__":
    main()
