"""Cold start of the CLI: `agentrunner --help`, and `agentrunner agents list` on 200 agents.

Each sample is a fresh process (nothing cached in memory between runs); the figure reported is
the median wall time. Targets (issue 2): --help < 0.3 s, agents list < 0.6 s.

    python bench/startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, summary, write_results

TARGETS = {
    "import agentrunner": 0.25,
    "agentrunner --help": 0.3,
    "agentrunner agents list (200)": 0.6,
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


def time_command(cmd: list[str], cwd: Path, runs: int) -> list[float]:
    env = {**os.environ, "COLUMNS": "200"}
    subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, check=True)  # warm the disk cache
    samples = []
    for _ in range(runs):
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
