"""Files on the dashboard over HTTP (docs/attachments.md): the post form sends them with the post
(multipart, with or without htmx), every member agent is sent them; a message's images show as
thumbnails and its PDFs as links — in the conversation, a message's thread, an agent's thread and
a run's page — served behind the dashboard's session; a file refused leaves nothing posted."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from PIL import Image

from tests.attachment_files import image, pdf
from tests.runner.conftest import Agent
from tests.server.dashboard.pages_html import Browser, Node, parse, wait_for


@pytest.fixture
def browsers() -> Iterator[Callable[[str], Browser]]:
    opened: list[Browser] = []

    def make(url: str) -> Browser:
        opened.append(Browser(url))
        return opened[-1]

    yield make
    for browser in opened:
        browser.close()


def _team(agent: Agent, project: Path, extra: str = "") -> None:
    """ann and bob on the `test` model, in #team with you; their answers go no further."""
    toml = project / "agentrunner.toml"
    config = toml.read_text().replace("[defaults]\n", "[defaults]\nchain_depth = 0\n")
    toml.write_text(config + '\n[channels.team]\nmembers = ["ann", "bob", "you"]\n' + extra)
    for name in ("ann", "bob"):
        agent(name, f"name: {name}\nmodel: test")


def _post(
    browser: Browser,
    path: str,
    text: str,
    files: list[tuple[str, bytes, str]],
    *,
    htmx: bool = False,
    **fields: str,
) -> httpx2.Response:
    """The form as a browser sends it: multipart, a part per file chosen (an empty one, with
    no name, when none was)."""
    parts = [("files", f) for f in files] or [("files", ("", b"", "application/octet-stream"))]
    return browser.client.post(
        path,
        data={"csrf": browser.csrf, "text": text, **fields},
        files=parts,
        headers={"hx-request": "true"} if htmx else {},
    )


def _thumbs(page: Node) -> list[tuple[str, str]]:
    return [(img.attrs["alt"], img.attrs["src"]) for img in page.all("img", cls="thumb")]


def _noisy(side: int) -> bytes:
    out = io.BytesIO()
    Image.effect_noise((side, side), 80).convert("RGB").save(out, "PNG")
    return out.getvalue()


def test_a_post_s_files_reach_the_agents_and_show_as_thumbnails_and_links(
    agent: Agent, project: Path, server: Any, browsers: Callable[[str], Browser]
) -> None:
    _team(agent, project)
    srv = server(token=None)
    browser = browsers(srv.url)
    shot, report = image(6, 4, "green"), pdf(pages=3)
    shot_sha, report_sha = (hashlib.sha256(d).hexdigest() for d in (shot, report))

    posted = _post(
        browser,
        "/ui/channels/team/messages",
        "What are these?",
        [("shot.png", shot, "image/png"), ("q3.pdf", report, "application/pdf")],
    )
    assert posted.status_code == 303, posted.text

    def replies() -> list[str]:
        page = browser.get("/ui/channels/team")
        return [
            li.one(cls="body").text()
            for li in page.all("li", cls="message")
            if "kind-agent" in li.classes
        ]

    wait_for("both agents' answers", lambda: len(replies()) == 2)
    for reply in replies():  # each agent was sent both files
        assert "[image: shot.png, image/png, 6x4" in reply and "[pdf: q3.pdf" in reply

    page = browser.get("/ui/channels/team")
    src = f"/ui/attachments/{shot_sha}?name=shot.png"
    assert _thumbs(page) == [("shot.png", src)]  # the post's own; the agents' carry none
    thumb = page.one("img", cls="thumb")
    assert (thumb.attrs["width"], thumb.attrs["height"]) == ("6", "4")
    [link] = [a for a in page.all("a") if a.all("img", cls="thumb")]
    assert link.attrs["href"] == src  # the thumbnail links to the picture whole
    pdf_item = page.one("li", cls="pdf")
    assert pdf_item.one("a").attrs["href"] == f"/ui/attachments/{report_sha}?name=q3.pdf"
    assert "q3.pdf (PDF, 3 pages" in pdf_item.text()

    got = browser.client.get(src)
    assert got.status_code == 200 and got.content == shot
    assert got.headers["content-type"] == "image/png"
    assert got.headers["content-disposition"] == "inline; filename*=UTF-8''shot.png"
    assert "content-security-policy" in got.headers  # a dashboard path: its headers
    assert browser.client.get(f"/ui/attachments/{'0' * 64}").status_code == 404
    assert browser.client.get("/ui/attachments/not-a-digest").status_code == 422

    # an agent's thread, and the run's page, show the file its message carried
    thread = browser.get("/ui/threads/ann@team")
    assert _thumbs(thread) == [("shot.png", src)]
    run_id = next(
        a.attrs["href"].rsplit("/", 1)[-1]
        for a in page.all("a", cls="run-link")
        if a.attrs["href"].startswith("/ui/runs/")
    )
    run_page = browser.get(f"/ui/runs/{run_id}")
    assert _thumbs(run_page) == [("shot.png", src)]
    assert "q3.pdf" in run_page.one("li", cls="prompt").text()

    # a reply in the message's thread, with another picture, from the thread's form (htmx)
    root = page.all("li", cls="message")[0].attrs["id"]
    other = image(3, 7, "blue")
    answered = _post(
        browser,
        "/ui/channels/team/messages",
        "And this one?",
        [("other.png", other, "image/png")],
        htmx=True,
        thread=root,
    )
    assert answered.status_code == 200, answered.text
    part = parse(answered.text)  # the thread's part, with the reply in it
    other_src = f"/ui/attachments/{hashlib.sha256(other).hexdigest()}?name=other.png"
    assert ("other.png", other_src) in _thumbs(part)
    assert ("other.png", other_src) in _thumbs(browser.get(f"/ui/channels/team/thread/{root}"))


def test_a_refused_file_leaves_nothing_posted(
    agent: Agent, project: Path, server: Any, browsers: Callable[[str], Browser]
) -> None:
    _team(agent, project, "\n[attachments]\nmax_image_mb = 0.0002\n")
    srv = server(token=None, worker=False)
    browser = browsers(srv.url)
    good = ("ok.png", image(), "image/png")
    for bad, said in (
        (("photo.png", b"just notes", "image/png"), "its content is text"),
        (("big.png", _noisy(20), "image/png"), "max_image_mb"),
    ):
        plain = _post(browser, "/ui/channels/team/messages", "look", [good, bad])
        assert plain.status_code == 422 and "attachment_refused" in plain.text
        assert said in plain.text
        htmx = _post(browser, "/ui/channels/team/messages", "look", [good, bad], htmx=True)
        assert htmx.status_code == 422 and htmx.headers["x-composer-error"] == "attachment_refused"
        form = parse(htmx.text)
        assert "choose the files again" in form.by_id("composer-error").text()
        assert form.by_id("composer-text").text() == "look"  # the text is kept
    assert browser.get("/ui/channels/team").all("li", cls="message") == []


def test_the_form_s_bound_follows_the_attachment_limits_and_files_want_the_session(
    agent: Agent, project: Path, server: Any, browsers: Callable[[str], Browser]
) -> None:
    _team(agent, project)
    srv = server(max_body_bytes=20_000, worker=False)  # a token: a person logs in
    browser = browsers(srv.url)
    big = _noisy(100)
    assert len(big) > 20_000  # past the JSON bodies' bound, within a message's files'
    assert browser.client.get("/ui/channels/team").status_code == 303  # to log in first
    assert browser.post("/login", {"token": "secret-token"}).status_code == 303
    posted = _post(
        browser, "/ui/channels/team/messages", "big one", [("big.png", big, "image/png")]
    )
    assert posted.status_code == 303, posted.text
    src = browser.get("/ui/channels/team").one("img", cls="thumb").attrs["src"]
    assert browser.client.get(src).content == big  # the session opens the dashboard's path
    anonymous = httpx2.get(srv.url + src)
    assert anonymous.status_code == 303 and anonymous.headers["location"].startswith("/login")
    # the API's path wants the bearer token, not the session
    sha = src.split("/")[-1].split("?")[0]
    assert browser.client.get(f"/attachments/{sha}").status_code == 401
    bearer = {"authorization": "Bearer secret-token"}
    assert httpx2.get(f"{srv.url}/attachments/{sha}", headers=bearer).content == big
