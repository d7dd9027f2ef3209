"""Files in a run's message over HTTP (docs/attachments.md, docs/http-api.md), on SQLite and
PostgreSQL: ``POST /threads/{id}/runs`` takes ``attachments`` (a file's bytes as base64 with
its name, or the digest of a file already kept), each checked by ``attach`` before anything is
queued; the run's record and the thread's messages name them; a refused one leaves nothing
behind."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
from pathlib import Path
from typing import Any

import httpx2

from tests.attachment_files import image, pdf
from tests.runner.conftest import Agent
from tests.server.conftest import open_thread

AUTH = {"authorization": "Bearer secret-token"}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _run(url: str, thread: str, message: str, files: list[dict[str, Any]]) -> httpx2.Response:
    return httpx2.post(
        f"{url}/threads/{thread}/runs",
        headers=AUTH,
        json={"agent_id": "looker", "message": message, "attachments": files},
    )


def _ended(url: str, run_id: str) -> dict[str, Any]:
    """The run's record once it has ended (its event stream ends with it)."""
    with httpx2.stream("GET", f"{url}/runs/{run_id}/events", headers=AUTH, timeout=60) as events:
        for _ in events.iter_lines():
            pass
    run = httpx2.get(f"{url}/runs/{run_id}", headers=AUTH).json()
    assert run["status"] in ("completed", "failed"), run
    return dict(run)


def _answer(url: str, thread: str) -> str:
    messages = httpx2.get(f"{url}/threads/{thread}/messages", headers=AUTH).json()["data"]
    return str(messages[-1]["content"])


def _kept() -> tuple[tuple[int, int], int, int]:
    """What the store holds: its files (how many, their bytes), its runs, its messages."""

    async def read() -> tuple[tuple[int, int], int, int]:
        from agentrunner.store import open_store

        store = await open_store(os.environ["AGENTRUNNER_DATABASE_URL"])
        try:
            runs = await store.runs.db.fetch_one("SELECT COUNT(*) AS n FROM runs", {})
            said = await store.runs.db.fetch_one("SELECT COUNT(*) AS n FROM messages", {})
            assert runs is not None and said is not None
            return await store.attachments.stats(), int(runs["n"]), int(said["n"])
        finally:
            await store.close()

    return asyncio.run(read())


def test_a_run_s_files_reach_its_agent_and_its_record_names_them(agent: Agent, server: Any) -> None:
    agent("looker", "name: looker\nmodel: test")
    srv = server()
    open_thread(srv.url, "looker", "t-1")
    open_thread(srv.url, "looker", "t-2")
    red, report = image(4, 3, "red"), pdf(pages=3)
    blue = image(7, 5, "blue", fmt="JPEG")

    first = _run(srv.url, "t-1", "what is this?", [{"name": "red.png", "data": _b64(red)}])
    second = _run(
        srv.url,
        "t-2",
        "and these?",
        [
            {"name": "blue.jpg", "data": _b64(blue), "detail": "low"},
            {"name": "report.pdf", "data": _b64(report)},
        ],
    )
    assert first.status_code == 202 and second.status_code == 202, (first.text, second.text)
    one, two = (_ended(srv.url, r.json()["run_id"]) for r in (first, second))

    # two files, two answers: the test model names what it was sent (its bytes loaded)
    said_one, said_two = _answer(srv.url, "t-1"), _answer(srv.url, "t-2")
    assert "red.png" in said_one and "4x3" in said_one and "report.pdf" not in said_one
    assert "blue.jpg" in said_two and "7x5" in said_two and "3 pages" in said_two
    assert "red.png" not in said_two

    # the run's record names its files, without their bytes
    red_ref = {
        "sha256": hashlib.sha256(red).hexdigest(),
        "media_type": "image/png",
        "size": len(red),
        "name": "red.png",
        "width": 4,
        "height": 3,
    }
    assert one["attachments"] == [red_ref]
    assert list(one)[-2:] == ["trace_id", "attachments"]  # the library's dict, in its order
    assert list(one["attachments"][0]) == list(red_ref)
    assert [a["name"] for a in two["attachments"]] == ["blue.jpg", "report.pdf"]
    assert two["attachments"][0]["detail"] == "low"
    assert two["attachments"][1] == {
        "sha256": hashlib.sha256(report).hexdigest(),
        "media_type": "application/pdf",
        "size": len(report),
        "name": "report.pdf",
        "pages": 3,
    }
    # … and so does the thread's message; the answer, text only, has no such key
    messages = httpx2.get(f"{srv.url}/threads/t-1/messages", headers=AUTH).json()["data"]
    assert messages[0]["attachments"] == [red_ref]
    assert list(messages[0]) == ["seq", "role", "content", "attachments", "run_id", "created_at"]
    assert "attachments" not in messages[1]
    assert "data" not in str(messages) and len(str(messages[0])) < 700
    # a run without files: no such key in its record
    plain = _run(srv.url, "t-1", "thanks", [])
    assert "attachments" not in _ended(srv.url, plain.json()["run_id"])
    files, _, _ = _kept()
    assert files == (3, len(red) + len(blue) + len(report))


def test_a_file_already_kept_is_named_by_its_digest(agent: Agent, server: Any) -> None:
    agent("looker", "name: looker\nmodel: test")
    srv = server()
    open_thread(srv.url, "looker", "t-1")
    open_thread(srv.url, "looker", "t-2")
    red = image(6, 2, "red")
    digest = hashlib.sha256(red).hexdigest()
    sent = _run(srv.url, "t-1", "keep it", [{"name": "red.png", "data": _b64(red)}])
    _ended(srv.url, sent.json()["run_id"])

    again = _run(srv.url, "t-2", "this again", [{"name": "again.png", "sha256": digest}])
    assert again.status_code == 202, again.text
    run = _ended(srv.url, again.json()["run_id"])
    assert run["status"] == "completed"
    said = _answer(srv.url, "t-2")
    assert "again.png" in said and "6x2" in said  # its own name, the kept file's pixels
    assert [a["name"] for a in run["attachments"]] == ["again.png"]
    assert _kept()[0] == (1, len(red))  # one copy, named by two threads

    runs_before = _kept()[1]
    unknown = _run(srv.url, "t-2", "and this?", [{"name": "x.png", "sha256": "ab" * 32}])
    assert unknown.status_code == 422, unknown.text
    error = unknown.json()["error"]
    assert error["code"] == "attachment_refused"
    assert "x.png" in error["message"] and "abababababab" in error["message"]
    assert _kept()[1] == runs_before  # nothing queued


def test_a_renamed_text_file_or_an_oversized_one_is_refused_and_nothing_is_stored(
    agent: Agent, server: Any, project: Path
) -> None:
    agent("looker", "name: looker\nmodel: test")
    with (project / "agentrunner.toml").open("a") as config:
        config.write("\n[attachments]\nmax_image_mb = 0.0002\n")  # 200 bytes
    srv = server()
    open_thread(srv.url, "looker", "t-1")
    big = image(300, 200, "green")
    assert len(big) > 200 > len(image())

    cases: list[tuple[list[dict[str, Any]], str, str]] = [
        (
            [{"name": "photo.png", "data": _b64(b"just some notes\n")}],
            "attachment_refused",
            "photo.png: its name says it is a PNG image, but its content is text",
        ),
        (
            [{"name": "big.png", "data": _b64(big)}],
            "attachment_refused",
            f"big.png: the file is {len(big):,} bytes; an image may be at most 200 bytes",
        ),
        (
            [{"name": "ok.png", "data": _b64(image())}, {"name": "big.png", "data": _b64(big)}],
            "attachment_refused",
            "big.png",
        ),
        (
            [{"name": "a.png", "data": "not base64!"}],
            "validation",
            "attachments.0.data is not base64",
        ),
        (
            [{"name": "a.png", "data": _b64(image()), "sha256": "ab" * 32}],
            "validation",
            "attachments.0 needs one of data",
        ),
        ([{"name": "a.png"}], "validation", "attachments.0 needs one of data"),
        (
            [{"name": "a.png", "data": _b64(image()), "detail": "huge"}],
            "validation",
            "attachments.0.detail must be auto, low or high",
        ),
        ([{"name": "a.png", "sha256": "abc"}], "validation", "attachments.0.sha256 must be"),
    ]
    for files, code, said in cases:
        refused = _run(srv.url, "t-1", "look", files)
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert (error["code"], said in error["message"]) == (code, True), error
        assert error.get("hint"), error
    # nothing of any of them: no file, no run, no message
    assert _kept() == ((0, 0), 0, 0)
