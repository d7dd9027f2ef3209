"""What waits for a person, on the dashboard (issue 41): ``/ui/approvals`` lists each pending
request with a form to decide it, a waiting run's page shows its requests, the decisions and
the same form; a form without its CSRF field decides nothing; a decision that came second is
said on the page, naming the first. Over HTTP against the mock provider, on both back ends."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from agentrunner.store import changes
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.server.dashboard.pages_html import Browser, Node, parse, wait_for
from tests.server.dashboard.test_live_pages import READ_S, Live, _events
from tests.server.dashboard.test_runs import run, settled

CLERK = "name: clerk\ncapabilities: [notes]\napproval:\n  tools: [note_create]"


@pytest.fixture
def browser(server: Any) -> Iterator[Browser]:
    """A browser on a loopback server with its worker (nothing to log in to)."""
    opened = Browser(server(token=None).url)
    yield opened
    opened.close()


def _waiting(browser: Browser, count: int) -> list[dict[str, Any]]:
    wait_for(f"{count} requests", lambda: len(browser.json("/approvals")["approvals"]) == count)
    listed: list[dict[str, Any]] = browser.json("/approvals")["approvals"]
    return listed


def _said(page: Node) -> str:
    return page.by_id("decision-said").text()


def test_the_list_and_a_waiting_runs_page_show_the_requests_and_decide_them(
    agent: Agent, browser: Browser, mock: MockProvider
) -> None:
    agent("clerk", CLERK)
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "Launch plan", "body": "Monday"})]),
        model="gpt-mock",
    )
    first = run(browser, "clerk", "t-plan", "Note the launch plan")
    _waiting(browser, 1)  # one at a time: the mock answers in the order it is asked
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "Salaries", "body": "secret"})]),
        Reply(text="Saved the launch plan."),
        Reply(text="Understood, not saved."),
        model="gpt-mock",
    )
    second = run(browser, "clerk", "t-pay", "Note the salaries")
    asked = {a["run_id"]: a for a in _waiting(browser, 2)}

    listing = browser.get("/ui/approvals")
    assert listing.one("a", aria_current="page").text() == "Approvals"  # the nav's own tab
    items = listing.by_id("approvals").all("li", cls="approval")
    assert [i.attrs["data-run"] for i in items] == [first, second]  # oldest first
    for item, title in zip(items, ["Launch plan", "Salaries"], strict=True):
        request = asked[item.attrs["data-run"]]
        assert item.one("h2").text() == "clerk asks to call note_create"
        assert f'"title": "{title}"' in item.one("pre", cls="approval-args").text()
        assert item.one("a", href=f"/ui/runs/{request['run_id']}").text() == request["run_id"]
        assert item.one(cls="time-left").text().startswith("23 h 59 min")  # a day, by default
        form = item.one("form")
        assert form.attrs["action"] == f"/ui/approvals/{request['id']}"
        assert form.one("input", name="csrf").attrs["value"] == browser.csrf
        assert form.one("input", name="back").attrs["value"] == "/ui/approvals"
        buttons = [(b.attrs["value"], b.text()) for b in form.all("button")]
        assert buttons == [("approve", "Approve"), ("deny", "Deny")]
    follow = listing.by_id("approvals-follow")
    version = listing.by_id("approvals-live").attrs["data-version"]
    assert follow.attrs["sse-connect"] == f"/ui/approvals/stream?{urlencode({'version': version})}"

    page = browser.get(f"/ui/runs/{first}")
    assert page.by_id("run-status").text() == "waiting"
    assert "sse-connect" in page.by_id("run-follow").attrs  # followed while it waits
    [pending] = page.by_id("run-approvals").all("li", cls="approval")
    assert pending.attrs["data-status"] == "pending"
    assert pending.one("form").attrs["action"] == f"/ui/approvals/{asked[first]['id']}"
    [call] = page.by_id("timeline").all("li", cls="tool-call")
    assert "waiting for a decision" in call.one("h3").text()

    # a form without its CSRF field, or with another's, decides nothing
    action = f"/ui/approvals/{asked[first]['id']}"
    refused = browser.post(action, {"decision": "approve"}, csrf=False)
    assert refused.status_code == 403 and "CSRF" in refused.text
    forged = browser.post(action, {"decision": "approve", "csrf": "x" * 43}, csrf=False)
    assert forged.status_code == 403
    assert browser.json(f"/approvals/{asked[first]['id']}")["status"] == "pending"
    bad = browser.post(action, {"decision": "maybe"})
    assert bad.status_code == 400 and "approve or deny" in bad.text  # a page saying why

    # approved from the run's page: back to it, which says so; the run goes on and completes
    back = f"/ui/runs/{first}"
    approved = browser.post(action, {"decision": "approve", "back": back})
    assert approved.status_code == 303
    assert approved.headers["location"] == f"{back}?decided={asked[first]['id']}"
    assert settled(browser, first) == "completed"
    page = browser.get(approved.headers["location"])
    assert _said(page) == "note_create for clerk: approved by you."
    [done] = page.by_id("run-approvals").all("li", cls="approval")
    assert done.attrs["data-status"] == "approved" and not done.all("form")
    assert done.one(cls="decided-by").text() == "you"
    assert done.one(cls="execution").text() == "ran once"
    assert page.by_id("answer").text() == "Answer Saved the launch plan."

    # denied from the list, with a reason the model is told
    denied = browser.post(
        f"/ui/approvals/{asked[second]['id']}", {"decision": "deny", "reason": "private"}
    )
    assert denied.headers["location"] == f"/ui/approvals?decided={asked[second]['id']}"
    assert settled(browser, second) == "completed"
    listing = browser.get(denied.headers["location"])
    assert _said(listing) == "note_create for clerk: denied by you (private)."
    assert listing.by_id("approvals").text().startswith("Nothing waits for a decision")
    tool_said = [m for m in mock.requests[-1].body["messages"] if m.get("role") == "tool"]
    assert tool_said[0]["content"] == "denied by you: private"
    page = browser.get(f"/ui/runs/{second}")
    [done] = page.by_id("run-approvals").all("li", cls="approval")
    assert done.attrs["data-status"] == "denied" and done.one(cls="reason").text() == "private"
    assert page.by_id("answer").text() == "Answer Understood, not saved."

    # a second decision is said on the page it came from, naming the first: not an error page
    late = browser.post(action, {"decision": "deny", "reason": "changed my mind"})
    assert late.status_code == 303
    assert late.headers["location"] == f"/ui/approvals?refused={asked[first]['id']}"
    said = _said(browser.get(late.headers["location"]))
    assert said == (
        "Not decided: note_create for clerk was approved by you first. The first decision stands."
    )
    assert browser.json(f"/approvals/{asked[first]['id']}")["status"] == "approved"
    assert len(mock.requests) == 4  # nothing ran twice


@pytest.fixture
def live(project: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Live]:
    monkeypatch.setattr(changes, "FALLBACK_S", 3600.0)  # only a commit can wake a stream
    opened = Live(project)
    try:
        yield opened
    finally:
        opened.close()


def _parts(events: Iterator[tuple[str, str]], until: Any) -> list[Node]:
    """The parts a never-ending stream sends, up to the first for which ``until`` holds."""
    parts = []
    for name, data in events:
        assert name == "approvals"
        parts.append(parse(data))
        if until(parts[-1]):
            return parts
    raise AssertionError("the stream ended")


def _ids(part: Node) -> list[str]:
    return [li.attrs["data-approval"] for li in part.all("li", cls="approval")]


def test_the_list_follows_requests_asked_and_decided_in_other_processes(
    agent: Agent, live: Live, mock: MockProvider
) -> None:
    """A worker process pauses a run; the list's stream, open before, shows its request as
    that commit is made; a decision over the JSON API takes it away again."""
    agent("clerk", CLERK)
    mock.queue(Reply(tool_calls=[("note_create", {"title": "plan", "body": "x"})]))
    live.browser.client.post("/threads", json={"agent_id": "clerk", "id": "t1"})
    started = live.browser.client.post(
        "/threads/t1/runs", json={"agent_id": "clerk", "message": "note it"}
    )
    run_id = started.json()["run_id"]
    empty = live.browser.get("/ui/approvals")
    assert empty.by_id("approvals").text().startswith("Nothing waits")
    with live.stream(empty.by_id("approvals-follow").attrs["sse-connect"]) as response:
        assert response.status_code == 200
        events = _events(response, time.monotonic() + READ_S)
        wait_for("the stream to watch", lambda: live.watching() == 1)
        live.start_worker()  # only now is anything committed
        [asked] = _parts(events, _ids)
        [item] = asked.all("li", cls="approval")
        assert item.attrs["data-run"] == run_id and "note_create" in item.one("h2").text()
        decided = live.browser.client.post(
            f"/approvals/{item.attrs['data-approval']}", json={"decision": "deny"}
        )
        assert decided.status_code == 200
        [gone] = _parts(events, lambda part: not _ids(part))
        assert gone.by_id("approvals").text().startswith("Nothing waits")
    wait_for("the stream to give its watch back", lambda: live.watching() == 0)
