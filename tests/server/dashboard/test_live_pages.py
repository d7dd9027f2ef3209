"""The live parts of the run and job pages, woken by commits (issue 29): a page opened while its
run is queued, whose stream is open before a worker process is even started, gets the part
again as that process commits — the fallback timer is an hour here, and every read has a 30 s
deadline — ending with the finished part and ``end``; a finished run's page is not live; a
job whose process died is found so at the fallback timer; a stream the browser leaves gives its
watch back. On both back ends (``store_url``)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from agentrunner.store import changes
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.server.conftest import ServerThread
from tests.server.dashboard.pages_html import Browser, Node, parse, wait_for

READ_S = 30.0  # a read's deadline: far below the fallback timer's hour


class Live:
    """The dashboard in this process (no worker of its own, streams' fallback an hour), and a
    worker process the test starts when its pages are open."""

    def __init__(self, project: Path) -> None:
        from agentrunner.interfaces.server import create_app

        self.app = create_app(project, token=None, worker=False)
        self.api = ServerThread(self.app)
        self.browser = Browser(self.api.url)
        self.project = project
        self.worker: subprocess.Popen[bytes] | None = None

    def start_worker(self) -> None:
        self.worker = subprocess.Popen(
            [sys.executable, "-m", "agentrunner", "worker"],
            cwd=self.project,
            env=os.environ.copy(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def watching(self) -> int:
        """The watches open in the server's process."""
        count: int = self.app.state.workspace.runner.store.changes.watching
        return count

    def stream(self, path: str) -> Any:
        return httpx2.stream("GET", self.api.url + path, timeout=READ_S)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.send_signal(signal.SIGTERM)
            self.worker.wait(timeout=30)
        self.browser.close()
        self.api.stop()


@pytest.fixture
def live(project: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Live]:
    monkeypatch.setattr(changes, "FALLBACK_S", 3600.0)
    opened = Live(project)
    try:
        yield opened
    finally:
        opened.close()


def _events(response: httpx2.Response, deadline: float) -> Iterator[tuple[str, str]]:
    """A stream's events as (name, data); comments (pings) left out."""
    name, data = "message", []
    for line in response.iter_lines():
        assert time.monotonic() < deadline, "the stream was not woken"
        if not line:
            if data:
                yield name, "\n".join(data)
            name, data = "message", []
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


def _until_end(response: httpx2.Response) -> list[Node]:
    """The parts a stream sent, each parsed, up to its ``end``."""
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    parts = []
    deadline = time.monotonic() + READ_S  # pings keep a read alive: a bound on the whole
    for name, data in _events(response, deadline):
        if name == "end":
            return parts
        parts.append(parse(data))
    raise AssertionError("the stream ended without 'end'")


def _queue_run(live: Live, thread_id: str, message: str) -> str:
    live.browser.client.post("/threads", json={"agent_id": "helper", "id": thread_id})
    made = live.browser.client.post(
        f"/threads/{thread_id}/runs", json={"agent_id": "helper", "message": message}
    )
    assert made.status_code == 202, made.text
    run_id: str = made.json()["run_id"]
    return run_id


def test_run_pages_follow_runs_a_worker_process_serves(agent: Agent, live: Live) -> None:
    agent("helper")  # no tools: the mock answers "Echo: " and the message
    runs = {
        said: _queue_run(live, f"t-{said}", f"Tell me about {said}") for said in ["figs", "kale"]
    }
    streams = {}
    for said, run_id in runs.items():
        page = live.browser.get(f"/ui/runs/{run_id}")
        assert page.by_id("run-status").text() == "created"
        follow = page.by_id("run-follow")
        assert follow.attrs["sse-connect"] == f"/ui/runs/{run_id}/stream?version=created.0"
        assert (follow.attrs["sse-swap"], follow.attrs["sse-close"]) == ("run", "end")
        assert "hx-trigger" not in page.by_id("run-live").attrs  # nothing polls
        streams[said] = live.stream(follow.attrs["sse-connect"])
    try:
        opened = {said: stream.__enter__() for said, stream in streams.items()}
        wait_for("both streams to watch their runs", lambda: live.watching() == 2)
        live.start_worker()  # only now is anything committed
        parts = {said: _until_end(response) for said, response in opened.items()}
    finally:
        for stream in streams.values():
            stream.__exit__(None, None, None)
    for said, other in (("figs", "kale"), ("kale", "figs")):
        last = parts[said][-1]
        assert last.by_id("run-status").text() == "completed"
        assert last.by_id("answer").text() == f"Answer Echo: Tell me about {said}"
        assert other not in last.by_id("run-live").text()
        assert not last.has_id("cancel-run")
        # every part is the page's part as it then was, the last one its end
        assert all(part.has_id("run-live") for part in parts[said])
        assert "completed" not in [p.by_id("run-status").text() for p in parts[said][:-1]]
    wait_for("the streams to give their watches back", lambda: live.watching() == 0)

    # a finished run's page is not live, and its stream (a page loaded as it ended) just ends
    for said, run_id in runs.items():
        page = live.browser.get(f"/ui/runs/{run_id}")
        follow = page.by_id("run-follow")
        assert "sse-connect" not in follow.attrs and "hx-ext" not in follow.attrs
        assert page.by_id("answer").text() == f"Answer Echo: Tell me about {said}"
        version = page.by_id("run-live").attrs["data-version"]
        assert version.startswith("completed.")
        with live.stream(f"/ui/runs/{run_id}/stream?version={version}") as response:
            assert _until_end(response) == []
        # a page left open from before: its part once, then the end
        with live.stream(f"/ui/runs/{run_id}/stream?version=created.0") as response:
            [part] = _until_end(response)
        assert part.by_id("run-live").attrs["data-version"] == version


def test_a_job_page_follows_its_job_and_its_delegation_in_a_worker_process(
    agent: Agent,
    live: Live,
    project: Path,
    store_url: str,
    mock: MockProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentrunner.workspace.company import jobs

    agent("ceo", "name: Chief Executive\ncapabilities: [agents]")
    agent("cto", "name: Chief Technology Officer\nreports_to: ceo")
    mock.queue(
        Reply(tool_calls=[("ask_agent", {"agent": "cto", "message": "Is it ready?"})]),
        Reply(text="Ready to ship."),
        Reply(text="The CTO says it is ready."),
    )

    async def no_worker(config: Any, store: Any) -> None:
        return None  # the test starts the worker, once the job's page is open

    monkeypatch.setattr(jobs, "ensure_worker", no_worker)
    job_id = _brief(project, store_url, "Are we ready to ship?")
    page = live.browser.get(f"/ui/jobs/{job_id}")
    assert page.by_id("job-status").text() == "created"
    follow = page.by_id("job-follow")
    assert follow.attrs["sse-connect"] == f"/ui/jobs/{job_id}/stream?version=created.0.0"
    assert (follow.attrs["sse-swap"], follow.attrs["sse-close"]) == ("job", "end")
    with live.stream(follow.attrs["sse-connect"]) as response:
        wait_for("the stream to watch the job", lambda: live.watching() == 1)
        live.start_worker()
        parts = _until_end(response)
    last = parts[-1]
    assert last.by_id("job-status").text() == "completed"
    log = [line.text() for line in last.by_id("job-log").all("li")]
    assert log[0].startswith("→ ask_agent")
    assert any(line.startswith("cto ›") for line in log)  # the delegation's own lines
    assert log[-1] == "The CTO says it is ready."
    assert "Stop job" not in last.by_id("job-live").text()
    assert "completed" not in [p.by_id("job-status").text() for p in parts[:-1]]
    wait_for("the stream to give its watches back", lambda: live.watching() == 0)
    done = live.browser.get(f"/ui/jobs/{job_id}")
    assert "sse-connect" not in done.by_id("job-follow").attrs


def test_a_job_whose_process_died_is_said_failed_by_its_page(
    agent: Agent,
    live: Live,
    project: Path,
    store_url: str,
    mock: MockProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A dead process commits nothing: the job's stream, at its fallback timer (short here),
    finds it gone, says so and ends."""
    from agentrunner.workspace.company import jobs

    agent("ceo", "name: Chief Executive")
    mock.queue(Reply(text="Too late.", delay_s=60))

    async def no_worker(config: Any, store: Any) -> None:
        return None

    monkeypatch.setattr(jobs, "ensure_worker", no_worker)
    job_id = _brief(project, store_url, "Think forever")
    live.start_worker()
    running = f"/runs/{job_id}"
    wait_for("the job to start", lambda: live.browser.json(running)["status"] == "running")
    page = live.browser.get(f"/ui/jobs/{job_id}")
    assert page.by_id("job-status").text() == "running"
    worker, live.worker = live.worker, None
    assert worker is not None
    worker.kill()
    worker.wait(timeout=30)  # reaped: its pid is gone
    monkeypatch.setattr(changes, "FALLBACK_S", 0.05)
    with live.stream(page.by_id("job-follow").attrs["sse-connect"]) as response:
        [part] = _until_end(response)
    assert part.by_id("job-status").text() == "failed"
    assert "is gone" in part.by_id("job-error").text()


def test_a_page_left_closes_its_stream_and_watch(agent: Agent, live: Live) -> None:
    agent("helper")
    queued = _queue_run(live, "t-left", "Nobody serves this")  # no worker: it stays queued
    for path in (f"/ui/runs/{queued}/stream?version=created.0", f"/ui/jobs/{queued}/stream"):
        with live.stream(path) as response:
            assert response.status_code == 200
            wait_for("the stream to watch", lambda: live.watching() == 1)
        wait_for("the watch given back as the browser left", lambda: live.watching() == 0)
    # a page older than the run as it is: its part at once, its form with this browser's CSRF
    # value; then the browser leaves while the stream waits
    csrf = live.browser.csrf
    stale = f"/ui/runs/{queued}/stream?version=running.7"
    with live.browser.client.stream("GET", stale, timeout=READ_S) as response:
        events = _events(response, time.monotonic() + READ_S)  # kept: closing it closes the
        name, data = next(events)  # response, as a browser leaving would
        assert name == "run"
        part = parse(data)
        assert part.by_id("run-status").text() == "created"
        form = part.by_id("cancel-run")
        assert form.one("input", name="csrf").attrs["value"] == csrf
        assert live.watching() == 1
        events.close()
    wait_for("the watch given back as the browser left", lambda: live.watching() == 0)
    # an unknown run or job: a 404 page, no stream
    for path in ("/ui/runs/run_nope/stream", "/ui/jobs/run_nope/stream"):
        missing = live.browser.client.get(path)
        assert missing.status_code == 404
        assert missing.headers["content-type"].startswith("text/html")
    assert live.watching() == 0


def test_on_a_guarded_server_a_pages_stream_wants_a_session(
    agent: Agent, server: Any, mock: MockProvider
) -> None:
    agent("helper")
    srv = server(worker=False)  # with a token: beyond loopback; the run stays queued
    browser = Browser(srv.url)
    try:
        browser.client.headers["authorization"] = "Bearer secret-token"
        browser.client.post("/threads", json={"agent_id": "helper", "id": "t-1"})
        queued = browser.client.post(
            "/threads/t-1/runs", json={"agent_id": "helper", "message": "Hello"}
        ).json()["run_id"]
        del browser.client.headers["authorization"]  # a person's browser: no bearer token
        for path in (f"/ui/runs/{queued}/stream", f"/ui/jobs/{queued}/stream"):
            away = browser.client.get(path)
            assert away.status_code == 303 and away.headers["location"].startswith("/login?")
        browser.post("/login", {"token": "secret-token", "next": "/"})
        for path in (f"/ui/runs/{queued}/stream", f"/ui/jobs/{queued}/stream"):
            with browser.client.stream("GET", path) as response:
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
    finally:
        browser.close()


def _brief(project: Path, store_url: str, directive: str) -> str:
    """``agentrunner brief --background`` as the library does it: queued for a worker."""
    from agentrunner.config import load_config
    from agentrunner.store import open_store
    from agentrunner.workspace.company.brief import queue_brief

    config = load_config(project)  # files read here, off any loop

    async def queue() -> str:
        store = await open_store(store_url)
        try:
            return (await queue_brief(config, store, directive)).job_id
        finally:
            await store.close()

    return asyncio.run(queue())
