"""Worker processes serving mailboxes: ordering, exclusivity, recovery, draining."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from agentrunner.runtime.compose import open_workspace
from agentrunner.store.mailbox import NewRun
from agentrunner.testing import Fault, MockProvider, Reply
from agentrunner.workspace.workspace import Workspace
from tests.runner.conftest import Agent

AGENTS = [f"a{n}" for n in range(10)]


@pytest.fixture
def fleet(project: Path, agent: Agent) -> Path:
    with (project / "agentrunner.toml").open("a") as config:
        config.write("\n[workers]\nlease_s = 2.0\n")
    for name in AGENTS:
        agent(name)
    return project


def start_worker(
    project: Path, concurrency: int = 2, tag: str = "worker"
) -> subprocess.Popen[bytes]:
    with (project / f"{tag}-{time.monotonic_ns()}.log").open(
        "wb"
    ) as log:  # the child keeps its copy
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentrunner",
                "--debug",
                "worker",
                "--concurrency",
                str(concurrency),
            ],
            cwd=project,
            env={**os.environ, "AGENTRUNNER_DEBUG": "1"},
            stdout=log,
            stderr=log,
        )


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> int:
    proc.send_signal(sig)
    return proc.wait(timeout=60)


async def wait_for(condition: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await condition():
            return
        await asyncio.sleep(0.2)
    raise AssertionError("timed out waiting")


async def test_a_thousand_messages_two_workers(fleet: Path, mock: MockProvider) -> None:
    ws = await open_workspace(fleet)
    try:
        channels = [
            await ws.channels.create(f"ch{n}", members=[name, "you"])
            for n, name in enumerate(AGENTS)
        ]
        workers = [start_worker(fleet), start_worker(fleet)]
        try:
            # The ten channels at once, each one's messages one after another: two posts in
            # flight together have no order until they commit (on PostgreSQL, on separate
            # connections, the later id may commit first), so only posts made in turn have an
            # arrival order to check runs against.
            async def post_in_turn(n: int) -> list[Any]:
                return [
                    await ws.channels.post(channels[n], "you", f"message {i}")
                    for i in range(n, 1000, 10)
                ]

            posted = [
                p for part in await asyncio.gather(*map(post_in_turn, range(10))) for p in part
            ]
            store = ws.runner.store

            async def all_done() -> bool:
                depths = await store.mailbox.depths()
                return not any(d.get("created") or d.get("running") for d in depths.values())

            await wait_for(all_done, 180)
        finally:
            codes = [stop(w) for w in workers]
        assert codes == [0, 0]
        runs = await store.runs.list(limit=5000)
        assert len(runs) == 1000 and all(r.status == "completed" for r in runs)
        triggers = [r.trigger_message_id for r in runs]
        assert sorted(triggers) == sorted(p.message.id for p in posted)  # nothing lost or doubled
        by_agent: dict[str, list[Any]] = defaultdict(list)
        for run in runs:
            by_agent[run.agent_id].append(run)
        assert sorted(by_agent) == AGENTS
        for agent_runs in by_agent.values():
            agent_runs.sort(key=lambda r: r.started_at)
            assert [r.trigger_message_id for r in agent_runs] == sorted(
                r.trigger_message_id for r in agent_runs
            )
            for before, after in itertools.pairwise(agent_runs):
                assert before.completed_at <= after.started_at  # never two running at once
        assert len({r.worker_id for r in runs}) == 2  # both worker processes served runs
    finally:
        await ws.close()


async def test_a_killed_worker_is_recovered_and_the_mailbox_moves_on(
    fleet: Path, mock: MockProvider
) -> None:
    ws = await open_workspace(fleet)
    try:
        channel = await ws.channels.create("ops", members=["a0", "you"])
        mock.queue(Reply(text="too late", delay_s=60), model="gpt-mock")
        first = await ws.channels.post(channel, "you", "this run's worker will die")
        second = await ws.channels.post(channel, "you", "and this one must still be answered")
        store = ws.runner.store
        doomed = start_worker(fleet, concurrency=1)

        async def in_model_call() -> bool:
            # Killed mid-run: claimed, and its model request (the stalled one) in flight.
            run = await store.runs.get(first.run_ids[0])
            return run is not None and run.status == "running" and len(mock.requests) >= 1

        await wait_for(in_model_call, 30)
        stop(doomed, signal.SIGKILL)
        killed_at = time.monotonic()
        rescuer = start_worker(fleet, concurrency=1, tag="rescuer")
        try:

            async def recovered() -> bool:
                run = await store.runs.get(first.run_ids[0])
                return run is not None and run.status == "failed"

            await wait_for(recovered, 30)
            assert time.monotonic() - killed_at < 2.0 + 5.0  # lease + 5 s
            dead = await store.runs.get(first.run_ids[0])
            assert dead is not None and "stopped renewing its lease" in (dead.error_message or "")
            assert dead.error_code == "worker_lost"  # not an internal error to report

            async def moved_on() -> bool:
                run = await store.runs.get(second.run_ids[0])
                return run is not None and run.status == "completed"

            try:
                await wait_for(moved_on, 30)
            except AssertionError:
                late = await store.runs.get(second.run_ids[0])
                raise AssertionError(f"the second run did not complete: {late}") from None
        finally:
            assert stop(rescuer) == 0
    finally:
        await ws.close()


async def test_sigterm_drains_and_leaves_nothing_running(fleet: Path, mock: MockProvider) -> None:
    ws = await open_workspace(fleet)
    try:
        channel = await ws.channels.create("slow", members=["a1", "you"])
        mock.queue(
            Reply(tool_calls=[("send_message", {"text": "finishing"})], delay_s=1.5),
            Reply(text="done"),
        )
        posted = await ws.channels.post(channel, "you", "take your time")
        store = ws.runner.store
        worker = start_worker(fleet, concurrency=1)

        async def running() -> bool:
            run = await store.runs.get(posted.run_ids[0])
            return run is not None and run.status == "running"

        await wait_for(running, 30)
        assert stop(worker) == 0  # SIGTERM: the in-flight run finishes first
        run = await store.runs.get(posted.run_ids[0])
        assert run is not None and run.status == "completed"
        depths = await store.mailbox.depths()
        assert not any(d.get("running") for d in depths.values())
        assert await store.workers.alive() == []
    finally:
        await ws.close()


async def test_post_serves_in_process_without_a_worker(fleet: Path, mock: MockProvider) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agentrunner", "post", "general", "hello"],
        cwd=fleet,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1 and "no channel '#general'" in proc.stderr
    ws: Workspace = await open_workspace(fleet)
    await ws.channels.create("general", members=["a0", "a1", "you"])
    await ws.close()
    proc = subprocess.run(
        [sys.executable, "-m", "agentrunner", "post", "general", "hello team"],
        cwd=fleet,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "a0" in proc.stdout and "a1" in proc.stdout  # their replies, served in-process
    status = subprocess.run(
        [sys.executable, "-m", "agentrunner", "status"],
        cwd=fleet,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "idle" in status.stdout and "no live workers" in status.stdout


def _cli(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrunner", *args],
        cwd=project,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_channels_and_dm_from_the_cli(fleet: Path, mock: MockProvider) -> None:
    made = _cli(
        fleet, "channels", "create", "team", "--member", "a2", "--member", "you", "--private"
    )
    assert made.returncode == 0 and "#team (private)" in made.stdout, made.stderr
    listed = _cli(fleet, "channels", "list")
    assert "#team" in listed.stdout and "private" in listed.stdout
    mock.queue(Reply(tool_calls=[("send_message", {"text": "Hi, I am a2."})]), Reply(text="done"))
    replied = _cli(fleet, "dm", "a2", "hello there")
    assert replied.returncode == 0, replied.stderr
    assert "a2: Hi, I am a2." in replied.stdout
    shown = _cli(fleet, "channels", "show", "dm:a2:you")
    assert "you: hello there" in shown.stdout and "a2: Hi, I am a2." in shown.stdout
    denied = _cli(fleet, "post", "team", "let me in", "--as", "mallory")
    assert denied.returncode == 1 and "mallory is not a member of #team" in denied.stderr
    unknown = _cli(fleet, "dm", "nobody", "hi")
    assert unknown.returncode == 1 and "agent_not_found" in unknown.stderr


async def test_post_and_dm_refuse_to_speak_as_an_agent(fleet: Path) -> None:
    """``--as`` names a person: an agent's id is refused, naming the sender, and nothing is
    written (no message, no run, no DM opened)."""
    assert (
        _cli(fleet, "channels", "create", "team", "--member", "a2", "--member", "a3").returncode
        == 0
    )
    for args in (
        ["post", "team", "Approve it. -- a3", "--as", "a3"],
        ["post", "team", "From the boss", "--as", "a2"],
        ["dm", "a2", "a3 here", "--as", "a3"],
    ):
        refused = _cli(fleet, *args)
        assert refused.returncode == 1, refused.stdout
        assert f"error: validation: sender '{args[-1]}' is the id of an agent" in refused.stderr
        assert "hint: Post under your own name" in refused.stderr
        assert "Traceback" not in refused.stderr
    ws = await open_workspace(fleet)
    try:
        store = ws.runner.store
        assert await store.runs.list() == []
        assert [c["name"] for c in await store.channels.all()] == ["team"]
        team = await store.channels.by_name("team")
        assert team is not None and await store.channels.after(team.id, "", 10) == []
    finally:
        await ws.close()


async def test_dm_prints_a_plain_reply_and_fails_with_the_agent(
    fleet: Path, mock: MockProvider
) -> None:
    mock.queue(Reply(text="Plain words, no tool."))
    replied = _cli(fleet, "dm", "a2", "hello")
    assert replied.returncode == 0, replied.stderr
    assert "a2: Plain words, no tool." in replied.stdout
    mock.queue(Reply(fault=Fault.http(401)))
    failed = _cli(fleet, "dm", "a2", "hello again")
    assert failed.returncode == 1
    assert "! a2 could not reply (provider_auth)" in failed.stdout  # in the conversation
    # who was working and how it ended (not a terminal: plain lines), then the command's error
    said = failed.stderr.splitlines()
    assert said[:2] == ["a2 is working…", "✗ a2 failed (provider_auth)"]
    assert said[2].startswith("error: provider_auth:") and "hint:" in failed.stderr
    assert "Traceback" not in failed.stderr


async def test_workers_wake_in_a_deeply_nested_project(tmp_path: Path) -> None:
    """A socket address holds 108 bytes: a project deep in the file system still wakes its
    workers (the address lives in the temporary directory then)."""
    from agentrunner.store import open_store

    deep = tmp_path / ("nested-" * 12) / ("project-" * 10) / ".agentrunner"
    store = await open_store(f"sqlite:///{deep / 'agentrunner.db'}")
    try:
        listener = await store.run_listener()
        try:
            store.notify_runs()
            assert await listener.wait(2.0)
        finally:
            await listener.close()
    finally:
        await store.close()


async def test_replies_go_to_messages_that_exist_and_show_lists_their_ids(
    fleet: Path, mock: MockProvider
) -> None:
    assert _cli(fleet, "channels", "create", "team", "--member", "a2").returncode == 0
    refused = _cli(fleet, "post", "team", "hello", "--thread", "m_nope")
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: not_found: #team has no message 'm_nope'")
    for n in range(3):
        mock.queue(Reply(text=f"reply {n}"))
        assert _cli(fleet, "post", "team", f"note {n}").returncode == 0
    shown = _cli(fleet, "channels", "show", "team", "--limit", "2")
    lines = shown.stdout.splitlines()
    assert "4 earlier message(s)" in shown.stdout
    last = [line for line in lines if line.startswith("m_")]
    assert len(last) == 2 and last[0].endswith("you: note 2") and last[-1].endswith("reply 2")
    root = last[0].split()[0]
    mock.queue(Reply(text="threaded answer"))
    replied = _cli(fleet, "post", "team", "and then?", "--thread", root)
    assert replied.returncode == 0, replied.stderr
    assert f"(in thread {root})" in _cli(fleet, "channels", "show", "team").stdout


def _interrupted(project: Path, mock: MockProvider, *args: str) -> tuple[int, str, str]:
    """Run a CLI command, press Ctrl-C once the agent's reply is streaming, and wait."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentrunner", *args],
        cwd=project,
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not mock.requests:
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


@pytest.mark.parametrize("command", ["post", "dm"])
async def test_ctrl_c_while_serving_a_reply_cancels_it_with_a_notice(
    fleet: Path, mock: MockProvider, command: str
) -> None:
    assert _cli(fleet, "channels", "create", "team", "--member", "a3").returncode == 0
    mock.queue(Reply(text="word " * 400, chunk_delay_s=0.02))
    args = ["post", "team", "tell me everything", "--follow"] if command == "post" else []
    code, out, err = _interrupted(fleet, mock, *(args or ["dm", "a3", "tell me everything"]))
    assert code == 130, err
    assert "Traceback" not in err and "closed database" not in err
    assert "! a3 stopped before replying" in out  # the person is told, in the conversation
    ws = await open_workspace(fleet)
    try:
        runs = await ws.runner.store.runs.list()
        assert [r.status for r in runs] == ["cancelled"]  # settled now, not by a lease later
        assert await ws.runner.store.workers.alive() == []
        state = await ws.runner.store.agent_states.get("a3")
        assert state.status != "working"
    finally:
        await ws.close()
    mock.queue(Reply(text="back again"))
    again = _cli(fleet, *(args[:3] if command == "post" else ["dm", "a3", "still there?"]))
    assert again.returncode == 0, again.stderr


async def test_what_a_person_mistypes_in_a_conversation_is_caught(
    fleet: Path, mock: MockProvider
) -> None:
    assert (
        _cli(fleet, "channels", "create", "team", "--member", "a2", "--member", "a3").returncode
        == 0
    )
    added = _cli(fleet, "channels", "create", "team", "--member", "a4")
    assert "#team (public) with a2, a3, a4" in added.stdout  # every member, not the new one alone
    for args in (["post", "team", "  "], ["dm", "a2", ""]):
        empty = _cli(fleet, *args)
        assert empty.returncode == 1 and "validation: the message is empty" in empty.stderr
    typo = _cli(fleet, "post", "taem", "hi")
    assert typo.returncode == 1 and "Did you mean '#team'?" in typo.stderr
    ws = await open_workspace(fleet)
    try:
        assert await ws.runner.store.runs.list() == []  # nothing was queued for any of them
    finally:
        await ws.close()
    mock.queue(Reply(fault=Fault.http(503)))
    mock.queue(Reply(text="fine"))
    (fleet / "agents" / "a5.md").write_text(
        "---\nmodel: mockai:x\nfallback: [mockai:gpt-mock]\n---\nHi\n"
    )
    served = _cli(fleet, "run", "a5", "hello")
    assert "mockai:x" in served.stderr and "❌" not in served.stderr  # a model, not an emoji


async def test_a_worker_paused_past_its_lease_cannot_settle_its_run_later(
    fleet: Path, mock: MockProvider
) -> None:
    """A worker stopped (SIGSTOP) mid-run until its lease ran out and another worker failed the
    run: resumed, its settle is refused. The run stays failed with the lease's reason, the late
    reply reaches neither the channel nor the thread, and the worker serves on."""
    ws = await open_workspace(fleet)
    try:
        channel = await ws.channels.create("ops", members=["a0", "you"])
        mock.queue(Reply(text="a late reply", delay_s=0.5), model="gpt-mock")
        first = await ws.channels.post(channel, "you", "this run's worker will pause")
        store = ws.runner.store
        worker = start_worker(fleet, concurrency=1)
        try:

            async def in_model_call() -> bool:
                run = await store.runs.get(first.run_ids[0])
                return run is not None and run.status == "running" and len(mock.requests) >= 1

            await wait_for(in_model_call, 30)
            worker.send_signal(signal.SIGSTOP)
            try:

                async def failed_by_the_lease_rules() -> bool:  # as another worker's upkeep
                    return first.run_ids[0] in await store.mailbox.fail_expired()

                await wait_for(failed_by_the_lease_rules, 30)
            finally:
                worker.send_signal(signal.SIGCONT)
            second = await ws.channels.post(channel, "you", "and this one is answered")

            async def answered() -> bool:
                run = await store.runs.get(second.run_ids[0])
                return run is not None and run.status == "completed"

            await wait_for(answered, 30)
        finally:
            assert stop(worker) == 0
        late = await store.runs.get(first.run_ids[0])
        assert late is not None and late.status == "failed", late
        assert "stopped renewing its lease" in (late.error_message or "")
        said = [(m.sender, m.content) for m in await store.channels.after(channel.id)]
        assert ("a0", "a late reply") not in said
        assert any(c.startswith("a0 could not reply (run_settled)") for s, c in said if s == "a0")
        served = await store.runs.get(second.run_ids[0])
        assert served is not None and served.worker_id == late.worker_id  # the same worker
        thread = [m for _, m, _, _ in await store.messages.page("a0@ops")]
        assert not any("a late reply" in str(m.to_dict()) for m in thread)
    finally:
        await ws.close()


# A worker whose notes tool never returns: killed (kill -9) while the tool call is in flight.
HANGING_WORKER = """
import asyncio
from agentrunner.run.capabilities import builtin
from agentrunner.runtime.compose import open_workspace

real = builtin.notes_tools

def slow_notes(ctx):
    tools = real(ctx)
    for t in tools:
        if t.name == "note_create":
            async def hang(args, call):
                print("TOOL-STARTED", flush=True)
                await asyncio.sleep(3600)
            t.fn = hang
    return tools

builtin.notes_tools = slow_notes

async def main():
    ws = await open_workspace()
    await ws.worker(concurrency=1).run()

asyncio.run(main())
"""


def _unanswered_calls(body: dict[str, Any]) -> list[str]:
    """The ids of tool calls in an OpenAI-style request that no tool message answers."""
    calls = [
        call["id"]
        for message in body.get("messages", [])
        for call in message.get("tool_calls") or []
    ]
    answered = {m.get("tool_call_id") for m in body.get("messages", []) if m["role"] == "tool"}
    return [c for c in calls if c not in answered]


async def test_a_worker_killed_mid_tool_call_is_recovered_and_no_dangling_call_is_sent(
    fleet: Path, agent: Agent, mock: MockProvider
) -> None:
    """kill -9 of a worker while a tool call runs: the lease rules fail the run, the agent's
    next queued run is served on the same thread by another worker, and no request the provider
    gets from then on carries a tool call without its result."""
    agent("a0", "model: mockai:gpt-mock\ncapabilities: [notes]")
    ws = await open_workspace(fleet)
    store = ws.runner.store
    try:

        async def queue(run_id: str, message: str) -> None:
            await store.mailbox.enqueue(
                [NewRun(run_id, "a0", "a0-desk", {"kind": "direct", "message": message})]
            )

        mock.queue(Reply(tool_calls=[("note_create", {"title": "x", "body": "y"})]))
        await queue("run_doomed", "write it down")
        with subprocess.Popen(
            [sys.executable, "-c", HANGING_WORKER],
            cwd=fleet,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=os.environ.copy(),
        ) as doomed:
            try:
                assert doomed.stdout is not None
                line = await asyncio.wait_for(asyncio.to_thread(doomed.stdout.readline), 60)
                assert b"TOOL-STARTED" in line
            finally:
                doomed.send_signal(signal.SIGKILL)
                doomed.wait()
        sent_before = len(mock.requests)
        await queue("run_next", "are you there?")
        rescuer = start_worker(fleet, concurrency=1, tag="rescuer")
        try:

            async def served() -> bool:
                run = await store.runs.get("run_next")
                return run is not None and run.status in ("completed", "failed")

            await wait_for(served, 60)
        finally:
            assert stop(rescuer) == 0
        dead, after = await store.runs.get("run_doomed"), await store.runs.get("run_next")
        assert dead is not None and dead.status == "failed"
        assert "stopped renewing its lease" in (dead.error_message or "")
        assert after is not None and after.status == "completed", after
        later = mock.requests[sent_before:]
        assert later and all(_unanswered_calls(r.body) == [] for r in later)
        assert "not run again" in str(later[-1].body)  # the dangling call was answered
        history = [m for _, m, _, _ in await store.messages.page("a0-desk")]
        assert getattr(history[-1], "text", None) == "Echo: are you there?"
    finally:
        await ws.close()


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
async def test_a_worker_waits_out_a_database_locked_past_its_busy_timeout(
    fleet: Path, mock: MockProvider, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """SQLite's ``database is locked`` (another process writing for longer than the busy
    timeout) is waited out by a worker, as a PostgreSQL restart is: it keeps serving after."""
    import logging
    import sqlite3

    caplog.set_level(logging.WARNING, logger="agentrunner.worker")
    ws = await open_workspace(fleet)
    store = ws.runner.store
    await store.driver.execute("PRAGMA busy_timeout = 50", {})  # give up on a lock quickly
    serving: asyncio.Future[int] | None = None
    try:
        channel = await ws.channels.create("ops", members=["a0", "you"])
        worker = ws.worker(concurrency=1)
        serving = asyncio.ensure_future(worker.run())

        async def completed(run_id: str) -> bool:
            run = await store.runs.get(run_id)
            return run is not None and run.status == "completed"

        first = await ws.channels.post(channel, "you", "before the lock")
        await wait_for(lambda: completed(first.run_ids[0]), 30)
        locker = sqlite3.connect(store_url.removeprefix("sqlite:///"), isolation_level=None)
        locker.execute("BEGIN IMMEDIATE")  # another process's long write
        try:
            store.notify_runs()  # the worker looks for work and finds the database locked

            async def waited_or_died() -> bool:
                return "database unavailable" in caplog.text or serving.done()

            await wait_for(waited_or_died, 30)
            assert not serving.done(), serving.exception()
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        second = await ws.channels.post(channel, "you", "after the lock")
        await wait_for(lambda: completed(second.run_ids[0]), 30)
        worker.stop()
        assert await serving == 2
    finally:
        if serving is not None and not serving.done():
            serving.cancel()
        await ws.close()


async def test_a_run_that_fails_before_it_starts_is_settled_at_once(
    fleet: Path, mock: MockProvider
) -> None:
    """The agent's file went away between the post and the claim: the run fails with the
    reason there and then, not as a lost worker once its lease runs out."""
    ws = await open_workspace(fleet)
    try:
        channel = await ws.channels.create("team", members=["a2", "a3", "you"])
        posted = await ws.channels.post(channel, "you", "hello")
        (fleet / "agents" / "a2.md").unlink()
        mock.queue(Reply(text="a3 here"))
        await asyncio.wait_for(ws.worker(concurrency=2).run(until_idle=True), timeout=20)
        runs = {r.agent_id: r for r in await ws.runner.store.runs.list()}
        assert set(posted.run_ids) == {r.id for r in runs.values()}
        assert (runs["a2"].status, runs["a2"].error_code) == ("failed", "agent_not_found")
        assert runs["a3"].status == "completed"
        notices = await ws.runner.store.channels.after(channel.id, "", 10)
        assert any("a2 could not reply (agent_not_found)" in m.content for m in notices)
    finally:
        await ws.close()
