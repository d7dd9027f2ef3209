"""``/schedules`` over HTTP (issue 44, item 4): the list and one schedule with its fires, pause
(the next tick fires nothing, in another process) and resume, run-now (a run queued; a skip
with its reason), 404 naming the schedules, every answer as the OpenAPI document declares it,
and the stream of fires: a fire written by another process after connecting reaches it, woken
by the commit, and an id resumes exactly. On both back ends (``store_url``)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
import schemathesis
from schemathesis.specs.openapi.checks import response_schema_conformance

from agentrunner.runtime.compose import open_workspace
from agentrunner.store import changes
from agentrunner.store.schedules import Fire
from tests.runner.conftest import Agent
from tests.server.conftest import ServerThread

AUTH = {"authorization": "Bearer secret-token"}
READ_S = 30.0  # a read's deadline: far below the fallback timer's hour
T0 = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC: 09:00 in Paris, a tick of every schedule here
SCHEDULES = """
[channels.general]
members = ["you", "digester"]

[schedules.ping]
agent = "pinger"
every = "10s"
message = "ping at {{input.fire_time}}"

[schedules.digest]
agent = "digester"
cron = "0 9 * * *"
timezone = "Europe/Paris"
message = "The digest of {{input.fire_date}}"
channel = "general"

[schedules.nap]
agent = "sleepy"
every = "1h"
message = "wake up"
"""


@dataclass
class Clock:
    now: float = T0

    def __call__(self) -> float:
        return self.now


def fire_elsewhere(project: Path, clock: Clock, at: float) -> list[Fire]:
    """Set ``clock`` to ``at`` and let a worker elsewhere (a workspace of its own on the
    project's store) fire what is due."""
    clock.now = at

    async def look() -> list[Fire]:
        ws = await open_workspace(project)
        try:
            ws.schedules.clock = clock
            return await ws.schedules.fire_due()
        finally:
            await ws.close()

    return asyncio.run(look())


def with_schedules(agent: Agent, project: Path) -> None:
    """The agents and ``SCHEDULES``: ping (every 10 s, a new thread), digest (a cron in
    Paris, posting to #general) and nap (its agent disabled)."""
    agent("pinger")
    agent("digester")
    agent("sleepy", "name: Sleepy\nenabled: false")
    config = project / "agentrunner.toml"
    config.write_text(config.read_text() + SCHEDULES)


@dataclass
class Api:
    """The API in this process with no worker, its schedules on ``clock``; ``fire`` looks at
    the schedules from another workspace (another process, as far as the store can tell) on
    the same clock (``fire_elsewhere``)."""

    server: ServerThread
    project: Path
    clock: Clock

    @property
    def url(self) -> str:
        return self.server.url

    def get(self, path: str, status: int = 200) -> Any:
        answer = httpx2.get(self.url + path, headers=AUTH, timeout=READ_S)
        assert answer.status_code == status, answer.text
        return answer.json()

    def post(self, path: str, status: int = 200) -> Any:
        answer = httpx2.post(self.url + path, headers=AUTH, timeout=READ_S)
        assert answer.status_code == status, answer.text
        return answer.json()

    def fire(self, at: float) -> list[Fire]:
        return fire_elsewhere(self.project, self.clock, at)

    def stream(self, last_event_id: str | None = None) -> Any:
        headers = {**AUTH, **({"last-event-id": last_event_id} if last_event_id else {})}
        return httpx2.stream("GET", f"{self.url}/schedules/events", headers=headers, timeout=READ_S)


@pytest.fixture
def api(agent: Agent, project: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    from agentrunner.interfaces.server import create_app

    monkeypatch.setattr(changes, "FALLBACK_S", 3600.0)  # only a commit wakes a stream
    with_schedules(agent, project)
    app = create_app(project, token="secret-token", worker=False)
    server = ServerThread(app)
    clock = Clock()
    app.state.workspace.schedules.clock = clock
    try:
        yield Api(server, project, clock)
    finally:
        server.stop()


def _events(response: httpx2.Response, count: int) -> list[dict[str, Any]]:
    """The stream's next ``count`` events (pings are comments, not events)."""
    got: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in response.iter_lines():
        if not line:
            if "data" in current:
                got.append({**current, "data": json.loads(current["data"])})
                if len(got) == count:
                    return got
            current = {}
            continue
        name, _, value = line.partition(":")
        current[name] = value[1:] if value.startswith(" ") else value
    return got


def test_the_list_and_one_schedule_say_what_each_is_and_what_it_fired(api: Api) -> None:
    assert api.fire(T0) == []  # seen for the first time: from now on
    [fired] = api.fire(T0 + 10)
    assert (fired.schedule, fired.outcome) == ("ping", "queued")

    listed = {s["name"]: s for s in api.get("/schedules")["schedules"]}
    assert list(listed) == ["digest", "nap", "ping"]  # by name
    ping, digest = listed["ping"], listed["digest"]
    assert (ping["agent"], ping["when"], ping["every_s"], ping["cron"]) == (
        "pinger",
        "every 10 s",
        10.0,
        None,
    )
    assert (digest["agent"], digest["cron"], digest["timezone"]) == (
        "digester",
        "0 9 * * *",
        "Europe/Paris",
    )
    assert digest["when"] != ping["when"] and "(Europe/Paris)" in digest["when"]
    assert (ping["target"], ping["thread"], ping["channel"]) == ("a new thread", "new", None)
    assert (digest["target"], digest["thread"], digest["channel"]) == ("#general", None, "general")
    assert ping["state"] == digest["state"] == "active"
    assert (ping["next_fire"], digest["next_fire"]) == (T0 + 20, T0 + 86400)
    assert ping["last_fire"]["tick"] == T0 + 10 and ping["last_fire"]["outcome"] == "queued"
    assert ping["last_fire"]["run_id"] == fired.run_id and digest["last_fire"] is None
    assert (ping["fires"], digest["fires"]) == (
        {"queued": 1, "skipped": 0},
        {"queued": 0, "skipped": 0},
    )

    api.fire(T0 + 20)
    one = api.get("/schedules/ping")
    assert {
        k: v for k, v in one.items() if k not in ("recent", "last_fire", "fires", "next_fire")
    } == {k: v for k, v in ping.items() if k not in ("last_fire", "fires", "next_fire")}
    newest, first = one["recent"]  # newest first; its run not ended, the next tick is skipped
    assert (first["tick"], first["outcome"], first["run_id"]) == (T0 + 10, "queued", fired.run_id)
    assert (newest["tick"], newest["outcome"], newest["run_id"]) == (T0 + 20, "skipped", None)
    assert newest["reason"].startswith("overlap: the previous fire's run")
    assert [f["tick"] for f in api.get("/schedules/ping?limit=1")["recent"]] == [T0 + 20]
    refused = httpx2.get(f"{api.url}/schedules/ping?limit=501", headers=AUTH)
    assert refused.status_code == 422 and "limit" in refused.json()["error"]["message"]


def test_a_paused_schedule_fires_nothing_elsewhere_until_it_is_resumed(api: Api) -> None:
    api.fire(T0)
    paused = api.post("/schedules/ping/pause")
    assert (paused["name"], paused["state"], paused["next_fire"]) == ("ping", "paused", None)
    assert api.fire(T0 + 10) == [] and api.fire(T0 + 20) == []  # ticks pass by, in any process
    assert api.get("/schedules/ping")["recent"] == []
    assert api.get("/schedules/digest")["state"] == "active"  # the others go on
    resumed = api.post("/schedules/ping/resume")
    assert (resumed["state"], resumed["next_fire"]) == ("active", T0 + 30)
    [fired] = api.fire(T0 + 30)  # from its next tick: the paused ones are not caught up
    assert (fired.schedule, fired.tick, fired.outcome, fired.missed) == (
        "ping",
        T0 + 30,
        "queued",
        0,
    )


def test_run_now_queues_a_run_or_says_why_it_did_not(api: Api) -> None:
    api.clock.now = T0 + 3
    fire = api.post("/schedules/digest/run", status=202)
    assert (fire["schedule"], fire["tick"], fire["outcome"]) == ("digest", T0 + 3, "queued")
    assert fire["reason"] == "run now, by request"
    run = api.get(f"/runs/{fire['run_id']}")
    assert (run["agent_id"], run["status"], run["thread_id"]) == (
        "digester",
        "created",
        "digester@general",
    )  # queued for a worker, in the channel it posts to
    posted = api.get("/channels/general/messages")["data"]
    assert [m["content"] for m in posted] == ["The digest of 2027-01-15"]

    skipped = api.post("/schedules/nap/run", status=202)
    assert (skipped["outcome"], skipped["run_id"]) == ("skipped", None)
    assert skipped["reason"].startswith("agent_disabled: agent 'sleepy' is disabled")
    listed = {s["name"]: s for s in api.get("/schedules")["schedules"]}
    assert listed["nap"]["fires"] == {"queued": 0, "skipped": 1}
    assert listed["digest"]["last_fire"]["run_id"] == fire["run_id"]


def test_an_unknown_schedule_is_404_naming_the_projects(api: Api) -> None:
    for method, path in [
        ("GET", "/schedules/nightly"),
        ("POST", "/schedules/nightly/pause"),
        ("POST", "/schedules/nightly/resume"),
        ("POST", "/schedules/nightly/run"),
    ]:
        answer = httpx2.request(method, api.url + path, headers=AUTH)
        assert answer.status_code == 404, path
        error = answer.json()["error"]
        assert (error["code"], error["message"]) == ("not_found", "no schedule 'nightly'")
        assert "digest, nap, ping" in error["hint"]
    assert all(
        s["fires"] == {"queued": 0, "skipped": 0} for s in api.get("/schedules")["schedules"]
    )
    unauthorized = httpx2.get(api.url + "/schedules")  # no token: as every route of the API
    assert unauthorized.status_code == 401


def test_every_answer_is_as_the_openapi_document_declares(api: Api) -> None:
    api.fire(T0)
    api.fire(T0 + 10)
    schema = schemathesis.openapi.from_url(f"{api.url}/openapi.json", headers=AUTH)

    def answer(path: str, method: str, status: int, **case: Any) -> Any:
        made = schema[path][method].Case(**case)
        response = made.call(headers=AUTH)
        assert response.status_code == status, response.text
        made.validate_response(response, checks=[response_schema_conformance])
        return response.json()

    ping = {"name": "ping"}
    assert len(answer("/schedules", "GET", 200)["schedules"]) == 3
    assert answer("/schedules/{name}", "GET", 200, path_parameters=ping)["recent"]
    assert answer("/schedules/{name}/pause", "POST", 200, path_parameters=ping)["state"] == "paused"
    assert (
        answer("/schedules/{name}/resume", "POST", 200, path_parameters=ping)["state"] == "active"
    )
    assert answer("/schedules/{name}/run", "POST", 202, path_parameters=ping)["run_id"]
    nap = {"name": "nap"}
    assert answer("/schedules/{name}/run", "POST", 202, path_parameters=nap)["outcome"] == "skipped"
    answer("/schedules/{name}", "GET", 404, path_parameters={"name": "nightly"})


def test_the_stream_gives_each_fire_as_it_is_written_and_resumes_after_an_id(api: Api) -> None:
    api.fire(T0)  # started before the stream: no fire
    with api.stream() as stream:  # open before the fires: only a commit can wake it
        fired = api.fire(T0 + 10)
        now = api.post("/schedules/digest/run", status=202)
        got = _events(stream, 2)
    assert [e["event"] for e in got] == ["schedule.fire", "schedule.fire"]
    assert got[0]["data"] == {**fired[0].to_dict(), "fired_at": got[0]["data"]["fired_at"]}
    assert got[1]["data"]["run_id"] == now["run_id"] and got[1]["data"]["schedule"] == "digest"
    assert got[0]["id"] != got[1]["id"]

    api.fire(T0 + 20)  # while nobody listens
    with api.stream(last_event_id=got[0]["id"]) as resumed:
        again = _events(resumed, 2)  # after the first: the run-now, then the tick it missed
    assert [(e["data"]["schedule"], e["data"]["tick"]) for e in again] == [
        ("digest", now["tick"]),
        ("ping", T0 + 20),
    ]
    assert again[0]["id"] == got[1]["id"]

    wrong = httpx2.get(f"{api.url}/schedules/events", headers={**AUTH, "last-event-id": "x"})
    assert wrong.status_code == 422 and "Last-Event-ID" in wrong.json()["error"]["message"]


def test_a_server_with_its_worker_fires_the_schedules(
    agent: Agent, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`serve` takes part as a worker does: its worker fires the project's schedules (on the
    real clock here), and serves their runs."""
    from agentrunner.interfaces.server import create_app

    agent("pinger")
    config = project / "agentrunner.toml"
    config.write_text(
        config.read_text()
        + '\n[schedules.beat]\nagent = "pinger"\nevery = "1s"\nmessage = "beat"\n'
        + 'overlap = "queue"\n'
    )
    app = create_app(project, token="secret-token", worker=True)
    server = ServerThread(app)
    try:
        for _ in range(600):  # ticks a second apart: a few are fired and answered within
            shown = httpx2.get(f"{server.url}/schedules/beat", headers=AUTH, timeout=READ_S)
            recent = shown.json()["recent"]
            if sum(f["outcome"] == "completed" for f in recent) >= 2:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"the server's worker fired nothing: {shown.text}")
    finally:
        server.stop()
    ticks = sorted(f["tick"] for f in recent)
    assert ticks == [ticks[0] + n for n in range(len(ticks))]  # each second once
