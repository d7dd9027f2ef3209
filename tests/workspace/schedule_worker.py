"""A worker process on a test's clock (tests/workspace/test_schedules_across_processes.py): what
``agentrunner worker`` runs — the workspace's worker, serving mailboxes and firing the project's
schedules — with the workspace's scheduler given a clock the test moves (a number in a file) and
a short poll. Every fire this process wrote is appended to a file of its own, a JSON line each,
as soon as its pass returns: which process decided which tick.

    python tests/workspace/schedule_worker.py PROJECT CLOCK_FILE FIRES_FILE

The test writes the clock file whole (a new file renamed over the old), so a read sees one
number or the next, never half of one. SIGTERM stops the worker as it stops ``worker``'s.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import IO

from agentrunner.runtime.compose import open_workspace
from agentrunner.store.schedules import Fire
from agentrunner.workspace.schedules import Scheduler


class FileClock:
    """The time the test says it is: the number in ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self) -> float:
        with open(self.path, "rb") as clock:  # a few bytes, in the page cache
            return float(clock.read())


class RecordingScheduler(Scheduler):
    """The workspace's scheduler, which also writes down each fire this process wrote."""

    out: IO[str]

    async def fire_due(self) -> list[Fire]:
        fires = await super().fire_due()
        for fire in fires:
            line = {"schedule": fire.schedule, "tick": fire.tick, "outcome": fire.outcome}
            self.out.write(json.dumps({**line, "run_id": fire.run_id, "missed": fire.missed}))
            self.out.write("\n")
        self.out.flush()
        return fires


async def main(project: Path, clock: Path, fires: Path) -> None:
    stopping = asyncio.Event()  # SIGTERM from the start, even before the worker is made
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    ws = await open_workspace(project)
    try:
        with fires.open("a") as out:
            scheduler = RecordingScheduler(
                ws.runner, ws.channels, clock=FileClock(clock), poll_s=0.01
            )
            scheduler.out = out
            ws.schedules = scheduler
            serving = ws.worker(schedules=True)
            stop = asyncio.create_task(stopping.wait())
            stop.add_done_callback(lambda _: serving.stop())
            await serving.run()
            stop.cancel()
    finally:
        await ws.close()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])))
