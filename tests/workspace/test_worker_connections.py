"""Connections are a budget (issue 47 item 2): a worker's pool is sized to its concurrency —
half of it, at least 2 — unless ``[database] pool_size`` says otherwise, so a worker at
concurrency 4 holds at most 4 connections to PostgreSQL (its listener among them) where it
held 8-9, and serves as fast. Counted in ``pg_stat_activity`` while it serves."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

import pytest

from agentrunner.config import load_config
from agentrunner.errors import AgentRunnerError
from agentrunner.runtime.compose import open_workspace
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent


async def _peak_while_serving(
    project: Path, store_url: str, mock: MockProvider, worker: int | bool
) -> tuple[int, int]:
    """The most connections the database had while a worker served 24 runs of 200 ms, and
    how many of them completed."""
    import psycopg

    sampler = await psycopg.AsyncConnection.connect(store_url, autocommit=True)
    # this process's connections only (another process's, not yet gone, are not the worker's),
    # less those it held before the worker's store opened (an earlier test's, left open)
    count = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid() AND client_port = ANY(%(ports)s)"
    )

    async def held() -> int:
        row = await (await sampler.execute(count, {"ports": _own_ports()})).fetchone()
        return row[0] if row else 0

    before = await held()
    workspace = await open_workspace(project, worker=worker)
    peak = 0

    async def sample() -> None:
        nonlocal peak
        while True:
            peak = max(peak, await held() - before)
            await asyncio.sleep(0.02)

    try:
        store = workspace.runner.store
        run_ids = []
        for n in range(24):
            mock.queue(Reply(text=f"answer {n}", delay_s=0.2), model="gpt-mock")
            await store.threads.open(f"t-{n}", f"a{n % 6}")
            run_ids.append((await workspace.runs.queue(f"a{n % 6}", f"t-{n}", "hi")).run_id)
        sampling = asyncio.ensure_future(sample())
        await workspace.worker(concurrency=4).run(until_idle=True)
        sampling.cancel()
        done = [await store.runs.get(run_id) for run_id in run_ids]
        return peak, sum(run is not None and run.status == "completed" for run in done)
    finally:
        await sampler.close()
        await workspace.close()


def _own_ports() -> list[int]:
    """The local ports of this process's TCP sockets (its fds' inodes in /proc/net/tcp*)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if fields[9] in inodes:
                    ports.append(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


@pytest.fixture
def agents(agent: Agent, store_url: str) -> None:
    if not store_url.startswith("postgres"):
        pytest.skip("connections are PostgreSQL's")
    for n in range(6):
        agent(f"a{n}", f"name: a{n}\nmodel: mockai:gpt-mock")


async def test_a_worker_at_concurrency_4_holds_at_most_4_connections(
    agents: None, project: Path, store_url: str, mock: MockProvider
) -> None:
    peak, completed = await _peak_while_serving(project, store_url, mock, 4)
    assert completed == 24
    assert peak <= 4, f"{peak} connections"


async def test_pool_size_in_the_config_wins_and_runs_still_complete(
    agents: None, project: Path, store_url: str, mock: MockProvider
) -> None:
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write("\n[database]\npool_size = 1\n")
    peak, completed = await _peak_while_serving(project, store_url, mock, 4)
    assert completed == 24 and peak <= 2, f"{peak} connections"


def test_a_pool_is_sized_by_the_config_then_the_worker_s_concurrency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agentrunner.toml").write_text("[workers]\nconcurrency = 12\n")
    config = load_config(tmp_path)
    sizes = [config.pool_size(w) for w in (None, False, True, 4, 1, 16)]
    assert sizes == [None, None, 6, 2, 2, 8]
    (tmp_path / "agentrunner.toml").write_text("[database]\npool_size = 3\n")
    assert load_config(tmp_path).pool_size(16) == 3
    for bad in ("0", "-2", '"many"'):
        (tmp_path / "agentrunner.toml").write_text(f"[database]\npool_size = {bad}\n")
        with pytest.raises(AgentRunnerError) as refused:
            load_config(tmp_path)
        assert "database.pool_size" in refused.value.message and refused.value.line == 2


async def test_status_says_what_a_worker_may_hold_and_what_the_database_has(
    agent: Agent, project: Path, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from tests.runner.test_cli_run import cli

    agent("a0")
    workspace = await open_workspace(project, worker=4)
    try:
        serving = workspace.worker(concurrency=4)
        await workspace.runner.store.workers.heartbeat(serving.id, serving.concurrency)
        code, out, _ = await asyncio.to_thread(cli, capsys, "status", "--json")
        _, text, _ = await asyncio.to_thread(cli, capsys, "status")
    finally:
        await workspace.close()
    assert code == 0
    report = json.loads(out)
    [worker] = report["workers"]
    if store_url.startswith("postgres"):
        assert worker["pool_size"] == 2 and "up to 3 connections" in text
        assert report["connections"]["now"] >= 1 and report["connections"]["max"] >= 100
        assert "connection(s) open, of max_connections" in text
    else:  # a file: no pool, no connections to count
        assert worker["pool_size"] is None and report["connections"] is None
        assert "connections" not in text
