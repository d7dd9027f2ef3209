"""A queued run's output schema and retry policy over HTTP (issue 46 item 6): ``output_schema``
and ``retry`` in ``POST /threads/{id}/runs`` are the run's, in place of its agent file's, kept
with the queued run for its worker; one that is wrong is 400 naming it, and nothing is
queued. On both back ends."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2

from agentrunner.testing import MockProvider, Reply
from agentrunner.testing.replies import Fault
from tests.runner.conftest import Agent
from tests.runner.test_run_answer_rules import CITY, YEAR
from tests.server.conftest import open_thread
from tests.server.test_only_tools_http import _runs

AUTH = {"authorization": "Bearer secret-token"}


def _run(url: str, body: dict[str, Any]) -> dict[str, Any]:
    made = httpx2.post(f"{url}/threads/t1/runs", headers=AUTH, json=body)
    assert made.status_code == 202, made.text
    run_id = made.json()["run_id"]
    with httpx2.stream("GET", f"{url}/runs/{run_id}/events", headers=AUTH, timeout=60) as events:
        for _ in events.iter_lines():
            pass
    return httpx2.get(f"{url}/runs/{run_id}", headers=AUTH).json()


def test_a_queued_run_answers_to_its_callers_schema_and_retries_as_told(
    agent: Agent, server: Any, mock: MockProvider
) -> None:
    agent("clerk", "name: clerk\nretry: {max: 1}")
    url = server().url
    open_thread(url, "clerk", "t1")
    for schema, reply in ((CITY, '{"city": "Oslo"}'), (YEAR, '{"year": 1624}')):
        mock.queue(Reply(text=reply))
        run = _run(url, {"agent_id": "clerk", "message": "hi", "output_schema": schema})
        assert run["status"] == "completed", run
        sent = mock.requests[-1].body["response_format"]["json_schema"]["schema"]
        assert sent == schema
    failing = Reply(text="", fault=Fault.http(503))
    mock.reset()
    mock.queue(failing, Reply(text="second time"))
    retry = {"max": 2, "backoff": "none", "initial_delay_s": 0.01}
    run = _run(url, {"agent_id": "clerk", "message": "hi", "retry": retry})
    assert run["status"] == "completed" and len(mock.requests) == 2
    before = asyncio.run(_runs())
    for body, said in (
        ({"output_schema": {"type": "objekt"}}, "is not a valid JSON Schema"),
        ({"retry": {"maxx": 2}}, "unknown key 'retry.maxx'"),
    ):
        refused = httpx2.post(
            f"{url}/threads/t1/runs",
            headers=AUTH,
            json={"agent_id": "clerk", "message": "hi", **body},
        )
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["code"] == "validation" and said in error["message"]
        assert json.dumps(error).count(next(iter(body))) >= 1  # the field is named
    assert asyncio.run(_runs()) == before  # nothing queued
