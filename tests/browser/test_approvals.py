"""A person in the loop, in Chromium (issue 41): a run started over HTTP waits for a yes on a
tool call; the approvals page, open before, shows the request as it comes; approved there, the
run goes on on the server's worker and completes, its page saying who decided."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from agentrunner.testing import MockProvider, Reply
from tests.browser.conftest import Served, accessible

CLERK = """\
---
name: Clerk
description: Keeps the notes
capabilities: [notes]
approval:
  tools: [note_create]
---
You keep notes.
"""


def _post(served: Served, path: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        served.url + path,
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        said: dict[str, Any] = json.load(answer)
        return said


def test_a_waiting_run_is_approved_in_the_browser_and_completes(
    serve: Callable[..., Served],
    tmp_path: Path,
    page: Any,
    mock: MockProvider,
    shoot: Callable[..., Path],
) -> None:
    (tmp_path / "project" / "agents" / "clerk.md").write_text(CLERK)
    served = serve()
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "Launch plan", "body": "Ship on Monday"})]),
        Reply(text="Saved the launch plan."),
        model="gpt-mock",
    )
    page.goto(served.url + "/ui/approvals")
    expect(page.locator("#approvals")).to_contain_text("Nothing waits for a decision")
    expect(page.locator("nav a[aria-current=page]")).to_have_text("Approvals")

    _post(served, "/threads", {"agent_id": "clerk", "id": "t-plan"})
    run_id = _post(
        served, "/threads/t-plan/runs", {"agent_id": "clerk", "message": "Save the launch plan"}
    )["run_id"]
    # shown as it comes, by the page's stream (no reload)
    item = page.locator("li.approval")
    expect(item).to_have_count(1, timeout=30_000)
    expect(item.locator("h2")).to_have_text("clerk asks to call note_create")
    expect(item.locator(".approval-args")).to_contain_text('"title": "Launch plan"')
    expect(item.get_by_role("link", name=run_id)).to_have_attribute("href", f"/ui/runs/{run_id}")
    accessible(page)
    shoot(page, "approvals")

    item.get_by_label("Reason").fill("looks right")
    item.get_by_role("button", name="Approve").click()
    expect(page.locator("#decision-said")).to_have_text(
        "note_create for clerk: approved by you (looks right)."
    )
    expect(page.locator("#approvals")).to_contain_text("Nothing waits for a decision")

    # the server's worker went on with the run: its page follows it to its end
    page.goto(served.url + f"/ui/runs/{run_id}")
    expect(page.locator("#run-status")).to_have_text("completed", timeout=30_000)
    expect(page.locator("#answer")).to_contain_text("Saved the launch plan.")
    decided = page.locator("#run-approvals li.approval")
    expect(decided).to_have_attribute("data-status", "approved")
    expect(decided.locator(".decided-by")).to_have_text("you")
    expect(decided.locator(".reason")).to_have_text("looks right")
    expect(decided.locator(".execution")).to_have_text("ran once")
    expect(decided.locator("form")).to_have_count(0)
    # the call ran (its result: the note's slug), once
    expect(page.locator("li.tool-call .tool-result")).to_have_text("Result launch-plan")
    assert len(mock.requests) == 2


def test_a_background_brief_whose_cto_needs_a_yes_waits_and_is_approved_in_the_browser(
    serve: Callable[..., Served], page: Any, mock: MockProvider
) -> None:
    """The company case: the CEO delegates to the CTO, whose tool call needs a yes; the CTO's
    run waits, so the CEO's brief waits on it (``jobs`` says so); approved on the dashboard,
    the CTO goes on, then the CEO, and the job completes."""
    served = serve()
    (served.project / "agents" / "ceo.md").write_text(
        "---\nname: CEO\ndescription: Runs the company\ncapabilities: [notes]\n---\nYou lead.\n"
    )
    (served.project / "agents" / "cto.md").write_text(
        "---\nname: CTO\ndescription: Owns technology\nreports_to: ceo\nmodel: mockai:gpt-mini\n"
        "capabilities: [notes]\napproval:\n  tools: [note_create]\n---\nYou build.\n"
    )
    mock.queue(
        Reply(tool_calls=[("delegate", {"agent": "cto", "task": "Write the launch plan"})]),
        Reply(text="The CTO wrote the launch plan."),
        model="gpt-mock",
    )
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "Launch plan", "body": "Ship Monday"})]),
        Reply(text="Plan written."),
        model="gpt-mini",
    )
    queued = served.cli("brief", "--background", "Get the launch plan written")
    assert queued.returncode == 0, queued.stderr
    job_id = re.search(r"job (run_\w+)", queued.stdout + queued.stderr)[1]  # type: ignore[index]

    page.goto(served.url + "/ui/approvals")
    item = page.locator("li.approval")
    expect(item).to_have_count(1, timeout=30_000)
    expect(item.locator("h2")).to_have_text("cto asks to call note_create")
    jobs = served.cli("jobs")
    assert jobs.returncode == 0, jobs.stderr
    assert "waiting" in jobs.stdout and "note_create" in jobs.stdout  # the CTO's, not a delegate

    item.get_by_role("button", name="Approve").click()
    expect(page.locator("#approvals")).to_contain_text("Nothing waits for a decision")
    page.goto(served.url + f"/ui/jobs/{job_id}")
    expect(page.locator("#job-status")).to_have_text("completed", timeout=30_000)
    expect(page.locator("main")).to_contain_text("The CTO wrote the launch plan.")
    tool_results = [
        m["content"] for m in mock.requests[-1].body["messages"] if m.get("role") == "tool"
    ]
    assert tool_results[-1] == "Plan written."  # the CTO's answer reached the CEO
