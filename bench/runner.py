"""The price of durability: a durable turn (AgentRunner.run_agent on SQLite: thread lock, run
rows, steps, run messages, events, costs, messages) against an engine-only turn and against the
bare loop (bench/engine.py's floor: a hand-written httpx2 loop doing the same turn), in the same
process, interleaved. One turn = 2 model requests + 1 tool call against the mock provider at
0 ms in its own process. The durable turn also with telemetry on (issue 26), the same with the
API's no-op tracer and meter (agentrunner's own part of telemetry's cost), with the daily
budgets set ([budgets] per_agent_daily_usd and global_daily_usd, priced model: each request
holds its worst case first), and with both, interleaved with the others: its spans made and
sent over OTLP/HTTP, in batches, to a local receiver in a process of its own (it answers as a
collector does and keeps nothing), the last batch of each round sent within that round's CPU
time. The durable turn also while another process tails the store (a dashboard or an event
stream open, so the run's log commits its events within milliseconds rather than with its
durable points): what that costs the run's process. Each configuration (at each
concurrency) has a client, engine or runner of its own, and is charged its own work only: the
garbage of the one before is collected first, and a durable one's WAL is copied back (as its
checkpointer thread would just after) within its CPU time.
Also: turn time on a 100,000-message thread against a 3,000-message one (both past the model's
context window, so both send the window's worth of history: what differs is only how much the
store holds), on a 10-message thread, and on a thread with 20,000 earlier runs; and the
daily-budget check (what a run with `per_agent_daily_usd` / `global_daily_usd` set reads first)
after 100,000 priced requests today. A thread past the window is compacted on its first run
(docs/engine.md, "History"): once, before the samples, not measured.

Targets (issue 4): durable / engine-only time per turn <= 1.3; the 100k-message thread within
20% of the 3,000-message one, and a thread with many runs within 20% of a 10-message one.
Issue 26: telemetry off costs nothing measurable (the durable turn is where it was); on, what
it adds is reported. Issue 29: durable CPU per turn <= 1.6x the floor's, at c=1 and c=64;
telemetry on with the daily budgets set adds under 10% to a durable turn.

    python bench/runner.py [--turns 300] [--rounds 3] [--concurrency 16,64] [--big 100000]
                           [--runs 20000] [--costs 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import percentile, print_table, write_results
from engine import TOOL_SCHEMA, floor_factory, mock_provider, weather

CONFIG = """\
[defaults]
model = "bench:gpt-bench"

[prices."bench:gpt-bench"]
input_per_mtok = {input_price}
output_per_mtok = {output_price}

[providers.bench]
kind = "openai"
base_url = "{url}"
"""
# The daily budgets, high enough never to refuse a request: what is measured is their holds.
BUDGETS = "[budgets]\nper_agent_daily_usd = 1000.0\nglobal_daily_usd = 1000.0\n"
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


# A thread past the bench model's context window (32,768 tokens: a model nothing lists) in these
# messages of a few words each.
FULL = 3000


def bench_tool() -> Any:
    from agentrunner.engine import Tool, ToolContext

    async def fn(args: dict[str, Any], ctx: ToolContext) -> str:
        return await weather(**args)

    return Tool("get_weather", "Weather.", TOOL_SCHEMA, fn)


def config(url: str, *, priced: bool = False) -> str:
    """The bench project's config; ``priced``: the model has prices (daily budgets need them
    to hold anything), else it is free."""
    prices = ("1.0", "4.0") if priced else ("0.0", "0.0")
    return CONFIG.format(url=url, input_price=prices[0], output_price=prices[1])


async def open_bench_runner(root: Path, url: str, extra: str = "", *, priced: bool = False) -> Any:
    from agentrunner import open_runner

    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text(config(url, priced=priced) + extra)
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
    from agentrunner.run.run_rows import RunRows

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


def checkpoint(runner: Any) -> None:
    """Copy the runner's WAL back into its database now (a passive checkpoint, as its
    checkpointer thread makes every 0.1 s), so that the next configuration measured does not
    pay for this one's writes."""
    with contextlib.closing(sqlite3.connect(runner.store.driver.path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()


def no_op_tracing() -> Any:
    """Telemetry on with the OpenTelemetry API's no-op tracer and meter: what agentrunner
    itself does for its spans and metrics, without the SDK's making, recording and exporting."""
    from opentelemetry.metrics import NoOpMeter
    from opentelemetry.trace import NoOpTracer

    from agentrunner.telemetry.metrics import Metrics
    from agentrunner.telemetry.otel import OtelTracing

    return OtelTracing(NoOpTracer(), metrics=Metrics(NoOpMeter("bench")))


def bench_engine(url: str) -> Any:
    """The engine-only side: an engine of its own, made from the runner's config text, so both
    sides resolve, call and price the model alike (pricing is the engine's work, not the
    price of durability)."""
    from agentrunner.config import load_config
    from agentrunner.engine import Engine

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "agentrunner.toml"
        path.write_text(config(url))
        return Engine.from_config(load_config(Path(tmp), env={"AGENTRUNNER_CONFIG": str(path)}))


async def engine_only_turn(engine: Any, tool: Any) -> None:
    await engine.run(model="bench:gpt-bench", system=SYSTEM, message=QUESTION, tools=[tool])


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


async def run(args: argparse.Namespace, url: str, receiver: str) -> dict[str, Any]:
    """Every configuration measured with a client, engine or runner of its own, one per
    concurrency: a pool left with 64 idle connections by the turns at c=64 has each of them
    checked before every request at c=1 (on httpx2's own transport, the floor's, ~10 us each)."""
    tool = bench_tool()
    levels = (1, *args.concurrency)
    closers = []
    turns: dict[str, Any] = {}  # "name c=N": the turn of that configuration
    for c in levels:
        floor, close_floor = floor_factory(url)
        engine = bench_engine(url)
        closers += [close_floor, engine.aclose]
        turns[f"floor c={c}"] = lambda n, floor=floor: floor()
        turns[f"engine c={c}"] = lambda n, engine=engine: engine_only_turn(engine, tool)
    telemetry = (
        f'[telemetry]\nenabled = true\nendpoint = "{receiver}"\n'
        f"sample_ratio = {args.sample_ratio}\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runners = {f"durable c={c}": await open_bench_runner(root / f"off{c}", url) for c in levels}
        runners["durable otel c=1"] = await open_bench_runner(root / "on", url, telemetry)
        # agentrunner's own part of telemetry's cost: its spans and measurements made, through
        # the OpenTelemetry API, on a tracer and a meter that do nothing (the API's no-ops)
        runners["durable otel no-op c=1"] = await open_bench_runner(root / "noop", url, telemetry)
        runners["durable otel no-op c=1"].engine.tracing = no_op_tracing()
        runners["durable budgets c=1"] = await open_bench_runner(
            root / "budgets", url, BUDGETS, priced=True
        )
        runners["durable otel+budgets c=1"] = await open_bench_runner(
            root / "both", url, telemetry + BUDGETS, priced=True
        )
        listeners = []
        for c in levels:
            runners[f"durable read live c={c}"] = await open_bench_runner(root / f"live{c}", url)
            db = root / f"live{c}" / ".agentrunner" / "agentrunner.db"
            listener = subprocess.Popen(
                [sys.executable, "-c", LISTENER, f"sqlite:///{db}"],
                stdout=subprocess.PIPE,
                text=True,
            )
            listeners.append(listener)
            assert listener.stdout is not None and listener.stdout.readline().strip() == "listening"
        from agentrunner.telemetry import NO_TRACING

        traced = {key for key, r in runners.items() if r.engine.tracing is not NO_TRACING}
        assert traced == {"durable otel c=1", "durable otel no-op c=1", "durable otel+budgets c=1"}
        from opentelemetry import trace

        flush = getattr(trace.get_tracer_provider(), "force_flush", None)
        assert flush is not None, "telemetry on set up no SDK"
        counter = iter(range(10**9))

        async def fresh_thread(runner: Any) -> str:
            thread_id = f"t{next(counter)}"
            await runner.store.threads.open(thread_id, "bench")
            await runner.store.threads.set_title(thread_id, "bench")  # no title effect
            return thread_id

        def durable(runner: Any, threads: list[str]) -> Any:
            async def turn(n: int) -> None:
                await runner.run_agent("bench", threads.pop(), QUESTION)

            return turn

        for key, runner in runners.items():
            count = args.turns * args.rounds + max(20, concurrency(key))
            turns[key] = durable(runner, [await fresh_thread(runner) for _ in range(count)])
        for key, turn in turns.items():  # warm up every path, its pool at its concurrency
            await timed(turn, max(20, concurrency(key)), concurrency(key))
        assert flush(), "the receiver did not take the spans"
        await asyncio.sleep(2.5)  # the listeners' sockets seen for sure (store/wake: _Listing)
        live = {key for key, r in runners.items() if r.store.changes.listened()}
        assert live == {f"durable read live c={c}" for c in levels}, live
        for runner in runners.values():  # the setup's writes copied back before any is measured
            checkpoint(runner)
        samples: dict[str, list[float]] = {}
        walls: dict[str, float] = {}
        cpu: dict[str, float] = {}
        for _ in range(args.rounds):
            for c in levels:
                for key in [k for k in turns if k.endswith(f" c={c}")]:
                    gc.collect()  # not the garbage of the configuration before
                    c0 = time.process_time()
                    got, wall = await timed(turns[key], args.turns, c)
                    if key in traced:
                        # the round's last batch, sent in its time, not in the next round's
                        assert flush(), "the receiver did not take the spans"
                    if key in runners:
                        # what the store's checkpointer would copy back after the run ends,
                        # copied in its time: not charged to the configuration after
                        checkpoint(runners[key])
                    cpu[key] = cpu.get(key, 0.0) + time.process_time() - c0
                    samples.setdefault(key, []).extend(got)
                    walls[key] = walls.get(key, 0.0) + wall
        runner = runners.pop("durable c=1")
        for other in runners.values():
            await other.close()
        for listener in listeners:
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
    for close in closers:
        await close()
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


def concurrency(key: str) -> int:
    """The concurrency of a configuration named "... c=N"."""
    return int(key.rsplit("=", 1)[1])


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
    parser.add_argument(
        "--concurrency",
        type=lambda text: [int(c) for c in text.split(",")],
        default=[16, 64],
        help="the concurrencies measured besides 1, comma-separated",
    )
    parser.add_argument(
        "--sample-ratio",
        type=float,
        default=1.0,
        help="[telemetry] sample_ratio of the telemetry rows (one provider a process: run again "
        "with another to compare)",
    )
    args = parser.parse_args()
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout is not None
        endpoint = f"http://127.0.0.1:{receiver.stdout.readline().strip()}"
        with mock_provider() as url:
            results = asyncio.run(run(args, url, endpoint))
        from agentrunner.telemetry.setup import send_telemetry

        send_telemetry()  # the last metrics while the receiver answers, not at exit without it
    finally:
        receiver.terminate()
        receiver.wait(timeout=10)
    levels = (1, *args.concurrency)
    latency = results["durable c=1"]["median_ms"] / results["engine c=1"]["median_ms"]
    throughput = {
        c: results[f"engine c={c}"]["turns_per_s"] / results[f"durable c={c}"]["turns_per_s"]
        for c in args.concurrency
    }
    over_floor = {
        name: {
            c: results[f"{name} c={c}"]["cpu_ms_per_turn"]
            / results[f"floor c={c}"]["cpu_ms_per_turn"]
            for c in levels
        }
        for name in ("durable", "durable read live", "engine")
    }
    size_ratio = results[f"thread_{args.big}"]["median_ms"] / results[f"thread_{FULL}"]["median_ms"]
    window_ratio = results[f"thread_{FULL}"]["median_ms"] / results["thread_10"]["median_ms"]
    runs_ratio = (
        results[f"thread_{args.runs}_runs"]["median_ms"] / results["thread_10"]["median_ms"]
    )
    print_table(
        "Turn = 2 requests + 1 tool call, mock at 0 ms, streaming (the floor: bench/engine.py's "
        f"hand-written httpx2 loop, not streaming); {args.rounds} interleaved rounds of "
        f"{args.turns}",
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
            *[
                [f"engine-only / durable, turns/s at c={c}", throughput[c], "<= 1.3"]
                for c in args.concurrency
            ],
            *[
                [f"durable / floor, CPU per turn at c={c}", over_floor["durable"][c], "<= 1.6"]
                for c in levels
            ],
            *[
                [
                    f"durable read live / floor, CPU per turn at c={c}",
                    over_floor["durable read live"][c],
                    "—",
                ]
                for c in levels
            ],
            *[
                [f"engine-only / floor, CPU per turn at c={c}", over_floor["engine"][c], "—"]
                for c in levels
            ],
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
        **{
            f"cpu_c{c}": results[f"durable c={c}"]["cpu_ms_per_turn"]
            - results[f"engine c={c}"]["cpu_ms_per_turn"]
            for c in levels
        },
    }
    print_table(
        "Durable minus engine-only, per turn",
        ["measure", "us"],
        [
            ["time at c=1 (medians)", extra["time_c1"] * 1000],
            *[[f"CPU at c={c}", extra[f"cpu_c{c}"] * 1000] for c in levels],
        ],
    )
    off = results["durable c=1"]
    added: dict[str, dict[str, float]] = {}
    rows = []
    for name in ("otel", "otel no-op", "budgets", "otel+budgets"):
        on = results[f"durable {name} c=1"]
        added[name] = {
            "time_us": (on["median_ms"] - off["median_ms"]) * 1000,
            "time_ratio": on["median_ms"] / off["median_ms"],
            "cpu_us": (on["cpu_ms_per_turn"] - off["cpu_ms_per_turn"]) * 1000,
            "cpu_ratio": on["cpu_ms_per_turn"] / off["cpu_ms_per_turn"],
        }
        target = "<= 1.10" if name == "otel+budgets" else "—"
        rows += [
            [f"{name}: time (medians)", added[name]["time_us"], added[name]["time_ratio"], ""],
            [f"{name}: CPU", added[name]["cpu_us"], added[name]["cpu_ratio"], target],
        ]
    print_table(
        "Telemetry on (OTLP/HTTP to a local receiver) and daily budgets set, minus both off, "
        "durable turn at c=1",
        ["measure", "us", "on / off", "target"],
        rows,
    )
    write_results(
        "runner",
        {
            "turns": args.turns,
            "rounds": args.rounds,
            "results": results,
            "durable_over_engine": {"latency_c1": latency}
            | {f"throughput_c{c}": v for c, v in throughput.items()},
            "durable_over_floor_cpu": {f"c{c}": v for c, v in over_floor["durable"].items()},
            "durable_read_live_over_floor_cpu": {
                f"c{c}": v for c, v in over_floor["durable read live"].items()
            },
            "engine_over_floor_cpu": {f"c{c}": v for c, v in over_floor["engine"].items()},
            "durable_minus_engine_us": {k: v * 1000 for k, v in extra.items()},
            "big_over_full_thread": size_ratio,
            "full_over_small_thread": window_ratio,
            "on_minus_off": added,
            "many_runs_over_small_thread": runs_ratio,
        },
    )


if __name__ == "__main__":
    main()
