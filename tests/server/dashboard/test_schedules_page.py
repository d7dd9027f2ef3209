"""The schedules on the dashboard (issue 44, item 4): ``/ui/schedules`` lists each schedule with
its state, next and last fire (its run linked) and counts, and forms that pause, resume and run
one now — refused without their CSRF field —; ``/ui/schedules/{name}`` shows its recent fires;
the list's stream sends the table again when another process writes a fire. On both back ends
(``store_url``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from agentrunner.store import changes
from tests.runner.conftest import Agent
from tests.server.conftest import ServerThread
from tests.server.dashboard.pages_html import Browser, Node, parse, wait_for
from tests.server.dashboard.test_live_pages import READ_S, _events
from tests.server.test_schedule_routes import T0, Clock, fire_elsewhere, with_schedules


@dataclass
class Dashboard:
    """The dashboard on loopback in this process (no worker: fires come from elsewhere, on
    ``clock``; its streams' fallback an hour), and a browser on it."""

    server: ServerThread
    browser: Browser
    project: Path
    clock: Clock
    app: Any

    def fire(self, at: float) -> None:
        fire_elsewhere(self.project, self.clock, at)

    def watching(self) -> int:
        count: int = self.app.state.workspace.runner.store.changes.watching
        return count


@pytest.fixture
def dashboard(agent: Agent, project: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Dashboard]:
    from agentrunner.interfaces.server import create_app

    monkeypatch.setattr(changes, "FALLBACK_S", 3600.0)
    with_schedules(agent, project)
    app = create_app(project, token=None, worker=False)
    server = ServerThread(app)
    clock = Clock()
    app.state.workspace.schedules.clock = clock
    browser = Browser(server.url)
    try:
        yield Dashboard(server, browser, project, clock, app)
    finally:
        browser.close()
        server.stop()


def _rows(page: Node) -> dict[str, Node]:
    return {row.attrs["data-schedule"]: row for row in page.by_id("schedules").all("tr")[1:]}


def _until_fired(events: Iterator[tuple[str, str]], schedule: str) -> Node:
    """The first table a never-ending stream sends that shows a fire of ``schedule`` (one
    before it may show only the clock moved on: a wake-up that came first)."""
    for name, data in events:
        assert name == "schedules"
        part = parse(data)
        if _rows(part)[schedule].one(cls="last-fire").all(cls="badge"):
            return part
    raise AssertionError("the stream ended")


def _buttons(row: Node) -> list[tuple[str, str]]:
    return [(form.attrs["action"], form.one("button").text()) for form in row.all("form")]


def test_the_page_lists_each_schedule_and_its_buttons_pause_resume_and_run_it(
    dashboard: Dashboard,
) -> None:
    browser = dashboard.browser
    dashboard.fire(T0)
    dashboard.fire(T0 + 10)  # ping's tick: a run queued
    page = browser.get("/ui/schedules")
    assert page.one("a", aria_current="page").text() == "Schedules"  # the nav's own tab
    rows = _rows(page)
    assert list(rows) == ["digest", "nap", "ping"]
    ping, digest = rows["ping"], rows["digest"]
    assert ping.one("a", href="/ui/schedules/ping").text() == "ping"
    assert ping.one("a", href="/#agent-pinger").text() == "pinger"
    assert ping.one("td", cls="when").text() == "every 10 s"
    assert "(Europe/Paris)" in digest.one("td", cls="when").text()
    assert ping.one("td", cls="target").text() == "a new thread"
    assert digest.one("td", cls="target").one("a").attrs["href"] == "/ui/channels/general"
    assert ping.attrs["data-state"] == digest.attrs["data-state"] == "active"
    [run] = browser.json("/schedules/ping")["recent"]
    last = ping.one("td", cls="last-fire")
    assert last.one("a").attrs["href"] == f"/ui/runs/{run['run_id']}"
    assert last.one(cls="badge").text() == "queued"
    assert digest.one("td", cls="last-fire").text() == "not yet"
    assert (
        ping.one(cls="fires-queued").text() == "1" and digest.one(cls="fires-queued").text() == "0"
    )
    assert _buttons(ping) == [
        ("/ui/schedules/ping/pause", "Pause"),
        ("/ui/schedules/ping/run", "Run now"),
    ]
    for form in ping.all("form"):
        assert form.one("input", name="csrf").attrs["value"] == browser.csrf
        assert form.one("input", name="back").attrs["value"] == "/ui/schedules"
    version = page.by_id("schedules-live").attrs["data-version"]
    follow = page.by_id("schedules-follow")
    assert follow.attrs["sse-connect"] == f"/ui/schedules/stream?{urlencode({'version': version})}"

    # Pause: the page says so, the row is paused and offers Resume; the next tick fires nothing
    paused = browser.post("/ui/schedules/ping/pause", {"back": "/ui/schedules"})
    assert paused.status_code == 303 and paused.headers["location"] == "/ui/schedules?paused=ping"
    page = browser.get(paused.headers["location"])
    assert page.by_id("schedule-said").text().startswith("ping is paused")
    row = _rows(page)["ping"]
    assert row.attrs["data-state"] == "paused" and row.one(cls="next-fire").text() == "—"
    assert _buttons(row)[0] == ("/ui/schedules/ping/resume", "Resume")
    dashboard.fire(T0 + 20)
    assert len(browser.json("/schedules/ping")["recent"]) == 1
    resumed = browser.post("/ui/schedules/ping/resume", {"back": "/ui/schedules"})
    page = browser.get(resumed.headers["location"])
    assert page.by_id("schedule-said").text().startswith("ping is resumed")
    assert _rows(page)["ping"].attrs["data-state"] == "active"
    # an address that says what is not so (a stale link, another's) says nothing
    assert not browser.get("/ui/schedules?paused=ping").has_id("schedule-said")
    assert not browser.get("/ui/schedules?fired=ping&tick=1").has_id("schedule-said")

    # Run now: a run queued, linked from what the page says and from the row
    dashboard.clock.now = T0 + 23
    fired = browser.post("/ui/schedules/digest/run", {"back": "/ui/schedules"})
    assert fired.status_code == 303
    page = browser.get(fired.headers["location"])
    said = page.by_id("schedule-said")
    [digest_run] = browser.json("/schedules/digest")["recent"]
    assert said.text() == f"digest fired now: run {digest_run['run_id']} is queued."
    assert said.one("a").attrs["href"] == f"/ui/runs/{digest_run['run_id']}"
    assert _rows(page)["digest"].one(cls="last-fire").one("a").attrs["href"] == (
        f"/ui/runs/{digest_run['run_id']}"
    )
    # … or, its agent disabled, not run, and why
    page = browser.get(browser.post("/ui/schedules/nap/run").headers["location"])
    assert (
        page.by_id("schedule-said")
        .text()
        .startswith("nap was not run: agent_disabled: agent 'sleepy' is disabled")
    )
    assert _rows(page)["nap"].one(cls="fires-skipped").text() == "1"


def test_a_form_without_its_csrf_field_does_nothing(dashboard: Dashboard) -> None:
    browser = dashboard.browser
    for action in ("pause", "run"):
        refused = browser.post(f"/ui/schedules/ping/{action}", csrf=False)
        assert refused.status_code == 403 and "CSRF" in refused.text
        forged = browser.post(f"/ui/schedules/ping/{action}", {"csrf": "x" * 43}, csrf=False)
        assert forged.status_code == 403
    ping = browser.json("/schedules/ping")
    assert ping["state"] == "active" and ping["recent"] == []
    missing = browser.post("/ui/schedules/nightly/pause")
    assert missing.status_code == 404 and "no schedule" in missing.text  # a page saying so
    assert "digest, nap, ping" in missing.text


def test_a_schedules_page_shows_its_recent_fires(dashboard: Dashboard) -> None:
    browser = dashboard.browser
    dashboard.fire(T0)
    dashboard.fire(T0 + 10)
    dashboard.fire(T0 + 20)  # the first fire's run has not ended: skipped (overlap = "skip")
    page = browser.get("/ui/schedules/ping")
    assert page.one("h1").text() == "Schedule ping"
    assert page.by_id("schedule-facts").one("dd", cls="when").text() == "every 10 s"
    skipped, queued = page.by_id("fires").all("tr")[1:]
    assert (skipped.attrs["data-outcome"], queued.attrs["data-outcome"]) == ("skipped", "queued")
    assert skipped.one(cls="fire-reason").text().startswith("overlap: the previous fire's run")
    [run] = [f for f in browser.json("/schedules/ping")["recent"] if f["run_id"]]
    assert queued.one("a", cls="run-link").attrs["href"] == f"/ui/runs/{run['run_id']}"
    assert queued.one("a", href=f"/ui/threads/{run['thread_id']}").text() == run["thread_id"]
    assert run["thread_id"].startswith("pinger-")  # thread = "new": its own
    assert not skipped.all("a", cls="run-link")
    forms = [form.attrs["action"] for form in page.all("form", cls="schedule-form")]
    assert forms == ["/ui/schedules/ping/pause", "/ui/schedules/ping/run"]
    assert {
        f.one("input", name="back").attrs["value"] for f in page.all("form", cls="schedule-form")
    } == {"/ui/schedules/ping"}
    other = browser.get("/ui/schedules/digest")  # another schedule: another page
    assert other.by_id("fires").text().startswith("No fires yet: its next tick is")
    browser.get("/ui/schedules/nightly", status=404)


def test_the_list_follows_fires_written_in_another_process(dashboard: Dashboard) -> None:
    """The table's stream, open before, sends the table again as another process's fire is
    committed (the fallback timer is an hour: only the commit wakes it)."""
    dashboard.fire(T0)
    page = dashboard.browser.get("/ui/schedules")
    assert _rows(page)["ping"].one(cls="last-fire").text() == "not yet"
    path = page.by_id("schedules-follow").attrs["sse-connect"]
    with dashboard.browser.client.stream("GET", path, timeout=READ_S) as response:
        assert response.status_code == 200
        events = _events(response, time.monotonic() + READ_S)
        wait_for("the stream to watch", lambda: dashboard.watching() == 1)
        dashboard.fire(T0 + 10)
        part = _until_fired(events, "ping")
        last = _rows(part)["ping"].one(cls="last-fire")
        assert last.one(cls="badge").text() == "queued" and last.one("a", cls="run-link")
        for form in _rows(part)["ping"].all("form"):  # its forms work as the page's
            assert form.one("input", name="csrf").attrs["value"] == dashboard.browser.csrf
    wait_for("the stream to give its watch back", lambda: dashboard.watching() == 0)
