"""The HTTP API end to end, on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.server.conftest import ServerThread, open_thread

AUTH = {"authorization": "Bearer secret-token"}


def test_openai_client_non_streaming_and_streaming_with_a_tool_call(
    agent: Agent, server: Any, mock: MockProvider
) -> None:
    import openai

    agent("helper", "capabilities: [notes]")
    server = server()
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="secret-token")
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "Plan", "body": "Ship"})]),
        Reply(text="Saved your plan."),
    )
    reply = client.chat.completions.create(
        model="helper", messages=[{"role": "user", "content": "Save a plan"}], user="ada"
    )
    assert reply.choices[0].message.content == "Saved your plan."
    assert reply.usage is not None and reply.usage.total_tokens > 0
    mock.queue(
        Reply(tool_calls=[("note_read", {"slug": "plan"})]), Reply(text="Your plan says: Ship.")
    )
    stream = client.chat.completions.create(
        model="helper",
        messages=[{"role": "user", "content": "What does it say?"}],
        user="ada",
        stream=True,
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "Your plan says: Ship."
    # Same `user`: the same thread, with the tool call recorded in between.
    thread = httpx2.get(f"{server.url}/threads/helper-ada/messages", headers=AUTH).json()["data"]
    assert [m["role"] for m in thread] == ["user", "assistant", "tool", "assistant"] * 2
    models = client.models.list()
    assert [m.id for m in models.data] == ["helper"]


def test_auth_and_json_errors(agent: Agent, server: Any) -> None:
    agent("helper")
    server = server()
    assert httpx2.get(f"{server.url}/health").status_code == 200
    denied = httpx2.get(f"{server.url}/agents")
    assert denied.status_code == 401 and denied.json()["error"]["code"] == "unauthorized"
    missing = httpx2.get(f"{server.url}/agents/ghost", headers=AUTH)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "agent_not_found"
    bad = httpx2.post(f"{server.url}/threads", headers=AUTH, json={"agent_id": ""})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "validation"
    nowhere = httpx2.get(f"{server.url}/no/such/route", headers=AUTH)
    assert nowhere.status_code == 404 and nowhere.json()["error"]["code"] == "not_found"
    for path in ("/threads/ghost", "/runs/ghost", "/channels/ghost/messages"):
        gone = httpx2.get(f"{server.url}{path}", headers=AUTH)
        assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found", path
    huge = httpx2.post(
        f"{server.url}/threads",
        headers={**AUTH, "content-type": "application/json"},
        content=b"x" * 2_000_000,
    )
    assert huge.status_code == 413 and huge.json()["error"]["code"] == "validation"


def test_threads_runs_and_cancel(agent: Agent, server: Any, mock: MockProvider) -> None:
    agent("helper")
    server = server()
    created = httpx2.post(
        f"{server.url}/threads", headers=AUTH, json={"agent_id": "helper", "id": "t-1"}
    )
    assert created.status_code == 201 and created.json()["id"] == "t-1"
    started = httpx2.post(
        f"{server.url}/threads/t-1/runs", headers=AUTH, json={"agent_id": "helper", "message": "hi"}
    )
    assert started.status_code == 202
    run_id = started.json()["run_id"]
    deadline = time.monotonic() + 20
    while httpx2.get(f"{server.url}/runs/{run_id}", headers=AUTH).json()["status"] != "completed":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    run = httpx2.get(f"{server.url}/runs/{run_id}", headers=AUTH).json()
    assert run["stop_reason"] == "end_turn" and run["usage"]["requests"] == 1
    mock.queue(Reply(text="word " * 400, chunk_delay_s=0.02))
    slow = httpx2.post(
        f"{server.url}/threads/t-1/runs",
        headers=AUTH,
        json={"agent_id": "helper", "message": "long"},
    ).json()
    while (
        httpx2.get(f"{server.url}/runs/{slow['run_id']}", headers=AUTH).json()["status"]
        != "running"
    ):
        time.sleep(0.02)
    assert (
        httpx2.post(f"{server.url}/runs/{slow['run_id']}/cancel", headers=AUTH).json()["cancel"]
        == "requested"
    )
    deadline = time.monotonic() + 20
    while (
        status := httpx2.get(f"{server.url}/runs/{slow['run_id']}", headers=AUTH).json()["status"]
    ) == "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert status == "cancelled"
    listed = httpx2.get(f"{server.url}/threads", headers=AUTH, params={"agent_id": "helper"}).json()
    assert [t["id"] for t in listed["data"]] == ["t-1"]
    assert httpx2.get(f"{server.url}/costs", headers=AUTH).json()["data"][0]["agent_id"] == "helper"


def test_queueing_a_run_and_posting_leave_the_server_loop_free(agent: Agent, server: Any) -> None:
    """Both wake the workers (on SQLite by reading a folder of sockets), which the server's
    loop leaves to a thread: with the detector of tests/conftest.py watching the server's
    loop, a blocking call there would be a 500."""
    agent("helper")
    server = server()
    open_thread(server.url, "helper", "t-1")
    started = httpx2.post(
        f"{server.url}/threads/t-1/runs", headers=AUTH, json={"agent_id": "helper", "message": "hi"}
    )
    assert started.status_code == 202, started.text
    posted = httpx2.post(f"{server.url}/dm/helper", headers=AUTH, json={"text": "hello"})
    assert posted.status_code == 201, posted.text
    assert len(posted.json()["run_ids"]) == 1


def _read_sse(response: httpx2.Response, limit: int | None = None) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in response.iter_lines():
        if not line:
            if "data" in current:
                events.append(current)
                if limit is not None and len(events) >= limit:
                    return events
            current = {}
            continue
        name, _, value = line.partition(":")
        current[name] = value[1:] if value.startswith(" ") else value
    return events


def test_sse_resume_with_last_event_id_across_processes(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    from agentrunner.interfaces.server import create_app

    agent("talker")
    api = ServerThread(
        create_app(project, token="secret-token", worker=False)
    )  # the worker is elsewhere
    worker = subprocess.Popen(
        [sys.executable, "-m", "agentrunner", "worker"],
        cwd=project,
        env=os.environ.copy(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        mock.queue(Reply(text=" ".join(f"w{n}" for n in range(120)), chunk_delay_s=0.01))
        open_thread(api.url, "talker", "t")
        run_id = httpx2.post(
            f"{api.url}/threads/t/runs", headers=AUTH, json={"agent_id": "talker", "message": "go"}
        ).json()["run_id"]
        with httpx2.stream(
            "GET", f"{api.url}/runs/{run_id}/events", headers=AUTH, timeout=30
        ) as first:
            head = _read_sse(first, limit=15)
        last = head[-1]["id"]
        with httpx2.stream(
            "GET",
            f"{api.url}/runs/{run_id}/events",
            headers={**AUTH, "last-event-id": last},
            timeout=30,
        ) as second:
            tail = _read_sse(second)
        assert (
            tail[-1]["event"] == "run.end" and json.loads(tail[-1]["data"])["status"] == "completed"
        )
        ids = [int(e["id"]) for e in head + tail[:-1]]
        assert ids == list(range(1, len(ids) + 1))  # exactly the missed events: no gap, no repeat
        tokens = "".join(
            json.loads(e["data"])["token"] for e in head + tail if e.get("event") == "agent.token"
        )
        assert tokens == " ".join(f"w{n}" for n in range(120))
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
        api.stop()


def test_serve_on_port_0_says_the_port_it_was_given(agent: Agent, project: Path) -> None:
    """``--port 0`` (any free port) said ``http://127.0.0.1:0/``, an address nobody can open."""
    import re

    agent("helper")
    server = subprocess.Popen(
        [sys.executable, "-m", "agentrunner", "serve", "--port", "0"],
        cwd=project,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        said = server.stderr.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", said)
        assert found and found.group(1) != "0", said
        assert httpx2.get(f"http://127.0.0.1:{found.group(1)}/health").status_code == 200
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
        if server.stderr is not None:
            server.stderr.close()


def test_serve_refuses_public_bind_without_token(project: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "AGENTRUNNER_API_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "agentrunner", "serve", "--host", "0.0.0.0"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 1 and "without a bearer token" in done.stderr


def _serve(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrunner", "serve", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_serve_on_a_busy_port_is_one_error_line(agent: Agent, project: Path) -> None:
    import socket

    agent("helper")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = _serve(project, "--port", str(port))
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: address_in_use: port {port} on 127.0.0.1")
    assert "hint:" in done.stderr and "Traceback" not in done.stderr
    assert "dashboard on http" not in done.stderr  # it never claimed to be serving


def test_a_busy_ports_hint_names_a_port_that_is_free(agent: Agent, project: Path) -> None:
    """The hint said ``--port N+1`` whatever was there (issue 39): with N+1 busy too, it named
    a port that was just as busy."""
    import re
    import socket

    agent("helper")
    for busy_after in (0, 2):  # the port alone busy; the port and the two after it
        with contextlib.ExitStack() as stack:
            first = stack.enter_context(socket.socket())
            first.bind(("127.0.0.1", 0))
            first.listen()
            port = first.getsockname()[1]
            busy = {port}
            for n in range(1, busy_after + 1):
                more = stack.enter_context(socket.socket())
                # Held by the test, or not asserted: a port some connection holds for the
                # moment is one a server may still listen on (SO_REUSEADDR), so it is no
                # "busy" port the hint must avoid (a CI run failed on it).
                with contextlib.suppress(OSError):
                    more.bind(("127.0.0.1", port + n))
                    more.listen()
                    busy.add(port + n)
            done = _serve(project, "--port", str(port))
            assert done.returncode == 1 and f"port {port} on 127.0.0.1" in done.stderr
            found = re.search(r"--port (\d+)", done.stderr)
            assert found, done.stderr
            named = int(found.group(1))
            assert named not in busy
            with socket.socket() as check:  # free: a server can listen there (others held)
                check.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                check.bind(("127.0.0.1", named))
                check.listen()


@pytest.mark.parametrize("port", ["99999", "65536", "-1"])
def test_a_port_out_of_range_is_a_validation_error(tmp_path: Path, port: str) -> None:
    """It was ``internal: OverflowError`` (issue 39); said before anything else is read."""
    done = _serve(tmp_path, "--port", port)
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: validation: --port {port} is not a port")
    assert "0 to 65535" in done.stderr and "internal" not in done.stderr


def test_serve_outside_a_project_is_one_error_line(tmp_path: Path) -> None:
    done = _serve(tmp_path, "--port", "0")
    assert done.returncode == 1 and "not in an agentrunner project" in done.stderr
    assert "Traceback" not in done.stderr and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("token", [" ", "\t\n", "two words", "tab\there"])
def test_a_blank_or_spaced_token_is_refused(
    agent: Agent, project: Path, monkeypatch: pytest.MonkeyPatch, token: str
) -> None:
    """A token of spaces let ``Authorization: Bearer  `` in; one with spaces inside cannot be
    sent as one header value."""
    agent("helper")
    monkeypatch.setenv("AGENTRUNNER_API_TOKEN", token)
    done = _serve(project, "--host", "0.0.0.0", "--port", "0")
    assert done.returncode == 1 and "AGENTRUNNER_API_TOKEN" in done.stderr
    assert token.strip() == "" or token not in done.stderr  # the value is never repeated


@pytest.mark.parametrize("token", ["q7Z", "k" * 31])
def test_a_short_token_is_refused_beyond_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, token: str
) -> None:
    """``serve --host 0.0.0.0`` started with a three-character token (issue 39)."""
    monkeypatch.setenv("AGENTRUNNER_API_TOKEN", token)
    done = _serve(tmp_path, "--host", "0.0.0.0", "--port", "0")
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"error: validation: AGENTRUNNER_API_TOKEN is {len(token)} characters long"
    )
    assert "at least 32" in done.stderr and "agentrunner token" in done.stderr
    assert token not in done.stderr  # the value is never repeated


def test_agentrunner_token_prints_a_new_token_that_serve_takes_beyond_loopback(
    agent: Agent, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import re
    import socket

    tokens = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-m", "agentrunner", "token"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        tokens.append(done.stdout.strip())
        assert done.stdout == tokens[-1] + "\n"  # the token alone: $(agentrunner token)
    assert tokens[0] != tokens[1]
    assert all(len(t) >= 32 and re.fullmatch(r"[A-Za-z0-9_-]+", t) for t in tokens)
    agent("helper")
    monkeypatch.setenv("AGENTRUNNER_API_TOKEN", tokens[0])
    with socket.socket() as busy:  # taken: serve gets as far as binding, then stops
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        done = _serve(project, "--host", "0.0.0.0", "--port", str(busy.getsockname()[1]))
    assert done.stderr.startswith("error: address_in_use: "), done.stderr  # the token passed


def test_thread_and_channel_streams_resume(agent: Agent, server: Any, mock: MockProvider) -> None:
    agent("helper")
    srv = server(cors_origins=["https://app.example"])
    preflight = httpx2.options(
        f"{srv.url}/agents",
        headers={"origin": "https://app.example", "access-control-request-method": "GET"},
    )
    assert preflight.headers.get("access-control-allow-origin") == "https://app.example"
    open_thread(srv.url, "helper", "t")
    for n in range(2):
        started = httpx2.post(
            f"{srv.url}/threads/t/runs",
            headers=AUTH,
            json={"agent_id": "helper", "message": f"m{n}"},
        )
        run_id = started.json()["run_id"]
        deadline = time.monotonic() + 20
        while httpx2.get(f"{srv.url}/runs/{run_id}", headers=AUTH).json()["status"] != "completed":
            assert time.monotonic() < deadline
            time.sleep(0.05)
    with httpx2.stream("GET", f"{srv.url}/threads/t/events", headers=AUTH, timeout=30) as stream:
        first = _read_sse(stream, limit=3)
    with httpx2.stream(
        "GET",
        f"{srv.url}/threads/t/events",
        headers={**AUTH, "last-event-id": first[-1]["id"]},
        timeout=30,
    ) as stream:
        rest = _read_sse(stream, limit=9)
    ids = [e["id"] for e in first + rest]
    # per run: agent.working, step.started, agent.token (the streamed deltas, stored merged),
    # cost.updated, agent.message, agent.idle
    assert len(ids) == len(set(ids)) == 12
    assert ids == sorted(ids, key=lambda i: (i.split("/")[0], int(i.split("/")[1])))
    httpx2.post(
        f"{srv.url}/channels/general/messages", headers=AUTH, json={"text": "x"}
    )  # no such channel
    from agentrunner.runtime.compose import open_workspace

    async def make_channel() -> None:
        ws = await open_workspace(Path.cwd())
        await ws.channels.create("lobby", members=["you", "ada"])
        await ws.close()

    import asyncio

    asyncio.run(make_channel())
    for text in ("one", "two", "three"):
        assert (
            httpx2.post(
                f"{srv.url}/channels/lobby/messages", headers=AUTH, json={"text": text}
            ).status_code
            == 201
        )
    with httpx2.stream(
        "GET", f"{srv.url}/channels/lobby/events", headers=AUTH, timeout=30
    ) as stream:
        head = _read_sse(stream, limit=1)
    with httpx2.stream(
        "GET",
        f"{srv.url}/channels/lobby/events",
        headers={**AUTH, "last-event-id": head[0]["id"]},
        timeout=30,
    ) as stream:
        tail = _read_sse(stream, limit=2)
    assert [json.loads(e["data"])["content"] for e in head + tail] == ["one", "two", "three"]
    assert httpx2.get(f"{srv.url}/channels/nope/messages", headers=AUTH).status_code == 404


def test_a_run_on_another_agents_thread_is_refused(agent: Agent, server: Any) -> None:
    agent("ceo")
    agent("cfo")
    server = server()
    made = httpx2.post(
        f"{server.url}/threads", headers=AUTH, json={"agent_id": "ceo", "id": "board"}
    )
    assert made.status_code == 201
    refused = httpx2.post(
        f"{server.url}/threads/board/runs", headers=AUTH, json={"agent_id": "cfo", "message": "hi"}
    )
    assert refused.status_code == 404
    assert refused.json()["error"]["code"] == "thread_not_found"
    assert "belongs to agent 'ceo'" in refused.json()["error"]["message"]


def _runs() -> list[Any]:
    """The runs in the project's store, opened beside the server's."""

    async def read() -> list[Any]:
        from agentrunner.store import open_store

        store = await open_store(os.environ["AGENTRUNNER_DATABASE_URL"])
        try:
            return await store.runs.list()
        finally:
            await store.close()

    return asyncio.run(read())


def test_a_run_on_an_unknown_thread_is_404_and_opens_none(agent: Agent, server: Any) -> None:
    """``POST /threads/{id}/runs`` runs on a thread that exists; opening one is ``POST
    /threads``'s. An unknown id is 404 ``thread_not_found`` (the agent's threads in its hint),
    nothing is queued and no thread appears; a beginning of an id names no thread here."""
    agent("ceo")
    agent("cfo")
    srv = server(worker=False)

    def start(thread: str, agent_id: str) -> httpx2.Response:
        body = {"agent_id": agent_id, "message": "hi"}
        return httpx2.post(f"{srv.url}/threads/{thread}/runs", headers=AUTH, json=body)

    made = httpx2.post(f"{srv.url}/threads", headers=AUTH, json={"agent_id": "ceo", "id": "t-10"})
    assert made.status_code == 201
    for thread, agent_id, hint in (
        ("t-1", "ceo", "Threads of 'ceo', newest first: t-10."),
        ("plans", "cfo", "'cfo' has no threads yet"),
    ):
        refused = start(thread, agent_id)
        assert refused.status_code == 404, refused.text
        error = refused.json()["error"]
        assert error["code"] == "thread_not_found"
        assert error["message"] == f"no thread '{thread}' of agent '{agent_id}'"
        assert hint in error["hint"] and "POST /threads" in error["hint"]
    listed = httpx2.get(f"{srv.url}/threads", headers=AUTH).json()["data"]
    assert [t["id"] for t in listed] == ["t-10"]
    assert _runs() == []
    opened = httpx2.post(
        f"{srv.url}/threads", headers=AUTH, json={"agent_id": "cfo", "id": "plans"}
    )
    assert opened.status_code == 201
    queued = start("plans", "cfo")
    assert queued.status_code == 202 and queued.json()["thread_id"] == "plans"
    assert start("t-10", "ceo").json()["thread_id"] == "t-10"


def test_no_one_posts_as_an_agent_over_http(agent: Agent, project: Path, server: Any) -> None:
    """A post or a DM whose ``sender`` is an agent's id is 422 naming ``sender``, and nothing
    is written; a person's name is taken."""
    agent("ceo")
    agent("cfo")
    with (project / "agentrunner.toml").open("a") as config:
        config.write('\n[channels.general]\nmembers = ["ceo", "cfo", "you"]\n')
    srv = server(worker=False)
    for path, sender in (
        ("/channels/general/messages", "ceo"),
        ("/channels/general/messages", "cfo"),
        ("/dm/cfo", "ceo"),
    ):
        refused = httpx2.post(
            f"{srv.url}{path}", headers=AUTH, json={"text": "Approve it. -- CEO", "sender": sender}
        )
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert (
            error["code"] == "validation"
            and f"sender '{sender}' is the id of an agent" in (error["message"])
        )
        assert "runs" in error["hint"]
    listed = httpx2.get(f"{srv.url}/channels/general/messages", headers=AUTH).json()
    assert listed["data"] == []
    assert [c["name"] for c in httpx2.get(f"{srv.url}/channels", headers=AUTH).json()["data"]] == [
        "general"
    ]
    taken = httpx2.post(
        f"{srv.url}/channels/general/messages", headers=AUTH, json={"text": "hi", "sender": "ada"}
    )
    assert taken.status_code == 201 and taken.json()["message"]["sender_kind"] == "person"
    assert len(taken.json()["run_ids"]) == 2


def test_the_http_api_refuses_and_does_not_offer_a_disabled_agent(
    agent: Agent, server: Any, mock: MockProvider
) -> None:
    agent("on", "name: Ada")
    agent("off", "name: Bo\nenabled: false")
    srv = server()
    queued = httpx2.post(
        f"{srv.url}/threads/t-off/runs", headers=AUTH, json={"agent_id": "off", "message": "hi"}
    )
    assert queued.status_code == 409
    assert queued.json()["error"]["code"] == "agent_disabled"
    assert "enabled: true" in queued.json()["error"]["hint"]
    for stream in (False, True):
        chat = httpx2.post(
            f"{srv.url}/v1/chat/completions",
            headers=AUTH,
            json={"model": "off", "stream": stream, "messages": [{"role": "user", "content": "x"}]},
        )
        assert chat.status_code == 409 and chat.json()["error"]["code"] == "agent_disabled"
    models = httpx2.get(f"{srv.url}/v1/models", headers=AUTH).json()["data"]
    assert [m["id"] for m in models] == ["on"]
    listed = httpx2.get(f"{srv.url}/agents", headers=AUTH).json()["data"]
    assert {a["id"]: a["enabled"] for a in listed} == {"off": False, "on": True}  # listed
    threads = httpx2.get(f"{srv.url}/threads", params={"agent_id": "off"}, headers=AUTH)
    assert threads.json()["data"] == []  # nothing half-written
    assert mock.requests == []


def test_a_thread_shows_its_summary(agent: Agent, server: Any, mock: MockProvider) -> None:
    """GET /threads/{id}: the thread with its newest summary (null before one is made)."""
    import asyncio

    from agentrunner.engine.messages import AssistantMessage, UserMessage
    from agentrunner.runtime.compose import open_runner

    agent("helper")
    srv = server()
    httpx2.post(f"{srv.url}/threads", headers=AUTH, json={"agent_id": "helper", "id": "t-1"})
    fresh = httpx2.get(f"{srv.url}/threads/t-1", headers=AUTH).json()
    assert (fresh["summary_through"], fresh["summary"]) == (0, None)
    mock.queue(Reply(text="They said hello."), model="gpt-mock")

    async def compact() -> None:
        runner = await open_runner()
        try:
            said = [UserMessage("Hello"), AssistantMessage("Hello to you")]
            await runner.store.batch(runner.store.messages.append_ops("t-1", 1, said, None))
            await runner.compact_thread("t-1")
        finally:
            await runner.close()

    asyncio.run(compact())
    shown = httpx2.get(f"{srv.url}/threads/t-1", headers=AUTH).json()
    assert shown["summary_through"] == 2
    summary = shown["summary"]
    assert (summary["through_seq"], summary["summary"], summary["model"]) == (
        2,
        "They said hello.",
        "mockai:gpt-mock",
    )
    assert summary["requests"] == 1 and summary["run_id"].startswith("run_")
    listed = httpx2.get(f"{srv.url}/threads", headers=AUTH).json()["data"]
    assert [(t["id"], t["summary_through"]) for t in listed] == [("t-1", 2)]


def test_cancelling_a_delegated_run_stops_it_and_its_caller_goes_on(
    agent: Agent, server: Any, mock: MockProvider
) -> None:
    """A delegation is a run of its own: cancelling it (not its caller) stops it at once, and
    the caller is told, as a tool's error, and answers. Cancelling another delegation of
    another run leaves this one alone."""
    agent("ceo", "name: CEO\nmodel: mockai:gpt-mock")
    agent("cto", "name: CTO\nreports_to: ceo\nmodel: mockant:claude-mock")
    mock.queue(
        Reply(tool_calls=[("delegate", {"agent": "cto", "task": "Estimate the migration"})]),
        Reply(text="The CTO was stopped; I will estimate it myself."),
        model="gpt-mock",
    )
    mock.queue(Reply(text="Three weeks.", delay_s=60), model="claude-mock")  # still thinking
    server = server()
    open_thread(server.url, "ceo", "board")
    started = httpx2.post(
        f"{server.url}/threads/board/runs",
        headers=AUTH,
        json={"agent_id": "ceo", "message": "How long will the migration take?"},
    ).json()

    deadline = time.monotonic() + 20
    child: dict[str, Any] = {"status": None}
    while child["status"] != "running":  # the CTO's run, on its thread under the CEO's
        assert time.monotonic() < deadline, "the delegation never started"
        time.sleep(0.1)
        said = httpx2.get(f"{server.url}/threads/board.cto/messages", headers=AUTH).json()
        ids = [m["run_id"] for m in said.get("data", []) if m.get("run_id")]
        if ids:
            child = httpx2.get(f"{server.url}/runs/{ids[0]}", headers=AUTH).json()
    assert (
        httpx2.post(f"{server.url}/runs/{child['id']}/cancel", headers=AUTH).json()["cancel"]
        == "requested"
    )
    deadline = time.monotonic() + 20
    while (parent := httpx2.get(f"{server.url}/runs/{started['run_id']}", headers=AUTH).json())[
        "status"
    ] == "running":
        assert time.monotonic() < deadline, "the caller did not go on"
        time.sleep(0.05)
    child = httpx2.get(f"{server.url}/runs/{child['id']}", headers=AUTH).json()
    assert child["status"] == "cancelled"
    assert parent["status"] == "completed"
    assert parent["usage"]["requests"] == 2  # it asked, then answered without the CTO
    last = mock.requests[-1].body["messages"][-1]
    assert last["role"] == "tool" and "cancelled" in last["content"]


def test_a_run_a_budget_refuses_before_any_request_is_402_and_its_message_kept_unsent(
    agent: Agent, server: Any, project: Path, mock: MockProvider
) -> None:
    """A model of unknown price under a budget: `price_unknown`, 402; the person's message is
    in the thread, marked as never sent to a model. Priced, the same agent answers, and its
    message is not marked."""
    with (project / "agentrunner.toml").open("a") as config:
        config.write("\n[budgets]\nper_run_usd = 1.0\n")
    agent("guess", "model: mockai:gpt-unlisted")
    agent("known", "model: mockai:gpt-mock")
    srv = server()
    for agent_id, status in (("guess", 402), ("known", 200)):
        asked = httpx2.post(
            f"{srv.url}/v1/chat/completions",
            headers=AUTH,
            json={
                "model": agent_id,
                "messages": [{"role": "user", "content": "hi"}],
                "user": "ada",
            },
        )
        assert asked.status_code == status, asked.text
        thread = httpx2.get(f"{srv.url}/threads/{agent_id}-ada/messages", headers=AUTH).json()
        said = next(m for m in thread["data"] if m["role"] == "user")
        assert said["content"] == "hi" and said.get("unsent", False) is (status == 402)
    assert asked.json()["choices"][0]["message"]["content"] == "Echo: hi"
    refused = httpx2.post(
        f"{srv.url}/v1/chat/completions",
        headers=AUTH,
        json={"model": "guess", "messages": [{"role": "user", "content": "again"}], "user": "bo"},
    )
    assert refused.json()["error"]["code"] == "price_unknown"
    assert '[prices."mockai:gpt-unlisted"]' in refused.json()["error"]["message"]
