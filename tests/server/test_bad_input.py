"""Bad input is a 422 with the error shape, the same on SQLite and PostgreSQL, and the client's
kept-alive connection goes on serving requests afterwards."""

from __future__ import annotations

import http.client
import json
from typing import Any

import httpx2
import pytest

from tests.runner.conftest import Agent

AUTH = {"authorization": "Bearer secret-token", "content-type": "application/json"}
NUL = "a\u0000b"
LONG_ID = "t" * 8192


def _nested(levels: int) -> Any:
    value: Any = "deep"
    for _ in range(levels):
        value = {"x": value}
    return value


def _chat(content: Any, **extra: Any) -> dict[str, Any]:
    return {"model": "helper", "messages": [{"role": "user", "content": content}], **extra}


BAD: list[tuple[str, str, Any, str]] = [
    # method, path, JSON body (None: no body), what the error message names
    ("POST", "/threads/t/runs", {"agent_id": "helper", "message": NUL}, "message"),
    ("POST", "/threads/t/runs", {"agent_id": "helper", "message": "hi\ud800"}, "message"),
    (
        "POST",
        "/threads/t/runs",
        {"agent_id": "helper", "message": "hi", "input": {"k": NUL}},
        "input",
    ),
    (
        "POST",
        "/threads/t/runs",
        {"agent_id": "helper", "message": "hi", "input": {NUL: 1}},
        "input",
    ),
    (
        "POST",
        "/threads/t/runs",
        {"agent_id": "helper", "message": "hi", "input": _nested(300)},
        "input",
    ),
    ("POST", "/threads/a%00b/runs", {"agent_id": "helper", "message": "hi"}, "thread_id"),
    ("POST", f"/threads/{LONG_ID}/runs", {"agent_id": "helper", "message": "hi"}, "thread_id"),
    ("POST", "/threads", {"agent_id": "helper", "id": LONG_ID}, "id"),
    ("POST", "/channels/lobby/messages", {"text": NUL}, "text"),
    ("POST", "/channels/lobby/messages", {"text": "hi", "sender": NUL}, "sender"),
    ("POST", "/channels/lobby/messages", {"text": "hi", "thread": NUL}, "thread"),
    ("POST", "/dm/helper", {"text": "hi", "sender": "ada\u0000"}, "sender"),
    ("POST", "/v1/chat/completions", _chat(NUL), "content"),
    ("POST", "/v1/chat/completions", _chat([{"type": "text", "text": {"nested": 1}}]), "text"),
    ("POST", "/v1/chat/completions", _chat("hi", user=NUL), "user"),
    ("GET", "/threads/a%00b", None, "thread_id"),
    ("GET", f"/threads/{LONG_ID}/messages", None, "thread_id"),
    ("GET", "/threads?agent_id=a%00b", None, "agent_id"),
    ("GET", "/runs/a%00b", None, "run_id"),
    ("GET", "/channels/a%00b/messages", None, "name"),
    ("GET", "/channels/lobby/messages?cursor=a%00b", None, "cursor"),
]


def _lobby() -> None:
    import asyncio
    from pathlib import Path

    from agentrunner.runtime.compose import open_workspace

    async def make() -> None:
        ws = await open_workspace(Path.cwd())
        await ws.channels.create("lobby", members=["helper", "ada"])
        await ws.close()

    asyncio.run(make())


def test_bad_input_is_422_and_the_connection_survives(agent: Agent, server: Any) -> None:
    agent("helper")
    _lobby()
    srv = server(worker=False)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    problems: list[str] = []
    try:
        conn.connect()
        for method, path, body, names in BAD:
            sock = conn.sock
            where = f"{method} {path[:60]} {str(body)[:60]}"
            payload = None if body is None else json.dumps(body).encode()
            try:
                conn.request(method, path, body=payload, headers=AUTH)
                response = conn.getresponse()
                data = json.loads(response.read())
            except (OSError, http.client.HTTPException) as exc:
                problems.append(f"{where}: {type(exc).__name__} (the connection was closed)")
                conn.close()
                conn.connect()
                continue
            if response.status != 422 or data.get("error", {}).get("code") != "validation":
                problems.append(f"{where}: {response.status} {str(data)[:120]}")
            elif names not in data["error"]["message"]:
                problems.append(f"{where}: the message does not name {names}: {data}")
            if response.getheader("connection") == "close" or conn.sock is not sock:
                problems.append(f"{where}: the server closed the connection")
                conn.close()
                conn.connect()
        assert problems == [], "\n".join(problems)
        sock = conn.sock
        # Header input is checked the same way (the chat's thread id).
        conn.request(
            "POST",
            "/v1/chat/completions",
            body=json.dumps(_chat("hi")).encode(),
            headers={**AUTH, "x-agentrunner-thread": "t" * 300},
        )
        response = conn.getresponse()
        text = response.read().decode()
        assert response.status == 422 and "x-agentrunner-thread" in text.lower(), text
        # A channel stream's Last-Event-ID: a position in its feed, or the id of one of its rows.
        for position in ("not-a-position", "7.x_1", "m_0000000000000000000000"):
            conn.request(
                "GET", "/channels/lobby/events", headers={**AUTH, "last-event-id": position}
            )
            response = conn.getresponse()
            data = json.loads(response.read())
            assert response.status == 422, (position, data)
            assert data["error"]["code"] == "validation"
            assert data["error"]["message"].startswith(f"Last-Event-ID '{position}' is no")
        # Nothing was written, and the same connection still serves good requests.
        conn.request("GET", "/threads", headers=AUTH)
        threads = conn.getresponse()
        assert threads.status == 200 and json.loads(threads.read())["data"] == []
        conn.request("GET", "/channels/lobby/messages", headers=AUTH)
        lobby = conn.getresponse()
        assert lobby.status == 200 and json.loads(lobby.read())["data"] == []
        assert conn.sock is sock
    finally:
        conn.close()


def test_good_input_of_the_same_shapes_is_accepted(agent: Agent, server: Any) -> None:
    """The rules refuse only what they should: ids in other alphabets, tabs and newlines in
    text, input nested a few levels, text parts of a chat message."""
    agent("helper")
    _lobby()
    srv = server(worker=False)
    ok = [
        ("/threads", {"agent_id": "helper", "id": "Ünïcode-thread.1@x:y"}),
        ("/threads", {"agent_id": "helper", "id": "t"}),
        ("/threads/Ünïcode-thread.1@x:y/runs", {"agent_id": "helper", "message": "tab\tand\nnew"}),
        ("/threads/t/runs", {"agent_id": "helper", "message": "hi", "input": _nested(20)}),
        ("/channels/lobby/messages", {"text": "hi\n", "sender": "Ada Lovelace"}),
        ("/v1/chat/completions", _chat([{"type": "text", "text": "hi"}])),
    ]
    for path, body in ok:
        done = httpx2.post(f"{srv.url}{path}", headers=AUTH, json=body, timeout=30)
        assert done.status_code in (200, 201, 202), (path, done.text[:300])
    thread = httpx2.get(f"{srv.url}/threads/Ünïcode-thread.1@x:y", headers=AUTH)
    assert thread.status_code == 200


@pytest.mark.parametrize("body", [b"{bad", b'{"agent_id": "helper",}'])
def test_a_body_that_is_not_json_is_400(agent: Agent, server: Any, body: bytes) -> None:
    agent("helper")
    srv = server(worker=False)
    done = httpx2.post(
        f"{srv.url}/threads",
        headers={**AUTH, "content-type": "application/json"},
        content=body,
    )
    assert done.status_code == 400 and done.json()["error"]["code"] == "validation", done.text
    assert "JSON" in done.json()["error"]["message"]
