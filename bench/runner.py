"""The price of durability: a durable turn (AgentRunner.run_agent on SQLite: thread lock, run
rows, steps, run messages, events, costs, messages) against an engine-only turn, in the same
process, interleaved. One turn = 2 model requests + 1 tool call against the mock provider at
0 ms in its own process. The durable turn also with telemetry on (issue 26), interleaved with
the others: its spans made and sent over OTLP/HTTP, in batches, to a local receiver in a
process of its own (it answers as a collector does and keeps nothing), the last batch of each
round sent within that round's CPU time. The durable turn also while another process tails the
store (issue 29: a dashboard or an event stream open, so the run's log commits its events
within milliseconds rather than with its durable points): what that costs the run's process.
Also: turn time on a 100,000-message thread against a
3,000-message one (both past the model's context window, so both send the window's worth of
history: what differs is only how much the store holds), on a 10-message thread, and on a
thread with 20,000 earlier runs; and the daily-budget check (what a run with
`per_agent_daily_usd` / `global_daily_usd` set reads first) after 100,000 priced requests
today. A thread past the window is compacted on its first run (docs/engine.md, "History"):
once, before the samples, not measured.

Targets (issue 4): durable / engine-only time per turn <= 1.3; the 100k-message thread within
20% of the 3,000-message one, and a thread with many runs within 20% of a 10-message one.
Issue 26: telemetry off costs nothing measurable (the durable turn is where it was); on, what
it adds is reported.

    python bench/runner.py [--turns 300] [--rounds 3] [--big 100000] [--runs 20000]
                           [--costs 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import percentile, print_table, write_results
from engine import TOOL_SCHEMA, mock_provider, weather

CONFIG = """\
[defaults]
model = "bench:gpt-bench"

[prices."bench:gpt-bench"]
input_per_mtok = 0.0
output_per_mtok = 0.0

[providers.bench]
kind = "openai"
base_url = "{url}"
"""
AGENT = "---\nname: Bench\ntools: [get_weather]\n---\nYou are a weather assistant.\n"
SYSTEM = "You are a weather assistant."
QUESTION = "What's the weather in Paris?"
# A receiver of OTLP/HTTP: takes what it is sent, answers as a collector does, keeps nothing.
RECEIVER = """\
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


# Another process tailing a store (an open event stream, as far as the run's process can tell).
LISTENER = """\
import asyncio, sys
from agentrunner.store import open_store

async def main(url):
    store = await open_store(url)
    async with store.changes.watch("bench:nobody"):
        print("listening", flush=True)
        await asyncio.Event().wait()

asyncio.run(main(sys.argv[1]))
"""


# A thread past the bench model's context window (32,768 tokens: a model nothing lists) in these
# messages of a few words each.
FULL = 3000


def bench_tool() -> Any:
    from agentrunner.engine import Tool, ToolContext

    async def fn(args: dict[str, Any], ctx: ToolContext) -> str:
        return await weather(**args)

    return Tool("get_weather", "Weather.", TOOL_SCHEMA, fn)


async def open_bench_runner(root: Path, url: str, extra: str = "") -> Any:
    from agentrunner import open_runner

    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text(CONFIG.format(url=url) + extra)
    (root / "agents" / "bench.md").write_text(AGENT)
    runner = await open_runner(root)
    runner.capabilities.register("bench", lambda ctx: [bench_tool()], ["get_weather"])
    return runner


async def timed(turn: Any, count: int, concurrency: int = 1) -> tuple[list[float], float]:
    """Per-turn latencies and the wall time for ``count`` turns by ``concurrency`` workers."""
    samples: list[float] = []
    left = count

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            start = time.perf_counter()
            await turn(left)
            samples.append(time.perf_counter() - start)

    wall = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return samples, time.perf_counter() - wall


async def fill_thread(runner: Any, thread_id: str, messages: int) -> None:
    from agentrunner.engine import AssistantMessage, UserMessage

    store = runner.store
    await store.threads.open(thread_id, "bench")
    await store.threads.set_title(thread_id, "big")
    chunk = 5000
    for start in range(0, messages, chunk):
        batch = [
            UserMessage(f"question {i}") if i % 2 == 0 else AssistantMessage(f"answer {i}")
            for i in range(start, min(start + chunk, messages))
        ]
        await store.batch(
            [
                *store.messages.append_ops(thread_id, start + 1, batch, None),
                store.threads.manifest_op(
                    thread_id, message_count=start + len(batch), session_run_id=None
                ),
            ]
        )


async def fill_runs(runner: Any, thread_id: str, runs: int) -> None:
    """``runs`` finished runs on the thread, as a long-lived session accumulates."""
    store = runner.store
    await store.threads.open(thread_id, "bench")
    await store.threads.set_title(thread_id, "busy")
    chunk = 5000
    for start in range(0, runs, chunk):
        ops = []
        for i in range(start, min(start + chunk, runs)):
            run_id = f"run_old{i:08d}"
            ops.append(
                store.runs.insert_op(
                    run_id=run_id, agent_id="bench", thread_id=thread_id, status="running"
                )
            )
            ops.append(store.runs.finish_op(run_id, status="completed", stop_reason="end_turn"))
        await store.batch(ops)


async def fill_costs(runner: Any, agent_id: str, requests: int) -> None:
    """``requests`` priced model requests today, recorded as runs record them."""
    from agentrunner.run_rows import RunRows

    store = runner.store
    await store.batch(
        [
            store.runs.insert_op(
                run_id="run_costly", agent_id=agent_id, thread_id=None, status="running"
            )
        ]
    )
    log = RunRows(store, "run_costly", agent_id).log
    for n in range(requests):
        log.emit(
            "cost.updated",
            {
                "model": "bench:gpt-bench",
                "attempt": 1,
                "outcome": "ok",
                "input_tokens": 0,
                "output_tokens": 0,
                "cache_read_tokens": 0,
                "cache_write_tokens": 0,
                "cost_micros": 7,
                "cost_known": True,
                "estimated": False,
                "cumulative_cost_micros": 7 * (n + 1),
            },
        )
        if n % 5000 == 4999:
            await log.flush()
    await log.flush()


async def budget_checks(runner: Any, agent_id: str, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        await runner.store.costs.spent_today(agent_id)
        await runner.store.costs.spent_today()
        samples.append(time.perf_counter() - start)
    return samples


def bench_engine(url: str) -> Any:
    """The engine-only side: an engine of its own, made from the runner's config text, so both
    sides resolve, call and price the model alike (pricing is the engine's work, not the
    price of durability)."""
    from agentrunner.config import load_config
    from agentrunner.engine import Engine

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "agentrunner.toml"
        path.write_text(CONFIG.format(url=url))
        return Engine.from_config(load_config(Path(tmp), env={"AGENTRUNNER_CONFIG": str(path)}))


async def engine_only_turn(engine: Any, tool: Any) -> None:
    await engine.run(model="bench:gpt-bench", system=SYSTEM, message=QUESTION, tools=[tool])


async def run(args: argparse.Namespace, url: str, receiver: str) -> dict[str, Any]:
    engine = bench_engine(url)
    tool = bench_tool()

    async def engine_turn(n: int) -> None:
        await engine_only_turn(engine, tool)

    with tempfile.TemporaryDirectory() as tmp:
        runner = await open_bench_runner(Path(tmp) / "off", url)
        traced = await open_bench_runner(
            Path(tmp) / "on",
            url,
            extra=f'[telemetry]\nenabled = true\nendpoint = "{receiver}"\n',
        )
        live = await open_bench_runner(Path(tmp) / "live", url)
        listener = subprocess.Popen(
            [
                sys.executable,
                "-c",
                LISTENER,
                f"sqlite:///{Path(tmp) / 'live' / '.agentrunner' / 'agentrunner.db'}",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert listener.stdout is not None and listener.stdout.readline().strip() == "listening"
        assert runner.engine.tracing is None and traced.engine.tracing is not None
        from opentelemetry import trace

        flush = getattr(trace.get_tracer_provider(), "force_flush", None)
        assert flush is not None, "telemetry on set up no SDK"
        counter = iter(range(10**9))

        async def fresh_thread(runner: Any) -> str:
            thread_id = f"t{next(counter)}"
            await runner.store.threads.open(thread_id, "bench")
            await runner.store.threads.set_title(thread_id, "bench")  # no title effect
            return thread_id

        count = 2 * args.turns * args.rounds + 50
        threads = [await fresh_thread(runner) for _ in range(count)]
        traced_threads = [await fresh_thread(traced) for _ in range(args.turns * args.rounds + 50)]
        live_threads = [await fresh_thread(live) for _ in range(count)]

        async def durable_turn(n: int) -> None:
            await runner.run_agent("bench", threads.pop(), QUESTION)

        async def traced_turn(n: int) -> None:
            await traced.run_agent("bench", traced_threads.pop(), QUESTION)

        async def live_turn(n: int) -> None:
            await live.run_agent("bench", live_threads.pop(), QUESTION)

        for _ in range(20):  # warm up every path
            await engine_turn(0)
            await durable_turn(0)
            await traced_turn(0)
            await live_turn(0)
        await asyncio.sleep(2.5)  # the listener's socket seen for sure (store/wake: _Listing)
        assert live.store.changes.listened() and not runner.store.changes.listened()
        assert flush(), "the receiver did not take the spans"
        samples: dict[str, list[float]] = {}
        walls: dict[str, float] = {}
        cpu: dict[str, float] = {}
        for _ in range(args.rounds):
            for c in (1, args.concurrency):
                turns = [
                    ("engine", engine_turn),
                    ("durable", durable_turn),
                    ("durable read live", live_turn),
                ]
                if c == 1:
                    turns.append(("durable otel", traced_turn))
                for name, turn in turns:
                    key = f"{name} c={c}"
                    c0 = time.process_time()
                    got, wall = await timed(turn, args.turns, c)
                    if turn is traced_turn:
                        # the round's last batch, sent in its time, not in the next round's
                        assert flush(), "the receiver did not take the spans"
                    cpu[key] = cpu.get(key, 0.0) + time.process_time() - c0
                    samples.setdefault(key, []).extend(got)
                    walls[key] = walls.get(key, 0.0) + wall
        await traced.close()
        await live.close()
        listener.terminate()
        listener.wait(timeout=10)

        await fill_thread(runner, "big", args.big)
        await fill_thread(runner, "full", FULL)
        await fill_thread(runner, "small", 10)
        await fill_runs(runner, "busy", args.runs)
        size_samples: dict[str, list[float]] = {"small": [], "full": [], "big": [], "busy": []}
        for thread_id in size_samples:  # the first run compacts a thread past the window
            await runner.run_agent("bench", thread_id, QUESTION)
        for _ in range(args.rounds):
            for thread_id in size_samples:
                got, _ = await timed(
                    lambda n, t=thread_id: runner.run_agent("bench", t, QUESTION), args.turns // 3
                )
                size_samples[thread_id] += got
        await fill_costs(runner, "bench", args.costs)
        budget = await budget_checks(runner, "bench", 200)
        await runner.close()
    await engine.aclose()
    total = args.turns * args.rounds
    results: dict[str, Any] = {
        key: stats(got)
        | {"turns_per_s": total / walls[key], "cpu_ms_per_turn": cpu[key] * 1000 / total}
        for key, got in samples.items()
    }
    results["thread_10"] = stats(size_samples["small"])
    results[f"thread_{FULL}"] = stats(size_samples["full"])
    results[f"thread_{args.big}"] = stats(size_samples["big"])
    results[f"thread_{args.runs}_runs"] = stats(size_samples["busy"])
    results[f"budget_check_{args.costs}_requests"] = stats(budget)
    return results


def stats(samples: list[float]) -> dict[str, float]:
    return {
        "median_ms": statistics.median(samples) * 1000,
        "p95_ms": percentile(samples, 95) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--big", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--costs", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout is not None
        endpoint = f"http://127.0.0.1:{receiver.stdout.readline().strip()}"
        with mock_provider() as url:
            results = asyncio.run(run(args, url, endpoint))
    finally:
        receiver.terminate()
        receiver.wait(timeout=10)
    c = args.concurrency
    latency = results["durable c=1"]["median_ms"] / results["engine c=1"]["median_ms"]
    throughput = results[f"engine c={c}"]["turns_per_s"] / results[f"durable c={c}"]["turns_per_s"]
    size_ratio = results[f"thread_{args.big}"]["median_ms"] / results[f"thread_{FULL}"]["median_ms"]
    window_ratio = results[f"thread_{FULL}"]["median_ms"] / results["thread_10"]["median_ms"]
    runs_ratio = (
        results[f"thread_{args.runs}_runs"]["median_ms"] / results["thread_10"]["median_ms"]
    )
    print_table(
        "Turn = 2 requests + 1 tool call, mock at 0 ms, streaming; "
        f"{args.rounds} interleaved rounds of {args.turns}",
        ["turn", "turns/s", "median ms", "p95 ms", "CPU ms/turn"],
        [
            [
                k,
                v.get("turns_per_s", "—"),
                v["median_ms"],
                v["p95_ms"],
                v.get("cpu_ms_per_turn", "—"),
            ]
            for k, v in results.items()
        ],
    )
    print_table(
        "Ratios",
        ["ratio", "value", "target"],
        [
            ["durable / engine-only, time per turn at c=1", latency, "<= 1.3"],
            [f"engine-only / durable, turns/s at c={c}", throughput, "<= 1.3"],
            [
                f"{args.big:,}-message / {FULL:,}-message thread, time per turn",
                size_ratio,
                "<= 1.2",
            ],
            [f"{FULL:,}-message (a window's worth sent) / 10-message", window_ratio, "—"],
            [f"thread with {args.runs:,} earlier runs / 10-message", runs_ratio, "<= 1.2"],
        ],
    )
    # The ratios move with the engine's own speed (a faster engine raises them); the difference
    # is what durability itself costs a turn.
    extra = {
        "time_c1": results["durable c=1"]["median_ms"] - results["engine c=1"]["median_ms"],
        "cpu_c1": results["durable c=1"]["cpu_ms_per_turn"]
        - results["engine c=1"]["cpu_ms_per_turn"],
        f"cpu_c{c}": results[f"durable c={c}"]["cpu_ms_per_turn"]
        - results[f"engine c={c}"]["cpu_ms_per_turn"],
    }
    print_table(
        "Durable minus engine-only, per turn",
        ["measure", "us"],
        [
            ["time at c=1 (medians)", extra["time_c1"] * 1000],
            ["CPU at c=1", extra["cpu_c1"] * 1000],
            [f"CPU at c={c}", extra[f"cpu_c{c}"] * 1000],
        ],
    )
    off, on = results["durable c=1"], results["durable otel c=1"]
    telemetry = {
        "time_c1": on["median_ms"] - off["median_ms"],
        "cpu_c1": on["cpu_ms_per_turn"] - off["cpu_ms_per_turn"],
    }
    telemetry_ratio = {
        "time_c1": on["median_ms"] / off["median_ms"],
        "cpu_c1": on["cpu_ms_per_turn"] / off["cpu_ms_per_turn"],
    }
    print_table(
        "Telemetry on (OTLP/HTTP to a local receiver) minus off, durable turn at c=1",
        ["measure", "us", "on / off"],
        [
            ["time (medians)", telemetry["time_c1"] * 1000, telemetry_ratio["time_c1"]],
            ["CPU", telemetry["cpu_c1"] * 1000, telemetry_ratio["cpu_c1"]],
        ],
    )
    ratio = {"latency_c1": latency, f"throughput_c{c}": throughput}
    write_results(
        "runner",
        {
            "turns": args.turns,
            "rounds": args.rounds,
            "results": results,
            "durable_over_engine": ratio,
            "durable_minus_engine_us": {k: v * 1000 for k, v in extra.items()},
            "big_over_full_thread": size_ratio,
            "full_over_small_thread": window_ratio,
            "telemetry_on_minus_off_us": {k: v * 1000 for k, v in telemetry.items()},
            "telemetry_on_over_off": telemetry_ratio,
            "many_runs_over_small_thread": runs_ratio,
        },
    )


if __name__ == "__main__":
    main()
