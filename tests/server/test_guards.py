"""What the server refuses before a route runs: bodies past the limit however they are sent,
Host names a web page could rebind, wrong tokens and methods, and connections that never finish
their request headers."""

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

from agentrunner.testing import MockProvider
from tests.runner.conftest import Agent

AUTH = {"authorization": "Bearer secret-token"}
JSON = {"content-type": "application/json"}


def _chunks(body: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    """A body sent with Transfer-Encoding: chunked, so there is no Content-Length to check."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


def _chat(text: str) -> bytes:
    import json

    return json.dumps({"model": "helper", "messages": [{"role": "user", "content": text}]}).encode()


def test_a_chunked_body_past_the_limit_is_refused_as_it_arrives(
    agent: Agent, server: Any, mock: MockProvider
) -> None:
    agent("helper")
    srv = server()
    small = httpx2.post(
        f"{srv.url}/v1/chat/completions",
        headers={**AUTH, **JSON},
        content=_chunks(_chat("hello")),
    )
    assert small.status_code == 200, small.text
    sent_before = len(mock.requests)
    huge = httpx2.post(
        f"{srv.url}/v1/chat/completions",
        headers={**AUTH, **JSON},
        content=_chunks(_chat("a" * 2_000_000)),
        timeout=60,
    )
    assert huge.status_code == 413, huge.text[:300]
    error = huge.json()["error"]
    assert error["code"] == "validation" and "1000000 bytes" in error["message"]
    assert len(mock.requests) == sent_before  # nothing reached the provider
    threads = httpx2.get(f"{srv.url}/threads", headers=AUTH).json()["data"]
    assert len(threads) == 1  # the small chat's; the huge one stored nothing
    # Content-Length past the limit is refused too, and the same way.
    declared = httpx2.post(f"{srv.url}/threads", headers={**AUTH, **JSON}, content=b"x" * 1_000_001)
    assert declared.status_code == 413 and declared.json()["error"]["code"] == "validation"


def test_each_field_a_model_receives_is_bounded(agent: Agent, server: Any) -> None:
    agent("helper")
    srv = server()
    chat = f"{srv.url}/v1/chat/completions"
    fits = httpx2.post(
        chat, headers=AUTH, json={"model": "helper", "messages": [{"role": "user", "content": "a"}]}
    )
    assert fits.status_code == 200
    long = "a" * 200_001  # well under the body limit, over the field's
    for content in (long, [{"type": "text", "text": long}]):
        refused = httpx2.post(
            chat,
            headers=AUTH,
            json={"model": "helper", "messages": [{"role": "user", "content": content}]},
        )
        assert refused.status_code == 422, refused.text[:300]
        assert refused.json()["error"]["code"] == "validation"
        assert "messages.0.content" in refused.json()["error"]["message"]
    run = httpx2.post(
        f"{srv.url}/threads/t/runs",
        headers=AUTH,
        json={"agent_id": "helper", "message": "hi", "input": {"notes": long}},
    )
    assert run.status_code == 422 and "input" in run.json()["error"]["message"]


def test_without_a_token_only_loopback_and_configured_names_are_accepted_as_host(
    agent: Agent, server: Any, project: Path
) -> None:
    agent("helper")
    with (project / "agentrunner.toml").open("a") as config:
        config.write('\n[server]\nallowed_hosts = ["Agents.Internal"]\n')
    srv = server(token=None)
    for host in (
        "localhost",
        "LOCALHOST:8765",
        "127.0.0.1",
        "127.0.0.1:1",
        "[::1]",
        "[::1]:8765",
        "agents.internal:8765",
    ):
        ok = httpx2.get(f"{srv.url}/agents", headers={"host": host})
        assert ok.status_code == 200, (host, ok.text)
    for host in (
        "evil.example",
        "evil.example:8765",
        "localhost.evil.example",
        "127.0.0.1.nip.io",
        "127.0.0.2",
        "[::2]",
        "agents.internal.evil.example",
    ):
        refused = httpx2.get(f"{srv.url}/agents", headers={"host": host})
        assert refused.status_code == 403, host
        error = refused.json()["error"]
        assert error["code"] == "unauthorized" and repr(host.lower()) in error["message"]
        assert "allowed_hosts" in error["hint"] and "AGENTRUNNER_API_TOKEN" in error["hint"]
    # A run cannot be started either (the point of DNS rebinding).
    started = httpx2.post(
        f"{srv.url}/threads/t/runs",
        headers={"host": "evil.example"},
        json={"agent_id": "helper", "message": "hi"},
    )
    assert started.status_code == 403


def test_with_a_token_any_host_is_accepted_and_the_token_decides(agent: Agent, server: Any) -> None:
    agent("helper")
    srv = server()
    with_token = httpx2.get(f"{srv.url}/agents", headers={**AUTH, "host": "api.example"})
    assert with_token.status_code == 200
    without = httpx2.get(f"{srv.url}/agents", headers={"host": "api.example"})
    assert without.status_code == 401


def test_a_missing_or_wrong_token_is_unauthorized(agent: Agent, server: Any) -> None:
    agent("helper")
    srv = server()
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": "secret-token"}):
        denied = httpx2.get(f"{srv.url}/agents", headers=headers)
        assert denied.status_code == 401
        error = denied.json()["error"]
        assert error["code"] == "unauthorized" and "Authorization: Bearer" in error["hint"]
    assert httpx2.get(f"{srv.url}/agents", headers=AUTH).status_code == 200


def test_a_wrong_method_says_which_methods_are_allowed(agent: Agent, server: Any) -> None:
    agent("helper")
    srv = server()
    threads = httpx2.delete(f"{srv.url}/threads", headers=AUTH)
    assert threads.status_code == 405
    assert set(threads.headers["allow"].split(", ")) == {"GET", "POST"}
    assert threads.json()["error"]["code"] == "validation"
    cancel = httpx2.get(f"{srv.url}/runs/r1/cancel", headers=AUTH)
    assert cancel.status_code == 405 and cancel.headers["allow"] == "POST"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection; a generous bound (15 s)
    keeps a server that never closes from hanging the test: it fails instead."""
    sock.settimeout(15)
    received = b""
    try:
        while chunk := sock.recv(4096):
            received += chunk
    except TimeoutError:
        raise AssertionError(f"the server kept the connection open; got {received!r}") from None
    except ConnectionResetError:
        pass  # closed with unread bytes of ours still in its buffer: closed all the same
    return received


@contextlib.contextmanager
def _serving(
    project: Path, output: Any = subprocess.DEVNULL, *options: str
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """``agentrunner serve`` as people start it (uvicorn with agentrunner's protocol), up."""
    port = _free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "agentrunner", "serve", "--port", str(port), *options],
        cwd=project,
        env={k: v for k, v in os.environ.items() if k != "AGENTRUNNER_API_TOKEN"},
        stdout=output,
        stderr=output,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx2.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            except httpx2.TransportError:
                assert time.monotonic() < deadline and serve.poll() is None, "serve did not start"
                time.sleep(0.1)
        yield serve, port
    finally:
        serve.terminate()
        serve.wait(timeout=30)


def test_a_request_whose_headers_never_end_is_closed(agent: Agent, project: Path) -> None:
    agent("helper")
    with _serving(project) as (serve, port):
        # A whole request on a raw socket is answered: the probe below is a fair one.
        with socket.create_connection(("127.0.0.1", port)) as whole:
            whole.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            assert _read_until_closed(whole).startswith(b"HTTP/1.1 200")
        # Half a request, never finished: the server closes the connection, answering nothing.
        with socket.create_connection(("127.0.0.1", port)) as half:
            half.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            assert _read_until_closed(half) == b""
        # The same after a first request on a kept-alive connection, trickling a byte at a time.
        with socket.create_connection(("127.0.0.1", port)) as kept:
            kept.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            kept.settimeout(15)
            answer = b""
            while not answer.endswith(b"}"):  # the whole response: head, then its JSON body
                answer += kept.recv(4096)
            assert answer.startswith(b"HTTP/1.1 200")
            kept.settimeout(1)
            try:
                for byte in b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ":
                    kept.sendall(bytes([byte]))
                    time.sleep(0.1)
            except OSError:
                pass  # closed while trickling: what should happen, sooner or later
            assert _read_until_closed(kept) == b""
        assert serve.poll() is None  # it goes on serving others
        assert httpx2.get(f"http://127.0.0.1:{port}/health").status_code == 200


def test_a_stalled_body_is_closed_and_does_not_hold_a_shutdown(agent: Agent, project: Path) -> None:
    agent("helper")
    head = (
        b"POST /threads HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100\r\n\r\n"
    )
    with _serving(project) as (_, port), socket.create_connection(("127.0.0.1", port)) as stalled:
        stalled.sendall(head + b'{"agent_id"')  # and then nothing more
        answer = _read_until_closed(stalled)
        assert answer == b"" or answer.startswith(b"HTTP/1.1 4")  # closed, not held open
    with _serving(project) as (serve, port), socket.create_connection(("127.0.0.1", port)) as held:
        held.sendall(head + b'{"agent_id"')
        time.sleep(0.5)
        serve.send_signal(signal.SIGTERM)  # a client that never finishes cannot keep it up
        assert serve.wait(timeout=30) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal


def test_ctrl_c_with_live_streams_open_ends_them_quietly(
    agent: Agent, project: Path, tmp_path: Path
) -> None:
    """A browser following a channel (the API's stream and the dashboard's) and a run's and a
    job's pages while the server is stopped: each stream is ended as a response should be, and
    nothing is printed as if the server had failed."""
    agent("helper")
    (project / "agentrunner.toml").write_text(
        (project / "agentrunner.toml").read_text() + '\n[channels.general]\nmembers = ["helper"]\n'
    )
    log = (tmp_path / "serve.log").open("wb")
    with _serving(project, log, "--no-worker") as (serve, port):
        opened = httpx2.post(
            f"http://127.0.0.1:{port}/threads", json={"agent_id": "helper", "id": "t"}
        )
        assert opened.status_code == 201, opened.text
        queued = httpx2.post(  # no worker: it stays queued, its pages live
            f"http://127.0.0.1:{port}/threads/t/runs",
            json={"agent_id": "helper", "message": "Hello"},
        )
        run_id = queued.json()["run_id"]
        streams = []
        for path in (
            "/channels/general/events",
            "/ui/channels/general/stream",
            f"/ui/runs/{run_id}/stream",
            f"/ui/jobs/{run_id}/stream",
        ):
            reader = socket.create_connection(("127.0.0.1", port))
            reader.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            reader.settimeout(15)
            assert reader.recv(4096).startswith(b"HTTP/1.1 200")
            streams.append(reader)
        serve.send_signal(signal.SIGINT)
        assert serve.wait(timeout=30) in (0, 130, -signal.SIGINT)
        for reader in streams:
            reader.close()
    log.close()
    printed = (tmp_path / "serve.log").read_text()
    assert "ASGI callable returned without completing response" not in printed, printed
    assert "ERROR" not in printed, printed
