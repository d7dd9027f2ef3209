"""Logging in on a server beyond loopback, and the team page, in a real browser."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from agentrunner.testing import MockProvider, Reply
from tests.browser.conftest import TOKEN, Served, accessible, fits


def test_a_wrong_token_is_refused_and_the_right_one_logs_in(
    serve: Callable[..., Served], page: Any, shoot: Callable[..., Path]
) -> None:
    served = serve(host="0.0.0.0", token=TOKEN)
    page.goto(served.url + "/ui/costs?days=3")
    # Sent to log in, and back where it was going afterwards.
    expect(page).to_have_url(re.compile(r"/login\?next=%2Fui%2Fcosts%3Fdays%3D3$"))
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    shoot(page, "login")

    page.get_by_label("Token").fill("not-the-token")
    with page.expect_response(lambda r: r.url.endswith("/login")) as answer:
        page.get_by_role("button", name="Log in").click()
    assert answer.value.status == 401
    expect(page.get_by_role("alert")).to_contain_text("That token is not this server's")
    assert not [c for c in page.context.cookies() if c["name"] == "ar_session"]
    # Still refused everywhere: a page sends the browser back to log in.
    page.goto(served.url + "/")
    expect(page).to_have_url(re.compile(r"/login\?next=%2F$"))

    page.get_by_label("Token").fill(TOKEN)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(served.url + "/")
    expect(page.get_by_role("heading", name="Team")).to_be_visible()
    (session,) = [c for c in page.context.cookies() if c["name"] == "ar_session"]
    assert session["httpOnly"] is True
    assert session["sameSite"] == "Strict"
    assert TOKEN not in session["value"]  # a digest of it, never the token itself
    # The cookie opens the pages, not the JSON API, which still wants the bearer token.
    api = page.context.request.get(served.url + "/agents")
    assert api.status == 401
    assert page.context.request.get(served.url + "/ui/team").status == 200

    # Logging out ends the session in this browser.
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/login$"))
    page.goto(served.url + "/")
    expect(page).to_have_url(re.compile(r"/login\?next="))


def test_the_team_page_shows_the_org_chart_and_follows_a_run_without_a_reload(
    serve: Callable[..., Served],
    page: Any,
    shoot: Callable[..., Path],
    mock: MockProvider,
) -> None:
    served = serve()
    page.goto(served.url + "/")
    chart = page.get_by_role("list", name="Org chart")
    expect(chart.locator("#agent-ceo")).to_contain_text("CEO")
    # The CTO and CFO report to the CEO: nested under the CEO's card.
    expect(chart.locator("#agent-ceo + ul.org #agent-cto")).to_contain_text("CTO")
    expect(chart.locator("#agent-ceo + ul.org #agent-cfo")).to_contain_text("CFO")
    expect(page.locator("#agent-cto")).to_contain_text("no runs yet")

    mock.queue(Reply(text="Shipped.", input_tokens=1000, output_tokens=200), model="gpt-mini")
    done = served.cli("run", "cto", "Ship the release")
    assert done.returncode == 0, done.stderr
    # The page refreshes its own part: the run and its spend appear, the CEO's stay as they were.
    expect(page.locator("#agent-cto")).to_contain_text("last run", timeout=15_000)
    expect(page.locator("#agent-cto")).to_contain_text("$0.0003 today")
    expect(page.locator("#agent-ceo")).to_contain_text("no runs yet")
    shoot(page, "team", full_page=True)

    page.locator("#agent-cto a").first.click()
    expect(page).to_have_url(re.compile(r"/ui/runs/"))


def test_the_pages_are_accessible_in_light_and_dark_and_fit_a_phone(
    serve: Callable[..., Served],
    page: Any,
    phone: Any,
    shoot: Callable[..., Path],
    mock: MockProvider,
) -> None:
    served = serve(host="0.0.0.0", token=TOKEN)
    for tab in (page, phone):
        tab.goto(served.url + "/")
        accessible(tab)  # the login page
        fits(tab)
        tab.get_by_label("Token").fill(TOKEN)
        tab.get_by_label("Token").press("Enter")  # the keyboard logs in too
        expect(tab.get_by_role("heading", name="Team")).to_be_visible()
        accessible(tab)
        fits(tab)
    light = page.evaluate("getComputedStyle(document.body).backgroundColor")
    dark = phone.evaluate("getComputedStyle(document.body).backgroundColor")
    assert light != dark
    shoot(phone, "team-phone-dark", full_page=True)

    # The theme toggle overrides the system's choice, and is remembered.
    toggle = page.locator("#theme-toggle")
    expect(toggle).to_have_text("Theme: system")
    toggle.click()
    toggle.click()
    expect(toggle).to_have_text("Theme: dark")
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == dark
    page.reload()
    expect(page.locator("#theme-toggle")).to_have_text("Theme: dark")
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == dark
