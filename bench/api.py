"""The HTTP API: POST-message requests per second, and event delivery latency — from the event's
time in the run (in a separate worker process) to its arrival at an SSE client — on SQLite and
on PostgreSQL.

Server, worker and mock provider run as processes on one core, the client on the other.
PostgreSQL: the server at ``--postgres URL`` (a database of its own is made there), else a
throwaway one started here where PostgreSQL's binaries are installed (as the tests do), else
SQLite only. Targets (issue 29): delivery p50 < 10 ms, p95 < 25 ms, on both.

    python bench/api.py [--requests 2000] [--concurrency 16] [--runs 50] [--postgres URL]
                        [--sqlite-only]
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
from _common import percentile, pin_to_core, print_table, write_results
from engine import free_port, start_mock

TOKEN = "bench-token"
AUTH = {"authorization": f"Bearer {TOKEN}"}
TARGETS = {"event_delivery_p50_ms": 10, "event_delivery_p95_ms": 25}


def start(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        cmd, cwd=cwd, env=env, stderr=subprocess.DEVNULL, preexec_fn=lambda: pin_to_core(1)
    )


async def post_messages(url: str, total: int, concurrency: int) -> tuple[float, list[float]]:
    import httpx2

    latencies: list[float] = []
    left = total
    async with httpx2.AsyncClient(base_url=url, headers=AUTH, timeout=30) as client:

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                begin = time.perf_counter()
                response = await client.post("/channels/lobby/messages", json={"text": "hello"})
                response.raise_for_status()
                latencies.append(time.perf_counter() - begin)

        wall = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return total / (time.perf_counter() - wall), latencies


def measure(root: Path, mock_port: int, db_url: str | None, args: Any) -> dict[str, Any]:
    """Server and worker (2 slots) on ``db_url`` (None: the project's SQLite file): POSTs,
    then runs followed over SSE."""
    api_port = free_port()
    (root / "agents").mkdir(parents=True)
    (root / "agents" / "talker.md").write_text("---\nname: talker\n---\nYou talk.\n")
    (root / "agentrunner.toml").write_text(
        '[defaults]\nmodel = "mock:gpt-mock"\ntitle_model = "test"\n\n'
        f'[providers.mock]\nkind = "openai"\nbase_url = "http://127.0.0.1:{mock_port}/v1"\n\n'
        '[prices."mock:gpt-mock"]\ninput_per_mtok = 0.0\noutput_per_mtok = 0.0\n\n'
        '[channels.lobby]\nmembers = ["you", "ada"]\n'
    )
    env = {**os.environ, "AGENTRUNNER_API_TOKEN": TOKEN}
    env.pop("AGENTRUNNER_DATABASE_URL", None)
    if db_url is not None:
        env["AGENTRUNNER_DATABASE_URL"] = db_url
    store_url = db_url or f"sqlite:///{root / '.agentrunner' / 'agentrunner.db'}"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        serve = ["serve", "--port", str(api_port), "--no-worker"]
        procs.append(start([sys.executable, "-m", "agentrunner", *serve], root, env))
        url = f"http://127.0.0.1:{api_port}"
        _wait_up(url)
        procs.append(start([sys.executable, "-m", "agentrunner", "worker", "-c", "2"], root, env))
        rps, post_latency = asyncio.run(post_messages(url, args.requests, args.concurrency))
        delivery = asyncio.run(_delivery(url, args.runs, store_url))
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait()
    return {
        "post_requests_per_s": rps,
        "post_p50_ms": percentile(post_latency, 50) * 1000,
        "post_p95_ms": percentile(post_latency, 95) * 1000,
        "event_delivery_p50_ms": percentile(delivery, 50),
        "event_delivery_p95_ms": percentile(delivery, 95),
        "events_measured": len(delivery),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--postgres", help="a PostgreSQL server to measure on (URL)")
    parser.add_argument("--sqlite-only", action="store_true", help="measure SQLite only")
    args = parser.parse_args()
    pin_to_core(0)
    mock_port = free_port()
    mock = start_mock(mock_port)
    throwaway: Any = None
    results: dict[str, dict[str, Any]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            results["sqlite"] = measure(Path(tmp) / "sqlite", mock_port, None, args)
            base = args.postgres
            if base is None and not args.sqlite_only:
                throwaway = _throwaway_postgres()
                base = throwaway.url if throwaway is not None else None
            if base is not None and not args.sqlite_only:
                db_url = _fresh_pg(base)
                results["postgres"] = measure(Path(tmp) / "postgres", mock_port, db_url, args)
            elif not args.sqlite_only:
                print("PostgreSQL not measured: no --postgres URL, and none installed")
    finally:
        mock.terminate()
        mock.wait()
        if throwaway is not None:
            throwaway.stop()
    measures = list(next(iter(results.values())))
    print_table(
        f"HTTP API (POST at concurrency {args.concurrency}; events of {args.runs} runs in a "
        "worker process, to an SSE client)",
        ["measure", *results],
        [[m, *(row[m] for row in results.values())] for m in measures],
    )
    write_results(
        "api",
        {
            "requests": args.requests,
            "concurrency": args.concurrency,
            "runs": args.runs,
            "results": results,
            "targets": TARGETS,
        },
    )


async def _delivery(url: str, runs: int, db_url: str) -> list[float]:
    """Per event: its arrival at the SSE client minus its own time in the run (from the store)."""
    import httpx2

    from agentrunner.store import open_store

    store = await open_store(db_url)
    delays: list[float] = []
    try:
        async with httpx2.AsyncClient(base_url=url, headers=AUTH, timeout=60) as client:
            await client.post("/threads", json={"agent_id": "talker", "id": "bench"})
            for n in range(runs):
                started = await client.post(
                    "/threads/bench/runs", json={"agent_id": "talker", "message": f"go {n}"}
                )
                run_id = started.json()["run_id"]
                arrivals: dict[int, float] = {}
                fields: dict[str, str] = {}
                async with client.stream("GET", f"/runs/{run_id}/events") as stream:
                    async for line in stream.aiter_lines():
                        if line:
                            name, _, value = line.partition(":")
                            fields[name] = value.strip()
                            continue
                        if fields.get("event") == "run.end":
                            break
                        if fields.get("id", "").isdigit():
                            arrivals[int(fields["id"])] = time.time()
                        fields = {}
                for event in await store.events.list(run_id):
                    if event.seq in arrivals:
                        delays.append((arrivals[event.seq] - event.created_at) * 1000)
    finally:
        await store.close()
    return delays


def _throwaway_postgres() -> Any:
    """A PostgreSQL server of the tests' kind (tests/throwaway_postgres.py), or None."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.throwaway_postgres import start_throwaway_postgres

    return start_throwaway_postgres()


def _fresh_pg(base: str) -> str:
    import psycopg

    name = f"bench_api_{os.getpid()}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return base.rsplit("/", 1)[0] + "/" + name


def _wait_up(url: str) -> None:
    import httpx2

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx2.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx2.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("server did not start")


if __name__ == "__main__":
    main()
