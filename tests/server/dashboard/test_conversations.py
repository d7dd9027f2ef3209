"""The dashboard's conversation pages over HTTP: the channels, a channel or a DM a page at a
time, posting as a person from its form, its live stream of HTML (new messages and who is
working), a message's thread; agents' threads a page at a time."""

from __future__ import annotations

import asyncio
import html
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import pytest

from agentrunner.core.ids import new_id
from agentrunner.engine import AssistantMessage, ToolCall, ToolResult, UserMessage
from agentrunner.store import Store, open_store
from agentrunner.store.channels import ChannelMessage
from agentrunner.testing import Fault, MockProvider, Reply
from tests.runner.conftest import Agent

T = TypeVar("T")

CHANNELS = """
[channels.general]
members = ["you", "ceo"]

[channels.ops]
members = ["cfo", "ann"]
private = true
"""


@pytest.fixture
def office(agent: Agent, project: Path) -> Path:
    """ceo (on the OpenAI mock) in #general with you; cfo (on the Anthropic mock) in the
    private #ops with ann."""
    agent("ceo", "name: ceo")
    agent("cfo", "name: cfo\nmodel: mockant:claude-mock")
    with (project / "agentrunner.toml").open("a") as config:
        config.write(CHANNELS)
    return project


@pytest.fixture
def browser() -> Iterator[Callable[[Any], httpx2.Client]]:
    """A client that keeps cookies, as a browser does: ``browser(srv)``."""
    opened: list[httpx2.Client] = []

    def make(srv: Any) -> httpx2.Client:
        client = httpx2.Client(base_url=srv.url, timeout=30)
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.close()


def _in_store(work: Callable[[Store], Awaitable[T]]) -> T:
    """``work`` on the project's store, opened beside the server's."""

    async def run() -> T:
        store = await open_store(os.environ["AGENTRUNNER_DATABASE_URL"])
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(run())


def _csrf(client: httpx2.Client, path: str) -> str:
    assert client.get(path).status_code == 200
    return str(client.cookies["ar_csrf"])


def _ids(page: str, list_id: str = "messages") -> list[str]:
    """The data-id of each message in the list ``#list_id``, in order."""
    found = re.search(rf'<ol id="{list_id}"[^>]*>(.*?)</ol>', page, re.S)
    assert found, page
    return re.findall(r'<li class="message[^"]*" id="[^"]*" data-id="([^"]+)"', found.group(1))


def _texts(page: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r'<div class="body">(.*?)</div>', page, re.S)]


def _link(page: str, link_id: str) -> str | None:
    found = re.search(rf'<a id="{link_id}" href="([^"]+)"', page)
    return html.unescape(found.group(1)) if found else None


def _post_api(srv: Any, path: str, **body: Any) -> dict[str, Any]:
    answer = httpx2.post(f"{srv.url}{path}", json=body, timeout=30)
    assert answer.status_code == 201, answer.text
    result: dict[str, Any] = answer.json()
    return result


def test_the_channels_and_two_conversations_each_show_their_own(
    office: Path, server: Any, browser: Any
) -> None:
    srv = server(token=None, worker=False)
    client = browser(srv)
    said = _post_api(srv, "/channels/general/messages", text="Hello general", sender="you")
    _post_api(srv, "/channels/ops/messages", text="Ops only & <private>", sender="ann")
    _post_api(srv, "/dm/ceo", text="Just between us", sender="you")
    reply = _post_api(
        srv,
        "/channels/general/messages",
        text="A reply",
        sender="you",
        thread=said["message"]["id"],
    )

    listing = client.get("/ui/channels")
    assert listing.status_code == 200
    for href in ("/ui/channels/general", "/ui/channels/ops", "/ui/channels/dm:ceo:you"):
        assert f'href="{href}"' in listing.text
    assert "ceo ↔ you" in listing.text and "private channel" in listing.text
    row = re.search(r'<tr data-channel="ops">(.*?)</tr>', listing.text, re.S)
    assert row and "ann" in row.group(1) and "cfo" in row.group(1) and "ceo" not in row.group(1)

    general = client.get("/ui/channels/general").text
    ops = client.get("/ui/channels/ops").text
    dm = client.get("/ui/channels/dm:ceo:you").text
    assert _texts(general) == ["Hello general", "A reply"]
    assert _texts(ops) == ["Ops only & <private>"]  # escaped in the page, the text as said
    assert "Ops only &amp; &lt;private&gt;" in ops
    assert _texts(dm) == ["Just between us"]
    assert len({*_ids(general), *_ids(ops), *_ids(dm)}) == 4
    members = re.search(r'<ul id="members"[^>]*>(.*?)</ul>', ops, re.S)
    assert members and "cfo" in members.group(1) and "you" not in members.group(1)
    assert "private channel" in ops and "private channel" not in general
    # the message that began a thread says so, and its thread shows the reply
    root = said["message"]["id"]
    assert f'href="/ui/channels/general/thread/{root}">1 reply</a>' in general
    thread = client.get(f"/ui/channels/general/thread/{root}").text
    assert _texts(thread) == ["Hello general", "A reply"]
    assert _ids(thread) == [reply["message"]["id"]]
    assert 'name="thread" value="' + root + '"' in thread
    # the form posts as the project's person; in a DM as its person too
    assert 'id="composer-sender" name="sender" value="you"' in general
    assert 'id="composer-text" name="text"' in dm
    assert 'sse-connect="/ui/channels/dm:ceo:you/stream?after=' in dm


def test_a_post_from_the_form_is_stored_once_and_queues_the_agents_runs(
    office: Path, server: Any, browser: Any
) -> None:
    srv = server(token=None, worker=False)
    client = browser(srv)
    csrf = _csrf(client, "/ui/channels/general")
    posted = client.post(
        "/ui/channels/general/messages", data={"csrf": csrf, "text": "Plan for Q3?"}
    )
    assert posted.status_code == 303
    assert posted.headers["location"] == "/ui/channels/general"
    page = client.get("/ui/channels/general").text
    assert _texts(page) == ["Plan for Q3?"]
    [root] = _ids(page)
    # a reply from the thread's form goes back to the thread, a reply to a reply too
    thread_path = f"/ui/channels/general/thread/{root}"
    first = client.post(
        "/ui/channels/general/messages", data={"csrf": csrf, "text": "Draft?", "thread": root}
    )
    assert first.status_code == 303 and first.headers["location"] == thread_path
    [reply] = _ids(client.get(thread_path).text)
    second = client.post(
        "/ui/channels/general/messages", data={"csrf": csrf, "text": "Soon.", "thread": reply}
    )
    assert second.status_code == 303 and second.headers["location"] == thread_path
    assert _texts(client.get(thread_path).text) == ["Plan for Q3?", "Draft?", "Soon."]
    nowhere = client.post(
        "/ui/channels/general/messages", data={"csrf": csrf, "text": "?", "thread": "m_0"}
    )
    assert nowhere.status_code == 404 and "#general has no message &#39;m_0&#39;" in nowhere.text
    in_ops = client.post(
        "/ui/channels/ops/messages",
        data={"csrf": csrf, "text": "Budget?", "sender": "ann"},
        headers={"hx-request": "true"},
    )
    # with htmx: the form again, emptied, and no message in it (the stream brings it)
    assert in_ops.status_code == 200
    assert in_ops.text.lstrip().startswith('<form id="composer"')
    assert re.search(r'name="text"[^>]*></textarea>', in_ops.text)
    assert 'value="ann"' in in_ops.text and 'class="message' not in in_ops.text
    assert _texts(client.get("/ui/channels/ops").text) == ["Budget?"]

    async def stored(store: Store) -> dict[str, list[tuple[str, str, str]]]:
        runs: dict[str, list[tuple[str, str, str]]] = {}
        for name in ("general", "ops"):
            channel = await store.channels.by_name(name)
            assert channel is not None
            message = (await store.channels.after(channel.id))[0]  # the first post
            runs[name] = [
                (run.agent_id, run.status, message.sender)
                for run in await store.runs.list()
                if run.trigger_message_id == message.id
            ]
        return runs

    assert _in_store(stored) == {
        "general": [("ceo", "created", "you")],
        "ops": [("cfo", "created", "ann")],
    }


def test_bad_posts_are_refused_with_a_page_and_nothing_is_stored(
    office: Path, server: Any, browser: Any
) -> None:
    srv = server(token=None, worker=False)
    client = browser(srv)
    csrf = _csrf(client, "/ui/channels/general")
    path = "/ui/channels/general/messages"

    forged = client.post(path, data={"text": "hi"})
    assert forged.status_code == 403 and "unauthorized" in forged.text
    assert "<!doctype html>" in forged.text  # a page, not JSON
    stale = client.post(path, data={"csrf": "x" * 40, "text": "hi"})
    assert stale.status_code == 403
    for text, why in (("", "text is empty"), ("  \n ", "text is empty")):
        empty = client.post(path, data={"csrf": csrf, "text": text})
        assert empty.status_code == 422 and "validation" in empty.text and why in empty.text
    long = client.post(path, data={"csrf": csrf, "text": "x" * 200_001})
    assert long.status_code == 422 and "text is 200001 characters long" in long.text
    agent = client.post(path, data={"csrf": csrf, "text": "hi", "sender": "ceo"})
    assert agent.status_code == 422 and "sender &#39;ceo&#39; is the id of an agent" in agent.text
    outsider = client.post("/ui/channels/ops/messages", data={"csrf": csrf, "text": "hi"})
    assert outsider.status_code == 400 and "you is not a member of #ops" in outsider.text
    unknown = client.post("/ui/channels/genral/messages", data={"csrf": csrf, "text": "hi"})
    assert unknown.status_code == 404 and "no channel &#39;#genral&#39;" in unknown.text
    assert "Did you mean &#39;#general&#39;?" in unknown.text
    # with htmx the refusal is the form again, the text kept and the error in it
    htmx = client.post(
        path, data={"csrf": csrf, "text": " ", "sender": "ada"}, headers={"hx-request": "true"}
    )
    assert htmx.status_code == 422 and htmx.headers["x-composer-error"] == "validation"
    assert htmx.text.lstrip().startswith('<form id="composer"')
    assert 'role="alert" id="composer-error"' in htmx.text and 'value="ada"' in htmx.text

    async def count(store: Store) -> int:
        total = 0
        for name in ("general", "ops"):
            channel = await store.channels.by_name(name)
            assert channel is not None
            total += len(await store.channels.after(channel.id))
        return total + len(await store.runs.list())

    assert _in_store(count) == 0


def test_unknown_pages_and_bad_cursors_are_error_pages(
    office: Path, server: Any, browser: Any
) -> None:
    srv = server(token=None, worker=False)
    client = browser(srv)
    said = _post_api(srv, "/channels/general/messages", text="root", sender="you")["message"]
    reply = _post_api(srv, "/channels/general/messages", text="r", thread=said["id"])["message"]
    for path, what in (
        ("/ui/channels/nope", "no channel &#39;#nope&#39;"),
        ("/ui/channels/nope/stream", "no channel &#39;#nope&#39;"),
        ("/ui/channels/general/thread/m_0", "no thread begun by message &#39;m_0&#39;"),
        (f"/ui/channels/ops/thread/{said['id']}", "#ops has no thread"),  # another channel's
        (f"/ui/channels/general/thread/{reply['id']}", "no thread begun"),  # a reply
        ("/ui/threads/nope", "no thread &#39;nope&#39;"),
    ):
        answer = client.get(path)
        assert answer.status_code == 404, path
        assert "not_found" in answer.text and what in answer.text, (path, answer.text)
    for path, what in (
        ("/ui/channels/general?before=zzz", "before &#39;zzz&#39; is not a position"),
        ("/ui/channels/general?after=m_1&before=m_2", "before and after cannot both"),
        ("/ui/channels/general/stream?after=x", "after &#39;x&#39; is not a position"),
        ("/ui/threads/t?before=0", "before"),
        ("/ui/threads?before=-1", "before"),
    ):
        answer = client.get(path)
        assert answer.status_code == 422, (path, answer.text)
        assert "validation" in answer.text and what in answer.text, (path, answer.text)


async def _seed_channel(store: Store, name: str, count: int) -> list[str]:
    channel = await store.channels.by_name(name)
    assert channel is not None
    messages = [
        ChannelMessage(
            channel.id, new_id("m_"), None, "you", "person", f"{name} {n}", 0, None, time.time()
        )
        for n in range(count)
    ]
    await store.batch([store.channels.message_op(m) for m in messages])
    return [m.id for m in messages]


def test_a_conversation_pages_back_and_forth_without_overlap(
    office: Path, server: Any, browser: Any
) -> None:
    srv = server(token=None, worker=False)
    client = browser(srv)
    ids = _in_store(lambda store: _seed_channel(store, "general", 120))
    newest = client.get("/ui/channels/general").text
    assert _ids(newest) == ids[70:]
    assert _texts(newest)[-1] == "general 119"
    assert _link(newest, "newer") is None and 'sse-connect="' in newest
    # the stream starts where the page's read of the channel's feed ended: a position in it
    assert re.search(r'sse-connect="/ui/channels/general/stream\?after=[1-9][0-9]*\."', newest)
    older_path = _link(newest, "older")
    assert older_path == f"/ui/channels/general?before={ids[70]}"
    older = client.get(older_path).text
    assert _ids(older) == ids[20:70]
    assert 'sse-connect="' not in older and 'id="composer"' not in older  # not the live end
    oldest = client.get(_link(older, "older") or "").text
    assert _ids(oldest) == ids[:20] and _link(oldest, "older") is None
    assert "The beginning of the conversation" in oldest
    back = client.get(_link(oldest, "newer") or "").text
    assert _ids(back) == ids[20:70]
    forward = client.get(_link(back, "newer") or "").text
    assert _ids(forward) == ids[70:] and 'sse-connect="' in forward  # the live end again
    pages = [_ids(p) for p in (newest, older, oldest)]
    assert sum(len(p) for p in pages) == len({i for p in pages for i in p}) == 120


async def _seed_thread(store: Store, thread_id: str, agent_id: str, count: int) -> None:
    await store.threads.open(thread_id, agent_id)
    said: list[Any] = []
    for n in range(count // 4):
        said += [
            UserMessage(f"{thread_id} question {n}"),
            AssistantMessage(tool_calls=[ToolCall(f"c{n}", "lookup", {"query": f"q{n}"})]),
            ToolResult(f"c{n}", "lookup", f"found {n}"),
            AssistantMessage(f"{thread_id} answer {n}", model="mockai:gpt-mock"),
        ]
    await store.batch(
        [
            *store.messages.append_ops(thread_id, 1, said, f"run_{thread_id}"),
            store.threads.manifest_op(thread_id, message_count=len(said), session_run_id=None),
        ]
    )


def test_a_thread_pages_from_its_newest_end_with_tool_calls_folded(
    office: Path, server: Any, browser: Any
) -> None:
    srv = server(token=None, worker=False)
    client = browser(srv)

    async def seed(store: Store) -> None:
        await _seed_thread(store, "ceo-long", "ceo", 120)
        await _seed_thread(store, "cfo-short", "cfo", 8)

    _in_store(seed)
    long = client.get("/ui/threads/ceo-long").text
    seqs = [int(s) for s in re.findall(r'data-seq="(\d+)"', long)]
    assert seqs == list(range(71, 121))
    assert _texts(long)[-1] == "ceo-long answer 29"
    assert '<details class="tool-call"><summary>tool call: <span class="mono">lookup</span>' in long
    assert "&#34;query&#34;: &#34;q29&#34;" in long  # the arguments, as JSON, folded
    assert 'href="/ui/runs/run_ceo-long"' in long
    assert _link(long, "older") == "/ui/threads/ceo-long?before=71"
    older = client.get("/ui/threads/ceo-long?before=71").text
    assert [int(s) for s in re.findall(r'data-seq="(\d+)"', older)] == list(range(21, 71))
    first = client.get(_link(older, "older") or "").text
    assert [int(s) for s in re.findall(r'data-seq="(\d+)"', first)] == list(range(1, 21))
    assert _link(first, "older") is None
    newer = client.get(_link(first, "newer") or "").text
    assert [int(s) for s in re.findall(r'data-seq="(\d+)"', newer)] == list(range(21, 71))
    short = client.get("/ui/threads/cfo-short").text
    assert [int(s) for s in re.findall(r'data-seq="(\d+)"', short)] == list(range(1, 9))
    assert "cfo-short question 1" in short and "ceo-long" not in short
    assert _link(short, "older") is None and _link(short, "newer") is None

    listing = client.get("/ui/threads").text
    assert 'data-thread="ceo-long"' in listing and 'data-thread="cfo-short"' in listing
    only_cfo = client.get("/ui/threads", params={"agent": "cfo"}).text
    assert 'data-thread="cfo-short"' in only_cfo and 'data-thread="ceo-long"' not in only_cfo
    assert '<option value="cfo" selected>' in only_cfo


def test_threads_page_by_their_cursor(office: Path, server: Any, browser: Any) -> None:
    srv = server(token=None, worker=False)
    client = browser(srv)

    async def seed(store: Store) -> None:
        for n in range(55):
            await store.threads.open(f"t{n:02}", "ceo")
            await asyncio.sleep(0.002)  # distinct times: the cursor is the time of an update

    _in_store(seed)
    first = client.get("/ui/threads").text
    listed = re.findall(r'data-thread="(t\d\d)"', first)
    assert listed == [f"t{n:02}" for n in range(54, 4, -1)]
    second = client.get(_link(first, "older") or "").text
    assert re.findall(r'data-thread="(t\d\d)"', second) == ["t04", "t03", "t02", "t01", "t00"]
    assert _link(second, "older") is None and _link(second, "newest") == "/ui/threads"


class Stream:
    """A page's SSE stream read on a thread: its events (``id``, ``event``, ``data``) as they
    come, waited for with a deadline."""

    def __init__(self, url: str, last_event_id: str | None = None) -> None:
        self.events: list[dict[str, str]] = []
        self.error: Exception | None = None
        self._changed = threading.Condition()
        self._stop = threading.Event()
        headers = {"last-event-id": last_event_id} if last_event_id else {}
        self._thread = threading.Thread(target=self._read, args=(url, headers), daemon=True)
        self._thread.start()

    def _read(self, url: str, headers: dict[str, str]) -> None:
        try:
            self._events(url, headers)
        except httpx2.HTTPError as exc:  # the server stopping at the end of the test
            if not self._stop.is_set():
                with self._changed:
                    self.error = exc
                    self._changed.notify_all()

    def _events(self, url: str, headers: dict[str, str]) -> None:
        current: dict[str, str] = {}
        with httpx2.stream("GET", url, headers=headers, timeout=30) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if self._stop.is_set():
                    return
                if line.startswith(":"):
                    continue
                if line:
                    name, _, value = line.partition(":")
                    value = value.removeprefix(" ")
                    current[name] = current[name] + "\n" + value if name in current else value
                    continue
                if "data" in current:
                    with self._changed:
                        self.events.append(current)
                        self._changed.notify_all()
                current = {}

    def wait(self, until: Callable[[list[dict[str, str]]], bool], timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not until(self.events):
                left = deadline - time.monotonic()
                assert self.error is None, f"the stream failed: {self.error!r}"
                assert left > 0, f"the stream did not get there: {self.events}"
                self._changed.wait(left)

    def close(self) -> None:
        self._stop.set()


def _messages(events: list[dict[str, str]]) -> list[str]:
    return [m for e in events if e["event"] == "message" for m in _ids_in(e["data"])]


def _ids_in(fragment: str) -> list[str]:
    return re.findall(r'data-id="([^"]+)"', fragment)


def test_the_stream_sends_each_message_once_and_who_is_working_as_html(
    office: Path, server: Any, browser: Any, mock: MockProvider
) -> None:
    srv = server(token=None)
    client = browser(srv)
    [earlier] = _in_store(lambda store: _seed_channel(store, "general", 1))
    page = client.get("/ui/channels/general").text
    start = re.search(r'sse-connect="([^"]+)"', page)
    assert start and re.fullmatch(r"/ui/channels/general/stream\?after=[1-9][0-9]*\.", start[1])
    live = Stream(srv.url + start.group(1))
    try:
        live.wait(lambda events: bool(events))
        [first] = live.events
        assert first["event"] == "working" and "id" not in first and "agent-" not in first["data"]
        mock.queue(Reply(text="Q3 looks fine."), model="gpt-mock")
        posted = client.post(
            "/ui/channels/general/messages",
            data={"csrf": client.cookies["ar_csrf"], "text": "How is Q3?"},
            headers={"hx-request": "true"},
        )
        assert posted.status_code == 200 and 'class="message' not in posted.text

        def answered(events: list[dict[str, str]]) -> bool:
            last = [e for e in events if e["event"] == "working"][-1]
            return any("Q3 looks fine." in e["data"] for e in events) and (
                "agent-working" not in last["data"]
            )

        live.wait(answered)
        new = live.events[1:]
        messages = [e for e in new if e["event"] == "message"]
        working = [e for e in new if e["event"] == "working"]
        assert [e["event"] for e in new].count("message") == 2  # the post once, the answer
        mine, answer = messages
        assert new[0] is mine  # the post comes first
        assert "How is Q3?" in mine["data"] and mine["data"].lstrip().startswith("<li")
        assert '<span class="sender">you</span>' in mine["data"]
        assert "Q3 looks fine." in answer["data"] and 'class="message kind-agent' in answer["data"]
        # ceo works (the region says so, as HTML), then is idle (the region empty)
        assert ["agent-working" in e["data"] for e in working] == [True, False]
        assert (
            '<span class="agent-working" data-agent="ceo">ceo is working</span>'
            in (working[0]["data"])
        )
        assert all(e.get("id") for e in new)
        assert earlier not in _messages(live.events)  # the page showed it already
    finally:
        live.close()

    # Reconnecting after the post (Last-Event-ID): what came after it, nothing twice
    resumed = Stream(srv.url + "/ui/channels/general/stream", last_event_id=mine["id"])
    try:
        resumed.wait(lambda events: any("Q3 looks fine." in e["data"] for e in events))
        assert _messages(resumed.events) == _ids_in(answer["data"])
        assert resumed.events[0]["event"] == "working" and "id" not in resumed.events[0]
        assert [e["id"] for e in resumed.events[1:]] == [e["id"] for e in new[1:]]
    finally:
        resumed.close()
    # the page, reloaded, shows both messages once and nobody working
    reloaded = client.get("/ui/channels/general").text
    assert _texts(reloaded) == ["general 0", "How is Q3?", "Q3 looks fine."]
    assert "agent-working" not in reloaded


def test_a_reply_in_a_thread_brings_its_first_message_its_replies_link_live(
    office: Path, server: Any, browser: Any, mock: MockProvider
) -> None:
    """Issue 39: a message that began a thread got its "1 reply" link only on a reload. With
    each reply in a thread, the stream sends the thread's first message's link again, to
    replace the one on the page (an htmx out-of-band swap), with the count it has now."""
    srv = server(token=None)
    client = browser(srv)
    page = client.get("/ui/channels/general").text
    start = re.search(r'sse-connect="([^"]+)"', page)
    assert start
    live = Stream(srv.url + start.group(1))
    try:
        live.wait(lambda events: bool(events))
        mock.queue(
            Reply(tool_calls=[("send_message", {"text": "Looking.", "in_thread": True})]),
            Reply(text=""),
            model="gpt-mock",
        )
        client.post(
            "/ui/channels/general/messages",
            data={"csrf": client.cookies["ar_csrf"], "text": "Is the launch on?"},
        )
        live.wait(lambda events: any("Looking." in e["data"] for e in events))
        posted, reply = [e for e in live.events if e["event"] == "message"]
        [root] = _ids_in(posted["data"])
        slot = f'<div class="replies-slot" id="replies-{root}"'
        assert slot in posted["data"] and "replies" not in posted["data"].split(slot)[1][:60]
        assert f'{slot} hx-swap-oob="true">' in reply["data"]  # the first message's link, again
        assert f'href="/ui/channels/general/thread/{root}">1 reply</a>' in reply["data"]

        # a person's reply in the thread: the link counts two
        mock.queue(Reply(tool_calls=[("do_nothing", {})]), Reply(text=""), model="gpt-mock")
        client.post(
            "/ui/channels/general/messages",
            data={"csrf": client.cookies["ar_csrf"], "text": "Thanks!", "thread": root},
        )
        live.wait(lambda events: any("Thanks!" in e["data"] for e in events))
        mine = [e for e in live.events if e["event"] == "message"][-1]
        assert f'href="/ui/channels/general/thread/{root}">2 replies</a>' in mine["data"]
    finally:
        live.close()
    # the page, reloaded, says the same
    assert (
        f'href="/ui/channels/general/thread/{root}">2 replies</a>'
        in client.get("/ui/channels/general").text
    )


def test_a_failed_run_shows_in_the_working_region(
    office: Path, server: Any, browser: Any, mock: MockProvider
) -> None:
    mock.queue(Reply(fault=Fault.http(401)), model="claude-mock")  # cfo's run fails
    srv = server(token=None)
    client = browser(srv)
    live = Stream(srv.url + "/ui/channels/ops/stream")
    try:
        live.wait(lambda events: bool(events))
        csrf = _csrf(client, "/ui/channels/ops")
        posted = client.post(
            "/ui/channels/ops/messages", data={"csrf": csrf, "text": "Numbers?", "sender": "ann"}
        )
        assert posted.status_code == 303
        live.wait(lambda events: any("agent-failed" in e["data"] for e in events))
        live.wait(lambda events: any("could not reply" in e["data"] for e in events))
        failed = next(e for e in live.events if "agent-failed" in e["data"])
        assert "cfo's run failed: <strong>provider_auth</strong>" in failed["data"]
        notice = next(e for e in live.events if "could not reply" in e["data"])
        assert 'class="message kind-notice' in notice["data"]
    finally:
        live.close()
    # the page shows the notice for people, and a fresh stream starts with nobody working
    page = client.get("/ui/channels/ops").text
    assert any("cfo could not reply (provider_auth)" in t for t in _texts(page))
    assert re.search(r'<div id="working"[^>]*></div>', page)


def test_behind_a_token_the_pages_the_form_and_the_stream_want_the_session(
    office: Path, server: Any, browser: Any
) -> None:
    srv = server(worker=False)  # a token: a person logs in with it
    client = browser(srv)
    for path in ("/ui/channels/general", "/ui/channels/general/stream", "/ui/threads"):
        refused = client.get(path)
        assert refused.status_code == 303 and refused.headers["location"].startswith("/login")
    csrf = _csrf(client, "/login")
    assert client.post("/login", data={"csrf": csrf, "token": "secret-token"}).status_code == 303
    assert (
        client.post(
            "/ui/channels/general/messages", data={"csrf": csrf, "text": "Behind the token"}
        ).headers["location"]
        == "/ui/channels/general"
    )
    assert _texts(client.get("/ui/channels/general").text) == ["Behind the token"]
    with client.stream("GET", "/ui/channels/general/stream") as stream:  # the session's
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert next(stream.iter_lines()) == "event: working"


def test_a_long_message_thread_opens_on_its_newest_replies_and_a_reply_shows_at_once(
    office: Path, server: Any, browser: Any
) -> None:
    srv = server(token=None, worker=False)
    client = browser(srv)
    root = _post_api(srv, "/channels/general/messages", text="The plan", sender="you")
    root_id = root["message"]["id"]
    said = [
        _post_api(srv, "/channels/general/messages", text=f"r{n}", sender="you", thread=root_id)
        for n in range(55)
    ]
    ids = [s["message"]["id"] for s in said]
    path = f"/ui/channels/general/thread/{root_id}"
    newest = client.get(path).text
    assert _ids(newest) == ids[5:]  # the newest 50, oldest first, the box after them
    assert _link(newest, "newer") is None and 'id="composer"' in newest
    older = client.get(_link(newest, "older") or "").text
    assert _ids(older) == ids[:5] and _link(older, "older") is None
    assert _link(older, "newest") == path and 'id="composer"' not in older
    forward = client.get(f"{path}?after={ids[1]}").text
    assert _ids(forward) == ids[2:52] and _link(forward, "newer") == f"{path}?after={ids[51]}"

    # with htmx, a reply is answered with the thread's newest replies, the reply among them
    csrf = _csrf(client, path)
    for text in ("First answer", "Second answer"):
        posted = client.post(
            "/ui/channels/general/messages",
            data={"csrf": csrf, "text": text, "thread": root_id},
            headers={"hx-request": "true"},
        )
        assert posted.status_code == 200
        assert posted.text.lstrip().startswith('<section class="panel"')
        assert 'id="thread-live"' in posted.text and "<html" not in posted.text
        assert _texts(posted.text)[-1] == text  # shown at once, last
        assert re.search(r'name="text"[^>]*></textarea>', posted.text)  # the box emptied
    assert _texts(client.get(path).text)[-2:] == ["First answer", "Second answer"]
    # a refused reply: the form alone, with its error, put where the form is
    refused = client.post(
        "/ui/channels/general/messages",
        data={"csrf": csrf, "text": "  ", "thread": root_id},
        headers={"hx-request": "true"},
    )
    assert refused.status_code == 422
    assert refused.headers["hx-retarget"] == "#composer"
    assert refused.text.lstrip().startswith('<form id="composer"')
