"""Tasks (seed 004): cache-hit latency in-process, and batch throughput against the mock provider
answering at once (0 ms), on one core with the mock on another.

    python bench/tasks.py [--hits 5000] [--batch 1000] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import percentile, pin_to_core, print_table, write_results
from engine import free_port, start_mock

CONFIG = """\
[defaults]
model = "mock:gpt-mock"

[providers.mock]
kind = "openai"
base_url = "http://127.0.0.1:{port}/v1"
api_key_env = "MOCK_KEY"

[prices."mock:gpt-mock"]
input_per_mtok = 0.15
output_per_mtok = 0.6
"""
AGENT = """\
---
name: Summariser
cache: true
prompt_template: "Summarise: {{input.text}}"
---
You summarise for {{input.company}}.
"""


async def measure(root: Path, hits: int, batch: int, concurrency: int) -> dict[str, float]:
    from agentrunner import open_task_runner

    async with await open_task_runner(root) as tasks:
        values = {"company": "Acme", "text": "Tides rise twice a day."}
        first = await tasks.execute("summariser", values)
        assert first.ok and not first.cached, first
        await tasks.cache.flush()  # hits read the file, not memory
        latencies = []
        for _ in range(hits):
            begin = time.perf_counter()
            outcome = await tasks.execute("summariser", values)
            latencies.append(time.perf_counter() - begin)
            assert outcome.cached

        timings = {}
        inputs = [{"company": "Acme", "text": f"item {i}"} for i in range(batch)]
        for label, cache in (("no cache", False), ("cold cache", True)):
            begin = time.perf_counter()
            done = await tasks.execute_many(
                "summariser", inputs, concurrency=concurrency, cache=cache
            )
            timings[label] = batch / (time.perf_counter() - begin)
            assert all(outcome.ok for outcome in done)
        return {
            "hit_p50_ms": percentile(latencies, 50) * 1000,
            "hit_p95_ms": percentile(latencies, 95) * 1000,
            "batch_tasks_per_s_no_cache": timings["no cache"],
            "batch_tasks_per_s_cold_cache": timings["cold cache"],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hits", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    port = free_port()
    mock = start_mock(port)
    pin_to_core(0)
    os.environ["MOCK_KEY"] = "sk-bench"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "agents").mkdir()
            (root / "agentrunner.toml").write_text(CONFIG.format(port=port))
            (root / "agents" / "summariser.md").write_text(AGENT)
            figures = asyncio.run(measure(root, args.hits, args.batch, args.concurrency))
    finally:
        mock.kill()
        mock.wait()
    print_table(
        "tasks",
        ["measure", "value", "target"],
        [
            ["cache hit p50 (in-process, from file)", f"{figures['hit_p50_ms']:.3f} ms", "< 1 ms"],
            ["cache hit p95", f"{figures['hit_p95_ms']:.3f} ms", ""],
            [
                f"batch of {args.batch} at c={args.concurrency}, no cache",
                f"{figures['batch_tasks_per_s_no_cache']:.0f} tasks/s",
                "report",
            ],
            [
                f"batch of {args.batch} at c={args.concurrency}, cold cache (writes)",
                f"{figures['batch_tasks_per_s_cold_cache']:.0f} tasks/s",
                "report",
            ],
        ],
    )
    write_results("tasks", {"args": vars(args), **figures})


if __name__ == "__main__":
    main()
