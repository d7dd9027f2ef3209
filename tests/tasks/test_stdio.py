"""`agentrunner stdio` driven end to end in a subprocess, as a program in another language would."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import Is, snapshot

from agentrunner.testing import Fault, MockProvider, MockProviderServer, Reply

CONFIG = """\
[defaults]
model = "mockai:gpt-mock"
title_model = "mockai:title-mock"  # titles never take the replies queued for the agent

[providers.mockai]
kind = "openai"
base_url = "{url}"
api_key_env = "MOCK_KEY"
"""
HELPER = """\
---
name: Helper
description: Answers questions.
prompt_template: "Summarise {{input.topic}}."
---
You help.
"""


class Client:
    """Reads stdout on a thread so a test can wait for a message with a timeout."""

    def __init__(self, root: Path) -> None:
        env = {**os.environ, "MOCK_KEY": "sk-mock"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentrunner", "stdio"],
            cwd=root,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))  # every line the server writes is JSON

    def send(self, raw: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        """Kill the server (if it still runs) and close its pipes (a test's ``finally``)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None and not pipe.closed:
                pipe.close()

    def request(self, rid: Any, method: str, /, **params: Any) -> None:
        self.send(json.dumps({"id": rid, "method": method, "params": params}))

    def until(self, done: Any) -> list[dict[str, Any]]:
        """Messages up to and including the first for which ``done`` is true."""
        seen = []
        while True:
            message = self.lines.get(timeout=30)
            seen.append(message)
            if done(message):
                return seen

    def response(self, id: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        seen = self.until(lambda m: m.get("id") == id and "event" not in m)
        return seen[-1], [m for m in seen[:-1] if m.get("id") == id]


@pytest.fixture
def client(tmp_path: Path, mock_server: MockProviderServer, mock: MockProvider) -> Iterator[Client]:
    root = tmp_path / "proj"
    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text(CONFIG.format(url=mock_server.openai_url))
    (root / "agents" / "helper.md").write_text(HELPER)
    client = Client(root)
    ready = client.lines.get(timeout=30)
    assert ready == {"event": "ready", "data": {"protocol": 1}}
    yield client
    client.close()


def test_execute_run_agent_cancel_and_bad_lines(client: Client, mock: MockProvider) -> None:
    client.request(1, "list_agents")
    listed, _ = client.response(1)
    assert [a["id"] for a in listed["result"]] == ["helper"]

    mock.queue(Reply(text="Tides rise."))
    client.request("t1", "execute", agent="helper", input={"topic": "tides"}, cache=True)
    done, _ = client.response("t1")
    assert done["result"]["status"] == "completed" and done["result"]["output"] == "Tides rise."
    client.request("t2", "execute", agent="helper", input={"topic": "tides"}, cache=True)
    again, _ = client.response("t2")
    assert again["result"]["cached"] is True and len(mock.requests) == 1
    mock.queue(Reply(text="Tides rise again."))  # the agent file's own setting: no cache
    client.request("t2b", "execute", agent="helper", input={"topic": "tides"})
    uncached, _ = client.response("t2b")
    assert uncached["result"]["cached"] is False and len(mock.requests) == 2

    client.request("t3", "execute", agent="nobody", input={})
    missing, _ = client.response("t3")
    assert missing["result"]["status"] == "failed"
    assert missing["result"]["error"]["code"] == "agent_not_found"

    mock.queue(Reply(text="Hello there."))
    client.request("r1", "run_agent", agent="helper", message="hi", input={"topic": "x"})
    ran, events = client.response("r1")
    assert ran["result"]["text"] == "Hello there." and ran["result"]["status"] == "completed"
    assert events == snapshot(
        [
            {
                "id": "r1",
                "event": "agent.working",
                "data": {
                    "agent_id": "helper",
                    "run_id": Is(ran["result"]["run_id"]),
                    "thread_id": Is(ran["result"]["thread_id"]),
                },
            },
            {"id": "r1", "event": "step.started", "data": {"step": 1, "model": "mockai:gpt-mock"}},
            {
                "id": "r1",
                "event": "agent.token",
                "data": {"token": "Hell", "model": "mockai:gpt-mock"},
            },
            {
                "id": "r1",
                "event": "agent.token",
                "data": {"token": "o th", "model": "mockai:gpt-mock"},
            },
            {
                "id": "r1",
                "event": "agent.token",
                "data": {"token": "ere.", "model": "mockai:gpt-mock"},
            },
            {
                "id": "r1",
                "event": "cost.updated",
                "data": {
                    "model": "mockai:gpt-mock",
                    "attempt": 1,
                    "outcome": "ok",
                    "input_tokens": 20,
                    "output_tokens": 3,
                    "cache_read_tokens": 0,
                    "cache_write_tokens": 0,
                    "cost_micros": None,
                    "cost_known": False,
                    "estimated": False,
                    "cumulative_cost_micros": 0,
                },
            },
            {
                "id": "r1",
                "event": "agent.message",
                "data": {"text": "Hello there.", "model": "mockai:gpt-mock"},
            },
            {
                "id": "r1",
                "event": "agent.idle",
                "data": {
                    "agent_id": "helper",
                    "run_id": Is(ran["result"]["run_id"]),
                    "thread_id": Is(ran["result"]["thread_id"]),
                    "outcome": "completed",
                },
            },
        ]
    )  # every event as it went out, one JSON line each
    thread = ran["result"]["thread_id"]

    mock.queue(Reply(text="Too slow.", delay_s=20), model="gpt-mock")
    client.request("r2", "run_agent", agent="helper", message="take your time", thread=thread)
    client.until(lambda m: m.get("id") == "r2" and m.get("event") == "step.started")
    client.request("c1", "cancel", id="r2")
    seen = client.until(lambda m: m.get("id") == "r2" and "event" not in m)
    assert seen[-1]["result"]["status"] == "cancelled"
    cancel_reply = next(m for m in seen if m.get("id") == "c1" and "result" in m)
    assert cancel_reply["result"] == {"cancelled": True}

    mock.queue(Reply(text="Never seen.", delay_s=20), model="gpt-mock")
    client.request("t4", "execute", agent="helper", input={"topic": "slow"})
    client.request("c2", "cancel", id="t4")
    seen = client.until(lambda m: m.get("id") == "t4")
    assert seen[-1]["error"]["code"] == "cancelled"

    client.send("this is not json")
    bad, _ = client.response(None)
    assert bad["error"]["code"] == "validation" and "not JSON" in bad["error"]["message"]
    client.request(5, "no_such_method")
    unknown, _ = client.response(5)
    assert "unknown method" in unknown["error"]["message"]
    client.request(6, "run_agent", agent="helper")
    no_message, _ = client.response(6)
    assert "params.message" in no_message["error"]["message"]
    client.request(7, "cancel", id="nothing-running")
    assert client.response(7)[0]["result"] == {"cancelled": False}

    client.request(8, "ping")  # still serving after every bad line
    assert client.response(8)[0]["result"] == {"protocol": 1}
    assert client.proc.stdin is not None
    client.proc.stdin.close()
    assert client.proc.wait(timeout=30) == 0


def test_run_agent_events_carry_what_tools_produce(
    tmp_path: Path, mock_server: MockProviderServer, mock: MockProvider
) -> None:
    root = tmp_path / "proj"
    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text(CONFIG.format(url=mock_server.openai_url))
    (root / "agents" / "pinger.md").write_text("---\nname: P\ncapabilities: [notify]\n---\nHi\n")
    mock.queue(Reply(tool_calls=[("notify_user", {"message": "Done!"})]), Reply(text="ok"))
    client = Client(root)
    try:
        client.lines.get(timeout=30)  # ready
        client.request("r", "run_agent", agent="pinger", message="go")
        result, events = client.response("r")
        assert result["result"]["text"] == "ok"
        assert {"id": "r", "event": "agent.notify", "data": {"message": "Done!"}} in events
    finally:
        client.close()


def test_a_disabled_agent_is_refused_with_agent_disabled(
    client: Client, tmp_path: Path, mock: MockProvider
) -> None:
    (tmp_path / "proj" / "agents" / "off.md").write_text(
        "---\nname: Bo\nenabled: false\n---\nYou help.\n"
    )
    client.request("r", "run_agent", agent="off", message="hi")
    ran, _ = client.response("r")
    assert ran["error"]["code"] == "agent_disabled" and "enabled: true" in ran["error"]["hint"]
    client.request("e", "execute", agent="off", input={})
    task, _ = client.response("e")
    assert task["result"]["error"]["code"] == "agent_disabled"
    assert mock.requests == []


def test_a_failed_run_says_who_failed_and_why_then_goes_idle(
    client: Client, mock: MockProvider
) -> None:
    """A program showing "helper is typing" clears it on agent.idle, whatever the outcome; a
    failure says its code first. Two runs, one failing, each with its own pair."""
    mock.queue(Reply(text="Fine."), Reply(fault=Fault.http(401)), model="gpt-mock")
    client.request("ok", "run_agent", agent="helper", message="hello", input={"topic": "x"})
    done, done_events = client.response("ok")
    client.request("bad", "run_agent", agent="helper", message="again", input={"topic": "y"})
    failed, failed_events = client.response("bad")
    assert failed["error"]["code"] == "provider_auth"
    for events in (done_events, failed_events):
        assert events[0]["event"] == "agent.working" and events[-1]["event"] == "agent.idle"
    run_ids = {events[0]["data"]["run_id"] for events in (done_events, failed_events)}
    assert len(run_ids) == 2 and done["result"]["run_id"] in run_ids
    assert done_events[-1]["data"]["outcome"] == "completed"
    assert [e["event"] for e in failed_events][-2:] == ["agent.failed", "agent.idle"]
    said = failed_events[-2]["data"]
    assert said["error_code"] == "provider_auth" and said["agent_id"] == "helper"
    assert said["message"] == failed["error"]["message"]  # as the run's record has it
    assert "sk-mock" not in json.dumps(failed_events)
    assert failed_events[-1]["data"]["outcome"] == "failed"
