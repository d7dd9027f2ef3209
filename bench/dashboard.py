"""The dashboard's conversation pages: the server's time to answer a page of a long thread
and a long channel, newest page first and an older one.

A temporary project holds a thread of 10,000 messages (a question, a tool call, its result
and an answer, over and over; 200 runs on it) and a channel of 10,000 messages (every tenth a
reply in a thread); each page is asked for in-process, through the ASGI app (httpx2's
ASGITransport: no socket, no other process), so the time is the server's: routing, the store's
reads, rendering. The pages read a page of rows however long the conversation, so the target,
under 300 ms a page, should hold with room to spare.

    python bench/dashboard.py [--messages 10000] [--requests 200] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import percentile, print_table, write_results

TARGET_MS = 300.0
AGENT = "---\nname: ceo\n---\nYou lead.\n"
CONFIG = '[defaults]\nmodel = "test"\n\n[channels.general]\nmembers = ["you", "ceo"]\n'


async def seed(ws: Any, messages: int) -> dict[str, str]:
    """The long thread and the long channel; the cursors of their older pages."""
    from agentrunner.core.ids import new_id
    from agentrunner.engine import AssistantMessage, ToolCall, ToolResult, UserMessage
    from agentrunner.store.channels import ChannelMessage

    store = ws.runner.store
    await store.threads.open("long", "ceo")
    said: list[Any] = []
    for n in range(messages // 4):
        said += [
            UserMessage(f"Question {n}: how are the numbers for region {n % 17} this week?"),
            AssistantMessage(
                tool_calls=[ToolCall(f"c{n}", "lookup", {"region": n % 17, "week": n})],
                model="openai:gpt-4o",
            ),
            ToolResult(f"c{n}", "lookup", '{"revenue": 1234567, "orders": 8910} ' * 12),
            AssistantMessage(f"Region {n % 17} is up 3% on last week. " * 6, model="openai:gpt-4o"),
        ]
    runs = [f"run_bench{n:04}" for n in range(200)]
    for start in range(0, len(said), 500):
        run = runs[start * len(runs) // len(said)]
        await store.batch(
            store.messages.append_ops("long", start + 1, said[start : start + 500], run)
        )
    await store.batch(
        [
            *(
                store.runs.insert_op(
                    run_id=run, agent_id="ceo", thread_id="long", status="completed"
                )
                for run in runs
            ),
            store.threads.manifest_op("long", message_count=len(said), session_run_id=None),
        ]
    )
    channel = await ws.channels.channel("general")
    rows: list[ChannelMessage] = []
    for n in range(messages):
        root = rows[n - 5].id if n % 10 == 9 else None
        sender, kind = ("ceo", "agent") if n % 2 else ("you", "person")
        text = f"Message {n}: " + "what we said about the plan, and what comes next. " * 4
        rows.append(
            ChannelMessage(channel.id, new_id("m_"), root, sender, kind, text, 0, None, time.time())
        )
    for start in range(0, len(rows), 500):
        await store.batch([store.channels.message_op(m) for m in rows[start : start + 500]])
    return {"channel_before": rows[messages // 2].id, "thread_before": str(len(said) // 2)}


async def measure(root: Path, url: str, messages: int, requests: int) -> dict[str, Any]:
    import httpx2

    from agentrunner.interfaces.server import create_app
    from agentrunner.runtime.compose import open_workspace

    ws = await open_workspace(root, database_url=url)
    try:
        started = time.perf_counter()
        cursors = await seed(ws, messages)
        seeded_s = time.perf_counter() - started
        app = create_app(root, worker=False, workspace=ws)
        pages = {
            "channel, newest page": "/ui/channels/general",
            "channel, an older page": f"/ui/channels/general?before={cursors['channel_before']}",
            "thread, newest page": "/ui/threads/long",
            "thread, an older page": f"/ui/threads/long?before={cursors['thread_before']}",
            "channels": "/ui/channels",
            "threads": "/ui/threads",
        }
        results: dict[str, Any] = {}
        async with app.router.lifespan_context(app):
            transport = httpx2.ASGITransport(app=app)
            async with httpx2.AsyncClient(
                transport=transport, base_url="http://127.0.0.1"
            ) as client:
                for name, path in pages.items():
                    for _ in range(5):  # warm: the first of each reads cold pages
                        (await client.get(path)).raise_for_status()
                    times = []
                    for _ in range(requests):
                        begin = time.perf_counter()
                        answer = await client.get(path)
                        times.append((time.perf_counter() - begin) * 1000)
                        answer.raise_for_status()
                    results[name] = {
                        "path": path,
                        "p50_ms": percentile(times, 50),
                        "p95_ms": percentile(times, 95),
                        "max_ms": max(times),
                        "bytes": len(answer.content),
                    }
        return {"seeded_s": seeded_s, "pages": results}
    finally:
        await ws.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument(
        "--postgres", help="also measure on this PostgreSQL database (an empty one)"
    )
    args = parser.parse_args()
    stores: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for dialect in ["sqlite", *(["postgres"] if args.postgres else [])]:
            root = Path(tmp) / dialect
            (root / "agents").mkdir(parents=True)
            (root / "agents" / "ceo.md").write_text(AGENT)
            (root / "agentrunner.toml").write_text(CONFIG)
            url = args.postgres if dialect == "postgres" else f"sqlite:///{root / 'bench.db'}"
            os.environ.pop("AGENTRUNNER_DATABASE_URL", None)
            stores[dialect] = asyncio.run(measure(root, url, args.messages, args.requests))
    rows = [
        [dialect, name, page["p50_ms"], page["p95_ms"], page["max_ms"], page["bytes"]]
        for dialect, result in stores.items()
        for name, page in result["pages"].items()
    ]
    print_table(
        f"Dashboard pages: server time in-process over {args.requests} requests each "
        f"(a thread and a channel of {args.messages:,} messages; target < {TARGET_MS:.0f} ms)",
        ["store", "page", "p50 ms", "p95 ms", "max ms", "bytes"],
        rows,
    )
    worst = max(row[3] for row in rows)
    print(f"\nworst p95: {worst:.1f} ms — {'within' if worst < TARGET_MS else 'OVER'} the target")
    write_results(
        "dashboard",
        {
            "messages": args.messages,
            "requests": args.requests,
            "target_ms": TARGET_MS,
            "results": stores,
        },
    )


if __name__ == "__main__":
    main()
