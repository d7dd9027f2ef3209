"""What history costs: the dashboard's summary pages and one durable turn, on a store that holds
little history and on the same store holding much more.

A project of 20 agents (a CEO and its reports) runs ``--base`` real turns against the mock
provider (two requests and a tool call each, priced, so every request writes a cost row), all of
its rows written as a run writes them. The history is then grown by copying those runs, with all
of their steps, run messages, events and cost rows, under new ids and spread over the last six
days (doubling each time), so that a store of a million runs takes minutes to make, not a day
of turns. At each size the pages that summarise history (the team page, the costs page, the
runs list) and one that shows a single run are asked for in-process through the ASGI app, and
``--turns`` turns are timed on fresh threads (latency and this process's CPU per turn).

Target (issue 47): the summary pages stay as fast as the single-item ones as history grows,
and a turn's cost stays flat. Last, ``[retention]`` is applied to the largest store as
``agentrunner gc`` applies it, timed, and a turn timed again.

    python bench/history.py [--sizes 10000,100000,1000000] [--postgres URL|start]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import percentile, print_table, write_results
from engine import mock_provider
from runner import QUESTION, bench_tool, config

AGENTS = 20
# Copied from run to run, in this order (a copy's foreign keys find their run): everything a
# finished run wrote under its id. Thread messages are not copied: a thread's size is
# bench/runner.py's measure.
TABLES = ("runs", "run_steps", "run_messages", "events", "costs")
DAY = 86_400.0
PAGES = {
    "team": "/ui/team",
    "costs (7 days)": "/ui/costs",
    "threads list": "/ui/threads",
    "one run": "/ui/runs/{run_id}",
}


def agent_files(root: Path) -> None:
    (root / "agents").mkdir(parents=True)
    (root / "agents" / "ceo.md").write_text("---\nname: CEO\ntools: [get_weather]\n---\nLead.\n")
    for n in range(1, AGENTS):
        (root / "agents" / f"a{n:02}.md").write_text(
            f"---\nname: Agent {n}\nreports_to: ceo\ntools: [get_weather]\n---\nYou help.\n"
        )


class Copier:
    """Doubles the finished runs' rows in place, by SQL, on either back end."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.postgres = url.startswith("postgres")
        self.columns = {table: self._columns(table) for table in TABLES}

    @contextlib.contextmanager
    def _connect(self) -> Iterator[Any]:
        if self.postgres:
            import psycopg

            with psycopg.connect(self.url.replace("postgresql+psycopg", "postgresql")) as pg:
                yield pg
        else:
            conn = sqlite3.connect(self.url.removeprefix("sqlite:///"), timeout=60)
            try:
                yield conn
                conn.commit()
            finally:
                conn.close()

    def _columns(self, table: str) -> list[str]:
        with self._connect() as conn:
            if self.postgres:
                rows = conn.execute(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_name = %s ORDER BY ordinal_position",
                    (table,),
                ).fetchall()
                return [row[0] for row in rows]
            return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]

    def double(self, copy: int) -> None:
        """Every finished run once more, under ids ending ``~copy``, moved back in time by half
        of the move before (so all of it stays within the last six days)."""
        shift = 6 * DAY / 2**copy
        suffix = f"~{copy}"
        settled = f"status IN ('completed', 'failed', 'cancelled') AND id NOT LIKE '%{suffix}'"
        with self._connect() as conn:
            for table in TABLES:
                columns = self.columns[table]
                values = [self._value(table, column, suffix, shift) for column in columns]
                where = (
                    settled
                    if table == "runs"
                    else f"run_id IN (SELECT id FROM runs WHERE {settled})"
                )
                conn.execute(
                    f"INSERT INTO {table} ({', '.join(columns)}) "
                    f"SELECT {', '.join(values)} FROM {table} WHERE {where}"
                )

    def _value(self, table: str, column: str, suffix: str, shift: float) -> str:
        if column in ("id", "run_id", "parent_run_id"):
            return f"{column} || '{suffix}'"
        if column in ("created_at", "started_at", "completed_at", "updated_at"):
            return f"{column} - {shift}"
        if table == "costs" and column == "day":
            if self.postgres:
                return (
                    f"to_char(to_timestamp(created_at - {shift}) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
                )
            return f"strftime('%Y-%m-%d', created_at - {shift}, 'unixepoch')"
        return column

    def analyze(self) -> None:
        """PostgreSQL's statistics brought up to date, as autovacuum keeps a store that grew over
        months: its plans for a store doubled in minutes would be for one a thousandth its
        size."""
        if self.postgres:
            with self._connect() as conn:
                conn.execute("ANALYZE")

    def runs(self) -> int:
        with self._connect() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])

    def rebuild_totals(self) -> None:
        """The day totals (cost_totals) the copies' cost rows add to, made again from the cost
        rows by the migration that made them (28)."""
        from agentrunner.store.sql import load_sql

        sql = load_sql("postgres") if self.postgres else load_sql("sqlite")
        [made] = [steps for version, steps in sql.migrations if version == 28]
        with self._connect() as conn:
            conn.execute("DELETE FROM cost_totals")
            conn.execute(next(step for step in made if step.startswith("INSERT")))

    def size_mb(self) -> float:
        if self.postgres:
            with self._connect() as conn:
                row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
                return float(row[0]) / 1e6
        path = Path(self.url.removeprefix("sqlite:///"))
        return sum(p.stat().st_size for p in path.parent.glob(path.name + "*")) / 1e6


async def turns(runner: Any, count: int) -> dict[str, float]:
    latencies = []
    cpu = time.process_time()
    for n in range(count):
        thread_id = f"bench{time.time_ns()}"
        await runner.store.threads.open(thread_id, f"a{1 + n % (AGENTS - 1):02}")
        await runner.store.threads.set_title(thread_id, "bench")
        begin = time.perf_counter()
        await runner.run_agent(f"a{1 + n % (AGENTS - 1):02}", thread_id, QUESTION)
        latencies.append((time.perf_counter() - begin) * 1000)
    return {
        "p50_ms": percentile(latencies, 50),
        "p95_ms": percentile(latencies, 95),
        "cpu_ms": (time.process_time() - cpu) * 1000 / count,
    }


async def pages(root: Path, url: str, requests: int, run_id: str) -> dict[str, dict[str, float]]:
    import httpx2

    from agentrunner.interfaces.server import create_app
    from agentrunner.runtime.compose import open_workspace

    ws = await open_workspace(root, database_url=url)
    ws.runner.capabilities.register("bench", lambda ctx: [bench_tool()], ["get_weather"])
    out: dict[str, dict[str, float]] = {}
    try:
        app = create_app(root, worker=False, workspace=ws)
        async with app.router.lifespan_context(app):
            transport = httpx2.ASGITransport(app=app)
            async with httpx2.AsyncClient(
                transport=transport, base_url="http://127.0.0.1"
            ) as client:
                for name, path in PAGES.items():
                    path = path.format(run_id=run_id)
                    for _ in range(3):
                        (await client.get(path)).raise_for_status()
                    times = []
                    for _ in range(requests):
                        begin = time.perf_counter()
                        (await client.get(path)).raise_for_status()
                        times.append((time.perf_counter() - begin) * 1000)
                    out[name] = {"p50_ms": percentile(times, 50), "p95_ms": percentile(times, 95)}
    finally:
        await ws.close()
    return out


async def measure(
    root: Path, url: str, base: int, sizes: list[int], args: argparse.Namespace
) -> list[dict[str, Any]]:
    from agentrunner import open_runner

    runner = await open_runner(root, database_url=url)
    runner.capabilities.register("bench", lambda ctx: [bench_tool()], ["get_weather"])
    try:
        await turns(runner, base)  # the history every copy repeats
        run_id = (await runner.store.runs.list(limit=1))[0].id
    finally:
        await runner.close()
    copier = Copier(url)
    results = []
    copy = 0
    for size in [base, *sizes]:
        started = time.perf_counter()
        while copier.runs() < size:
            copy += 1
            copier.double(copy)
        copier.rebuild_totals()
        copier.analyze()
        grown_s = time.perf_counter() - started
        held = copier.runs()
        shown = await pages(root, url, args.requests, run_id)
        runner = await open_runner(root, database_url=url)
        runner.capabilities.register("bench", lambda ctx: [bench_tool()], ["get_weather"])
        try:
            turn = await turns(runner, args.turns)
        finally:
            await runner.close()
        results.append(
            {"runs": held, "size_mb": copier.size_mb(), "grown_s": grown_s}
            | {"pages": shown, "turn": turn}
        )
        print(f"  {held:,} runs ({copier.size_mb():,.0f} MB): {shown} turn {turn}", flush=True)
    results.append(await collect(root, url, copier, args))
    return results


async def collect(root: Path, url: str, copier: Copier, args: argparse.Namespace) -> dict[str, Any]:
    """``[retention]`` applied to the largest store, as ``agentrunner gc`` does: the events and
    run messages of the runs settled over three days ago (about half of them) removed, and the
    rest's token deltas merged; then a turn timed again."""
    from agentrunner import open_runner
    from agentrunner.config.retention import Retention
    from agentrunner.workspace.retention import apply_retention

    runner = await open_runner(root, database_url=url)
    runner.capabilities.register("bench", lambda ctx: [bench_tool()], ["get_weather"])
    try:
        rules = Retention(events_days=3, run_messages_days=3)
        before = copier.size_mb()
        started = time.perf_counter()
        removal = await apply_retention(runner.store, rules)
        took = time.perf_counter() - started
        turn = await turns(runner, args.turns)
    finally:
        await runner.close()
    print(f"  gc: {removal.rows} in {took:.1f} s; turn {turn}", flush=True)
    return {
        "gc": {"rules": "events_days = 3, run_messages_days = 3", "removed": removal.rows},
        "gc_s": took,
        "rows_per_s": removal.total / took if took else 0.0,
        "size_mb_before": before,
        "runs": copier.runs(),
        "size_mb": copier.size_mb(),  # SQLite keeps the pages it freed for reuse
        "turn": turn,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base", type=int, default=200, help="real turns first")
    parser.add_argument("--sizes", default="10000,100000", help="runs held at each measure")
    parser.add_argument("--requests", type=int, default=50, help="of each page, at each size")
    parser.add_argument("--turns", type=int, default=100, help="timed at each size")
    parser.add_argument(
        "--postgres",
        metavar="URL|start",
        help="measure on this (empty) PostgreSQL database instead; start: a throwaway server",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    os.environ.pop("AGENTRUNNER_DATABASE_URL", None)
    with contextlib.ExitStack() as stack:
        provider = stack.enter_context(mock_provider())
        root = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        agent_files(root)
        (root / "agentrunner.toml").write_text(config(provider, priced=True))
        url = args.postgres or f"sqlite:///{root / 'history.db'}"
        if args.postgres == "start":
            sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
            from tests.throwaway_postgres import start_throwaway_postgres

            server = start_throwaway_postgres()
            if server is None:
                sys.exit("no PostgreSQL server binaries here (initdb): install PostgreSQL")
            stack.callback(server.stop)
            url = server.url
        results = asyncio.run(measure(root, url, args.base, sizes, args))
    store = "postgres" if args.postgres else "sqlite"
    rows = [
        [f"{r['runs']:,}", f"{r['size_mb']:,.0f}"]
        + [r["pages"][name]["p50_ms"] for name in PAGES]
        + [r["turn"]["p50_ms"], r["turn"]["cpu_ms"]]
        for r in results
        if "pages" in r
    ]
    print_table(
        f"History on {store}: page p50 (ms, in-process, {args.requests} requests) and one "
        f"durable turn (p50 ms, CPU ms), by runs held",
        ["runs", "MB", *PAGES, "turn p50", "turn CPU"],
        rows,
    )
    gc = results[-1]
    print(
        f"\ngc ({gc['gc']['rules']}) on {gc['runs']:,} runs: {gc['gc']['removed']} in "
        f"{gc['gc_s']:.1f} s ({gc['rows_per_s']:,.0f} rows/s); a turn after it: "
        f"p50 {gc['turn']['p50_ms']:.2f} ms, CPU {gc['turn']['cpu_ms']:.2f} ms"
    )
    write_results(f"history-{store}", {"base": args.base, "results": results})


if __name__ == "__main__":
    main()
