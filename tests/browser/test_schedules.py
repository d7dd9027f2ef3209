"""The schedules page in Chromium (issue 44): it passes axe's checks with its badges and buttons;
*Run now* queues a run, which the server's worker completes and the open page then shows
without a reload; *Pause* and *Resume* change the row; a schedule's page lists its fires."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from agentrunner.testing import MockProvider, Reply
from tests.browser.conftest import Served, accessible

SCHEDULES = """
[schedules.digest]
agent = "ceo"
cron = "0 9 * * 1-5"
timezone = "Europe/Paris"
message = "Write the morning digest"
channel = "general"

[schedules.standup]
agent = "cfo"
every = "1h"
message = "Check the books"
"""


def test_the_schedules_page_runs_pauses_and_follows_a_schedule(
    serve: Callable[..., Served], tmp_path: Path, page: Any, mock: MockProvider
) -> None:
    with (tmp_path / "project" / "agentrunner.toml").open("a") as config:
        config.write(SCHEDULES)
    served = serve()
    mock.queue(Reply(text="Digest: all quiet."), model="gpt-mock")

    page.goto(served.url + "/ui/schedules")
    expect(page.locator("nav a[aria-current=page]")).to_have_text("Schedules")
    digest = page.locator("tr[data-schedule=digest]")
    expect(digest.locator(".last-fire")).to_have_text("not yet")
    expect(page.locator("tr[data-schedule=standup] .when")).to_have_text("every 1 h")
    accessible(page)

    digest.get_by_role("button", name="Run digest now").click()
    expect(page.locator("#schedule-said")).to_contain_text("digest fired now: run")
    # the worker runs it; the open page shows what came of it, without a reload
    expect(page.locator("tr[data-schedule=digest] .last-fire .badge")).to_have_text(
        "completed", timeout=30_000
    )

    page.locator("tr[data-schedule=standup]").get_by_role("button", name="Pause standup").click()
    expect(page.locator("#schedule-said")).to_contain_text("standup is paused")
    standup = page.locator("tr[data-schedule=standup]")
    expect(standup).to_have_attribute("data-state", "paused")
    expect(standup.get_by_role("button", name="Resume standup")).to_be_visible()
    accessible(page)  # a paused and a completed badge, read as well

    page.locator("tr[data-schedule=digest] a", has_text="digest").first.click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Schedule digest")
    expect(page.locator("#fires tbody tr")).to_have_count(1)
    expect(page.locator("#fires .badge")).to_have_text("completed")
    accessible(page)
