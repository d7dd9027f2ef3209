"""Scale-out on PostgreSQL (issue 47): served runs per second and post → start latency with 1,
2, 4 and 8 `agentrunner worker` processes, for 10, 100 and 1,000 agents, the mock provider
answering each request after a model's delay (200 ms by default), so that the curve measures
the workers' coordination rather than this machine's CPU; with the database's connections at
their peak, its CPU per served run (every PostgreSQL process's, from /proc) and the NOTIFYs a
listener heard. Each point on a database of its own, on one throwaway server.

    python bench/scaleout.py [--workers 1,2,4,8] [--agents 10,100,1000] [--runs-per-worker 60]
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from _common import percentile, print_table, write_results
from engine import free_port

AGENT = "---\nname: {name}\nmodel: mock:gpt-mock\n---\nYou are {name}.\n"
CONFIG = """\
[defaults]
title_model = "test"

[providers.mock]
kind = "openai"
base_url = "{url}"

[prices."mock:gpt-mock"]
input_per_mtok = 0.0
output_per_mtok = 0.0

[workers]
concurrency = {concurrency}
"""


def _postgres_cpu_s() -> float:
    """Every PostgreSQL process's CPU seconds so far (user and system), from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)
            name = fields[0].split("(", 1)[1]
            if not name.startswith("postgres"):
                continue
            values = fields[1].split()
            total += int(values[11]) + int(values[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            continue
    return total / ticks


def _machine_busy() -> tuple[int, int]:
    """The machine's CPU time so far, busy and in all (clock ticks, every core), from
    /proc/stat."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return sum(values) - idle, sum(values)


async def point(
    base: str, mock_url: str, agents: int, workers: int, runs: int, concurrency: int
) -> dict[str, Any]:
    import psycopg

    from agentrunner.runtime.compose import open_workspace

    name = f"scale_{agents}_{workers}_{time.monotonic_ns()}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = base.rsplit("/", 1)[0] + "/" + name
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "agents").mkdir()
        (root / "agentrunner.toml").write_text(CONFIG.format(url=mock_url, concurrency=concurrency))
        for n in range(agents):
            (root / "agents" / f"a{n}.md").write_text(AGENT.format(name=f"a{n}"))
        env = {**os.environ, "AGENTRUNNER_DATABASE_URL": url}
        ws = await open_workspace(root, database_url=url)
        store = ws.runner.store
        await store.driver.pool.resize(1, 1)  # type: ignore[attr-defined]  # one connection
        for n in range(runs):  # threads first: what is measured is serving, not opening
            await store.threads.open(f"t{n}", f"a{n % agents}")
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "agentrunner", "worker"],
                cwd=root,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(workers)
        ]
        listener = await psycopg.AsyncConnection.connect(url, autocommit=True)
        sampler = await psycopg.AsyncConnection.connect(url, autocommit=True)
        notifies = 0
        peak = 0

        async def hear() -> None:
            nonlocal notifies
            await listener.execute("LISTEN agentrunner_runs")
            await listener.execute("LISTEN agentrunner_changes")
            async for _ in listener.notifies():
                notifies += 1

        async def sample() -> None:
            nonlocal peak
            count = (
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            while True:
                row = await (await sampler.execute(count)).fetchone()
                # less the NOTIFY listener and this process's own pool of one
                peak = max(peak, (row[0] if row else 0) - 2)
                await asyncio.sleep(0.05)

        try:
            while len(await store.workers.alive()) < workers:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # idle, listening
            hearing, sampling = asyncio.ensure_future(hear()), asyncio.ensure_future(sample())
            cpu_before, busy_before = _postgres_cpu_s(), _machine_busy()
            start = time.perf_counter()
            queued = [
                await ws.runs.queue(f"a{n % agents}", f"t{n}", f"question {n}") for n in range(runs)
            ]
            while True:
                depths = await store.mailbox.depths()
                if not any(d.get("created") or d.get("running") for d in depths.values()):
                    break
                await asyncio.sleep(0.02)
            elapsed = time.perf_counter() - start
            cpu = _postgres_cpu_s() - cpu_before
            busy_after = _machine_busy()
            busy = (busy_after[0] - busy_before[0]) / max(1, busy_after[1] - busy_before[1])
            hearing.cancel()
            sampling.cancel()
            latencies, completed = [], 0
            for q in queued:
                run = await store.runs.get(q.run_id)
                if run is not None and run.status == "completed":
                    completed += 1
                if run is not None and run.started_at:
                    latencies.append((run.started_at - run.created_at) * 1000)
            idle = []  # an idle agent's: one run at a time, the workers waiting
            for n in range(20):
                await store.threads.open(f"idle{n}", "a0")
                posted = await ws.runs.queue("a0", f"idle{n}", "ping")
                await asyncio.sleep(0.3)
                run = await store.runs.get(posted.run_id)
                if run is not None and run.started_at:
                    idle.append((run.started_at - run.created_at) * 1000)
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait()
            await listener.close()
            await sampler.close()
            await ws.close()
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return {
        "agents": agents,
        "workers": workers,
        "runs": runs,
        "completed": completed,
        "served_runs_per_s": runs / elapsed,
        "queue_to_start_p50_ms": percentile(latencies, 50),
        "queue_to_start_p95_ms": percentile(latencies, 95),
        "idle_post_to_start_p50_ms": percentile(idle, 50),
        "idle_post_to_start_p95_ms": percentile(idle, 95),
        "peak_connections": peak,
        "connections_per_worker": peak / workers,
        "postgres_cpu_ms_per_run": cpu * 1000 / runs,
        "notifies_per_run": notifies / runs,
        "machine_cpu_busy": busy,  # of all its cores, while the runs were served
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    numbers = lambda text: [int(n) for n in text.split(",")]  # noqa: E731
    parser.add_argument("--workers", type=numbers, default=[1, 2, 4, 8])
    parser.add_argument("--agents", type=numbers, default=[10, 100, 1000])
    parser.add_argument("--runs-per-worker", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=4, help="each worker's")
    parser.add_argument("--delay-ms", type=float, default=200.0, help="the mock's, a request")
    args = parser.parse_args()
    from tests.throwaway_postgres import start_throwaway_postgres

    server = start_throwaway_postgres()
    if server is None:
        sys.exit("no PostgreSQL server binaries here (initdb): install PostgreSQL")
    port = free_port()
    mock = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentrunner.testing",
            "--port",
            str(port),
            "--delay-ms",
            str(args.delay_ms),
        ]
    )
    rows: list[dict[str, Any]] = []
    try:
        time.sleep(1.0)
        for agents in args.agents:
            for workers in args.workers:
                runs = args.runs_per_worker * workers
                result = asyncio.run(
                    point(
                        server.url,
                        f"http://127.0.0.1:{port}/v1",
                        agents,
                        workers,
                        runs,
                        args.concurrency,
                    )
                )
                rows.append(result)
                print(
                    f"{agents} agents, {workers} worker(s): "
                    f"{result['served_runs_per_s']:.1f} runs/s",
                    flush=True,
                )
    finally:
        mock.terminate()
        mock.wait()
        server.stop()
    for agents in args.agents:
        mine = [r for r in rows if r["agents"] == agents]
        one = next((r["served_runs_per_s"] for r in mine if r["workers"] == 1), None)
        for r in mine:
            r["linear"] = r["served_runs_per_s"] / (one * r["workers"]) if one else None
    print_table(
        f"Scale-out (PostgreSQL, the mock at {args.delay_ms:.0f} ms a request, concurrency "
        f"{args.concurrency} a worker)",
        [
            "agents",
            "workers",
            "runs/s",
            "× linear",
            "queued→start p50 ms",
            "idle post→start p50/p95 ms",
            "conns/worker",
            "pg CPU ms/run",
            "NOTIFY/run",
            "machine CPU busy",
        ],
        [
            [
                r["agents"],
                r["workers"],
                r["served_runs_per_s"],
                r["linear"],
                r["queue_to_start_p50_ms"],
                f"{r['idle_post_to_start_p50_ms']:.1f} / {r['idle_post_to_start_p95_ms']:.1f}",
                r["connections_per_worker"],
                r["postgres_cpu_ms_per_run"],
                r["notifies_per_run"],
                r["machine_cpu_busy"],
            ]
            for r in rows
        ],
    )
    write_results("scaleout", {"args": vars(args), "points": rows})


if __name__ == "__main__":
    main()
