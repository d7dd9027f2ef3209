""" "Try again from here" on a thread's page (issue 45, item 4): under each person's message a
form, holding the message, forks the thread before it and sends the message as edited in the
fork, where a worker runs it; the fork's page says where it came from; the thread is left as it
is; a form without its CSRF field, or with a point that is no message, forks nothing. Over HTTP
against the mock provider, on both back ends (``project``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.server.dashboard.pages_html import Browser, wait_for
from tests.server.dashboard.test_runs import run, settled


@pytest.fixture
def browser(server: Any) -> Iterator[Browser]:
    opened = Browser(server(token=None).url)
    yield opened
    opened.close()


def _messages(browser: Browser, thread_id: str) -> list[dict[str, Any]]:
    return list(browser.json(f"/threads/{thread_id}/messages")["data"])


def test_a_message_edited_and_sent_again_goes_to_a_fork_and_the_thread_stays(
    agent: Agent, browser: Browser, mock: MockProvider
) -> None:
    agent("clerk", "name: clerk")
    mock.queue(Reply(text="Tea is best."), Reply(text="Paris."), model="gpt-mock")
    assert settled(browser, run(browser, "clerk", "t-1", "Coffee or tea?")) == "completed"
    assert settled(browser, run(browser, "clerk", "t-1", "Capital of France?")) == "completed"
    before = _messages(browser, "t-1")

    page = browser.get("/ui/threads/t-1")
    forms = {f.attrs["id"]: f for f in page.all("form") if f.attrs.get("id", "").startswith("try")}
    assert sorted(forms) == ["try-again-1", "try-again-3"]  # one per person's message
    second = forms["try-again-3"]
    assert second.attrs["action"] == "/ui/threads/t-1/fork"
    assert second.one("input", name="at").attrs["value"] == "2"
    assert second.one("textarea").text() == "Capital of France?"
    assert second.one("input", name="csrf").attrs["value"] == browser.csrf

    mock.queue(Reply(text="Rome."), model="gpt-mock")
    sent = browser.post("/ui/threads/t-1/fork", {"at": "2", "message": "Capital of Italy?"})
    assert sent.status_code == 303, sent.text
    fork_id = sent.headers["location"].rsplit("/", 1)[1]
    assert fork_id != "t-1"
    wait_for("the fork's run", lambda: len(_messages(browser, fork_id)) == 4)
    said = [(m["role"], m.get("content") or m.get("text")) for m in _messages(browser, fork_id)]
    assert said[2:] == [("user", "Capital of Italy?"), ("assistant", "Rome.")]
    assert _messages(browser, fork_id)[:2] == before[:2]
    history = mock.requests[-1].body["messages"]
    assert [m["content"] for m in history[1:]] == [
        "Coffee or tea?",
        "Tea is best.",
        "Capital of Italy?",
    ]
    assert _messages(browser, "t-1") == before  # the thread is as it was
    forked = browser.get(f"/ui/threads/{fork_id}")
    origin = forked.by_id("forked-from")
    assert origin.one("a").attrs["href"] == "/ui/threads/t-1#seq-2"
    assert "messages 1–2" in origin.text()

    # another message, another point: the first, sent as it was
    mock.queue(Reply(text="Coffee, then."), model="gpt-mock")
    again = browser.post("/ui/threads/t-1/fork", {"at": "0", "message": "Coffee or tea?"})
    assert again.status_code == 303
    other = again.headers["location"].rsplit("/", 1)[1]
    wait_for("the second fork's run", lambda: len(_messages(browser, other)) == 2)
    assert len({other, fork_id, "t-1"}) == 3


def test_a_form_without_its_csrf_or_with_a_wrong_point_forks_nothing(
    agent: Agent, browser: Browser, mock: MockProvider
) -> None:
    agent("clerk", "name: clerk")
    mock.queue(Reply(text="Hello."), model="gpt-mock")
    assert settled(browser, run(browser, "clerk", "t-1", "Hi")) == "completed"
    forged = browser.post("/ui/threads/t-1/fork", {"at": "0", "message": "x"}, csrf=False)
    assert forged.status_code == 403, forged.text
    for at, status, said in (
        ("9", 400, "has messages 1-2; there is no message 9"),
        ("two", 422, "at is not a message number"),  # a field that breaks its rules
    ):
        refused = browser.post("/ui/threads/t-1/fork", {"at": at, "message": "x"})
        assert refused.status_code == status, refused.text
        assert said in refused.text
    missing = browser.post("/ui/threads/nope/fork", {"at": "0", "message": "x"})
    assert missing.status_code == 404
    assert [t["id"] for t in browser.json("/threads")["data"]] == ["t-1"]
