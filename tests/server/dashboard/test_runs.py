"""The run page, ``/ui/runs/{id}``: a run as a timeline, over HTTP against the mock provider."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from agentrunner.testing import Fault, MockProvider, Reply
from tests.runner.conftest import Agent
from tests.server.dashboard.pages_html import Browser, Node, wait_for


@pytest.fixture
def run_browser(server: Any) -> Iterator[Browser]:
    """A browser on a loopback server (no token: nothing to log in to), serving runs."""
    browser = Browser(server(token=None).url)
    yield browser
    browser.close()


async def _open_thread(agent_id: str, thread_id: str) -> None:
    from agentrunner.store import open_store

    store = await open_store(os.environ["AGENTRUNNER_DATABASE_URL"])
    try:
        await store.threads.open(thread_id, agent_id)
    finally:
        await store.close()


def run(browser: Browser, agent_id: str, thread_id: str, message: str) -> str:
    """Queue a run over the JSON API on the thread, opened first through the store if new (as
    the Python API opens one under any id); its id."""
    asyncio.run(_open_thread(agent_id, thread_id))
    started = browser.client.post(
        f"/threads/{quote(thread_id, safe='')}/runs",
        json={"agent_id": agent_id, "message": message},
    )
    assert started.status_code == 202, started.text
    run_id: str = started.json()["run_id"]
    return run_id


def settled(browser: Browser, run_id: str) -> str:
    wait_for(
        f"run {run_id} to end",
        lambda: browser.json(f"/runs/{run_id}")["status"] in ("completed", "failed", "cancelled"),
    )
    status: str = browser.json(f"/runs/{run_id}")["status"]
    return status


def tool_calls(page: Node) -> list[Node]:
    return page.by_id("timeline").all("li", cls="tool-call")


def test_a_run_with_a_tool_call_and_a_failed_run_each_show_their_own(
    agent: Agent, run_browser: Browser, mock: MockProvider
) -> None:
    agent("helper", "capabilities: [notes]")
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "Launch plan", "body": "Ship on Monday"})]),
        Reply(text="Saved your launch plan."),
    )
    good = run(run_browser, "helper", "t-good", "Save the launch plan")
    assert settled(run_browser, good) == "completed"
    mock.queue(Reply(fault=Fault.http(401)))
    bad = run(run_browser, "helper", "bad run #2", "Try again")  # any characters but controls
    assert settled(run_browser, bad) == "failed"

    page = run_browser.get(f"/ui/runs/{good}")
    assert page.by_id("run-status").text() == "completed"
    [call] = tool_calls(page)
    assert call.attrs["data-tool"] == "note_create"
    arguments = call.one(cls="tool-args").text()
    assert '"title": "Launch plan"' in arguments and '"body": "Ship on Monday"' in arguments
    assert call.one(cls="tool-result").text() == "Result launch-plan"  # the note's slug
    assert page.by_id("answer").text() == "Answer Saved your launch plan."
    assert page.by_id("stop-reason").text() == "end_turn"
    assert not page.has_id("run-error")
    assert page.by_id("run-thread").attrs["href"] == "/ui/threads/t-good"
    assert page.by_id("run-agent").attrs["href"] == "/#agent-helper"
    assert page.by_id("trace-id").text() == "none (telemetry was off)"
    steps = page.by_id("timeline").all("li", cls="step")
    assert len(steps) == 2 and all("failed" not in step.classes for step in steps)
    # each step's attempts counted from 1 (the events number them across the run's chain)
    for step in steps:
        assert "attempt 1: mockai:gpt-mock (provider mockai) — ok" in step.text()
        assert "attempt 2" not in step.text()
    # its figures apart: "… cache write 0 · $0.0001 · 3 ms", not "0· $0.0001· 3 ms"
    assert "· $" in steps[0].text() and "0· " not in steps[0].text()
    tokens = page.by_id("run-tokens").text()  # two requests of 20 input tokens each
    assert tokens.startswith("input 40 · output ") and tokens.endswith(" · requests 2")

    failed = run_browser.get(f"/ui/runs/{bad}")
    assert failed.by_id("run-status").text() == "failed"
    assert failed.by_id("run-error").text().startswith("provider_auth: ")
    assert failed.by_id("run-end").text().startswith("Failed provider_auth: ")
    [step] = failed.by_id("timeline").all("li", cls="step")
    assert "failed" in step.classes
    assert "provider_auth (HTTP 401)" in step.one(cls="attempt-error").text()
    assert tool_calls(failed) == [] and not failed.has_id("answer")
    assert failed.by_id("run-thread").attrs["href"] == "/ui/threads/bad%20run%20%232"
    assert failed.by_id("run-thread").text() == "bad run #2"
    # what one shows, the other does not
    assert "provider_auth" not in page.by_id("run-live").text()
    assert "Launch plan" not in failed.by_id("run-live").text()
    # neither is running: no cancel form, no stream
    for shown in (page, failed):
        assert not shown.has_id("cancel-run")
        assert "sse-connect" not in shown.by_id("run-follow").attrs


def test_a_delegation_links_the_child_run_and_back(
    agent: Agent, run_browser: Browser, mock: MockProvider
) -> None:
    agent("boss", "capabilities: [agents]")
    agent("cto")
    mock.queue(
        Reply(tool_calls=[("ask_agent", {"agent": "cto", "message": "Is it ready?"})]),
        Reply(text="Ready to ship."),
        Reply(text="The CTO says it is ready."),
    )
    parent = run(run_browser, "boss", "t-boss", "Ask the CTO")
    assert settled(run_browser, parent) == "completed"
    page = run_browser.get(f"/ui/runs/{parent}")
    [call] = tool_calls(page)
    assert call.attrs["data-tool"] == "ask_agent"
    assert call.one(cls="tool-result").text() == "Result Ready to ship."
    [link] = call.all("a")
    child = link.attrs["href"].removeprefix("/ui/runs/")
    assert child != parent and "cto" in call.one(cls="child-run").text()
    assert [a.attrs["href"] for a in page.by_id("children").all("a")] == [f"/ui/runs/{child}"]

    asked = run_browser.get(f"/ui/runs/{child}")
    assert asked.by_id("run-parent").attrs["href"] == f"/ui/runs/{parent}"
    assert asked.by_id("answer").text() == "Answer Ready to ship."
    assert asked.by_id("run-agent").text() == "cto"


def test_cancel_form_while_it_runs_then_none(
    agent: Agent, run_browser: Browser, mock: MockProvider
) -> None:
    agent("helper")
    mock.queue(Reply(text="word " * 400, chunk_delay_s=0.02))
    slow = run(run_browser, "helper", "t-slow", "Write at length")
    wait_for("the run to start", lambda: run_browser.json(f"/runs/{slow}")["status"] == "running")
    page = run_browser.get(f"/ui/runs/{slow}")
    form = page.by_id("cancel-run")
    assert (form.tag, form.attrs["method"], form.attrs["action"]) == (
        "form",
        "post",
        f"/ui/runs/{slow}/cancel",
    )
    assert form.one("input", name="csrf").attrs["value"] == run_browser.csrf
    follow = page.by_id("run-follow")
    assert follow.attrs["sse-connect"].startswith(f"/ui/runs/{slow}/stream?version=running.")
    assert page.by_id("run-status").text() == "running"

    # without the CSRF field, or with another browser's: refused, nothing done
    refused = run_browser.post(f"/ui/runs/{slow}/cancel", csrf=False)
    assert refused.status_code == 403 and "CSRF" in refused.text
    forged = run_browser.post(f"/ui/runs/{slow}/cancel", {"csrf": "x" * 43}, csrf=False)
    assert forged.status_code == 403
    assert run_browser.json(f"/runs/{slow}")["status"] == "running"

    cancelled = run_browser.post(f"/ui/runs/{slow}/cancel")
    assert cancelled.status_code == 303
    assert cancelled.headers["location"] == f"/ui/runs/{slow}?cancel=requested"
    assert settled(run_browser, slow) == "cancelled"
    after = run_browser.get(cancelled.headers["location"])
    assert after.by_id("run-status").text() == "cancelled"
    assert not after.has_id("cancel-said")  # it ended: its status says the rest
    assert after.by_id("run-end").text().startswith("Cancelled")
    assert not after.has_id("cancel-run")
    assert "sse-connect" not in after.by_id("run-follow").attrs

    # the live part: a page of the version it has gets only the end; an older one the part
    version = after.by_id("run-live").attrs["data-version"]
    same = run_browser.client.get(f"/ui/runs/{slow}/stream?version={version}")
    assert same.status_code == 200 and same.text.split() == ["event:", "end", "data:", "ended"]
    fresh = run_browser.client.get(f"/ui/runs/{slow}/stream?version=running.1")
    assert "event: run" in fresh.text and 'id="run-status"' in fresh.text
    assert "<html" not in fresh.text  # a fragment, not a page

    # a stale form, sent after the run ended: said plainly, not an error
    again = run_browser.post(f"/ui/runs/{slow}/cancel")
    assert again.headers["location"] == f"/ui/runs/{slow}?cancel=not_cancellable"
    said = run_browser.get(again.headers["location"]).by_id("cancel-said").text()
    assert said == "The run had already ended: nothing was cancelled."


def test_a_running_runs_page_names_its_model(
    agent: Agent, run_browser: Browser, mock: MockProvider
) -> None:
    """Issue 39: the header said "Model —" until the run ended (its row's model is written
    then): two runs on two models, each named while it runs."""
    agent("helper")
    agent("scout", "model: mockai:gpt-mini")
    for model in ("gpt-mock", "gpt-mini"):
        mock.queue(Reply(text="word " * 400, chunk_delay_s=0.02), model=model)
    runs = {
        "mockai:gpt-mock": run(run_browser, "helper", "t-helper", "Write at length"),
        "mockai:gpt-mini": run(run_browser, "scout", "t-scout", "Write at length too"),
    }
    for model, run_id in runs.items():
        wait_for(
            "its first step", lambda r=run_id: run_browser.get(f"/ui/runs/{r}").has_id("step-1")
        )  # type: ignore[misc]
        page = run_browser.get(f"/ui/runs/{run_id}")
        assert page.by_id("run-status").text() == "running"
        assert page.by_id("run-model").text() == model
    for model, run_id in runs.items():
        run_browser.post(f"/ui/runs/{run_id}/cancel")
        assert settled(run_browser, run_id) == "cancelled"
        assert run_browser.get(f"/ui/runs/{run_id}").by_id("run-model").text() == model


def test_an_unknown_run_is_a_404_page(agent: Agent, run_browser: Browser) -> None:
    agent("helper")
    page = run_browser.get("/ui/runs/run_nope", status=404)
    assert "no run 'run_nope'" in page.text()
    missing = run_browser.post("/ui/runs/run_nope/cancel")
    assert missing.status_code == 404 and "no run" in missing.text
    assert run_browser.client.get("/ui/runs/run_nope/stream").status_code == 404
    # the CSRF check comes first: a form without it learns nothing about the run
    assert run_browser.post("/ui/runs/run_nope/cancel", csrf=False).status_code == 403
    bad = run_browser.client.get("/ui/runs/line%0Abreak")  # not an id: a page saying why
    assert bad.status_code == 422 and bad.headers["content-type"].startswith("text/html")
    assert "control character" in bad.text


def test_pages_are_rendered_without_reading_template_files_on_the_loop(
    agent: Agent, run_browser: Browser
) -> None:
    """Templates are compiled when the dashboard is imported: a page read from disk, or a
    file's time checked at each page, would be blocking calls on the server's loop (the
    detector of tests/conftest.py watches it: such a call is a 500)."""
    agent("helper")
    for _ in range(2):
        assert run_browser.get("/").by_id("team")
        assert run_browser.get("/ui/no/such/page", status=404).text()
        css = run_browser.client.get("/ui/static/app.css")
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")


def test_on_a_guarded_server_the_run_page_and_its_form_want_a_session(
    agent: Agent, server: Any, mock: MockProvider
) -> None:
    agent("helper")
    srv = server()  # with a token: beyond loopback
    browser = Browser(srv.url)
    try:
        browser.client.headers["authorization"] = "Bearer secret-token"  # the JSON API's way
        done = run(browser, "helper", "t-1", "Hello")
        assert settled(browser, done) == "completed"
        del browser.client.headers["authorization"]  # a person's browser: no bearer token
        away = browser.client.get(f"/ui/runs/{done}")
        assert away.status_code == 303
        assert away.headers["location"] == f"/login?next=%2Fui%2Fruns%2F{done}"
        assert browser.post(f"/ui/runs/{done}/cancel").status_code == 401  # nothing done
        login = browser.post("/login", {"token": "secret-token", "next": f"/ui/runs/{done}"})
        assert login.headers["location"] == f"/ui/runs/{done}"
        assert browser.get(f"/ui/runs/{done}").by_id("run-status").text() == "completed"
        stale = browser.post(f"/ui/runs/{done}/cancel")
        assert stale.headers["location"] == f"/ui/runs/{done}?cancel=not_cancellable"
    finally:
        browser.close()


async def test_the_app_is_made_on_a_running_loop_without_blocking_it(project: Path) -> None:
    """An application may make the server's app inside its own loop (tests/workspace do):
    the dashboard's static files and templates are read as the app starts, off the loop, not
    while it is made."""
    from agentrunner.interfaces.server import create_app

    app = create_app(project, worker=False)  # blockbuster fails the test on a blocking call
    assert app.state.dashboard_login is False


def test_the_run_ids_pages_show_are_what_the_cli_takes(
    agent: Agent, run_browser: Browser, mock: MockProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    """A person copies a run's id as a page shows it into ``agentrunner runs show`` (issue 39):
    the pages showed the id's last 8 characters, which the CLI, matching beginnings, refused."""
    import json

    from tests.runner.test_cli_run import cli

    agent("helper")
    mock.queue(Reply(text="One."), Reply(text="Two."))
    runs = [run(run_browser, "helper", "t-ids", message) for message in ("one", "two")]
    assert [settled(run_browser, run_id) for run_id in runs] == ["completed", "completed"]

    page = run_browser.get("/ui/threads/t-ids")
    listed = {
        a.attrs["href"].removeprefix("/ui/runs/"): a.text()
        for a in page.by_id("thread-runs").all("a")
    }
    by_message = {
        a.attrs["href"].removeprefix("/ui/runs/"): a.text().removeprefix("run ")
        for a in page.all("a", cls="run-link")
    }
    assert set(listed) == set(by_message) == set(runs)
    assert listed == by_message  # one short form, wherever a page shows it
    assert listed[runs[0]] != listed[runs[1]]
    for run_id in runs:
        shown = listed[run_id]
        assert run_browser.get(f"/ui/runs/{run_id}").one("title").text().startswith(f"Run {shown} ")
        code, out, err = cli(capsys, "runs", "show", shown, "--json")
        assert code == 0, err
        assert json.loads(out)["run"]["id"] == run_id
