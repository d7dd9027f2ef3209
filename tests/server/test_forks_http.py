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
    run_id = queued.json()["run_id"]
    deadline = time.monotonic() + 30
    while (run := httpx2.get(f"{url}/runs/{run_id}", headers=TOKEN).json())["status"] not in (
        "completed",
        "failed",
    ):
        assert time.monotonic() < deadline, run
        time.sleep(0.05)
    assert run["status"] == "completed", run
    return dict(run)


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
    assert (body["at"], body["asked"], body["cut"]) == (2, 2, 2)
    assert (fork["forked_from"], fork["forked_at"], fork["message_count"]) == ("t-1", 2, 2)
    assert httpx2.get(f"{srv.url}/threads/{fork['id']}", headers=TOKEN).json()["forked_at"] == 2
    _ran(srv.url, fork["id"], "instead")
    fork_sent = mock.requests[-1].body["messages"]
    assert json.dumps(fork_sent[:3]) == json.dumps(parent_sent[:3])  # system, 1, 2 as they were
    assert fork_sent[3]["content"] == "instead" and len(fork_sent) == 4
    assert _messages(srv.url, "t-1") == before  # the parent is as it was

    rewound = httpx2.post(f"{srv.url}/threads/t-1/rewind", headers=TOKEN, json={"at": 2})
    assert rewound.status_code == 200, rewound.text
    assert rewound.json()["cut"] == 2 and rewound.json()["thread"]["message_count"] == 2
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
