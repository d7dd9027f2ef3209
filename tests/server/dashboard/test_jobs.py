"""The jobs pages, ``/ui/jobs`` and ``/ui/jobs/{id}``: the company's background briefs, served
by the server's own worker, listed, followed and stopped."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.server.dashboard.pages_html import Browser, Node, wait_for


@pytest.fixture
def job_browser(agent: Agent, project: Path, server: Any, store_url: str) -> Iterator[Browser]:
    """A company (ceo, who delegates, and cto) behind a loopback server whose worker is
    registered: background briefs are queued for it, no worker process is started."""
    agent("ceo", "name: Chief Executive\ncapabilities: [agents]")
    agent("cto", "name: Chief Technology Officer\nreports_to: ceo")
    browser = Browser(server(token=None).url)
    wait_for("the server's worker", lambda: bool(_store_call(store_url, _workers)))
    yield browser
    browser.close()


async def _workers(store: Any) -> list[Any]:
    return list(await store.workers.alive())


def _store_call(store_url: str, work: Any) -> Any:
    from agentrunner.store import open_store

    async def call() -> Any:
        store = await open_store(store_url)
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(call())


def brief(project: Path, store_url: str, directive: str) -> str:
    """``agentrunner brief --background`` as the library does it: queued for a worker."""
    from agentrunner.config import load_config
    from agentrunner.workspace.company.brief import queue_brief

    config = load_config(project)  # files read here, off any loop

    async def queue(store: Any) -> str:
        queued = await queue_brief(config, store, directive)
        assert queued.worker_pid is None  # the server's worker serves it: none was started
        return queued.job_id

    job_id: str = _store_call(store_url, queue)
    return job_id


def status(page: Node) -> str:
    return page.by_id("job-status").text()


def job_status(browser: Browser, job_id: str) -> str:
    return status(browser.get(f"/ui/jobs/{job_id}"))


def test_the_jobs_list_and_each_jobs_log_with_its_delegation(
    job_browser: Browser, project: Path, store_url: str, mock: MockProvider
) -> None:
    mock.queue(
        Reply(tool_calls=[("ask_agent", {"agent": "cto", "message": "Is v2 ready?"})]),
        Reply(text="v2 is ready to ship."),
        Reply(text="Release v2 is done."),
    )
    release = brief(project, store_url, "Release v2")
    wait_for("the release", lambda: job_status(job_browser, release) == "completed")
    mock.queue(Reply(text="The notes are written."))
    notes = brief(project, store_url, "Write the release notes")
    wait_for("the notes", lambda: job_status(job_browser, notes) == "completed")

    listed = job_browser.get("/ui/jobs")
    rows = listed.by_id("jobs").all("tr", data_job=notes) + listed.by_id("jobs").all(
        "tr", data_job=release
    )
    assert [row.attrs["data-job"] for row in listed.by_id("jobs").all("tr")[1:]] == [
        notes,
        release,
    ]  # newest first
    for row, directive in zip(rows, ("Write the release notes", "Release v2"), strict=True):
        assert row.one("td", cls="directive").text() == directive
        assert row.one(cls="badge").text() == "completed"
        assert row.one("a").attrs["href"] == f"/ui/jobs/{row.attrs['data-job']}"
        assert "brief (background)" in row.text() and "$0.0" in row.text()

    page = job_browser.get(f"/ui/jobs/{release}")
    log = page.by_id("job-log")
    lines = [line.text() for line in log.all("li")]
    assert lines[0].startswith('→ ask_agent {"agent": "cto", "message": "Is v2 ready?"}')
    assert "cto › answered" in lines[1] and "v2 is ready to ship." in lines[1]  # folded
    assert lines[2] == "← v2 is ready to ship."
    assert lines[-1] == "Release v2 is done."
    assert page.one("h1").text() == "Release v2"
    assert not page.all("form", id="stop-job")  # it ended: nothing to stop
    assert "sse-connect" not in page.by_id("job-follow").attrs
    cost = page.by_id("job-cost").text()
    assert "tokens" in cost and "ceo" in page.by_id("job-live").text()
    assert page.by_id("job-run").attrs["href"] == f"/ui/runs/{release}"

    other = job_browser.get(f"/ui/jobs/{notes}")
    assert [li.text() for li in other.by_id("job-log").all("li")] == ["The notes are written."]
    assert "ask_agent" not in other.by_id("job-live").text()


def test_stop_a_running_job_and_a_finished_one(
    job_browser: Browser, project: Path, store_url: str, mock: MockProvider
) -> None:
    mock.queue(Reply(text="Too late.", delay_s=60))
    slow = brief(project, store_url, "Think forever")
    wait_for("the job to start", lambda: job_status(job_browser, slow) == "running")
    page = job_browser.get(f"/ui/jobs/{slow}")
    form = page.one("form", id="stop-job")
    assert (form.attrs["method"], form.attrs["action"]) == ("post", f"/ui/jobs/{slow}/stop")
    assert form.one("input", name="csrf").attrs["value"] == job_browser.csrf
    assert form.one("button").text() == "Stop job"
    connect = page.by_id("job-follow").attrs["sse-connect"]
    assert connect.startswith(f"/ui/jobs/{slow}/stream?version=")

    refused = job_browser.post(f"/ui/jobs/{slow}/stop", csrf=False)
    assert refused.status_code == 403
    assert job_status(job_browser, slow) == "running"  # nothing was done

    stopped = job_browser.post(f"/ui/jobs/{slow}/stop")
    assert stopped.status_code == 303
    assert stopped.headers["location"] == f"/ui/jobs/{slow}?stopped=requested"
    after = job_browser.get(stopped.headers["location"])
    assert status(after) == "cancelled"  # the stop waited for it
    said = after.by_id("job-error").text()  # its code once, not "cancelled: cancelled: …"
    assert said.count("cancelled") == 1, said
    assert after.by_id("stop-said").text().startswith("Stopped")
    assert not after.all("form", id="stop-job")
    run = job_browser.json(f"/runs/{slow}")
    assert (run["status"], run["stop_reason"]) == ("cancelled", "cancelled")

    mock.queue(Reply(text="Done quickly."))
    quick = brief(project, store_url, "Be quick")
    wait_for("the quick job", lambda: job_status(job_browser, quick) == "completed")
    again = job_browser.post(f"/ui/jobs/{quick}/stop")  # a page left open after it ended
    assert again.status_code == 303
    assert again.headers["location"] == f"/ui/jobs/{quick}?stopped=settled"
    said = job_browser.get(again.headers["location"])
    assert said.by_id("stop-said").text() == "This job had already ended; it was left as it was."
    assert status(said) == "completed"  # never turned into a failed one

    version = said.by_id("job-live").attrs["data-version"]
    same = job_browser.client.get(f"/ui/jobs/{quick}/stream?version={version}")
    assert same.status_code == 200 and same.text.split() == ["event:", "end", "data:", "ended"]
    fragment = job_browser.client.get(f"/ui/jobs/{quick}/stream?version=running.0.0")
    assert "event: job" in fragment.text and "<html" not in fragment.text
    assert 'id="job-status"' in fragment.text


def test_an_unknown_job_is_a_404_page(job_browser: Browser) -> None:
    page = job_browser.get("/ui/jobs/run_nope", status=404)
    assert "no job 'run_nope'" in page.text()
    assert job_browser.post("/ui/jobs/run_nope/stop").status_code == 404
    assert job_browser.post("/ui/jobs/run_nope/stop", csrf=False).status_code == 403
    assert job_browser.client.get("/ui/jobs/run_nope/stream").status_code == 404
    empty = job_browser.get("/ui/jobs")
    assert empty.by_id("jobs").text().startswith("No jobs yet")
