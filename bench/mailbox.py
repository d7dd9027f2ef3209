"""Mailbox throughput and latency, on PostgreSQL and SQLite.

1. claims/s: 8 worker processes claim and complete queued runs (the model at 0 ms: no model
   call at all), 4,000 runs over 100 agents — the mailbox machinery's ceiling.
2. served runs/s: 8 `agentrunner worker` processes serving channel runs end to end against the
   mock provider at 0 ms (2 model requests per run).
3. post-to-start latency for an idle agent: one idle worker; a message is posted every 100 ms;
   latency = the run's start − the message's time.

Targets (issue 5): >= 1,000 claims/s with 8 workers on PostgreSQL; post-to-start p50 < 20 ms.

    python bench/mailbox.py [--postgres URL] [--runs 4000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import percentile, print_table, write_results
from engine import free_port, start_mock

AGENT = "---\nname: {name}\nmodel: mock:gpt-mock\n---\nYou are {name}.\n"
CONFIG = """\
[providers.mock]
kind = "openai"
base_url = "{url}"

[prices."mock:gpt-mock"]
input_per_mtok = 0.0
output_per_mtok = 0.0
"""


async def claimer(url: str, ready: Path, go: Path) -> None:
    from agentrunner.store import open_store

    store = await open_store(url)
    ready.touch()
    while not go.exists():
        await asyncio.sleep(0.001)
    worker = f"bench:{os.getpid()}"
    while (claimed := await store.mailbox.claim(worker, 30)) is not None:
        await store.batch(
            [store.runs.finish_op(claimed.id, status="completed", stop_reason="end_turn")]
        )
    await store.close()


async def queue_runs(url: str, runs: int, agents: int) -> None:
    from agentrunner.core.ids import new_id
    from agentrunner.store import open_store
    from agentrunner.store.mailbox import NewRun

    store = await open_store(url)
    queued = [
        NewRun(new_id("run_"), f"agent{n % agents}", None, {"kind": "noop"}) for n in range(runs)
    ]
    for start in range(0, len(queued), 500):
        await store.mailbox.enqueue(queued[start : start + 500])
    await store.close()


def claims_per_second(url: str, runs: int, processes: int) -> float:
    asyncio.run(queue_runs(url, runs, 100))
    with tempfile.TemporaryDirectory() as tmp:
        go = Path(tmp) / "go"
        readies = [Path(tmp) / f"ready{n}" for n in range(processes)]
        procs = [
            subprocess.Popen([sys.executable, __file__, "--claimer", url, str(r), str(go)])
            for r in readies
        ]
        while not all(r.exists() for r in readies):
            time.sleep(0.01)
        start = time.perf_counter()
        go.touch()
        for proc in procs:
            proc.wait()
        return runs / (time.perf_counter() - start)


def make_project(root: Path, url: str, mock_url: str, agents: int) -> None:
    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text(CONFIG.format(url=mock_url))
    for n in range(agents):
        (root / "agents" / f"agent{n}.md").write_text(AGENT.format(name=f"agent{n}"))


async def served_and_latency(root: Path, url: str, runs: int, workers: int) -> dict[str, Any]:
    from agentrunner.runtime.compose import open_workspace

    env = {**os.environ, "AGENTRUNNER_DATABASE_URL": url}
    ws = await open_workspace(root, database_url=url)
    channels = [await ws.channels.create(f"c{n}", members=[f"agent{n}", "you"]) for n in range(20)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "agentrunner", "worker", "-c", "1"],
            cwd=root,
            env=env,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(workers)
    ]
    try:
        while len(await ws.runner.store.workers.alive()) < workers:
            await asyncio.sleep(0.05)
        start = time.perf_counter()
        await asyncio.gather(
            *(ws.channels.post(channels[n % 20], "you", f"m{n}") for n in range(runs))
        )
        while any(
            d.get("created") or d.get("running")
            for d in (await ws.runner.store.mailbox.depths()).values()
        ):
            await asyncio.sleep(0.05)
        served = runs / (time.perf_counter() - start)
        latencies = []
        for n in range(30):
            posted = await ws.channels.post(channels[0], "you", f"ping {n}")
            await asyncio.sleep(0.1)
            run = await ws.runner.store.runs.get(posted.run_ids[0])
            if run is not None and run.started_at:
                latencies.append((run.started_at - posted.message.created_at) * 1000)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait()
        await ws.close()
    return {
        "served_runs_per_s": served,
        "post_to_start_p50_ms": percentile(latencies, 50),
        "post_to_start_p95_ms": percentile(latencies, 95),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--postgres", default=os.environ.get("AGENTRUNNER_TEST_DATABASE_URL"))
    parser.add_argument("--runs", type=int, default=4000)
    parser.add_argument("--served", type=int, default=400)
    parser.add_argument("--claimer", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.claimer:
        asyncio.run(claimer(args.claimer[0], Path(args.claimer[1]), Path(args.claimer[2])))
        return
    port = free_port()
    mock = start_mock(port)
    results: dict[str, Any] = {}
    try:
        backends: list[tuple[str, str]] = []
        with tempfile.TemporaryDirectory() as tmp:
            backends.append(("sqlite", f"sqlite:///{tmp}/bench.db"))
            if args.postgres:
                backends.append(("postgres", _fresh_pg(args.postgres)))
            for name, url in backends:
                row: dict[str, Any] = {"claims_per_s": claims_per_second(url, args.runs, 8)}
                root = Path(tmp) / f"project-{name}"
                make_project(root, url, f"http://127.0.0.1:{port}/v1", 20)
                row |= asyncio.run(served_and_latency(root, _fresh(url, name, tmp), args.served, 8))
                results[name] = row
    finally:
        mock.terminate()
        mock.wait()
    print_table(
        "Mailbox: 8 worker processes (2 cores); mock model at 0 ms",
        ["back end", "claims/s", "served runs/s", "post→start p50 ms", "p95 ms"],
        [
            [
                k,
                v["claims_per_s"],
                v["served_runs_per_s"],
                v["post_to_start_p50_ms"],
                v["post_to_start_p95_ms"],
            ]
            for k, v in results.items()
        ],
    )
    write_results(
        "mailbox",
        {
            "runs": args.runs,
            "results": results,
            "targets": {"claims_per_s_postgres": 1000, "post_to_start_p50_ms": 20},
        },
    )


def _fresh_pg(base: str, prefix: str = "bench") -> str:
    import psycopg

    name = f"{prefix}_{os.getpid()}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return base.rsplit("/", 1)[0] + "/" + name


def _fresh(url: str, name: str, tmp: str) -> str:
    """A second, empty database for the end-to-end part."""
    if name == "sqlite":
        return f"sqlite:///{tmp}/served.db"
    return _fresh_pg(url, "served")


if __name__ == "__main__":
    main()
