"""Images and PDFs through ``POST /v1/chat/completions`` (docs/http-api.md, docs/attachments.md),
driven by the official ``openai`` client: ``image_url`` and ``file`` parts as data URLs reach
the agent, checked by ``attach``; earlier turns' files are kept in the history a request opens;
a web address or a refused file is a 400 in OpenAI's error shape, with nothing stored."""

from __future__ import annotations

import asyncio
import base64
import os
from pathlib import Path
from typing import Any

import httpx2
import pytest

from agentrunner.testing import MockProvider
from tests.attachment_files import image, pdf
from tests.runner.conftest import Agent

AUTH = {"authorization": "Bearer secret-token"}


def _url(data: bytes, media_type: str) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def _image(data: bytes, detail: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"url": _url(data, "image/png")}
    if detail is not None:
        part["detail"] = detail
    return {"type": "image_url", "image_url": part}


def _file(data: bytes, filename: str) -> dict[str, Any]:
    file = {"filename": filename, "file_data": _url(data, "application/pdf")}
    return {"type": "file", "file": file}


def _said(text: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}, *parts]}


@pytest.fixture
def client(agent: Agent, server: Any) -> Any:
    """The official client, on a server whose agent ``looker`` is on the ``test`` model (it
    names the files it is sent, and refuses a request without their bytes)."""
    import openai

    agent("looker", "name: looker\nmodel: test")
    srv = server()
    made = openai.OpenAI(base_url=f"{srv.url}/v1", api_key="secret-token", max_retries=0)
    made.url = srv.url  # type: ignore[attr-defined]
    return made


def _kept() -> tuple[tuple[int, int], int, int]:
    """What the store holds: its files (how many, their bytes), its runs, its threads."""

    async def read() -> tuple[tuple[int, int], int, int]:
        from agentrunner.store import open_store

        store = await open_store(os.environ["AGENTRUNNER_DATABASE_URL"])
        try:
            runs = await store.runs.db.fetch_one("SELECT COUNT(*) AS n FROM runs", {})
            threads = await store.runs.db.fetch_one("SELECT COUNT(*) AS n FROM threads", {})
            assert runs is not None and threads is not None
            return await store.attachments.stats(), int(runs["n"]), int(threads["n"])
        finally:
            await store.close()

    return asyncio.run(read())


def test_the_official_client_sends_an_image_and_a_pdf_to_an_agent(client: Any) -> None:
    red, blue, report = image(4, 3, "red"), image(7, 5, "blue", fmt="JPEG"), pdf(pages=3)
    first = client.chat.completions.create(
        model="looker",
        messages=[_said("describe both", _image(red, "low"), _file(report, "report.pdf"))],
    )
    answer = first.choices[0].message.content
    assert "You said: describe both" in answer
    assert "image.png" in answer and "4x3" in answer  # an image_url part has no name: its type's
    assert "report.pdf" in answer and "3 pages" in answer
    # another image, streamed: another answer, naming only what it was sent
    chunks = client.chat.completions.create(
        model="looker",
        messages=[_said("and this one?", _image(blue))],  # a JPEG, whatever its URL claims
        stream=True,
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "image.jpg" in streamed and "7x5" in streamed
    assert "report.pdf" not in streamed and "4x3" not in streamed
    files, runs, _ = _kept()
    assert files == (3, len(red) + len(blue) + len(report)) and runs == 2


def test_earlier_turns_files_are_kept_in_the_history_a_request_opens(client: Any) -> None:
    red, blue = image(4, 3, "red"), image(9, 2, "blue")
    reply = client.chat.completions.create(
        model="looker",
        messages=[
            _said("what colour?", _image(red)),
            {"role": "assistant", "content": "Red."},
            _said("and this?", _image(blue, "high")),
        ],
        user="ada",
    )
    answer = reply.choices[0].message.content
    assert "9x2" in answer and "4x3" not in answer  # the new input's file goes with the run
    messages = httpx2.get(f"{client.url}/threads/looker-ada/messages", headers=AUTH).json()
    said = [(m["role"], m["content"], m.get("attachments", [])) for m in messages["data"]]
    assert [(role, text) for role, text, _ in said] == [
        ("user", "what colour?"),
        ("assistant", "Red."),
        ("user", "and this?"),
        ("assistant", answer),
    ]
    first, _, third, _ = (files for _, _, files in said)
    assert [(f["name"], f["width"], f["height"]) for f in first] == [("image.png", 4, 3)]
    assert [(f["name"], f["width"], f.get("detail")) for f in third] == [("image.png", 9, "high")]
    assert _kept()[0] == (2, len(red) + len(blue))  # the earlier file's bytes kept too


def test_a_web_address_or_a_refused_file_is_a_400_in_openai_s_shape(
    agent: Agent, server: Any, project: Path
) -> None:
    import openai

    agent("looker", "name: looker\nmodel: test")
    with (project / "agentrunner.toml").open("a") as config:
        config.write("\n[attachments]\nmax_image_mb = 0.0002\n")  # 200 bytes
    srv = server()
    client = openai.OpenAI(base_url=f"{srv.url}/v1", api_key="secret-token", max_retries=0)
    big = image(300, 200, "green")
    assert len(big) > 200 > len(image())

    web = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    cases: list[tuple[list[dict[str, Any]], str, str, str]] = [
        (
            [_said("look", web)],
            "validation",
            "messages.0.content.1.image_url.url",
            "only data URLs",
        ),
        (
            [_said("look", _file(b"just some notes\n", "notes.pdf"))],
            "attachment_refused",
            "messages.0.content.1",
            "notes.pdf: its name says it is a PDF, but its content is text",
        ),
        (
            [_said("look", _image(image()), _image(big))],
            "attachment_refused",
            "messages.0.content.2",
            f"the file is {len(big):,} bytes; an image may be at most 200 bytes",
        ),
        (  # an earlier turn's file is checked as the new one's is
            [_said("look", _image(big)), {"role": "assistant", "content": "ok"}, _said("again")],
            "attachment_refused",
            "messages.0.content.1",
            "an image may be at most 200 bytes",
        ),
        (
            [_said("look", {"type": "file", "file": {"file_id": "file-abc123"}})],
            "validation",
            "messages.0.content.1.file.file_id",
            "a file uploaded to OpenAI",
        ),
        (
            [_said("look", {"type": "image_url", "image_url": {"url": "data:image/png,abc"}})],
            "validation",
            "messages.0.content.1.image_url.url",
            "without ;base64",
        ),
        (
            [_said("look", _image(image(), "original"))],
            "attachment_refused",
            "messages.0.content.1",
            "detail must be auto, low or high",
        ),
    ]
    for messages, code, param, said in cases:
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(model="looker", messages=messages, user="ada")
        error = refused.value
        assert error.status_code == 400
        assert (error.code, error.param, error.type) == (code, param, "invalid_request_error")
        assert said in error.message, error.message
        assert isinstance(error.body, dict) and error.body.get("hint"), error.body
    # an assistant's files: not something a model is sent (a 422, as any part refused)
    answered = {"role": "assistant", "content": [_image(image())]}
    with pytest.raises(openai.UnprocessableEntityError) as refused_part:
        client.chat.completions.create(model="looker", messages=[_said("a"), answered, _said("b")])
    assert "messages.1.content.0.type is 'image_url'" in refused_part.value.message
    assert _kept() == ((0, 0), 0, 0)  # nothing stored: no file, no run, no thread


def test_the_mock_provider_receives_the_image(
    agent: Agent, server: Any, project: Path, mock: MockProvider
) -> None:
    """Through a real wire: an agent on the mock provider, whose model is declared to take
    images and PDFs, is sent the client's image as a Chat Completions ``image_url`` part."""
    import openai

    agent("viewer", "name: viewer\nmodel: mockai:gpt-mock")
    with (project / "agentrunner.toml").open("a") as config:
        config.write('\n[models."mockai:gpt-mock"]\ninput = ["text", "image", "pdf"]\n')
    srv = server()
    client = openai.OpenAI(base_url=f"{srv.url}/v1", api_key="secret-token", max_retries=0)
    red, report = image(5, 4, "red"), pdf(pages=2)
    client.chat.completions.create(
        model="viewer",
        messages=[_said("describe", _image(red, "low"), _file(report, "report.pdf"))],
    )
    [sent] = [r.body for r in mock.requests if r.path.endswith("/chat/completions")]
    last = sent["messages"][-1]
    parts = last["content"]
    by_type = {p["type"]: p for p in parts}
    assert by_type["image_url"]["image_url"] == {"url": _url(red, "image/png"), "detail": "low"}
    assert by_type["file"]["file"] == {
        "filename": "report.pdf",
        "file_data": _url(report, "application/pdf"),
    }
