"""The price of traces: the durable turn of bench/runner.py (2 model requests + 1 tool call
against the mock provider at 0 ms, thread lock, run rows, events, costs) with telemetry off and
on, in the same process, interleaved. On, every span of the run goes out over OTLP/HTTP in
batches to a local receiver in a process of its own (it answers 200 and keeps nothing), and its
metrics are recorded (and sent once a minute), so the figure includes making the spans and
the measurements and exporting them.

Target (issue 26): telemetry off costs nothing measurable (its turn is bench/runner.py's
durable turn); on, the overhead is reported.

    python bench/telemetry.py [--turns 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_results
from engine import mock_provider
from runner import QUESTION, open_bench_runner, stats, timed

# A receiver of OTLP/HTTP: counts what it is sent, answers as a collector does.
RECEIVER = """\
import sys
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


async def run(args: argparse.Namespace, url: str, receiver: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        off = await open_bench_runner(Path(tmp) / "off", url)
        on = await open_bench_runner(
            Path(tmp) / "on",
            url,
            extra=f'[telemetry]\nenabled = true\nendpoint = "{receiver}"\n',
        )
        assert off.engine.tracing is None and on.engine.tracing is not None
        counter = iter(range(10**9))

        async def fresh_thread(runner: Any) -> str:
            thread_id = f"t{next(counter)}"
            await runner.store.threads.open(thread_id, "bench")
            await runner.store.threads.set_title(thread_id, "bench")  # no title effect
            return thread_id

        count = args.turns * args.rounds + 20
        threads = {
            "off": [await fresh_thread(off) for _ in range(count)],
            "on": [await fresh_thread(on) for _ in range(count)],
        }
        runners = {"off": off, "on": on}

        def turn(name: str) -> Any:
            async def one(n: int) -> None:
                await runners[name].run_agent("bench", threads[name].pop(), QUESTION)

            return one

        for _ in range(20):  # warm up both
            await turn("off")(0)
            await turn("on")(0)
        samples: dict[str, list[float]] = {"off": [], "on": []}
        cpu = {"off": 0.0, "on": 0.0}
        for _ in range(args.rounds):
            for name in ("off", "on"):
                c0 = time.process_time()
                got, _ = await timed(turn(name), args.turns)
                cpu[name] += time.process_time() - c0
                samples[name] += got
        await off.close()
        await on.close()
    from opentelemetry import metrics, trace

    # the last batch, sent while the receiver still runs (a bench may block here)
    flush = getattr(trace.get_tracer_provider(), "force_flush", None)
    assert flush is not None and flush(), "the receiver did not take the last spans"
    flush = getattr(metrics.get_meter_provider(), "force_flush", None)
    assert flush is not None and flush(), "the receiver did not take the last metrics"
    total = args.turns * args.rounds
    return {
        name: stats(got) | {"cpu_ms_per_turn": cpu[name] * 1000 / total}
        for name, got in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    # stopped at exit, after agentrunner's own last send (atexit calls the latest first)
    atexit.register(receiver.wait, timeout=10)
    atexit.register(receiver.terminate)
    assert receiver.stdout is not None
    endpoint = f"http://127.0.0.1:{receiver.stdout.readline().strip()}"
    with mock_provider() as url:
        results = asyncio.run(run(args, url, endpoint))
    overhead = {
        "time_c1": results["on"]["median_ms"] / results["off"]["median_ms"] - 1,
        "cpu_c1": results["on"]["cpu_ms_per_turn"] / results["off"]["cpu_ms_per_turn"] - 1,
    }
    print_table(
        "Durable turn, telemetry off and on (OTLP/HTTP to a local receiver); "
        f"{args.rounds} interleaved rounds of {args.turns}",
        ["telemetry", "median ms", "p95 ms", "CPU ms/turn"],
        [[k, v["median_ms"], v["p95_ms"], v["cpu_ms_per_turn"]] for k, v in results.items()],
    )
    print_table(
        "On over off",
        ["measure", "overhead %"],
        [
            ["time per turn (medians)", overhead["time_c1"] * 100],
            ["CPU per turn", overhead["cpu_c1"] * 100],
        ],
    )
    write_results(
        "telemetry",
        {
            "turns": args.turns,
            "rounds": args.rounds,
            "results": results,
            "overhead_on_over_off": overhead,
        },
    )


if __name__ == "__main__":
    main()
