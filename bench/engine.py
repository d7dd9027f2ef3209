"""The engine against a hand-written plain-httpx2 loop (the floor), on one turn:
2 model requests + 1 tool call, against the mock provider at 0 ms in its own process.

The engine runs the turn over Chat Completions (`engine`) and over OpenAI's Responses API
(`responses`: the same turn, the mock answering as the API does, events and echoed request
fields included). Configurations run interleaved (round-robin, several rounds), each in a fresh
worker process so its peak RSS is its own. Reports turns/s, CPU ms per turn (the worker's CPU),
latency p50/p95 and peak RSS, plus import times. Targets (issue 3): engine >= 0.6 × floor
turns/s; peak RSS < 80 MB at concurrency 64; `import agentrunner` < 0.25 s. Issue 30: the
Responses wire within 10 % of Chat Completions' turns/s (>= 0.9 ×, same stream and
concurrency). Issue 29: the streaming engine >= 0.9 × the floor's turns/s at concurrency 1 and
64 (the floor does not stream: it reads each answer whole), printed with the unstreamed
engine's ratio and each one's CPU per turn as a ratio to the floor's.

A ratio to the floor is the median over rounds of each round's ratio (the floor and the loop
run minutes apart at most, so a machine shared with other work slows both alike), not the
ratio of the medians.

    python bench/engine.py [--turns 400] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import percentile, pin_to_core, print_table, write_results

CONFIGS = [
    ("floor", False, 1),
    ("engine", False, 1),
    ("engine", True, 1),
    ("responses", False, 1),
    ("responses", True, 1),
    ("floor", False, 64),
    ("engine", False, 64),
    ("engine", True, 64),
    ("responses", False, 64),
    ("responses", True, 64),
]
# The wire each engine configuration speaks: Chat Completions, or OpenAI's Responses API.
KINDS = {"engine": "openai", "responses": "openai-responses"}
SYSTEM = "You are a weather assistant."
QUESTION = "What's the weather in Paris?"
TOOL_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


async def weather(city: str) -> str:
    return f"Sunny, 22C in {city}"


# -- the floor: what a careful person would write by hand with httpx2 --------------------------


def floor_factory(base_url: str) -> Any:
    import httpx2

    client = httpx2.AsyncClient(
        base_url=base_url, limits=httpx2.Limits(max_connections=256, max_keepalive_connections=64)
    )
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather.",
                "parameters": TOOL_SCHEMA,
            },
        }
    ]

    async def turn() -> str:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": QUESTION},
        ]
        body = {"model": "gpt-bench", "messages": messages, "tools": tools}
        reply = (await client.post("/chat/completions", json=body)).json()["choices"][0]["message"]
        call = reply["tool_calls"][0]
        result = await weather(**json.loads(call["function"]["arguments"]))
        messages += [reply, {"role": "tool", "tool_call_id": call["id"], "content": result}]
        final = (await client.post("/chat/completions", json=body)).json()
        return str(final["choices"][0]["message"]["content"])

    return turn, client.aclose


def engine_factory(base_url: str, stream: bool, kind: str = "openai") -> Any:
    from agentrunner.config import ProviderConfig
    from agentrunner.engine import Engine, ModelRegistry, Tool, ToolContext

    async def fn(args: dict[str, Any], ctx: ToolContext) -> str:
        return await weather(**args)

    tool = Tool("get_weather", "Weather.", TOOL_SCHEMA, fn)
    engine = Engine(ModelRegistry({"bench": ProviderConfig("bench", kind, base_url)}))

    async def turn() -> str:
        result = await engine.run(
            model="bench:gpt-bench", system=SYSTEM, message=QUESTION, tools=[tool], stream=stream
        )
        return result.text

    return turn, engine.aclose


async def drive(
    kind: str, stream: bool, concurrency: int, turns: int, base_url: str
) -> dict[str, Any]:
    turn, close = (
        floor_factory(base_url)
        if kind == "floor"
        else engine_factory(base_url, stream, KINDS[kind])
    )
    for _ in range(max(10, concurrency)):  # warm up connections and code paths
        await turn()
    latencies: list[float] = []
    remaining = turns

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            start = time.perf_counter()
            await turn()
            latencies.append(time.perf_counter() - start)

    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    await close()
    return {
        "turns": len(latencies),
        "turns_per_s": len(latencies) / wall,
        "cpu_ms_per_turn": cpu * 1000 / len(latencies),
        "p50_ms": percentile(latencies, 50) * 1000,
        "p95_ms": percentile(latencies, 95) * 1000,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def per_round_ratios(runs: dict[str, list[dict[str, Any]]], name: str) -> dict[str, float]:
    """``name``'s turns/s and CPU per turn as ratios to the floor's at its concurrency: each
    round's ratio, the median over rounds."""
    floor = runs[f"floor c={name.rsplit('c=', 1)[1]}"]
    pairs = list(zip(runs[name], floor, strict=True))
    return {
        "turns_per_s_x_floor": statistics.median(
            r["turns_per_s"] / f["turns_per_s"] for r, f in pairs
        ),
        "cpu_x_floor": statistics.median(
            r["cpu_ms_per_turn"] / f["cpu_ms_per_turn"] for r, f in pairs
        ),
    }


def import_time(module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    samples = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(5)
    ]
    return statistics.median(samples)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_mock(port: int, *options: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentrunner.testing", "--port", str(port), *options],
        preexec_fn=lambda: pin_to_core(1),
    )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("mock provider did not start")


@contextlib.contextmanager
def mock_provider() -> Iterator[str]:
    """The mock provider on its own core, this process pinned to another; yields its base URL
    and stops it on exit."""
    port = free_port()
    mock = start_mock(port)
    pin_to_core(0)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        mock.terminate()
        mock.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        pin_to_core(0)
        kind, stream, concurrency = args.worker.split(":")
        result = asyncio.run(drive(kind, stream == "1", int(concurrency), args.turns, args.url))
        print(json.dumps(result))
        return
    port = free_port()
    mock = start_mock(port)
    url = f"http://127.0.0.1:{port}/v1"
    runs: dict[str, list[dict[str, Any]]] = {}
    try:
        for _ in range(args.rounds):
            for kind, stream, concurrency in CONFIGS:
                name = f"{kind}{' stream' if stream else ''} c={concurrency}"
                cmd = [
                    sys.executable,
                    __file__,
                    "--worker",
                    f"{kind}:{int(stream)}:{concurrency}",
                    "--url",
                    url,
                    "--turns",
                    str(args.turns),
                ]
                out = subprocess.run(
                    cmd,
                    capture_output=True,
                    text=True,
                    check=True,
                    env={**os.environ, "PYTHONHASHSEED": "0"},
                )
                runs.setdefault(name, []).append(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        mock.terminate()
        mock.wait(timeout=10)
    summary = {
        name: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        | {"peak_rss_mb": max(r["peak_rss_mb"] for r in rs)}
        for name, rs in runs.items()
    }
    ratios = {name: per_round_ratios(runs, name) for name in runs}
    rows = []
    for name, s in summary.items():
        chat = summary.get(name.replace("responses", "engine"), s)["turns_per_s"]
        rows.append(
            [
                name,
                s["turns_per_s"],
                ratios[name]["turns_per_s_x_floor"],
                s["turns_per_s"] / chat if name.startswith("responses") else "",
                s["cpu_ms_per_turn"],
                ratios[name]["cpu_x_floor"],
                s["p50_ms"],
                s["p95_ms"],
                s["peak_rss_mb"],
            ]
        )
    print_table(
        "One turn = 2 requests + 1 tool call; mock at 0 ms; "
        f"median of {args.rounds} interleaved rounds of {args.turns} turns",
        [
            "loop",
            "turns/s",
            "× floor",
            "× chat",
            "CPU ms/turn",
            "CPU × floor",
            "p50 ms",
            "p95 ms",
            "peak RSS MB",
        ],
        rows,
    )
    print_table(
        "Issue 29: the engine's turns/s as a ratio to the floor's (target: streaming >= 0.9)",
        ["loop", "c=1", "c=64", "CPU × floor c=1", "CPU × floor c=64"],
        [
            [
                loop,
                *(ratios[f"{loop} c={c}"]["turns_per_s_x_floor"] for c in (1, 64)),
                *(ratios[f"{loop} c={c}"]["cpu_x_floor"] for c in (1, 64)),
            ]
            for loop in ("engine stream", "engine")
        ],
    )
    imports = {m: import_time(m) for m in ("agentrunner", "agentrunner.engine")}
    print_table(
        "Import time (median of 5 fresh processes)",
        ["module", "seconds"],
        [[m, t] for m, t in imports.items()],
    )
    targets = {
        "engine_vs_floor_min": 0.6,
        "engine_stream_vs_floor_min": 0.9,
        "responses_vs_chat_min": 0.9,
        "peak_rss_mb_c64_max": 80,
        "import_agentrunner_s_max": 0.25,
    }
    write_results(
        "engine",
        {
            "turns": args.turns,
            "rounds": args.rounds,
            "results": summary,
            "ratios_to_floor": ratios,
            "runs": runs,
            "imports_s": imports,
            "targets": targets,
        },
    )


if __name__ == "__main__":
    main()
