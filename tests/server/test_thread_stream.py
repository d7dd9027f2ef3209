"""A thread's stream gives its runs' events in the order the runs held the thread, whatever
order their ids are in (issue 39 item 11): a run queued before another but served after it —
a POSTed run waiting for a worker while a run started directly holds the thread — reaches a
client that stayed connected and one that resumes with the last id it got. On both back ends
(``store_url``)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from agentrunner.runtime.compose import open_workspace
from agentrunner.testing import MockProvider, Reply
from agentrunner.workspace import feeds
from tests.runner.conftest import Agent

AUTH = {"authorization": "Bearer secret-token"}


def _events(response: httpx2.Response) -> Iterator[dict[str, Any] | None]:
    """The stream's events; None for a ping (comments every 15 s), so a reader can give up."""
    current: dict[str, Any] = {}
    for line in response.iter_lines():
        if not line:
            yield current if "data" in current else None
            current = {}
            continue
        name, _, value = line.partition(":")
        current[name] = value[1:] if value.startswith(" ") else value


def _until_idle(response: httpx2.Response, runs: int) -> list[dict[str, Any]]:
    """The stream's events up to the ``runs``-th ``agent.idle``; a failure once a ping comes
    20 s on without it."""
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    for item in _events(response):
        if item is not None:
            got.append(item)
        if sum(e["event"] == "agent.idle" for e in got) == runs:
            return got
        assert time.monotonic() < deadline, f"not {runs} runs' events: {got}"
    raise AssertionError(f"the stream ended: {got}")


def _stream(url: str, last_event_id: str | None = None) -> Any:
    headers = {**AUTH, **({"last-event-id": last_event_id} if last_event_id else {})}
    return httpx2.stream("GET", f"{url}/threads/t/events", headers=headers, timeout=30)


async def _direct_run_then_serve_the_queue(project: Path, message: str) -> str:
    """A run started here on thread ``t`` while an earlier-queued run waits; then the queue
    served. The direct run's id."""
    ws = await open_workspace(project)
    try:
        direct = await ws.runner.run_agent("talker", "t", message)
        await ws.worker(concurrency=1).run(until_idle=True)
        return direct.run_id
    finally:
        await ws.close()


@pytest.mark.parametrize("read", [1000, 3])  # 3: a run's events read a few at a time
def test_a_run_queued_first_and_served_last_reaches_the_threads_stream(
    agent: Agent,
    project: Path,
    server: Any,
    mock: MockProvider,
    monkeypatch: pytest.MonkeyPatch,
    read: int,
) -> None:
    monkeypatch.setattr(feeds, "_EVENTS_READ", read)
    agent("talker")
    api = server(worker=False)  # the queued run waits until this test serves it
    assert httpx2.post(
        f"{api.url}/threads", headers=AUTH, json={"agent_id": "talker", "id": "t"}
    ).is_success
    mock.queue(Reply(text="answered second"), Reply(text="answered first"))
    with _stream(api.url) as live:
        queued = httpx2.post(
            f"{api.url}/threads/t/runs", headers=AUTH, json={"agent_id": "talker", "message": "a"}
        ).json()["run_id"]
        direct = asyncio.run(_direct_run_then_serve_the_queue(project, "b"))
        assert direct > queued  # the direct run's id is the later one, yet it ran first
        seen = _until_idle(live, runs=2)
    runs = [json.loads(e["data"])["run_id"] for e in seen]
    assert runs == sorted(runs, key=[direct, queued].index)  # in the order they held it
    answers = [json.loads(e["data"])["text"] for e in seen if e["event"] == "agent.message"]
    assert answers == ["answered second", "answered first"]
    ids = [e["id"] for e in seen]
    assert len(ids) == len(set(ids))

    # Resumed after the direct run's last event: the queued run's events, each once.
    last_of_direct = max(i for i, e in enumerate(seen) if json.loads(e["data"])["run_id"] == direct)
    with _stream(api.url, seen[last_of_direct]["id"]) as resumed:
        rest = _until_idle(resumed, runs=1)
    assert [e["id"] for e in rest] == ids[last_of_direct + 1 :]
    # …and after any event of the queued run: what came after it, nothing twice.
    with _stream(api.url, ids[-3]) as resumed:
        assert [e["id"] for e in _until_idle(resumed, runs=1)] == ids[-2:]
