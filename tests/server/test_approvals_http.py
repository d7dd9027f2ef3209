"""Deciding over HTTP (issue 41): an HTTP-started run waits, ``/approvals`` lists and decides
what it waits on (the first decision wins: 409 naming it), and the server's worker finishes
it; a question (``ask_person``) is answered the same way."""

from __future__ import annotations

import time
from typing import Any

import httpx2

from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.server.conftest import TOKEN, open_thread


def _until(url: str, run_id: str, *statuses: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while (run := httpx2.get(f"{url}/runs/{run_id}", headers=TOKEN).json())["status"] not in (
        statuses
    ):
        assert time.monotonic() < deadline, run
        time.sleep(0.05)
    return dict(run)


def _start(url: str, thread: str, agent_id: str, message: str) -> str:
    queued = httpx2.post(
        f"{url}/threads/{thread}/runs",
        headers=TOKEN,
        json={"agent_id": agent_id, "message": message},
    )
    assert queued.status_code == 202 or queued.status_code == 200, queued.text
    return str(queued.json()["run_id"])


def test_an_http_run_waits_and_is_decided_over_http(
    agent: Agent, server: Any, mock: MockProvider
) -> None:
    agent(
        "clerk",
        "model: mockai:gpt-mock\ncapabilities: [notes, person]\napproval:\n  tools: [note_create]",
    )
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "plan", "body": "x"})]),
        Reply(text="written"),
        Reply(tool_calls=[("ask_person", {"question": "Which day?"})]),
        Reply(text="Tuesday then"),
    )
    srv = server()
    open_thread(srv.url, "clerk", "t-1")
    run_id = _start(srv.url, "t-1", "clerk", "write the plan")
    assert _until(srv.url, run_id, "waiting", "completed", "failed")["status"] == "waiting"
    listed = httpx2.get(f"{srv.url}/approvals", headers=TOKEN).json()["approvals"]
    [pending] = [a for a in listed if a["run_id"] == run_id]
    assert pending["tool"] == "note_create" and pending["kind"] == "tool"
    assert httpx2.get(f"{srv.url}/approvals/{pending['id']}", headers=TOKEN).json() == pending

    decided = httpx2.post(
        f"{srv.url}/approvals/{pending['id']}",
        headers=TOKEN,
        json={"decision": "approve", "by": "ana", "reason": "fine"},
    )
    assert decided.status_code == 200, decided.text
    assert decided.json()["requeued"] is True
    assert decided.json()["approval"]["decided_by"] == "ana"
    late = httpx2.post(
        f"{srv.url}/approvals/{pending['id']}",
        headers=TOKEN,
        json={"decision": "deny", "by": "bo"},
    )
    assert late.status_code == 409
    assert late.json()["error"]["code"] == "approval_decided"
    assert "ana" in late.json()["error"]["message"]
    assert _until(srv.url, run_id, "completed", "failed")["status"] == "completed"

    # a question, answered over HTTP
    second = _start(srv.url, "t-1", "clerk", "when?")
    assert _until(srv.url, second, "waiting", "completed", "failed")["status"] == "waiting"
    [question] = [
        a
        for a in httpx2.get(f"{srv.url}/approvals", headers=TOKEN).json()["approvals"]
        if a["run_id"] == second
    ]
    assert question["kind"] == "question"
    answered = httpx2.post(
        f"{srv.url}/approvals/{question['id']}",
        headers=TOKEN,
        json={"decision": "approve", "answer": "Tuesday"},
    )
    assert answered.status_code == 200, answered.text
    assert _until(srv.url, second, "completed", "failed")["status"] == "completed"
    body = mock.requests[-1].body
    assert [m["content"] for m in body["messages"] if m.get("role") == "tool"][-1] == "Tuesday"
    events = httpx2.get(
        f"{srv.url}/runs/{second}/events", headers=TOKEN, params={"after": 0}, timeout=10
    ).text
    assert "approval.requested" in events and "approval.decided" in events
