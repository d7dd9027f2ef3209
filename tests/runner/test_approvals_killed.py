"""Exactly once across kill -9 (issue 41): an HTTP-started run waits to append a line to a file;
``serve`` (with its worker) is killed with SIGKILL — while the run waits, after the approved call
ran and before the run settled, or while the call was running — a new ``serve`` starts,
``agentrunner approve`` decides where nobody had, and the run completes on the new worker with
the line in the file exactly once. On SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from agentrunner.testing import Fault, MockProvider, Reply
from tests.runner.conftest import Agent

SERVER = Path(__file__).with_name("mcp_server.py")


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Serve:
    """``agentrunner serve`` in its own process group (its MCP server's with it), killable."""

    def __init__(self, project: Path) -> None:
        self.port = _port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentrunner", "serve", "--port", str(self.port)],
            cwd=project,
            env=os.environ.copy(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx2.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx2.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(self.proc.stderr.read() if self.proc.stderr else "")
            time.sleep(0.1)

    def get(self, path: str) -> Any:
        return httpx2.get(f"{self.url}{path}", timeout=10).json()

    def post(self, path: str, body: dict[str, Any]) -> httpx2.Response:
        return httpx2.post(f"{self.url}{path}", json=body, timeout=10)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):  # it died by itself
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@pytest.fixture
def serves(project: Path) -> Iterator[list[Serve]]:
    started: list[Serve] = []
    yield started
    for serve in started:
        if serve.proc.poll() is None or (serve.proc.stderr and not serve.proc.stderr.closed):
            serve.kill()


def _until(check: Any, what: str, seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(0.1)
    return found


@pytest.mark.parametrize("kill", ["waiting", "after_the_call", "during_the_call"])
def test_a_killed_server_leaves_an_approved_call_run_exactly_once(
    agent: Agent,
    project: Path,
    mock: MockProvider,
    serves: list[Serve],
    tmp_path: Path,
    kill: str,
) -> None:
    with (project / "agentrunner.toml").open("a") as config:
        config.write("\n[workers]\nlease_s = 2.0\n")
    tool = "append_then_hang" if kill == "during_the_call" else "append_line"
    agent(
        "scribe",
        "model: mockai:gpt-mock\n"
        f'mcp_servers:\n  calc: {{command: "{sys.executable}", args: ["{SERVER}"]}}\n'
        f"approval:\n  tools: [{tool}]",
    )
    target = tmp_path / "lines.txt"
    replies = [Reply(tool_calls=[(tool, {"path": str(target), "line": "hello"})])]
    if kill == "after_the_call":  # the model's next request stalls: the kill comes then
        replies.append(Reply(fault=Fault.stall(120)))
    mock.queue(*replies, Reply(text="appended"))

    first = Serve(project)
    serves.append(first)
    assert first.post("/threads", {"agent_id": "scribe", "id": "t-1"}).status_code == 201
    run_id = first.post("/threads/t-1/runs", {"agent_id": "scribe", "message": "append"}).json()[
        "run_id"
    ]
    _until(lambda: first.get(f"/runs/{run_id}")["status"] == "waiting", "the run to wait")
    [pending] = first.get("/approvals")["approvals"]
    if kill == "waiting":
        first.kill()
    else:  # approved on the first server, which is killed once the call has had its effect
        assert first.post(f"/approvals/{pending['id']}", {"decision": "approve"}).status_code == 200
        if kill == "after_the_call":
            _until(
                lambda: first.get(f"/approvals/{pending['id']}")["execution"] == "finished",
                "the call's result to be journalled",
            )
        else:
            _until(lambda: target.exists() and target.read_text(), "the call's effect")
        first.kill()

    second = Serve(project)
    serves.append(second)
    if kill == "waiting":
        decided = subprocess.run(
            [sys.executable, "-m", "agentrunner", "approve", pending["id"]],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert decided.returncode == 0, decided.stderr
    run = _until(
        lambda: (r := second.get(f"/runs/{run_id}"))["status"] in ("completed", "failed") and r,
        "the run to settle on the new server",
    )
    assert run["status"] == "completed", run
    assert target.read_text() == "hello\n"  # exactly once, whatever died when
    results = [m["content"] for m in mock.requests[-1].body["messages"] if m.get("role") == "tool"]
    if kill == "during_the_call":
        assert results[-1].startswith("interrupted while running")
    else:
        assert results[-1] == f"appended to {target}"
