"""The HTTP API: POST-message requests per second, and event delivery latency — from the event's
time in the run (in a separate worker process) to its arrival at an SSE client.

Server, worker and mock provider run as processes on one core, the client on the other.

    python bench/api.py [--requests 2000] [--concurrency 16]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import percentile, pin_to_core, print_table, write_results
from engine import free_port, start_mock

TOKEN = "bench-token"
AUTH = {"authorization": f"Bearer {TOKEN}"}


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    mock_port, api_port = free_port(), free_port()
    mock = start_mock(mock_port)
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "agents").mkdir()
        (root / "agents" / "talker.md").write_text("---\nname: talker\n---\nYou talk.\n")
        (root / "agentrunner.toml").write_text(
            '[defaults]\nmodel = "mock:gpt-mock"\ntitle_model = "test"\n\n'
            f'[providers.mock]\nkind = "openai"\nbase_url = "http://127.0.0.1:{mock_port}/v1"\n\n'
            '[prices."mock:gpt-mock"]\ninput_per_mtok = 0.0\noutput_per_mtok = 0.0\n\n'
            '[channels.lobby]\nmembers = ["you", "ada"]\n'
        )
        env = {**os.environ, "AGENTRUNNER_API_TOKEN": TOKEN}
        try:
            procs.append(
                start(
                    [
                        sys.executable,
                        "-m",
                        "agentrunner",
                        "serve",
                        "--port",
                        str(api_port),
                        "--no-worker",
                    ],
                    root,
                    env,
                )
            )
            url = f"http://127.0.0.1:{api_port}"
            _wait_up(url)
            procs.append(
                start([sys.executable, "-m", "agentrunner", "worker", "-c", "2"], root, env)
            )
            pin_to_core(0)
            rps, post_latency = asyncio.run(post_messages(url, args.requests, args.concurrency))
            delivery = asyncio.run(
                _delivery(url, args.runs, f"sqlite:///{root / '.agentrunner' / 'agentrunner.db'}")
            )
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait()
            mock.terminate()
            mock.wait()
    results = {
        "post_requests_per_s": rps,
        "post_p50_ms": percentile(post_latency, 50) * 1000,
        "post_p95_ms": percentile(post_latency, 95) * 1000,
        "event_delivery_p50_ms": percentile(delivery, 50),
        "event_delivery_p95_ms": percentile(delivery, 95),
        "events_measured": len(delivery),
    }
    print_table(
        f"HTTP API (SQLite; POST at concurrency {args.concurrency}; "
        "events of runs in a worker process)",
        ["measure", "value"],
        [[k, v] for k, v in results.items()],
    )
    write_results(
        "api", {"requests": args.requests, "concurrency": args.concurrency, "results": results}
    )


async def _delivery(url: str, runs: int, db_url: str) -> list[float]:
    """Per event: its arrival at the SSE client minus its own time in the run (from the store)."""
    import httpx2

    from agentrunner.store import open_store

    store = await open_store(db_url)
    delays: list[float] = []
    try:
        async with httpx2.AsyncClient(base_url=url, headers=AUTH, timeout=60) as client:
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
