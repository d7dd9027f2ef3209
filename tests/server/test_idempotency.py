"""Retries do not duplicate work (Idempotency-Key), queues are bounded (429 + Retry-After), and
many concurrent posts are each stored once."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2

from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.server.conftest import ServerThread, open_thread

AUTH = {"authorization": "Bearer secret-token"}


def _store_counts(project: Path) -> tuple[dict[str, dict[str, int]], int]:
    """Queued runs per agent, and how many messages #lobby holds (read straight from the
    store, not through the API under test)."""
    from agentrunner.runtime.compose import open_workspace

    async def read() -> tuple[dict[str, dict[str, int]], int]:
        ws = await open_workspace(project)
        try:
            depths = await ws.runner.store.mailbox.depths()
            lobby = await ws.runner.store.channels.by_name("lobby")
            messages = await ws.runner.store.channels.after(lobby.id, "", 10_000) if lobby else []
            return depths, len(messages)
        finally:
            await ws.close()

    return asyncio.run(read())


def _lobby(project: Path, *members: str) -> None:
    from agentrunner.runtime.compose import open_workspace

    async def make() -> None:
        ws = await open_workspace(project)
        await ws.channels.create("lobby", members=list(members))
        await ws.close()

    asyncio.run(make())


def _queued(project: Path, agent_id: str) -> int:
    return _store_counts(project)[0].get(agent_id, {}).get("created", 0)


def test_a_retried_run_returns_the_first_response_and_queues_nothing(
    agent: Agent, server: Any, project: Path
) -> None:
    agent("helper")
    srv = server(worker=False)
    open_thread(srv.url, "helper", "t")
    open_thread(srv.url, "helper", "u")
    url = f"{srv.url}/threads/t/runs"
    body = {"agent_id": "helper", "message": "hi"}
    first = httpx2.post(url, headers={**AUTH, "idempotency-key": "k1"}, json=body)
    again = httpx2.post(url, headers={**AUTH, "idempotency-key": "k1"}, json=body)
    assert first.status_code == again.status_code == 202
    assert again.json() == first.json()
    assert again.headers.get("idempotent-replayed") == "true"
    assert "idempotent-replayed" not in first.headers
    assert _queued(project, "helper") == 1
    other = httpx2.post(url, headers={**AUTH, "idempotency-key": "k2"}, json=body)
    none = httpx2.post(url, headers=AUTH, json=body)
    assert len({first.json()["run_id"], other.json()["run_id"], none.json()["run_id"]}) == 3
    assert _queued(project, "helper") == 3
    # The same key for a different request: refused, naming the key, and nothing is queued.
    changed = httpx2.post(
        url, headers={**AUTH, "idempotency-key": "k1"}, json={**body, "message": "bye"}
    )
    assert changed.status_code == 422
    error = changed.json()["error"]
    assert error["code"] == "validation" and "Idempotency-Key" in error["message"]
    assert "k1" in error["message"] and error["hint"]
    # The key is scoped to its route: the same key on another thread is another request.
    elsewhere = httpx2.post(
        f"{srv.url}/threads/u/runs", headers={**AUTH, "idempotency-key": "k1"}, json=body
    )
    assert elsewhere.status_code == 202 and elsewhere.json()["run_id"] != first.json()["run_id"]
    assert _queued(project, "helper") == 4
    bad_key = httpx2.post(url, headers={**AUTH, "idempotency-key": "k" * 300}, json=body)
    assert bad_key.status_code == 422 and "Idempotency-Key" in bad_key.json()["error"]["message"]


def test_concurrent_repeats_start_one_run(agent: Agent, server: Any, project: Path) -> None:
    agent("helper")
    srv = server(worker=False)
    open_thread(srv.url, "helper", "t")

    def post(_: int) -> httpx2.Response:
        return httpx2.post(
            f"{srv.url}/threads/t/runs",
            headers={**AUTH, "idempotency-key": "same"},
            json={"agent_id": "helper", "message": "hi"},
            timeout=30,
        )

    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(post, range(32)))
    assert {a.status_code for a in answers} == {202}
    assert len({a.json()["run_id"] for a in answers}) == 1
    assert _queued(project, "helper") == 1


def test_keys_hold_across_processes_and_are_scoped_per_token(agent: Agent, project: Path) -> None:
    from agentrunner.interfaces.server import create_app

    agent("helper")
    first = ServerThread(create_app(project, token="token-a", worker=False))
    second = ServerThread(create_app(project, token="token-a", worker=False))
    other = ServerThread(create_app(project, token="token-b", worker=False))
    try:
        body = {"agent_id": "helper", "message": "hi"}
        a = {"authorization": "Bearer token-a", "idempotency-key": "k"}
        b = {"authorization": "Bearer token-b", "idempotency-key": "k"}
        open_thread(first.url, "helper", "t", {"authorization": "Bearer token-a"})
        made = httpx2.post(f"{first.url}/threads/t/runs", headers=a, json=body).json()
        repeated = httpx2.post(f"{second.url}/threads/t/runs", headers=a, json=body).json()
        another = httpx2.post(f"{other.url}/threads/t/runs", headers=b, json=body).json()
        assert repeated == made and another["run_id"] != made["run_id"]
        assert _queued(project, "helper") == 2
    finally:
        for running in (first, second, other):
            running.stop()


def test_a_retried_channel_post_and_dm_are_stored_once(
    agent: Agent, server: Any, project: Path
) -> None:
    agent("helper")
    _lobby(project, "helper", "ada")
    srv = server(worker=False)
    for path, body in (
        ("/channels/lobby/messages", {"text": "hello", "sender": "ada"}),
        ("/dm/helper", {"text": "psst", "sender": "ada"}),
    ):
        headers = {**AUTH, "idempotency-key": f"post-{path}"}
        first = httpx2.post(f"{srv.url}{path}", headers=headers, json=body)
        again = httpx2.post(f"{srv.url}{path}", headers=headers, json=body)
        assert first.status_code == again.status_code == 201
        assert again.json() == first.json() and len(first.json()["run_ids"]) == 1
    depths, lobby_messages = _store_counts(project)
    assert lobby_messages == 1 and depths["helper"]["created"] == 2


def test_a_retried_chat_completion_runs_the_agent_once(
    agent: Agent, server: Any, mock: MockProvider
) -> None:
    agent("helper")
    srv = server()
    chat = f"{srv.url}/v1/chat/completions"
    body = {"model": "helper", "messages": [{"role": "user", "content": "hi"}], "user": "ada"}
    mock.queue(Reply(text="First answer."), Reply(text="Second answer."))
    headers = {**AUTH, "idempotency-key": "c1"}
    first = httpx2.post(chat, headers=headers, json=body, timeout=30)
    again = httpx2.post(chat, headers=headers, json=body, timeout=30)
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json()
    assert first.json()["choices"][0]["message"]["content"] == "First answer."
    assert len(mock.requests) == 1
    # Streamed: the first streams live, a repeat streams the same answer without a run.
    streamed = {**body, "stream": True}
    texts = []
    for _ in range(2):
        with httpx2.stream(
            "POST", chat, headers={**AUTH, "idempotency-key": "c2"}, json=streamed, timeout=30
        ) as response:
            assert response.status_code == 200
            chunks = [
                json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: {")
            ]
        texts.append(
            "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
        )
        assert chunks[-1]["usage"]["total_tokens"] > 0
    assert texts == ["Second answer.", "Second answer."]
    assert len(mock.requests) == 2
    messages = httpx2.get(f"{srv.url}/threads/helper-ada/messages", headers=AUTH).json()["data"]
    assert [m["role"] for m in messages] == ["user", "assistant"] * 2


def test_a_full_queue_answers_429_with_retry_after(
    agent: Agent, server: Any, project: Path
) -> None:
    agent("helper")
    agent("other")
    with (project / "agentrunner.toml").open("a") as config:
        config.write("\n[workers]\nmax_queue = 2\n")
    _lobby(project, "helper", "ada")
    srv = server(worker=False)
    open_thread(srv.url, "helper", "t")
    open_thread(srv.url, "other", "o")
    body = {"agent_id": "helper", "message": "hi"}
    kept = {**AUTH, "idempotency-key": "kept"}
    assert httpx2.post(f"{srv.url}/threads/t/runs", headers=kept, json=body).status_code == 202
    assert httpx2.post(f"{srv.url}/threads/t/runs", headers=AUTH, json=body).status_code == 202
    for path, payload in (
        ("/threads/t/runs", body),
        ("/channels/lobby/messages", {"text": "hi", "sender": "ada"}),
        ("/dm/helper", {"text": "hi"}),
    ):
        full = httpx2.post(f"{srv.url}{path}", headers=AUTH, json=payload)
        assert full.status_code == 429, (path, full.text)
        assert int(full.headers["retry-after"]) >= 1
        error = full.json()["error"]
        assert error["code"] == "queue_full" and "helper" in error["message"]
        assert "max_queue" in error["hint"]
    # Nothing of a refused post was written; a repeat of an accepted request is still answered.
    depths, lobby_messages = _store_counts(project)
    assert depths["helper"]["created"] == 2 and lobby_messages == 0
    assert httpx2.post(f"{srv.url}/threads/t/runs", headers=kept, json=body).status_code == 202
    # Another agent's queue is its own.
    fine = httpx2.post(
        f"{srv.url}/threads/o/runs", headers=AUTH, json={"agent_id": "other", "message": "hi"}
    )
    assert fine.status_code == 202


def test_two_hundred_concurrent_posts_are_each_stored_once(
    agent: Agent, server: Any, project: Path
) -> None:
    agent("helper")
    _lobby(project, "helper", "ada")
    srv = server(worker=False)

    def post(n: int) -> httpx2.Response:
        return httpx2.post(
            f"{srv.url}/channels/lobby/messages",
            headers=AUTH,
            json={"text": f"m{n}", "sender": "ada"},
            timeout=60,
        )

    with ThreadPoolExecutor(max_workers=50) as pool:
        answers = list(pool.map(post, range(200)))
    assert [a.status_code for a in answers].count(201) == 200
    stored = httpx2.get(
        f"{srv.url}/channels/lobby/messages", headers=AUTH, params={"limit": 1000}
    ).json()["data"]
    assert sorted(m["content"] for m in stored) == sorted(f"m{n}" for n in range(200))
    assert len({m["id"] for m in stored}) == 200
    run_ids = [r for a in answers for r in a.json()["run_ids"]]
    assert len(set(run_ids)) == 200
    assert _store_counts(project)[0]["helper"]["created"] == 200
