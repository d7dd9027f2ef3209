"""A queued run's tools narrowed over HTTP (issue 46 item 5): ``tools`` in ``POST
/threads/{id}/runs`` is the only tools of its agent's the run is offered; a widening is 400
naming the tool, and nothing is queued. On both back ends."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx2

from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.runner.test_only_tools import _offered
from tests.server.conftest import open_thread

AUTH = {"authorization": "Bearer secret-token"}


def test_a_queued_run_over_http_is_narrowed_and_a_widening_queues_nothing(
    agent: Agent, server: Any, mock: MockProvider
) -> None:
    agent("clerk", "capabilities: [notes, memory]")
    url = server().url
    open_thread(url, "clerk", "t1")
    mock.queue(Reply(text="ok"))
    made = httpx2.post(
        f"{url}/threads/t1/runs",
        headers=AUTH,
        json={"agent_id": "clerk", "message": "hi", "tools": ["note_list"]},
    )
    assert made.status_code == 202, made.text
    run_id = made.json()["run_id"]
    with httpx2.stream("GET", f"{url}/runs/{run_id}/events", headers=AUTH, timeout=60) as events:
        for _ in events.iter_lines():
            pass
    assert httpx2.get(f"{url}/runs/{run_id}", headers=AUTH).json()["status"] == "completed"
    assert _offered(mock.requests[-1].body) == {"note_list"}
    refused = httpx2.post(
        f"{url}/threads/t1/runs",
        headers=AUTH,
        json={"agent_id": "clerk", "message": "hi", "tools": ["note_list", "send_file"]},
    )
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["code"] == "validation" and "'send_file'" in error["message"]
    assert asyncio.run(_runs()) == 1  # the narrowed one; the refused one was never queued
    misspelt = httpx2.post(  # `tool` for `tools` would run with every tool: refused
        f"{url}/threads/t1/runs",
        headers=AUTH,
        json={"agent_id": "clerk", "message": "hi", "tool": ["note_list"]},
    )
    assert misspelt.status_code == 422, misspelt.text
    nowhere = httpx2.post(  # an unknown thread is said first, as for a bad file
        f"{url}/threads/nope/runs",
        headers=AUTH,
        json={"agent_id": "clerk", "message": "hi", "tools": ["send_file"]},
    )
    assert nowhere.status_code == 404, nowhere.text
    assert asyncio.run(_runs()) == 1


async def _runs() -> int:
    from agentrunner.store import open_store

    store = await open_store(os.environ["AGENTRUNNER_DATABASE_URL"])
    try:
        return len(await store.runs.list(limit=10))
    finally:
        await store.close()
