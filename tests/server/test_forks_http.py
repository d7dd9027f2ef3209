"""``POST /threads/{id}/fork`` and ``/rewind`` (issue 45, item 4): a fork's next run sends its
parent's history as it was, then its message; a rewind cuts in place; a wrong point or thread is
a 400 or a 404 naming it, and nothing is written. On both back ends (``project``)."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx2

from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.server.conftest import TOKEN, open_thread


def _ran(url: str, thread: str, message: str) -> dict[str, Any]:
    queued = httpx2.post(
        f"{url}/threads/{thread}/runs",
        headers=TOKEN,
        json={"agent_id": "clerk", "message": message},
    )
    assert queued.status_code in (200, 202), queued.text
    return _done(url, queued.json()["run_id"])


def _messages(url: str, thread: str) -> list[dict[str, Any]]:
    page = httpx2.get(f"{url}/threads/{thread}/messages", headers=TOKEN)
    assert page.status_code == 200, page.text
    return list(page.json()["data"])


def test_fork_and_rewind_over_http(agent: Agent, server: Any, mock: MockProvider) -> None:
    agent("clerk", "model: mockai:gpt-mock")
    mock.queue(Reply(text="first answer"), Reply(text="second answer"), Reply(text="forked"))
    srv = server()
    open_thread(srv.url, "clerk", "t-1")
    _ran(srv.url, "t-1", "first")
    _ran(srv.url, "t-1", "second")
    parent_sent = mock.requests[-1].body["messages"]  # system, 1-3, "second"
    before = _messages(srv.url, "t-1")
    assert len(before) == 4

    forked = httpx2.post(f"{srv.url}/threads/t-1/fork", headers=TOKEN, json={"at": 2})
    assert forked.status_code == 201, forked.text
    body = forked.json()
    fork = body["thread"]
    assert (body["at"], body["asked"], body["left_out"]) == (2, 2, 2)
    assert (fork["forked_from"], fork["forked_at"], fork["message_count"]) == ("t-1", 2, 2)
    assert httpx2.get(f"{srv.url}/threads/{fork['id']}", headers=TOKEN).json()["forked_at"] == 2
    _ran(srv.url, fork["id"], "instead")
    fork_sent = mock.requests[-1].body["messages"]
    assert json.dumps(fork_sent[:3]) == json.dumps(parent_sent[:3])  # system, 1, 2 as they were
    assert fork_sent[3]["content"] == "instead" and len(fork_sent) == 4
    assert _messages(srv.url, "t-1") == before  # the parent is as it was

    rewound = httpx2.post(f"{srv.url}/threads/t-1/rewind", headers=TOKEN, json={"at": 2})
    assert rewound.status_code == 200, rewound.text
    assert rewound.json()["left_out"] == 2 and rewound.json()["thread"]["message_count"] == 2
    assert _messages(srv.url, "t-1") == before[:2]


def test_a_wrong_point_or_thread_is_refused_and_nothing_is_written(
    agent: Agent, server: Any, mock: MockProvider
) -> None:
    agent("clerk", "model: mockai:gpt-mock")
    mock.queue(Reply(text="an answer"))
    srv = server()
    open_thread(srv.url, "clerk", "t-1")
    _ran(srv.url, "t-1", "hello")
    for path, at in (("fork", 3), ("rewind", 3), ("fork", -1)):
        refused = httpx2.post(f"{srv.url}/threads/t-1/{path}", headers=TOKEN, json={"at": at})
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["code"] == "validation" and f"no message {at}" in error["message"]
        assert "messages 1-2" in error["message"]
    missing = httpx2.post(f"{srv.url}/threads/t-nope/fork", headers=TOKEN, json={"at": 1})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "thread_not_found"
    untyped = httpx2.post(f"{srv.url}/threads/t-1/fork", headers=TOKEN, json={"at": "two"})
    assert untyped.status_code in (400, 422), untyped.text
    listed = httpx2.get(f"{srv.url}/threads", headers=TOKEN).json()["data"]
    assert [t["id"] for t in listed] == ["t-1"]
    assert len(_messages(srv.url, "t-1")) == 2


def test_a_replay_is_queued_on_a_fork_and_sends_the_first_request_again(
    agent: Agent, server: Any, mock: MockProvider
) -> None:
    agent("clerk", "model: mockai:gpt-mock", body="You keep {{input.office}}'s books.")
    mock.queue(Reply(text="first"), Reply(text="again"), Reply(text="on mini"))
    srv = server()
    open_thread(srv.url, "clerk", "t-1")
    queued = httpx2.post(
        f"{srv.url}/threads/t-1/runs",
        headers=TOKEN,
        json={"agent_id": "clerk", "message": "Balance?", "input": {"office": "Lyon"}},
    )
    original_id = queued.json()["run_id"]
    _done(srv.url, original_id)
    original = mock.requests[-1].body

    replayed = httpx2.post(f"{srv.url}/runs/{original_id}/replay", headers=TOKEN)
    assert replayed.status_code == 202, replayed.text
    body = replayed.json()
    assert (body["replay_of"], body["model"], body["status"]) == (
        original_id,
        "mockai:gpt-mock",
        "created",
    )
    run = _done(srv.url, body["run_id"])
    assert run["thread_id"] == body["thread_id"] != "t-1"
    again = mock.requests[-1].body
    assert json.dumps(again["messages"]) == json.dumps(original["messages"])
    assert "Lyon" in json.dumps(again["messages"])

    other = httpx2.post(
        f"{srv.url}/runs/{original_id}/replay", headers=TOKEN, json={"model": "mockai:gpt-mini"}
    )
    assert other.status_code == 202, other.text
    assert _done(srv.url, other.json()["run_id"])["model"] == "mockai:gpt-mini"
    assert mock.requests[-1].body["model"] == "gpt-mini"
    assert json.dumps(mock.requests[-1].body["messages"]) == json.dumps(original["messages"])

    threads = len(httpx2.get(f"{srv.url}/threads", headers=TOKEN).json()["data"])
    for path, json_body, status, code in (
        ("/runs/run_nope/replay", None, 404, "not_found"),
        (f"/runs/{original_id}/replay", {"model": "nope:nothing"}, 400, "model_not_found"),
    ):
        refused = httpx2.post(f"{srv.url}{path}", headers=TOKEN, json=json_body)
        assert refused.status_code == status, refused.text
        assert refused.json()["error"]["code"] == code
    assert len(httpx2.get(f"{srv.url}/threads", headers=TOKEN).json()["data"]) == threads


def _done(url: str, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while (run := httpx2.get(f"{url}/runs/{run_id}", headers=TOKEN).json())["status"] not in (
        "completed",
        "failed",
    ):
        assert time.monotonic() < deadline, run
        time.sleep(0.05)
    assert run["status"] == "completed", run
    return dict(run)
