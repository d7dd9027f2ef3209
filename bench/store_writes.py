"""What a durable turn's writes cost SQLite, without the turn around them.

Records the transactions of real turns (AgentRunner.run_agent against the mock provider, the
turn of bench/runner.py: 2 model requests + 1 tool call), then replays them into copies of the
store as it was before those turns: through the store's own driver, timed (time per turn), and
on a plain connection whose WAL is kept whole, to count the pages each turn writes and which
B-tree (table or index) each page belongs to. Replaying leaves out the network, the engine and
the event loop, so it separates storage changes that bench/runner.py's turn-to-turn spread
cannot: every committed page is a WAL frame, and frames are most of a commit's cost.

A commit also slows what runs next on its core: SQLite's code and data have taken the core's
caches, and the engine's next request refills them. So engine-only turns (bench/runner.py's)
are timed in pairs, one alone and one right after a recorded turn's transactions are committed
on the same thread, untimed; the difference is what a durable turn's writes cost beyond their
own time.

    python bench/store_writes.py [--turns 3000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_results
from engine import mock_provider
from runner import QUESTION, bench_engine, bench_tool, engine_only_turn, open_bench_runner

if TYPE_CHECKING:
    from agentrunner.store import Store
    from agentrunner.store.drivers import Driver, Op, SQLiteDriver
WAL_HEADER = 32
FRAME_HEADER = 24


async def record(url: str, turns: int, snapshot: Path) -> list[list[list[Op]]]:
    """The transactions of ``turns`` durable turns, turn by turn, each turn on a new thread;
    ``snapshot`` gets the database as it was before them."""
    with tempfile.TemporaryDirectory() as tmp:
        runner = await open_bench_runner(Path(tmp), url)
        store: Store = runner.store
        threads = []
        for n in range(turns + 50):
            await store.threads.open(f"t{n}", "bench")
            await store.threads.set_title(f"t{n}", "bench")  # no title effect
            threads.append(f"t{n}")
        for _ in range(50):
            await runner.run_agent("bench", threads.pop(), QUESTION)
        driver = store.driver
        await driver.execute(f"VACUUM INTO '{snapshot}'", {})
        recorder = _Recorder(driver)
        store.driver = cast("Driver", recorder)  # the run log writes through store.batch/submit
        recorded = []
        for _ in range(turns):
            await runner.run_agent("bench", threads.pop(), QUESTION)
            recorded.append([ops for ops in recorder.transactions if ops])
            recorder.transactions = []
        store.driver = driver
        await runner.close()
    return recorded


class _Recorder:
    """The store's driver, keeping a copy of each transaction it is given."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.transactions: list[list[Op]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.driver, name)

    async def batch(self, ops: Sequence[Op]) -> None:
        self.transactions.append(list(ops))
        await self.driver.batch(ops)

    def submit(self, ops: Sequence[Op]) -> asyncio.Future[None]:
        self.transactions.append(list(ops))
        return self.driver.submit(ops)


@contextlib.asynccontextmanager
async def copy_of(snapshot: Path) -> AsyncIterator[SQLiteDriver]:
    """The store's SQLite driver on a fresh copy of ``snapshot``."""
    from agentrunner.store.drivers import SQLiteDriver

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "agentrunner.db"
        shutil.copy(snapshot, path)
        driver = SQLiteDriver(str(path))
        try:
            yield driver
        finally:
            await driver.close()


async def replay_timed(snapshot: Path, transactions: list[list[Op]]) -> float:
    """Seconds to commit ``transactions`` one by one through the store's SQLite driver."""
    async with copy_of(snapshot) as driver:
        start = time.perf_counter()
        for ops in transactions:
            await driver.batch(ops)
        return time.perf_counter() - start


async def replay_counted(snapshot: Path, transactions: list[list[Op]]) -> Counter[str]:
    """WAL frames written by ``transactions``, by B-tree: the driver's settings, but no
    checkpoint, so every frame stays in the WAL to be read back."""
    async with copy_of(snapshot) as driver:
        conn = driver._conn
        if driver._checkpointer is not None:  # keep the WAL whole for counting
            await driver._checkpointer.stop()
            driver._checkpointer = None
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        for ops in transactions:
            await driver.batch(ops)
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        owner = dict(conn.execute("SELECT pageno, name FROM dbstat").fetchall())
        wal = Path(f"{driver.path}-wal").read_bytes()
    frames: Counter[str] = Counter()
    offset = WAL_HEADER
    while offset + FRAME_HEADER + page_size <= len(wal):
        (page,) = struct.unpack_from(">I", wal, offset)
        # Page 1 holds the schema and the database header (its size and free-page list).
        frames["page 1 (header)" if page == 1 else owner.get(page, "free pages")] += 1
        offset += FRAME_HEADER + page_size
    return frames


async def after_commits(
    url: str, snapshot: Path, turns: list[list[list[Op]]]
) -> tuple[float, float]:
    """Median seconds of an engine-only turn, alone and right after one recorded turn's
    transactions are committed: the two in turn, once per recorded turn."""
    engine = bench_engine(url)
    tool = bench_tool()

    async def turn() -> float:
        start = time.perf_counter()
        await engine_only_turn(engine, tool)
        return time.perf_counter() - start

    alone: list[float] = []
    after: list[float] = []
    async with copy_of(snapshot) as driver:
        for _ in range(50):  # warm up the engine and its connection
            await turn()
        for transactions in turns:
            alone.append(await turn())
            for ops in transactions:
                await driver.batch(ops)
            after.append(await turn())
    await engine.aclose()
    return statistics.median(alone), statistics.median(after)


async def run(args: argparse.Namespace, url: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = Path(tmp) / "before.db"
        recorded = await record(url, args.turns, snapshot)
        transactions = [ops for turn in recorded for ops in turn]
        seconds = [await replay_timed(snapshot, transactions) for _ in range(args.rounds)]
        by_tree = await replay_counted(snapshot, transactions)
        alone, after = await after_commits(url, snapshot, recorded)
    turns = args.turns
    rows = sum(len(ops) for ops in transactions)
    return {
        "turns": turns,
        "transactions_per_turn": len(transactions) / turns,
        "rows_per_turn": rows / turns,
        "us_per_turn_median": statistics.median(seconds) / turns * 1e6,
        "us_per_turn_min": min(seconds) / turns * 1e6,
        "wal_frames_per_turn": by_tree.total() / turns,
        "engine_turn_us_alone": alone * 1e6,
        "engine_turn_us_after_commits": after * 1e6,
        "frames_per_turn_by_btree": {name: count / turns for name, count in by_tree.most_common()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with mock_provider() as url:
        results = asyncio.run(run(args, url))
    print_table(
        f"A durable turn's writes, replayed ({args.turns} turns, {args.rounds} rounds)",
        ["measure", "per turn"],
        [
            ["transactions", results["transactions_per_turn"]],
            ["rows written", results["rows_per_turn"]],
            ["time, median of rounds (us)", results["us_per_turn_median"]],
            ["time, best round (us)", results["us_per_turn_min"]],
            ["WAL frames (pages written)", results["wal_frames_per_turn"]],
        ],
    )
    alone, after = results["engine_turn_us_alone"], results["engine_turn_us_after_commits"]
    print_table(
        "An engine-only turn, alone and right after a turn's commits (median us)",
        ["engine-only turn", "us"],
        [["alone", alone], ["after the commits", after], ["difference", after - alone]],
    )
    print_table(
        "WAL frames per turn by B-tree",
        ["table or index", "frames"],
        list(results["frames_per_turn_by_btree"].items()),
    )
    write_results("store_writes", results)


if __name__ == "__main__":
    main()
