"""[retention] (issue 47): each rule removes exactly the rows it names, of settled runs old
enough, and nothing a run still running or waiting needs; ``gc --dry-run`` counts what ``gc``
then removes; a settled run's token deltas are merged into a row per stream, the same text."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentRunner
from agentrunner.config.retention import Retention
from agentrunner.store import RunLog
from agentrunner.store.costs import today
from agentrunner.testing import MockProvider, Reply
from agentrunner.workspace.retention import apply_retention, pass_held
from tests.runner.conftest import Agent

DAY = 86_400.0
TABLES = {
    "runs": "id",
    "run_steps": "run_id",
    "run_messages": "run_id",
    "events": "run_id",
    "costs": "run_id",
}


async def rows(runner: AgentRunner) -> dict[str, Counter[str]]:
    """Each table's rows per run; the thread messages and day totals as a whole."""
    out: dict[str, Counter[str]] = {}
    for table, column in TABLES.items():
        found = await runner.store.driver.fetch_all(f"SELECT {column} AS run FROM {table}", {})
        out[table] = Counter(str(row["run"]) for row in found)
    for table in ("messages", "cost_totals", "threads"):
        found = await runner.store.driver.fetch_all(f"SELECT COUNT(*) AS n FROM {table}", {})
        out[table] = Counter({"all": int(found[0]["n"])})
    return out


async def age(runner: AgentRunner, run_id: str, days: float) -> None:
    """Run ``run_id`` made and settled ``days`` ago (its cost rows on that day)."""
    seconds = days * DAY
    await runner.store.driver.execute(
        f"UPDATE runs SET created_at = created_at - {seconds}, "
        f"completed_at = completed_at - {seconds} WHERE id = '{run_id}'",
        {},
    )
    await runner.store.driver.execute(
        f"UPDATE costs SET day = '{today(time.time() - seconds)}', "
        f"created_at = created_at - {seconds} WHERE run_id = '{run_id}'",
        {},
    )


async def turn(runner: AgentRunner, mock: MockProvider, thread: str, text: str) -> str:
    mock.queue(Reply(text=text))
    return (await runner.run_agent("helper", thread, text)).run_id


async def history(runner: AgentRunner, mock: MockProvider) -> dict[str, str]:
    """Runs of every age and state: settled 40, 10, 5 and 1 days ago on two threads, the newest
    of a thread 40 days old, a parent settled 40 days ago whose delegation still runs, a run
    still running that began 40 days ago and one that has waited for a person since then."""
    runs = {
        "old_a": await turn(runner, mock, "a", "first on a"),
        "old_b": await turn(runner, mock, "b", "first on b"),
        "last_b": await turn(runner, mock, "b", "last on b"),
        "mid_a": await turn(runner, mock, "a", "second on a"),
        "recent_a": await turn(runner, mock, "a", "third on a"),
        "new_a": await turn(runner, mock, "a", "fourth on a"),
        "parent": await turn(runner, mock, "c", "parent on c"),
        "after_parent": await turn(runner, mock, "c", "after it on c"),
    }
    for key, days in (
        ("old_a", 40),
        ("old_b", 41),
        ("last_b", 40),
        ("mid_a", 10),
        ("recent_a", 5),
        ("new_a", 1),
        ("parent", 40),
        ("after_parent", 2),
    ):
        await age(runner, runs[key], days)
    store = runner.store
    runs["child"], runs["running"] = "run_child_still_running", "run_running_40_days"
    runs["waiting"] = "run_waiting_40_days"
    await store.batch(
        [
            store.runs.insert_op(
                run_id=runs["child"],
                agent_id="helper",
                thread_id=None,
                status="running",
                parent_run_id=runs["parent"],
                depth=1,
            ),
            store.runs.insert_op(
                run_id=runs["running"], agent_id="helper", thread_id="d", status="running"
            ),
            store.runs.insert_op(
                run_id=runs["waiting"], agent_id="helper", thread_id="f", status="waiting"
            ),
        ]
    )
    for run_id in (runs["child"], runs["running"], runs["waiting"]):
        log = RunLog(store, run_id, "helper")
        log.message("user_message", "still going")
        log.emit("agent.token", {"token": "still ", "model": "x:m"})
        await log.flush()
        log.emit("agent.token", {"token": "going", "model": "x:m"})
        await log.flush()
        await age(runner, run_id, 40)
    return runs


@pytest.mark.parametrize(
    ("rules", "gone"),
    [
        # (rule, the runs whose rows of each table go: {table: runs})
        (
            {"runs_days": 30},
            {
                "runs": {"old_a", "old_b"},
                "run_steps": {"old_a", "old_b"},
                "run_messages": {"old_a", "old_b"},
                "events": {"old_a", "old_b"},
            },
        ),
        ({"events_days": 7}, {"events": {"old_a", "old_b", "last_b", "parent", "mid_a"}}),
        (
            {"run_messages_days": 3},
            {"run_messages": {"old_a", "old_b", "last_b", "parent", "mid_a", "recent_a"}},
        ),
        (
            {"runs_days": 30, "events_days": 7, "run_messages_days": 7},
            {
                "runs": {"old_a", "old_b"},
                "run_steps": {"old_a", "old_b"},
                "run_messages": {"old_a", "old_b", "last_b", "parent", "mid_a"},
                "events": {"old_a", "old_b", "last_b", "parent", "mid_a"},
            },
        ),
        ({"costs_days": 7}, {"costs": {"old_a", "old_b", "last_b", "parent", "mid_a"}}),
    ],
    ids=["runs", "events", "run_messages", "all", "costs"],
)
async def test_a_rule_removes_exactly_what_it_names(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    rules: dict[str, float],
    gone: dict[str, set[str]],
) -> None:
    agent("helper")
    runner: AgentRunner = await open_runner()
    runs = await history(runner, mock)
    before = await rows(runner)
    retention = Retention(**rules, compact_token_deltas=False)
    counted = await apply_retention(runner.store, retention, dry_run=True)
    assert await rows(runner) == before  # a dry run removes nothing
    async with pass_held(runner.store, "test", hold_s=60.0) as held:
        assert held == "test"
        removed = await apply_retention(runner.store, retention)
    assert removed.to_dict() == counted.to_dict() and removed.done
    after = await rows(runner)
    for table in TABLES:
        named = {run_id: key for key, run_id in runs.items()}
        lost = {named[run] for run in before[table] if after[table][run] != before[table][run]}
        assert lost == gone.get(table, set()), table
        assert all(not after[table][runs[key]] for key in gone.get(table, set())), table
    # what each rule said it removed is what went
    went = {table: sum(before[table].values()) - sum(after[table].values()) for table in TABLES}
    said: Counter[str] = Counter()
    for kinds in removed.rows.values():
        said.update(kinds)
    assert went["runs"] == said["runs"] and went["events"] == said["events"]
    assert went["run_messages"] == said["run_messages"] and went["run_steps"] == said["steps"]
    assert went["costs"] == said["costs"] and removed.total == sum(went.values())
    # never a rule's: threads and their messages, the day totals reports read
    for table in ("messages", "cost_totals", "threads"):
        assert after[table] == before[table]
    # again: nothing more to do, and the runs still running are whole
    assert (await apply_retention(runner.store, retention)).total == 0
    for key in ("child", "running", "waiting", "new_a"):
        assert all(after[t][runs[key]] == before[t][runs[key]] for t in TABLES)


async def test_what_a_run_still_running_needs_stays(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    """Everything at 0 days: the runs still running keep all they have, the parent its child
    waits on stays, and each thread's newest completed run stays (its transcript's start)."""
    agent("helper")
    runner: AgentRunner = await open_runner()
    runs = await history(runner, mock)
    everything = Retention(0, 0, 0, 0, 0)
    await apply_retention(runner.store, everything)
    left = await rows(runner)
    assert set(left["runs"]) == {
        runs[key]
        for key in ("child", "running", "waiting", "parent", "last_b", "new_a", "after_parent")
    }
    for key in ("child", "running", "waiting"):
        assert left["events"][runs[key]] == 2 and left["run_messages"][runs[key]] == 1
    assert all(
        left[t][runs[k]] == 0 for t in ("events", "run_messages") for k in ("last_b", "new_a")
    )
    assert not left["costs"]
    # the channel agent's place in its thread is still found from the kept run
    record = await runner.store.runs.get(runs["new_a"])
    assert record is not None and record.status == "completed"


async def test_token_deltas_are_merged_into_a_row_per_stream(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    """A settled run's deltas, written in many rows while it streamed, become one row per
    stream with the same text; streams apart (another event between, another model) stay
    apart, and a run settled less than a minute ago is left for later."""
    agent("helper")
    runner: AgentRunner = await open_runner()
    store = runner.store
    texts = {
        "run_one": ["It ", "is ", "cold ", "in ", "Oslo."],
        "run_two": ["Warm ", "in ", "Rome."],
    }
    for run_id, parts in texts.items():
        await store.batch(
            [
                store.runs.insert_op(
                    run_id=run_id, agent_id="helper", thread_id=None, status="running"
                )
            ]
        )
        log = RunLog(store, run_id, "helper")
        for n, part in enumerate(parts):
            log.emit(
                "agent.thinking" if n == 0 else "agent.token",
                {"token": part, "model": "x:m"} if n else {"text": part, "model": "x:m"},
            )
            await log.flush()  # a row each: as a slow stream is written
        log.emit("agent.tool_call", {"call_id": "c1", "name": "f", "input": {}, "model": "x:m"})
        log.emit("agent.token", {"token": "After ", "model": "x:m"})
        await log.flush()
        log.emit("agent.token", {"token": "the tool.", "model": "x:m"})
        await log.flush()
        log.emit("agent.token", {"token": " Other model.", "model": "x:other"})
        await log.flush()
        await store.batch(
            [store.runs.finish_op(run_id, status="completed", stop_reason="end_turn")]
        )
    await age(runner, "run_one", 1 / 1440)  # settled two minutes ago, the other just now

    def text(events: list[Any]) -> list[tuple[str, str]]:
        return [
            (e.type, e.payload.get("token") or e.payload.get("text") or e.payload.get("name"))
            for e in events
        ]

    before = {run_id: await store.events.list(run_id) for run_id in texts}
    dry = await apply_retention(store, Retention(), dry_run=True)
    removed = await apply_retention(store, Retention())
    assert dry.to_dict() == removed.to_dict()
    assert removed.rows == {"compaction": {"merged": 3 + 1}}
    merged = await store.events.list("run_one")
    assert text(merged) == [
        ("agent.thinking", "It "),
        ("agent.token", "is cold in Oslo."),
        ("agent.tool_call", "f"),
        ("agent.token", "After the tool."),
        ("agent.token", " Other model."),
    ]
    assert len(before["run_one"]) == 9 and len(merged) == 5
    assert "".join(t for kind, t in text(before["run_one"]) if kind == "agent.token") == "".join(
        t for kind, t in text(merged) if kind == "agent.token"
    )
    assert await store.events.list("run_two") == before["run_two"]  # settled just now
    later = await apply_retention(store, Retention(), now=time.time() + 120)
    assert later.rows == {"compaction": {"merged": 1 + 1}}
    assert (await apply_retention(store, Retention(), now=time.time() + 120)).total == 0


async def test_one_process_applies_the_rules_at_a_time(agent: Agent, open_runner: Any) -> None:
    agent("helper")
    runner: AgentRunner = await open_runner()
    store = runner.store
    assert await store.retention.claim("worker-1", 60.0)
    assert not await store.retention.claim("worker-2", 60.0)
    assert await store.retention.claim("worker-1", 60.0)  # its own, renewed
    async with pass_held(store, "worker-2", hold_s=60.0) as held:
        assert held is None  # not its turn: skipped, not waited for
    await store.retention.release("worker-1")
    async with pass_held(store, "worker-2", hold_s=0.5) as held:
        assert held == "worker-2"
    await asyncio.sleep(0.6)  # past the hold, which nobody released
    assert await store.retention.claim("worker-3", 60.0)  # a holder that died loses it


def new_project(tmp_path: Path) -> tuple[Path, Callable[..., subprocess.CompletedProcess[str]]]:
    """A project from ``agentrunner init p --model test``, on its own SQLite file; and the CLI
    run in it, as a person runs it."""
    env = {**os.environ, "AGENTRUNNER_DATABASE_URL": ""}

    def cli(*args: str, cwd: Path = tmp_path / "p") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agentrunner", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )

    made = cli("init", "p", "--model", "test", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    return tmp_path / "p", cli


def test_gc_from_the_command_line(tmp_path: Path) -> None:
    """As a person runs it: a dry run counts, gc removes the same, a second gc has nothing;
    a wrong rule is refused with where it is written and what it takes."""
    _, cli = new_project(tmp_path)
    for question in ("What is the weather in Oslo?", "And in Rome?"):
        assert cli("run", "assistant", question).returncode == 0
    config = tmp_path / "p" / "agentrunner.toml"
    config.write_text(config.read_text() + "\n[retention]\nevents_days = 0\n")
    dry = cli("gc", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would remove" in dry.stdout and "(--dry-run)" in dry.stdout
    counted = int(dry.stdout.split("would remove ")[1].split()[0].replace(",", ""))
    done = cli("gc", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["total"] == counted > 0 and report["rules"]["events"]["events"] == counted
    assert "nothing to remove" in cli("gc").stdout
    config.write_text(config.read_text().replace("events_days = 0", 'events_days = "30d"'))
    wrong = cli("gc")
    assert wrong.returncode == 1 and "Traceback" not in wrong.stderr
    assert "retention.events_days must be a number of days" in wrong.stderr
    assert "agentrunner.toml:" in wrong.stderr and "hint:" in wrong.stderr


async def test_a_worker_applies_the_rules_as_it_serves(
    project: Path, agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    """A worker applies [retention] between its runs, and a run queued meanwhile is served."""
    from agentrunner.runtime.compose import open_workspace
    from agentrunner.workspace.worker import Worker

    config = project / "agentrunner.toml"
    config.write_text(config.read_text() + "\n[retention]\nevents_days = 2\n")
    agent("helper")
    agent("other")
    runner: AgentRunner = await open_runner()
    runs = await history(runner, mock)
    ws = await open_workspace(project)
    try:
        worker = Worker(ws.runner, ws.channels, concurrency=1, retention_every_s=0.05)
        serving = asyncio.ensure_future(worker.run())
        try:
            deadline = time.monotonic() + 20
            while (await rows(runner))["events"][runs["mid_a"]] and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            left = await rows(runner)
            assert not left["events"][runs["mid_a"]] and not left["events"][runs["old_a"]]
            assert left["events"][runs["new_a"]] and left["events"][runs["running"]] == 2
            mock.queue(Reply(text="served meanwhile"))
            # (another agent's: helper has runs "still running", and an agent runs one at a time)
            await runner.store.threads.open("e", "other")
            queued = (await ws.runs.queue("other", "e", "and now?")).run_id
            while time.monotonic() < deadline:
                run = await runner.store.runs.get(queued)
                if run is not None and run.status == "completed":
                    break
                await asyncio.sleep(0.05)
            assert run is not None and run.status == "completed"
        finally:
            worker.stop()
            await asyncio.wait_for(serving, 20)
    finally:
        await ws.close()


def test_gc_stopped_by_ctrl_c_goes_on_from_where_it_stopped(tmp_path: Path) -> None:
    """Ctrl-C mid-way: what was removed stays removed, said so, exit 130; the next gc removes
    the rest, and the two removed together what the dry run before them counted."""
    import signal
    import sqlite3

    project, cli = new_project(tmp_path)
    env = {**os.environ, "AGENTRUNNER_DATABASE_URL": ""}
    assert cli("run", "assistant", "hello").returncode == 0  # the store, made and migrated
    database = project / ".agentrunner" / "agentrunner.db"
    # (closed, not only committed: one left to the collector warns in whichever test it is)
    with contextlib.closing(sqlite3.connect(database)) as conn, conn:  # 20,000 runs, 10 events
        settled = time.time() - 10 * DAY
        conn.executemany(
            "INSERT INTO runs (id, agent_id, status, created_at, completed_at, depth) "
            "VALUES (?, 'assistant', 'completed', ?, ?, 0)",
            [(f"run_old{n:06}", settled + n, settled + n) for n in range(20_000)],
        )
        conn.executemany(
            "INSERT INTO events (run_id, seq, type, payload, created_at) VALUES (?, ?, ?, ?, ?)",
            [
                (f"run_old{n:06}", seq, "agent.message", '{"text": "old"}', settled + n)
                for n in range(20_000)
                for seq in range(1, 11)
            ],
        )
    config = project / "agentrunner.toml"
    config.write_text(config.read_text() + "\n[retention]\nevents_days = 1\n")
    counted = json.loads(cli("gc", "--dry-run", "--json").stdout)["total"]
    assert counted == 200_000
    gc = subprocess.Popen(
        [sys.executable, "-m", "agentrunner", "gc", "--json"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    with contextlib.closing(sqlite3.connect(database, timeout=30)) as conn:  # a batch committed
        while time.monotonic() < deadline:
            row = conn.execute("SELECT 1 FROM retention_state WHERE rule = 'events'").fetchone()
            if row:
                break
            time.sleep(0.01)
    gc.send_signal(signal.SIGINT)
    out, said = gc.communicate(timeout=60)
    assert gc.returncode == 130, (out, said)
    assert "cancelled after removing" in said and "they stay removed" in said
    assert "Traceback" not in said
    left = json.loads(cli("gc", "--dry-run", "--json").stdout)["total"]
    assert 0 < left < counted
    rest = json.loads(cli("gc", "--json").stdout)
    assert rest["total"] == left and rest["done"]
    with contextlib.closing(sqlite3.connect(database)) as conn:
        gone = conn.execute("SELECT COUNT(*) FROM events WHERE run_id LIKE 'run_old%'").fetchone()
        pass_row = conn.execute(
            "SELECT expires_at FROM retention_state WHERE rule = 'pass'"
        ).fetchone()
    assert gone == (0,) and pass_row == (0.0,)  # all gone; the pass let go, not left held


async def test_a_kept_newest_run_goes_once_its_thread_moves_on(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    """A newcomer's find: the run kept as its thread's newest was walked past and never looked
    at again, so it stayed, with all its rows, after newer runs came on its thread."""
    agent("helper")
    runner: AgentRunner = await open_runner()
    first = await turn(runner, mock, "g", "first on g")
    await age(runner, first, 40)
    rules = Retention(runs_days=30, compact_token_deltas=False)
    assert (await apply_retention(runner.store, rules)).total == 0  # the newest: kept
    second = await turn(runner, mock, "g", "second on g")
    await age(runner, second, 35)
    counted = await apply_retention(runner.store, rules, dry_run=True)
    removed = await apply_retention(runner.store, rules)
    assert removed.to_dict() == counted.to_dict()
    assert removed.rows["runs"]["runs"] == 1 and removed.done
    assert await runner.store.runs.get(first) is None
    assert await runner.store.runs.get(second) is not None  # the newest now
    assert (await apply_retention(runner.store, rules)).total == 0


async def test_a_run_says_what_the_rules_removed_of_it(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    """A run whose events and run messages went says so (``removed``): its record, the API's
    view of it, and a replay, which was refused as having "never reached a model"."""
    from agentrunner.errors import AgentRunnerError

    agent("helper")
    runner: AgentRunner = await open_runner()
    old = await turn(runner, mock, "h", "an old question")
    kept = await turn(runner, mock, "h", "a new question")
    await age(runner, old, 10)
    await apply_retention(runner.store, Retention(events_days=5, run_messages_days=5))
    record = await runner.store.runs.get(old)
    assert record is not None and record.removed == ["events", "run_messages"]
    assert record.to_dict()["removed"] == ["events", "run_messages"]
    untouched = await runner.store.runs.get(kept)
    assert untouched is not None and untouched.removed == []
    assert "removed" not in untouched.to_dict()
    from agentrunner.run.replay import plan_replay

    with pytest.raises(AgentRunnerError) as refused:
        await plan_replay(runner.store, runner.engine.models, old)
    assert "the [retention] rules removed its run messages" in refused.value.message
    assert "threads fork" in (refused.value.hint or "")


@pytest.mark.parametrize("value", ["nan", "inf", "-1", '"30d"', "true"])
def test_a_rule_takes_a_finite_number_of_days(tmp_path: Path, value: str) -> None:
    from agentrunner.config import load_config
    from agentrunner.errors import AgentRunnerError

    (tmp_path / "agentrunner.toml").write_text(f"[retention]\nevents_days = {value}\n")
    with pytest.raises(AgentRunnerError) as refused:
        load_config(tmp_path, env={})
    assert "retention.events_days must be a number of days, 0 or more" in refused.value.message
    assert refused.value.hint and "events_days = 30" in refused.value.hint
