"""A run's model settings through the HTTP API: checked when the run is queued, kept with it,
sent by the worker that serves it."""

from __future__ import annotations

import time
from typing import Any

import httpx2

from agentrunner.testing import MockProvider
from tests.runner.conftest import Agent
from tests.server.conftest import open_thread

AUTH = {"authorization": "Bearer secret-token"}


def test_the_http_api_queues_a_run_with_its_settings(
    agent: Agent, server: Any, mock: MockProvider
) -> None:
    agent("helper")
    api = server()
    open_thread(api.url, "helper", "t-1")
    refused = httpx2.post(
        f"{api.url}/threads/t-1/runs",
        headers=AUTH,
        json={"agent_id": "helper", "message": "hi", "model_settings": {"seed": "one"}},
    )
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "validation"
    assert "'model_settings.seed' must be a whole number" in refused.json()["error"]["message"]
    unstorable = httpx2.post(
        f"{api.url}/threads/t-1/runs",
        headers=AUTH,
        json={"agent_id": "helper", "message": "hi", "model_settings": {"stop": "a\u0000b"}},
    )
    assert unstorable.status_code == 422
    assert unstorable.json()["error"]["message"].startswith("model_settings holds")
    started = httpx2.post(
        f"{api.url}/threads/t-1/runs",
        headers=AUTH,
        json={"agent_id": "helper", "message": "hi", "model_settings": {"temperature": 0.45}},
    )
    assert started.status_code == 202, started.text
    run_id = started.json()["run_id"]
    deadline = time.monotonic() + 20
    while httpx2.get(f"{api.url}/runs/{run_id}", headers=AUTH).json()["status"] != "completed":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    # the refused run was never queued
    assert [r.body.get("temperature") for r in mock.requests] == [0.45]
