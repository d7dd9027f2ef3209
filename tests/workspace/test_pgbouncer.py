"""Behind PgBouncer in transaction pooling mode (issue 47 item 4): with ``[database] pooled =
true`` the pool prepares no statements (a transaction may land on another server connection,
where they are not) and LISTEN goes to ``AGENTRUNNER_DATABASE_LISTEN_URL``, a direct
connection (a pooler hands a session to another client between transactions). Workers serve
every run, a post wakes an idle worker through the pooler's NOTIFY, a worker killed with -9 is
recovered as without the pooler, and a pooled URL without a listen URL is refused naming it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from agentrunner.errors import AgentRunnerError
from agentrunner.runtime.compose import open_workspace
from agentrunner.testing import MockProvider, Reply
from agentrunner.workspace.worker import Worker
from tests.workspace import test_workers
from tests.workspace.test_workers import AGENTS

fleet = test_workers.fleet  # ten agents, a 2 s lease: as the workers' own tests have them


@pytest.fixture
def bounced(
    fleet: Path, store_url: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Path:
    if not store_url.startswith("postgres"):
        pytest.skip("PgBouncer pools PostgreSQL's connections")
    pooler = request.getfixturevalue("pgbouncer")
    monkeypatch.setenv("AGENTRUNNER_DATABASE_URL", pooler)
    monkeypatch.setenv("AGENTRUNNER_DATABASE_LISTEN_URL", store_url)
    with (fleet / "agentrunner.toml").open("a") as toml:
        toml.write("\n[database]\npooled = true\n")
    return fleet


async def test_two_workers_behind_pgbouncer_serve_every_run(
    bounced: Path, mock: MockProvider
) -> None:
    first, second = await open_workspace(bounced), await open_workspace(bounced)
    try:
        store = first.runner.store
        run_ids = []
        for n in range(60):  # every statement many times over: prepared ones would fail
            agent = AGENTS[n % len(AGENTS)]
            mock.queue(Reply(text=f"answer {n}", delay_s=0.05), model="gpt-mock")
            await store.threads.open(f"t-{n}", agent)
            run_ids.append((await first.runs.queue(agent, f"t-{n}", f"question {n}")).run_id)
        await asyncio.gather(
            first.worker(concurrency=4).run(until_idle=True),
            second.worker(concurrency=4).run(until_idle=True),
        )
        runs = [await store.runs.get(run_id) for run_id in run_ids]
        assert [run.status if run else None for run in runs] == ["completed"] * 60
        for n in (0, 29, 59):
            said = await store.messages.page(f"t-{n}", after=0, limit=10)
            assert [m[1].role for m in said] == ["user", "assistant"]
    finally:
        await first.close()
        await second.close()


async def test_a_post_wakes_an_idle_worker_through_the_pooler(
    bounced: Path, mock: MockProvider
) -> None:
    serving, posting = await open_workspace(bounced), await open_workspace(bounced)
    worker = Worker(serving.runner, serving.channels, concurrency=1, idle_poll_s=30.0)
    running = asyncio.ensure_future(worker.run())
    try:
        await asyncio.sleep(1.0)  # idle: waiting on its LISTEN, its timer 30 s away
        await posting.runner.store.threads.open("t-wake", "a0")
        queued = await posting.runs.queue("a0", "t-wake", "are you there?")
        started = time.monotonic()
        while True:
            run = await posting.runner.store.runs.get(queued.run_id)
            if run is not None and run.status == "completed":
                break
            assert time.monotonic() - started < 10, "the NOTIFY never reached the worker"
            await asyncio.sleep(0.05)
        assert time.monotonic() - started < 5  # woken, not found by its 30 s timer
    finally:
        worker.stop()
        await asyncio.wait_for(running, 30)
        await serving.close()
        await posting.close()


async def test_a_killed_worker_behind_pgbouncer_is_recovered(
    bounced: Path, mock: MockProvider
) -> None:
    await test_workers.test_a_killed_worker_is_recovered_and_the_mailbox_moves_on(bounced, mock)


async def test_a_pooled_url_without_a_listen_url_is_refused_naming_it(
    bounced: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTRUNNER_DATABASE_LISTEN_URL")
    with pytest.raises(AgentRunnerError) as refused:
        await open_workspace(bounced)
    assert refused.value.code.value == "validation"
    assert "LISTEN needs a session of its own" in refused.value.message
    assert "AGENTRUNNER_DATABASE_LISTEN_URL" in (refused.value.hint or "")
