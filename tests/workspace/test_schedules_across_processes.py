"""Schedules fired by four worker processes at once on one database (issue 44's acceptance test).

The processes are what ``agentrunner worker`` runs (tests/workspace/schedule_worker.py), on a fake
clock they share: a number in a file, moved by the test one tick at a time once every fire of
the tick before is written. Each tick of each schedule is decided once, by one process, with its
run queued once — while workers are killed (SIGKILL) in the middle of a tick and a new one joins,
and after an outage in which no worker ran for ten ticks (the ``missed`` rules).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agentrunner.runtime.compose import open_workspace
from agentrunner.store.schedules import Fire
from agentrunner.workspace.workspace import Workspace
from tests.runner.conftest import Agent

T0 = 1_800_000_000.0  # a whole minute
MINUTE = 60.0
TICKS = 200
OUTAGE = 10  # ticks that pass with no worker running
WORKERS = 4
SCRIPT = Path(__file__).with_name("schedule_worker.py")
AGENTS = {"ping": "pinger", "pong": "ponger", "digest": "poster"}  # each schedule's agent
MISSED = {"ping": "skip", "pong": "once", "digest": "skip"}
WAIT_S = 180.0  # the most any one wait may take before the test gives up (a hung process)

SCHEDULES = """
[channels.general]
members = ["poster", "you"]

[schedules.ping]  # on a new thread each time
agent = "pinger"
every = "1m"
message = "ping at {{input.fire_time}}"
missed = "skip"
overlap = "queue"

[schedules.pong]  # cron, in a time zone
agent = "ponger"
cron = "* * * * *"
timezone = "Europe/Paris"
message = "pong at {{input.fire_time}}"
missed = "once"
overlap = "queue"

[schedules.digest]  # a post in #general
agent = "poster"
every = "60s"
channel = "general"
message = "digest at {{input.fire_time}}"
missed = "skip"
overlap = "queue"
"""


def tick(n: int) -> float:
    return T0 + n * MINUTE


class Fleet:
    """The worker processes, the clock they read, and what each says it fired."""

    def __init__(self, project: Path) -> None:
        self.project = project
        self.clock = project / "clock"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.gone: set[str] = set()  # stopped or killed by the test
        self.killed: list[str] = []

    def set_clock(self, now: float) -> None:
        """The time, for every process at once: written whole, then renamed over the old."""
        staged = self.clock.with_suffix(".new")
        staged.write_text(repr(now))
        os.replace(staged, self.clock)

    def start(self) -> str:
        name = f"w{len(self.procs) + 1}"
        with (self.project / f"{name}.log").open("wb") as log:  # the child keeps its copy
            self.procs[name] = subprocess.Popen(
                [sys.executable, str(SCRIPT), str(self.project), str(self.clock), name + ".fires"],
                cwd=self.project,
                stdout=log,
                stderr=log,
            )
        return name

    def live(self) -> list[str]:
        return [name for name in self.procs if name not in self.gone]

    def kill(self, name: str) -> None:
        self.gone.add(name)
        self.killed.append(name)
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait(timeout=60)

    def stop_all(self) -> None:
        """SIGTERM, as a person stops ``worker``: each drains and exits cleanly."""
        names = self.live()
        for name in names:
            self.procs[name].send_signal(signal.SIGTERM)
        for name in names:
            code = self.procs[name].wait(timeout=120)
            self.gone.add(name)
            assert code == 0, f"worker {name} exited with {code}:\n{self.log(name)}"

    def check_alive(self) -> None:
        for name in self.live():
            if self.procs[name].poll() is not None:
                raise AssertionError(f"worker {name} died on its own:\n{self.log(name)}")

    def log(self, name: str) -> str:
        return (self.project / f"{name}.log").read_text(errors="replace")[-4000:]

    def records(self) -> dict[str, list[dict[str, Any]]]:
        """Each process's fires, as it wrote them down once they were committed."""
        found: dict[str, list[dict[str, Any]]] = {}
        for name in self.procs:
            path = self.project / f"{name}.fires"
            lines = path.read_text().splitlines() if path.exists() else []
            found[name] = [json.loads(line) for line in lines]
        return found

    def end(self) -> None:
        for name in self.live():
            self.procs[name].kill()
            self.procs[name].wait(timeout=60)
            self.gone.add(name)


async def until(fleet: Fleet, what: str, done: Callable[[], Awaitable[bool]]) -> None:
    """Poll the store until ``done``; a process that dies on its own fails the test at once,
    and so does a wait past ``WAIT_S`` (something hung: not a measure of speed)."""
    gives_up = time.monotonic() + WAIT_S
    while not await done():
        fleet.check_alive()
        if time.monotonic() > gives_up:
            raise AssertionError(f"no progress: still waiting for {what}")
        await asyncio.sleep(0.02)


async def stop_all(fleet: Fleet, ws: Workspace) -> None:
    """Stop every worker once each is serving (a process still starting would die of the
    signal, not stop)."""

    async def serving() -> bool:
        pids = {int(row["pid"]) for row in await ws.app.store.workers.alive()}
        return all(fleet.procs[name].pid in pids for name in fleet.live())

    await until(fleet, "every worker to be serving", serving)
    fleet.stop_all()


async def fires_written(ws: Workspace) -> int:
    counts = await ws.app.store.schedules.counts()
    return sum(n for outcomes in counts.values() for n in outcomes.values())


async def fires_of(ws: Workspace) -> dict[str, list[Fire]]:
    store = ws.app.store.schedules
    return {
        name: sorted(await store.recent(name, limit=1000), key=lambda f: f.tick) for name in AGENTS
    }


async def test_four_workers_fire_each_tick_once_through_kills_and_an_outage(
    project: Path, agent: Agent
) -> None:
    for name in AGENTS.values():
        agent(name, f"name: {name}\nmodel: test")
    with (project / "agentrunner.toml").open("a") as config:
        config.write(SCHEDULES)
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    kills = {rng.randrange(20, 100): False, rng.randrange(100, 180): True}  # tick: replace it?
    ws = await open_workspace(project)  # #general made before the workers start
    fleet = Fleet(project)
    started = time.monotonic()
    try:
        fleet.set_clock(tick(0))
        for _ in range(WORKERS):
            fleet.start()

        async def seen() -> bool:  # each schedule started from tick 0 by some process
            return len(await ws.app.store.schedules.states()) == len(AGENTS)

        await until(fleet, "the schedules to be seen", seen)
        for n in range(1, TICKS + 1):
            fleet.set_clock(tick(n))
            if n in kills:  # in the middle of the tick's decisions, or about then
                await asyncio.sleep(rng.uniform(0, 0.02))
                fleet.kill(rng.choice(fleet.live()))
                if kills[n]:
                    fleet.start()

            async def decided(n: int = n) -> bool:
                return await fires_written(ws) == len(AGENTS) * n

            await until(fleet, f"tick {n}'s fires", decided)
        served = time.monotonic() - started

        # an outage: no worker runs while ten ticks pass; then four start at once
        await stop_all(fleet, ws)
        fleet.set_clock(tick(TICKS + OUTAGE))
        for _ in range(WORKERS):
            fleet.start()

        async def caught_up() -> bool:  # skip: one fire for the missed, one on time; once: one
            after = sum(2 if MISSED[name] == "skip" else 1 for name in AGENTS)
            return await fires_written(ws) == len(AGENTS) * TICKS + after

        await until(fleet, "the fires after the outage", caught_up)
        await stop_all(fleet, ws)
        print(f"\n{TICKS} ticks in {served:.1f} s; in all {time.monotonic() - started:.1f} s")
        await check(ws, fleet)
    except BaseException as exc:
        exc.add_note(f"kills at ticks {kills} (random seed {seed}); killed {fleet.killed}")
        raise
    finally:
        fleet.end()
        await ws.close()


async def check(ws: Workspace, fleet: Fleet) -> None:
    fires = await fires_of(ws)
    for name, theirs in fires.items():
        # every tick once, queued on time
        on_time = [(f.tick, f.outcome, f.missed) for f in theirs if f.tick <= tick(TICKS)]
        assert on_time == [(tick(n), "queued", 0) for n in range(1, TICKS + 1)], name
        # after the outage: the nine missed skipped and the tenth on time, or one run, the
        # tenth's, standing for them all
        after = [(f.tick, f.outcome, f.missed) for f in theirs if f.tick > tick(TICKS)]
        last = TICKS + OUTAGE
        if MISSED[name] == "skip":
            assert after == [(tick(last - 1), "skipped", 9), (tick(last), "queued", 0)], name
        else:
            assert after == [(tick(last), "queued", 9)], name

    # the runs queued: one per queued fire, each of the schedule's agent, none besides
    runs = {r.id: r for r in await ws.app.store.runs.list(limit=10_000)}
    scheduled = {i: r for i, r in runs.items() if (r.request or {}).get("schedule")}
    queued = [f for theirs in fires.values() for f in theirs if f.outcome == "queued"]
    assert len(queued) == len(AGENTS) * (TICKS + 1)
    assert sorted(scheduled) == sorted(f.run_id for f in queued if f.run_id)
    for fire in queued:
        run = scheduled[fire.run_id or ""]
        assert run.agent_id == AGENTS[fire.schedule]
        assert run.request and run.request["schedule"] == fire.schedule
        assert run.request["background"] is True
    # the digest's posts: one per queued fire, each its run's trigger
    rows = await ws.app.store.driver.fetch_all(
        "SELECT id FROM channel_messages WHERE sender = 'schedule:digest'", {}
    )
    digests = [scheduled[f.run_id or ""] for f in queued if f.schedule == "digest"]
    assert sorted(r["id"] for r in rows) == sorted(r.trigger_message_id or "" for r in digests)

    # which process decided what: no fire twice, each as stored; a process killed between its
    # commit and writing it down leaves at most one look's fires (one per schedule) unnamed
    records = fleet.records()
    named = Counter((r["schedule"], r["tick"]) for rs in records.values() for r in rs)
    assert max(named.values()) == 1, [key for key, n in named.items() if n > 1]
    stored = {(f.schedule, f.tick): f for theirs in fires.values() for f in theirs}
    for record in (r for rs in records.values() for r in rs):
        fire = stored[(record["schedule"], record["tick"])]
        assert (record["outcome"], record["run_id"]) == (fire.outcome, fire.run_id)
    unnamed = len(stored) - sum(named.values())
    assert 0 <= unnamed <= len(AGENTS) * len(fleet.killed), unnamed
    print("fires decided by each process:", {n: len(rs) for n, rs in records.items()})
    print("killed:", fleet.killed, "unnamed fires:", unnamed)
