"""What a person sees and does in the dashboard beyond its pages' contents: long conversations
open at their newest, a thread's reply shows at once, times in the browser's own zone, a lost
server said, forms that cannot be undone asking first, the costs chart against the limits, a
running run's page followed to its end by its stream."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from playwright.sync_api import expect

from agentrunner.testing import MockProvider, Reply
from tests.browser.conftest import Served, accessible

LOBBY = '\n[channels.lobby]\nmembers = ["you"]\n'  # people only: no agent answers


def _post(served: Served, text: str, thread: str | None = None) -> str:
    body = {"text": text, "sender": "you", **({"thread": thread} if thread else {})}
    request = urllib.request.Request(
        served.url + "/channels/lobby/messages",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        message_id: str = json.load(answer)["message"]["id"]
        return message_id


def _lobby(serve: Callable[..., Served], tmp_path: Path) -> Served:
    with (tmp_path / "project" / "agentrunner.toml").open("a") as config:
        config.write(LOBBY)
    return serve()


def _in_view(page: Any, selector: str) -> bool:
    return bool(
        page.locator(selector).evaluate(
            "e => { const r = e.getBoundingClientRect();"
            " return r.top >= 0 && r.bottom <= window.innerHeight; }"
        )
    )


def test_a_long_channel_and_thread_open_at_the_newest_and_a_reply_shows_at_once(
    serve: Callable[..., Served], tmp_path: Path, page: Any
) -> None:
    served = _lobby(serve, tmp_path)
    root = _post(served, "The plan")
    for n in range(55):
        _post(served, f"reply {n}", thread=root)
    said = [_post(served, f"note {n}") for n in range(60)]

    page.goto(served.url + "/ui/channels/lobby")
    newest = f'#messages li[data-id="{said[-1]}"]'
    expect(page.locator(newest)).to_be_visible()
    assert _in_view(page, newest)  # opened at the newest message, not 3,000 px above it
    assert _in_view(page, "#composer-text")
    marker = page.evaluate("window.marker = Math.random()")
    box = page.get_by_role("textbox", name="Message")
    box.fill("Sent with Ctrl+Enter")
    box.press("Control+Enter")
    mine = page.locator("#messages li.message").filter(has_text="Sent with Ctrl+Enter")
    expect(mine).to_have_count(1)
    expect(box).to_have_value("")
    page.wait_for_function(
        "() => { const r = [...document.querySelectorAll('#messages li')].pop()"
        ".getBoundingClientRect(); return r.top >= 0 && r.bottom <= window.innerHeight; }"
    )
    assert page.evaluate("window.marker") == marker
    accessible(page)

    # the thread: its newest replies, older ones a page away, a reply shown at once
    page.goto(served.url + f"/ui/channels/lobby/thread/{root}")
    replies = page.locator("#messages li.message")
    expect(replies.last).to_contain_text("reply 54")
    expect(replies).to_have_count(50)
    expect(page.locator("#older")).to_be_visible()
    assert _in_view(page, "#composer-text")
    marker = page.evaluate("window.marker = Math.random()")
    for text in ("First answer", "Second answer"):
        reply = page.get_by_role("textbox", name="Reply")
        reply.fill(text)
        page.get_by_role("button", name="Send").click()
        expect(page.locator("#messages li.message").last).to_contain_text(text)
        expect(page.get_by_role("textbox", name="Reply")).to_have_value("")
    assert page.evaluate("window.marker") == marker  # no reload: the answer was the thread
    accessible(page)
    page.locator("#older").click()
    expect(page.locator("#messages li.message").first).to_contain_text("reply 0")
    expect(page.locator("#newest")).to_be_visible()


def test_a_message_that_begins_a_thread_gets_its_replies_link_live(
    serve: Callable[..., Served], tmp_path: Path, page: Any
) -> None:
    """Issue 39: the link to a thread begun on the page came only with a reload."""
    served = _lobby(serve, tmp_path)
    root = _post(served, "Who takes the launch?")
    page.goto(served.url + "/ui/channels/lobby")
    expect(page.locator(f'#messages li[data-id="{root}"]')).to_be_visible()
    marker = page.evaluate("window.marker = Math.random()")
    link = page.locator(f'#messages li[data-id="{root}"] a.replies')
    expect(link).to_have_count(0)
    _post(served, "I do.", thread=root)
    expect(link).to_have_text("1 reply")
    _post(served, "I can help.", thread=root)
    expect(link).to_have_text("2 replies")
    replies = page.locator("#messages li.message.reply")
    expect(replies).to_have_count(2)  # the replies themselves, each once
    assert page.evaluate("window.marker") == marker  # no reload
    link.click()
    expect(page).to_have_url(served.url + f"/ui/channels/lobby/thread/{root}")
    expect(page.locator("#messages li.message")).to_have_count(2)


def _local(iso: str, zone: str) -> str:
    when = (
        datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).astimezone(ZoneInfo(zone))
    )
    if when.date() == datetime.now(ZoneInfo(zone)).date():
        return when.strftime("%H:%M:%S")
    return when.strftime("%Y-%m-%d %H:%M")


def test_times_are_shown_in_the_browsers_own_zone(
    serve: Callable[..., Served], tmp_path: Path, chromium: Any
) -> None:
    served = _lobby(serve, tmp_path)
    first = _post(served, "Morning")
    shown = {}
    for zone in ("Asia/Kolkata", "America/Los_Angeles"):
        context = chromium.new_context(timezone_id=zone)
        tab = context.new_page()
        try:
            tab.goto(served.url + "/ui/channels/lobby")
            stamp = tab.locator(f'li[data-id="{first}"] time')
            iso = stamp.get_attribute("datetime")
            assert iso is not None
            expect(stamp).to_have_text(_local(iso, zone))
            assert (stamp.get_attribute("title") or "").endswith("UTC")  # the server's, on hover
            shown[zone] = stamp.inner_text()
            # one that arrives live is written in the zone too
            said = f"Later, in {zone}"  # its own text: the other zone's post is on the page too
            tab.get_by_role("textbox", name="Message").fill(said)
            tab.get_by_role("button", name="Send").click()
            later = tab.locator("#messages li.message").filter(has_text=said).locator("time")
            expect(later).to_have_attribute("data-local", "")
            later_iso = later.get_attribute("datetime")
            assert later_iso is not None
            expect(later).to_have_text(_local(later_iso, zone))
        finally:
            context.close()
    assert shown["Asia/Kolkata"] != shown["America/Los_Angeles"]
    # without script, the server's UTC time, said to be UTC
    context = chromium.new_context(java_script_enabled=False)
    tab = context.new_page()
    try:
        tab.goto(served.url + "/ui/channels/lobby")
        expect(tab.locator(f'li[data-id="{first}"] time')).to_have_text(re.compile(r" UTC$"))
    finally:
        context.close()


def test_a_lost_server_is_said_and_a_post_kept(
    serve: Callable[..., Served], tmp_path: Path, page: Any
) -> None:
    served = _lobby(serve, tmp_path)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(served.url + "/")
    notice = page.locator("#connection")
    expect(notice).to_be_hidden()
    assert notice.get_attribute("role") == "status"
    assert errors == []  # no 404 for /favicon.ico, nothing else
    page.context.set_offline(True)
    expect(notice).to_be_visible(timeout=10_000)  # the team's refresh failed
    expect(notice).to_contain_text("Lost the connection to the server")
    accessible(page)
    page.context.set_offline(False)
    expect(notice).to_be_hidden(timeout=10_000)  # its next refresh came back

    page.goto(served.url + "/ui/channels/lobby")
    page.context.set_offline(True)
    box = page.get_by_role("textbox", name="Message")
    box.fill("Said while the server is away")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#composer-unsent")).to_contain_text("Not sent")
    expect(box).to_have_value("Said while the server is away")  # kept, to send again
    expect(notice).to_be_visible()
    page.context.set_offline(False)
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#messages")).to_contain_text("Said while the server is away")
    expect(page.locator("#composer-unsent")).to_have_count(0)
    expect(notice).to_be_hidden()
    # serve's banner says where the dashboard is
    banner = f"agentrunner dashboard on {served.url}/ · API docs at /docs"
    assert banner in served.log.read_text()


def test_a_running_runs_page_follows_it_to_its_end_and_lets_go(
    serve: Callable[..., Served], page: Any, mock: MockProvider
) -> None:
    """Opened while the run waits on its model, the page shows its answer when it comes, from
    the page's one stream (no polling), which the browser closes at its end and does not open
    again; no notice is said."""
    served = serve()
    mock.queue(Reply(text="Postgres, for the team.", delay_s=8), model="gpt-mini")
    opened = urllib.request.Request(
        served.url + "/threads",
        data=json.dumps({"agent_id": "cto", "id": "t-db"}).encode(),
        headers={"content-type": "application/json"},
    )
    urllib.request.urlopen(opened, timeout=30).close()
    request = urllib.request.Request(
        served.url + "/threads/t-db/runs",
        data=json.dumps({"agent_id": "cto", "message": "Pick a database"}).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        run_id = json.load(answer)["run_id"]
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if f"/ui/runs/{run_id}/" in r.url else None)
    page.goto(served.url + f"/ui/runs/{run_id}")
    follow = page.locator("#run-follow")
    expect(follow).to_have_attribute("sse-connect", re.compile(rf"^/ui/runs/{run_id}/stream\?"))
    expect(page.locator("#cancel-run")).to_have_count(1)
    expect(page.locator("#answer")).to_contain_text("Postgres, for the team.", timeout=30_000)
    expect(page.locator("#run-status")).to_have_text("completed")
    expect(page.locator("#cancel-run")).to_have_count(0)
    expect(page.locator("#connection")).to_be_hidden()
    accessible(page)
    page.wait_for_timeout(4_000)  # longer than a browser waits to reconnect a closed stream
    assert [url for url in asked if "/stream" in url] == [asked[0]] and len(asked) == 1, asked
    expect(page.locator("#connection")).to_be_hidden()
