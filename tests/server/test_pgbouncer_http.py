"""``serve`` behind PgBouncer in transaction pooling mode (issue 47 item 4): a thread opened, a
run queued and served by the server's own worker, its events streamed to the end (the stream
waits on changes: LISTEN on the direct listen URL) and its record read back, all through the
pooler. On PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest

from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.server.conftest import open_thread

AUTH = {"authorization": "Bearer secret-token"}


def test_serve_behind_pgbouncer_runs_and_streams(
    agent: Agent,
    project: Path,
    server: Any,
    mock: MockProvider,
    store_url: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not store_url.startswith("postgres"):
        pytest.skip("PgBouncer pools PostgreSQL's connections")
    monkeypatch.setenv("AGENTRUNNER_DATABASE_URL", request.getfixturevalue("pgbouncer"))
    monkeypatch.setenv("AGENTRUNNER_DATABASE_LISTEN_URL", store_url)
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write("\n[database]\npooled = true\n")
    agent("clerk")
    url = server().url
    open_thread(url, "clerk", "t1")
    answers = []
    for n in range(3):  # the same statements again: prepared ones would fail on a new server
        mock.queue(Reply(text=f"answer {n}"))
        made = httpx2.post(
            f"{url}/threads/t1/runs", headers=AUTH, json={"agent_id": "clerk", "message": "hi"}
        )
        assert made.status_code == 202, made.text
        run_id = made.json()["run_id"]
        with httpx2.stream(
            "GET", f"{url}/runs/{run_id}/events", headers=AUTH, timeout=60
        ) as events:
            streamed = [line for line in events.iter_lines() if line.startswith("event:")]
        assert "event: agent.idle" in streamed
        run = httpx2.get(f"{url}/runs/{run_id}", headers=AUTH).json()
        answers.append((run["status"], run.get("output") or run.get("text")))
    assert [status for status, _ in answers] == ["completed"] * 3
