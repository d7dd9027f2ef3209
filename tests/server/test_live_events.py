"""Event streams woken by commits in another process (issue 29): a run served by a worker
process reaches the run's, its thread's and its channel's SSE streams without waiting for a
poll — the fallback timer is an hour here, and every read has a 30 s deadline — whole and in
order under a burst of tokens, and a stream resumed with ``Last-Event-ID`` gives exactly what
came after it. On both back ends (``store_url``)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from agentrunner.store import changes
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.server.conftest import ServerThread

AUTH = {"authorization": "Bearer secret-token"}
READ_S = 30.0  # a read's deadline: far below the fallback timer's hour


@pytest.fixture
def api_and_worker(
    agent: Agent, project: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ServerThread]:
    """The API in this process, with the fallback timer of its streams an hour long, and a
    worker process serving the runs."""
    from agentrunner.interfaces.server import create_app

    monkeypatch.setattr(changes, "FALLBACK_S", 3600.0)
    agent("talker")
    config = project / "agentrunner.toml"
    config.write_text(config.read_text() + '\n[channels.lobby]\nmembers = ["you", "talker"]\n')
    api = ServerThread(create_app(project, token="secret-token", worker=False))
    worker = subprocess.Popen(
        [sys.executable, "-m", "agentrunner", "worker"],
        cwd=project,
        env=os.environ.copy(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield api
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
        api.stop()


def _events(response: httpx2.Response) -> Iterator[dict[str, Any]]:
    current: dict[str, Any] = {}
    for line in response.iter_lines():
        if not line:
            if "data" in current:
                yield current
            current = {}
            continue
        name, _, value = line.partition(":")
        current[name] = value[1:] if value.startswith(" ") else value


def _until(response: httpx2.Response, event: str, count: int | None = None) -> list[dict[str, Any]]:
    """The stream's events up to the first ``event`` (or the first ``count``)."""
    got = []
    for item in _events(response):
        got.append(item)
        if item.get("event") == event or len(got) == count:
            break
    return got


def _stream(api: ServerThread, path: str, last_event_id: str | None = None) -> Any:
    headers = {**AUTH, **({"last-event-id": last_event_id} if last_event_id else {})}
    return httpx2.stream("GET", f"{api.url}{path}", headers=headers, timeout=READ_S)


def test_a_run_in_a_worker_process_reaches_its_run_and_thread_streams_whole(
    api_and_worker: ServerThread, mock: MockProvider
) -> None:
    api = api_and_worker
    words = [f"w{n}" for n in range(300)]
    mock.queue(Reply(text=" ".join(words), chunk_delay_s=0.001))
    made = httpx2.post(f"{api.url}/threads", headers=AUTH, json={"agent_id": "talker", "id": "t"})
    assert made.status_code == 201
    with _stream(api, "/threads/t/events") as thread_stream:  # waiting before the run begins
        run_id = httpx2.post(
            f"{api.url}/threads/t/runs", headers=AUTH, json={"agent_id": "talker", "message": "go"}
        ).json()["run_id"]
        with _stream(api, f"/runs/{run_id}/events") as first:
            head = _until(first, "run.end", count=20)
        with _stream(api, f"/runs/{run_id}/events", last_event_id=head[-1]["id"]) as second:
            tail = _until(second, "run.end")
        on_thread = _until(thread_stream, "agent.idle")
    assert tail[-1]["event"] == "run.end"
    assert json.loads(tail[-1]["data"])["status"] == "completed"
    run_events = head + tail[:-1]
    # every event once, in order: resumed exactly after the last one seen
    assert [int(e["id"]) for e in run_events] == list(range(1, len(run_events) + 1))
    tokens = [json.loads(e["data"])["token"] for e in run_events if e["event"] == "agent.token"]
    assert "".join(tokens) == " ".join(words)
    assert len(tokens) > 1  # the burst came in more than one commit
    # the thread's stream, waiting before the run was queued, got the same events
    assert [e["id"] for e in on_thread] == [f"{run_id}/{e['id']}" for e in run_events]


def test_a_post_answered_in_a_worker_process_reaches_the_channel_stream(
    api_and_worker: ServerThread, mock: MockProvider
) -> None:
    api = api_and_worker
    mock.queue(Reply(text="hello back"))
    with _stream(api, "/channels/lobby/events") as stream:  # waiting before the post
        posted = httpx2.post(
            f"{api.url}/channels/lobby/messages", headers=AUTH, json={"text": "hi"}
        )
        assert posted.status_code == 201
        seen = _until(stream, "", count=4)
    # the post, the agent at work, and its answer (delivered as a post once its run ended)
    assert [(e["event"], json.loads(e["data"]).get("content")) for e in seen] == [
        ("channel.message", "hi"),
        ("agent.working", None),
        ("agent.idle", None),
        ("channel.message", "hello back"),
    ]
    # resumed after the post: the rest, nothing twice
    with _stream(api, "/channels/lobby/events", last_event_id=seen[0]["id"]) as stream:
        again = _until(stream, "", count=3)
    assert [e["id"] for e in again] == [e["id"] for e in seen[1:]]


def test_served_connections_send_small_writes_at_once() -> None:
    """``serve``'s connections have Nagle's algorithm off: an SSE event written after another
    goes out at once, not after the client's delayed ACK (up to 40 ms)."""
    import asyncio

    from agentrunner.interfaces.cli.serve import _listen

    async def accept() -> int:
        sock = _listen("127.0.0.1", 0)
        accepted: asyncio.Future[asyncio.BaseTransport] = asyncio.Future()

        class Protocol(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                accepted.set_result(transport)

        server = await asyncio.get_running_loop().create_server(Protocol, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            transport = await asyncio.wait_for(accepted, READ_S)
            served = transport.get_extra_info("socket")
            nodelay = int(served.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()
            writer.close()
            return nodelay

    assert asyncio.run(accept()) == 1
