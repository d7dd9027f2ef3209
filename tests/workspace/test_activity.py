"""Who is working, for the people following a channel (issue 26): ``agent.working``,
``agent.failed`` and ``agent.idle`` on a channel's SSE stream and in ``post --follow`` / ``dm``,
whichever process serves the runs; a lost run's end. (The feed they are read from:
``test_channel_feed.py``.)"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from agentrunner.core.ids import new_id
from agentrunner.runtime.compose import open_workspace
from agentrunner.store import open_store
from agentrunner.store.channels import ChannelMessage
from agentrunner.testing import Fault, MockProvider, Reply
from tests.runner.conftest import Agent
from tests.server.conftest import ServerThread

AUTH = {"authorization": "Bearer secret-token"}


@pytest.fixture
def worker(team: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A worker in another process, serving two runs at once."""
    with (team / "worker.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentrunner", "worker", "--concurrency", "2"],
            cwd=team,
            env=os.environ.copy(),
            stdout=log,
            stderr=log,
        )
    yield proc
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0, (team / "worker.log").read_text()


def _sse(url: str, until: Any, last_event_id: str | None = None) -> list[dict[str, Any]]:
    """A stream's events (``id``, ``event``, ``data`` parsed) until ``until(events)`` holds."""
    headers = {**AUTH, **({"last-event-id": last_event_id} if last_event_id else {})}
    events: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    with httpx2.stream("GET", url, headers=headers, timeout=30) as stream:
        for line in stream.iter_lines():
            if line:
                name, _, value = line.partition(":")
                current[name] = value.removeprefix(" ")
                continue
            if "data" in current:
                events.append({**current, "data": json.loads(current["data"])})
                if until(events):
                    return events
            current = {}
    raise AssertionError(f"the stream ended: {events}")


def _idle_for(runs: list[str]) -> Any:
    return lambda events: (
        {e["data"]["run_id"] for e in events if e["event"] == "agent.idle"} >= set(runs)
    )


def test_a_channel_stream_shows_two_agents_working_at_once_served_in_another_process(
    team: Path, worker: subprocess.Popen[bytes], mock: MockProvider
) -> None:
    from agentrunner.interfaces.server import create_app

    # Each model call takes 2 s: the worker serves both runs at once meanwhile.
    mock.queue(Reply(text="Ann here.", delay_s=2), model="ann-mock")
    mock.queue(Reply(text="Bob here.", delay_s=2), model="bob-mock")
    api = ServerThread(create_app(team, token="secret-token", worker=False))
    try:
        posted = httpx2.post(
            f"{api.url}/channels/team/messages", headers=AUTH, json={"text": "Who is in?"}
        ).json()
        runs, message = posted["run_ids"], posted["message"]["id"]
        stream = f"{api.url}/channels/team/events"
        ended = _idle_for(runs)
        events = _sse(
            stream,
            lambda got: ended(got) and sum(e["event"] == "channel.message" for e in got) == 3,
        )
        kinds = [(e["event"], e["data"].get("agent_id") or e["data"].get("sender")) for e in events]
        assert kinds[0] == ("channel.message", "you")
        working = {
            e["data"]["agent_id"]: e["data"] for e in events if e["event"] == "agent.working"
        }
        idle = {e["data"]["agent_id"]: e["data"] for e in events if e["event"] == "agent.idle"}
        assert set(working) == set(idle) == {"ann", "bob"}  # a pair each, naming its agent
        for who in ("ann", "bob"):
            assert (
                working[who]["run_id"]
                == idle[who]["run_id"]
                != working["bob" if who == "ann" else "ann"]["run_id"]
            )
            assert working[who] == {
                "agent_id": who,
                "run_id": working[who]["run_id"],
                "thread_id": f"{who}@team",
                "message_id": message,
                "thread": None,
            }
            assert idle[who]["outcome"] == "completed"
        assert {w["run_id"] for w in working.values()} == set(runs)
        order = [k for k, _ in kinds if k.startswith("agent.")]
        assert order[:2] == ["agent.working", "agent.working"]  # both at once
        for who in ("ann", "bob"):  # a plain answer is posted for it once its run is done
            assert kinds.index(("agent.working", who)) < kinds.index(("channel.message", who))
        ids = [e["id"] for e in events]
        assert len(set(ids)) == len(ids)

        # Resumed after the first working: exactly what followed it, no repeat, no gap.
        at = next(i for i, e in enumerate(events) if e["event"] == "agent.working")
        rest = _sse(stream, lambda got: len(got) >= len(events) - at - 1, events[at]["id"])
        assert [(e["id"], e["event"]) for e in rest] == [
            (e["id"], e["event"]) for e in events[at + 1 :]
        ]

        # A failed reply, in a DM with bob: what went wrong, then idle.
        mock.queue(Reply(fault=Fault.http(401)), model="bob-mock")
        dm = httpx2.post(f"{api.url}/dm/bob", headers=AUTH, json={"text": "Still there?"}).json()
        failing = _sse(f"{api.url}/channels/{dm['channel']}/events", _idle_for(dm["run_ids"]))
        said = [
            (e["event"], e["data"].get("outcome") or e["data"].get("error_code")) for e in failing
        ]
        assert said[1:] == [
            ("agent.working", None),
            ("agent.failed", "provider_auth"),
            ("agent.idle", "failed"),
        ]
        failed = failing[2]["data"]
        assert failed["agent_id"] == "bob" and failed["run_id"] == dm["run_ids"][0]
        assert "sk-mock-key" not in json.dumps(failing)  # the provider's key is nowhere
        notice = _sse(f"{api.url}/channels/{dm['channel']}/events", lambda got: len(got) >= 5)
        assert notice[-1]["event"] == "channel.message"
        assert notice[-1]["data"]["content"].startswith("bob could not reply (provider_auth)")
    finally:
        api.stop()


def _cli(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrunner", *args],
        cwd=project,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_post_follow_shows_who_is_working_with_a_worker_elsewhere(
    team: Path, worker: subprocess.Popen[bytes], mock: MockProvider
) -> None:
    mock.queue(Reply(text="Ann here.", delay_s=1), model="ann-mock")
    mock.queue(Reply(fault=Fault.http(400)), model="bob-mock")  # bob's reply fails
    deadline = time.monotonic() + 30
    while "· concurrency 2" not in _cli(team, "status").stdout:  # the worker is up
        assert time.monotonic() < deadline
        time.sleep(0.2)
    done = _cli(team, "post", "team", "Who is in?", "--follow")
    assert done.returncode == 0, done.stderr
    said = done.stderr.splitlines()
    assert said[0].startswith("posted m_") and said[0].endswith("· 2 agent(s) will read it")
    # not a terminal: a line as each starts working, and one for what came of it
    assert sorted(said[1:]) == [
        "ann is working…",
        "ann replied",
        "bob is working…",
        "✗ bob failed (validation)",
    ]
    assert said.index("bob is working…") < said.index("✗ bob failed (validation)")
    assert said.index("ann is working…") < said.index("ann replied")
    replies = sorted(line.split(" ", 1)[1] for line in done.stdout.splitlines())
    assert len(replies) == 2
    assert replies[0].startswith("! bob could not reply (validation)")
    assert replies[1] == "ann: Ann here."


def test_dm_served_here_shows_the_agent_working_and_that_it_replied(
    team: Path, mock: MockProvider
) -> None:
    """No worker: dm serves the reply in its own process; its output is the reply, with a
    line on stderr saying who worked on it and one saying what came of it."""
    mock.queue(Reply(text="Yes?"), model="ann-mock")
    done = _cli(team, "dm", "ann", "Are you there?")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["ann is working…", "ann replied"]
    [line] = done.stdout.splitlines()
    assert line.split(" ", 1)[1] == "ann: Yes?"


def test_post_follow_closes_each_working_line_with_what_came_of_it(
    team: Path, mock: MockProvider
) -> None:
    """Issue 39: "ann is working…" was never followed by what came of it. Two posts, served
    here: a plain answer (posted for it after its run) and a silence by do_nothing; then a
    reply by send_message (posted mid-run) and a failure."""

    def follow(text: str) -> list[str]:
        done = _cli(team, "post", "team", text, "--follow")
        assert done.returncode == 0, done.stderr
        said = done.stderr.splitlines()
        assert said[0].startswith("posted m_")
        for agent in ("ann", "bob"):  # each agent's line, then what came of it
            lines = [line for line in said[1:] if agent in line]
            assert len(lines) == 2 and lines[0] == f"{agent} is working…", said
        return sorted(said[1:])

    mock.queue(Reply(text="Ann here."), model="ann-mock")
    mock.queue(Reply(tool_calls=[("do_nothing", {})]), Reply(text=""), model="bob-mock")
    assert follow("Who is in?") == [
        "ann is working…",
        "ann replied",
        "bob is working…",
        "bob stayed silent",
    ]
    mock.queue(
        Reply(tool_calls=[("send_message", {"text": "On it."})]), Reply(text=""), model="ann-mock"
    )
    mock.queue(Reply(fault=Fault.http(400)), model="bob-mock")
    assert follow("Who takes the launch?") == [
        "ann is working…",
        "ann replied",
        "bob is working…",
        "✗ bob failed (validation)",
    ]


# -- a lost run ---------------------------------------------------------------------------------


async def test_a_lost_runs_channel_hears_it_end_once(
    team: Path, agent: Agent, store_url: str
) -> None:
    """A worker that died mid-run never writes its agent.idle: the lease rules that fail the
    run write its agent.failed and agent.idle in the channel, once though two upkeeps race."""
    agent("cy")
    ws = await open_workspace(team)
    others = [await open_store(store_url) for _ in range(2)]
    try:
        channel = await ws.channels.create("team")
        posted = await ws.channels.post(channel, "you", "hello")
        store = ws.runner.store
        claimed = [await store.mailbox.claim("dead:1", lease_s=-1.0) for _ in posted.run_ids]
        assert {c.id for c in claimed if c} == set(posted.run_ids)
        await store.threads.open("t-cy", "cy")
        queued = await ws.runs.queue("cy", "t-cy", "not in a channel")
        await store.mailbox.claim("dead:1", lease_s=-1.0)
        failed = await asyncio.gather(*(s.mailbox.fail_expired() for s in others))
        assert sorted(failed[0] + failed[1]) == sorted([*posted.run_ids, queued.run_id])
        rows = await store.channels.activity_after(channel.id)
        assert sorted((r.run_id, r.type) for r in rows) == sorted(
            (run, kind) for run in posted.run_ids for kind in ("agent.failed", "agent.idle")
        )
        for row in rows:
            assert row.payload["message_id"] == posted.message.id
            assert row.payload["thread_id"] == f"{row.payload['agent_id']}@team"
            if row.type == "agent.failed":
                assert row.payload["error_code"] == "worker_lost"
                assert "dead:1 stopped renewing its lease" in row.payload["message"]
            else:
                assert row.payload["outcome"] == "failed"
        assert await store.events.list(queued.run_id) == []  # its events are its worker's
    finally:
        for other in others:
            await other.close()
        await ws.close()


def test_on_a_terminal_each_working_agent_has_a_spinner_gone_once_it_is_idle() -> None:
    import io

    from rich.console import Console

    from agentrunner.interfaces.cli.activity import ActivityDisplay

    def shown(display: ActivityDisplay) -> list[str]:
        plain = Console(file=io.StringIO(), width=60, color_system=None)
        plain.print(display._spinners())
        return [line[2:] for line in plain.file.getvalue().splitlines()]  # past the spinner

    screen = Console(file=io.StringIO(), force_terminal=True, width=60, color_system=None)
    piped = Console(file=io.StringIO(), force_terminal=False)
    display = ActivityDisplay(stdout=screen, stderr=piped)  # the conversation's terminal
    try:
        assert display.live is not None and display.live.console is screen
        display.show("agent.working", {"agent_id": "ann", "run_id": "r1"})
        display.show("agent.working", {"agent_id": "bob", "run_id": "r2"})
        assert shown(display) == ["ann is working…", "bob is working…"]
        display.show("agent.failed", {"agent_id": "bob", "run_id": "r2", "error_code": "timeout"})
        display.show("agent.idle", {"agent_id": "bob", "run_id": "r2", "outcome": "failed"})
        assert shown(display) == ["ann is working…"]
        display.show("agent.idle", {"agent_id": "ann", "run_id": "r1", "outcome": "completed"})
        assert shown(display) == []
    finally:
        display.close()
    assert "✗ bob failed (timeout)" in screen.file.getvalue()  # kept, above the spinners
    assert piped.file.getvalue() == ""  # nothing in the pipe


def _message(run_id: str, sender: str, kind: str = "agent") -> ChannelMessage:
    return ChannelMessage("ch_1", new_id("m_"), None, sender, kind, "…", 1, run_id, 1.0)


@pytest.mark.parametrize("terminal", [True, False])
def test_each_working_agent_is_closed_with_what_came_of_it(terminal: bool) -> None:
    """Replied (a message of its run, before or after it ended), stayed silent (ended with
    none, said once the follow is over: a plain answer is posted just after its run ends),
    failed, cancelled — on a terminal above the spinners, in a pipe as lines."""
    import io

    from rich.console import Console

    from agentrunner.interfaces.cli.activity import ActivityDisplay

    screen = Console(file=io.StringIO(), force_terminal=terminal, width=60, color_system=None)
    piped = Console(file=io.StringIO(), force_terminal=False)
    display = ActivityDisplay(stdout=screen, stderr=piped)
    shown = screen if terminal else piped
    runs = {"ann": "r1", "bob": "r2", "cy": "r3", "dee": "r4", "eve": "r5"}

    def said() -> list[str]:
        """The lines printed, past the terminal's cursor codes and the spinners' frames."""
        text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown.file.getvalue())
        return [line for line in text.splitlines() if line and "working" not in line]

    for agent, run_id in runs.items():
        display.show("agent.working", {"agent_id": agent, "run_id": run_id})
    display.message(_message("r1", "ann"))  # send_message, mid-run
    display.show("agent.idle", {"agent_id": "ann", "run_id": "r1", "outcome": "completed"})
    display.show("agent.idle", {"agent_id": "bob", "run_id": "r2", "outcome": "completed"})
    display.show("agent.idle", {"agent_id": "eve", "run_id": "r5", "outcome": "completed"})
    display.message(_message("r5", "eve"))  # a plain answer, posted after its run
    display.show("agent.failed", {"agent_id": "cy", "run_id": "r3", "error_code": "timeout"})
    display.message(_message("r3", "cy", "notice"))  # its notice is no reply
    display.show("agent.idle", {"agent_id": "cy", "run_id": "r3", "outcome": "failed"})
    display.show("agent.idle", {"agent_id": "dee", "run_id": "r4", "outcome": "cancelled"})
    assert said() == ["ann replied", "eve replied", "✗ cy failed (timeout)", "dee was cancelled"]
    display.close()
    assert said()[-1] == "bob stayed silent"
    assert len(said()) == 5  # one line each, no more
    if not terminal:
        working = [line for line in piped.file.getvalue().splitlines() if "working" in line]
        assert working == [f"{agent} is working…" for agent in runs]


def test_a_follow_cut_short_does_not_call_an_unanswered_run_silent() -> None:
    import io

    from rich.console import Console

    from agentrunner.interfaces.cli.activity import ActivityDisplay

    piped = Console(file=io.StringIO(), force_terminal=False)
    display = ActivityDisplay(stdout=piped, stderr=piped)
    display.show("agent.working", {"agent_id": "ann", "run_id": "r1"})
    display.show("agent.idle", {"agent_id": "ann", "run_id": "r1", "outcome": "completed"})
    display.close(settled=False)  # Ctrl-C: its answer may still be on its way
    assert piped.file.getvalue().splitlines() == ["ann is working…"]
