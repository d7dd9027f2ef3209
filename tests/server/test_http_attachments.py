"""Files over HTTP (docs/attachments.md): a post or DM's files by their bytes (base64) or by the
digest of an upload, each reaching every agent the message reaches; the upload itself, bounded
by ``[attachments]`` rather than the JSON bodies' limit; a kept file's bytes back."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import time
from pathlib import Path
from typing import Any

import httpx2
from PIL import Image

from agentrunner.store import open_store
from tests.attachment_files import image, pdf
from tests.runner.conftest import Agent

AUTH = {"authorization": "Bearer secret-token"}


def _team(agent: Agent, project: Path, extra: str = "") -> None:
    """ann and bob on the `test` model, in #team with you; their answers go no further."""
    toml = project / "agentrunner.toml"
    config = toml.read_text().replace("[defaults]\n", "[defaults]\nchain_depth = 0\n")
    toml.write_text(config + '\n[channels.team]\nmembers = ["ann", "bob", "you"]\n' + extra)
    for name in ("ann", "bob"):
        agent(name, f"name: {name}\nmodel: test")


def _replies(url: str, channel: str, after: str, count: int) -> list[dict[str, Any]]:
    """The agents' messages after ``after`` once there are ``count`` (a bound on waiting)."""
    deadline = time.monotonic() + 30
    while True:
        page = httpx2.get(f"{url}/channels/{channel}/messages?cursor={after}", headers=AUTH)
        said = [m for m in page.json()["data"] if m["sender_kind"] == "agent"]
        if len(said) >= count:
            return said
        assert time.monotonic() < deadline, page.text
        time.sleep(0.05)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _noisy(side: int) -> bytes:
    """A PNG that does not compress: its size grows with its pixels."""
    out = io.BytesIO()
    Image.effect_noise((side, side), 80).convert("RGB").save(out, "PNG")
    return out.getvalue()


def test_a_post_s_files_reach_every_agent_by_bytes_or_by_upload(
    agent: Agent, project: Path, server: Any
) -> None:
    _team(agent, project)
    srv = server()
    shot, report = image(6, 4, "green"), pdf(pages=3)

    posted = httpx2.post(
        f"{srv.url}/channels/team/messages",
        headers=AUTH,
        json={"text": "look", "attachments": [{"name": "shot.png", "data": _b64(shot)}]},
    )
    assert posted.status_code == 201, posted.text
    message = posted.json()["message"]
    assert message["attachments"] == [
        {
            "sha256": hashlib.sha256(shot).hexdigest(),
            "media_type": "image/png",
            "size": len(shot),
            "name": "shot.png",
            "width": 6,
            "height": 4,
        }
    ]
    keys = ["sha256", "media_type", "size", "name", "width", "height"]
    assert list(message["attachments"][0]) == keys  # in the library's order
    replies = _replies(srv.url, "team", message["id"], 2)
    assert sorted(r["sender"] for r in replies) == ["ann", "bob"]
    assert all("[image: shot.png, image/png, 6x4" in r["content"] for r in replies)
    assert all("attachments" not in r for r in replies)  # an agent's message carries none

    # the upload: the file as the body, its name in the query; then the post names its digest
    uploaded = httpx2.post(
        f"{srv.url}/attachments?name=report.pdf",
        headers={**AUTH, "content-type": "application/pdf"},
        content=report,
    )
    assert uploaded.status_code == 201, uploaded.text
    ref = uploaded.json()
    assert ref == {
        "sha256": hashlib.sha256(report).hexdigest(),
        "media_type": "application/pdf",
        "size": len(report),
        "name": "report.pdf",
        "pages": 3,
    }
    second = httpx2.post(
        f"{srv.url}/channels/team/messages",
        headers=AUTH,
        json={"text": "and this", "attachments": [{"name": "q3.pdf", "sha256": ref["sha256"]}]},
    ).json()["message"]
    assert [a["name"] for a in second["attachments"]] == ["q3.pdf"]  # named anew
    replies = _replies(srv.url, "team", second["id"], 2)
    for reply in replies:
        given = reply["content"].split("I was given:")[1]
        assert "q3.pdf, application/pdf, 3 pages" in given and "shot.png" not in given

    # the listing names each message's files; a message without keeps its old shape
    listed = httpx2.get(f"{srv.url}/channels/team/messages", headers=AUTH).json()["data"]
    assert [m.get("attachments", [{}])[0].get("name") for m in listed if m["sender"] == "you"] == [
        "shot.png",
        "q3.pdf",
    ]
    assert set(replies[0]) == {
        "id",
        "sender",
        "sender_kind",
        "content",
        "thread",
        "depth",
        "created_at",
    }

    # the channel's stream names them too, in its channel.message events
    with httpx2.stream("GET", f"{srv.url}/channels/team/events", headers=AUTH, timeout=30) as s:
        said: list[dict[str, Any]] = []
        kind = ""
        for line in s.iter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: ") and kind == "channel.message":
                said.append(json.loads(line[6:]))
                if len(said) == len(listed):
                    break
    # the event is the listing's message, files and all; two agents' replies written in the
    # same millisecond come in the order they were committed, the listing's by their ids
    assert sorted(said, key=lambda m: m["id"]) == sorted(listed, key=lambda m: m["id"])

    # the bytes back, as their type and under a name
    got = httpx2.get(f"{srv.url}/attachments/{ref['sha256']}?name=q3.pdf", headers=AUTH)
    assert got.status_code == 200 and got.content == report
    assert got.headers["content-type"] == "application/pdf"
    assert got.headers["content-disposition"] == "attachment; filename*=UTF-8''q3.pdf"
    png = httpx2.get(f"{srv.url}/attachments/{hashlib.sha256(shot).hexdigest()}", headers=AUTH)
    assert png.content == shot and png.headers["content-type"] == "image/png"
    assert png.headers["content-disposition"] == "inline; filename*=UTF-8''image.png"
    unknown = httpx2.get(f"{srv.url}/attachments/{'0' * 64}", headers=AUTH)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
    assert httpx2.get(f"{srv.url}/attachments/{ref['sha256']}").status_code == 401


def test_a_dm_s_file_reaches_its_agent(agent: Agent, project: Path, server: Any) -> None:
    _team(agent, project)
    srv = server()
    sent = httpx2.post(
        f"{srv.url}/dm/ann",
        headers=AUTH,
        json={"text": "read this", "attachments": [{"name": "n.pdf", "data": _b64(pdf(2))}]},
    )
    assert sent.status_code == 201, sent.text
    body = sent.json()
    [reply] = _replies(srv.url, body["channel"], body["message"]["id"], 1)
    assert reply["sender"] == "ann" and "[pdf: n.pdf, application/pdf, 2 pages" in reply["content"]


def _nothing_posted(url: str) -> None:
    listed = httpx2.get(f"{url}/channels/team/messages", headers=AUTH).json()["data"]
    assert listed == []


def test_bad_files_are_refused_with_nothing_posted_or_kept(
    agent: Agent, project: Path, server: Any, store_url: str
) -> None:
    _team(agent, project, "\n[attachments]\nmax_image_mb = 0.0002\n")
    srv = server()
    big = _noisy(20)
    assert len(big) > 200 > len(image())
    for files, status, code, said in (
        ([{"name": "photo.png", "data": _b64(b"just notes")}], 422, "attachment_refused", "text"),
        ([{"name": "big.png", "data": _b64(big)}], 422, "attachment_refused", "200 bytes"),
        ([{"name": "a.png", "data": "not base64!"}], 422, "validation", "attachments.1.data"),
        ([{"name": "a.png"}], 422, "validation", "needs one of data"),
        ([{"name": "a.png", "sha256": "f" * 64}], 422, "attachment_refused", "no file is kept"),
    ):
        # a good file first: nothing is posted when one of them is refused
        good = {"name": "ok.png", "data": _b64(image())}
        for path in ("/channels/team/messages", "/dm/ann"):
            done = httpx2.post(
                f"{srv.url}{path}", headers=AUTH, json={"text": "x", "attachments": [good, *files]}
            )
            assert done.status_code == status, done.text
            error = done.json()["error"]
            assert error["code"] == code and said in error["message"] + str(error.get("hint"))
    _nothing_posted(srv.url)
    for name, data in (("photo.png", b"just notes"), ("big.png", big), ("empty.png", b"")):
        done = httpx2.post(f"{srv.url}/attachments?name={name}", headers=AUTH, content=data)
        assert done.status_code == 422, done.text
        assert done.json()["error"]["code"] == "attachment_refused"

    async def counts() -> Any:
        store = await open_store(store_url)
        try:
            runs = await store.runs.list()
            said = await store.messages.db.fetch_all("SELECT id FROM channel_messages", {})
            return runs, said, await store.attachments.stats()
        finally:
            await store.close()

    assert asyncio.run(counts()) == ([], [], (0, 0))


def test_an_upload_is_bounded_by_the_file_limits_not_the_json_body_limit(
    agent: Agent, project: Path, server: Any
) -> None:
    _team(agent, project, "\n[attachments]\nmax_image_mb = 0.05\nmax_pdf_mb = 0.03\n")
    srv = server(max_body_bytes=20_000)
    within = _noisy(100)  # past the JSON bodies' 20,000 bytes, within an image's 50,000
    assert 20_000 < len(within) < 50_000
    done = httpx2.post(f"{srv.url}/attachments?name=noise.png", headers=AUTH, content=within)
    assert done.status_code == 201, done.text
    assert done.json()["width"] == 100
    # the JSON body's own limit still holds for a post with the file inline
    inline = {"text": "x", "attachments": [{"name": "noise.png", "data": _b64(within)}]}
    too_big = httpx2.post(f"{srv.url}/channels/team/messages", headers=AUTH, json=inline)
    assert too_big.status_code == 413 and "over 20000 bytes" in too_big.text
    # ... and the upload's named by its digest is posted
    named = {"text": "x", "attachments": [{"name": "n.png", "sha256": done.json()["sha256"]}]}
    posted = httpx2.post(f"{srv.url}/channels/team/messages", headers=AUTH, json=named)
    assert posted.status_code == 201, posted.text
    # past the larger file limit: refused as it arrives, before the file is read
    past = _noisy(140)
    assert len(past) > 50_000
    refused = httpx2.post(f"{srv.url}/attachments?name=huge.png", headers=AUTH, content=past)
    assert refused.status_code == 413 and "over 50000 bytes" in refused.text
