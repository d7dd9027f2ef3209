"""Files through ``agentrunner stdio`` (docs/stdio.md): ``run_agent`` and ``execute`` take
``attachments`` as the HTTP API does (a file's bytes as base64 with its name, or the digest of
a file already kept), each checked by ``attach``; a refused one is an error naming it, and
nothing is stored."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.attachment_files import image, pdf
from tests.tasks.test_stdio import Client

LOOKER = """\
---
name: Looker
model: test
prompt_template: "Look at {{input.what}}."
---
You look at files.
"""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text("[attachments]\nmax_image_mb = 0.0002\n")  # 200 bytes
    (root / "agents" / "looker.md").write_text(LOOKER)
    return root


@pytest.fixture
def client(root: Path) -> Iterator[Client]:
    client = Client(root)
    assert client.lines.get(timeout=30)["event"] == "ready"
    yield client
    if client.proc.poll() is None:
        client.proc.kill()
    client.proc.wait(timeout=30)
    for pipe in (client.proc.stdin, client.proc.stdout, client.proc.stderr):
        if pipe is not None and not pipe.closed:
            pipe.close()


async def stored(root: Path) -> tuple[tuple[int, int], int]:
    """What the project's store holds: its files (how many, their bytes) and its runs."""
    from agentrunner.runtime.compose import open_runner

    runner = await open_runner(root)
    try:
        runs = await runner.store.runs.db.fetch_one("SELECT COUNT(*) AS n FROM runs", {})
        assert runs is not None
        return await runner.store.attachments.stats(), int(runs["n"])
    finally:
        await runner.close()


def _kept(root: Path) -> tuple[tuple[int, int], int]:
    return asyncio.run(stored(root))


def _result(client: Client, rid: str) -> dict[str, Any]:
    done, _ = client.response(rid)
    assert "result" in done, done
    return dict(done["result"])


def test_run_agent_and_execute_take_files(client: Client, root: Path) -> None:
    red, report = image(4, 3, "red"), pdf(pages=2)
    client.request(
        "r1",
        "run_agent",
        agent="looker",
        message="what is this?",
        attachments=[{"name": "red.png", "data": _b64(red)}],
    )
    client.request(
        "r2",
        "run_agent",
        agent="looker",
        message="and this?",
        new=True,
        attachments=[{"name": "report.pdf", "data": _b64(report)}],
    )
    one, two = _result(client, "r1"), _result(client, "r2")
    assert "red.png" in one["text"] and "4x3" in one["text"] and "report.pdf" not in one["text"]
    assert "report.pdf" in two["text"] and "2 pages" in two["text"] and "red" not in two["text"]

    # a file already kept, named by its digest under another name
    digest = hashlib.sha256(red).hexdigest()
    client.request(
        "r3",
        "run_agent",
        agent="looker",
        message="again",
        attachments=[{"name": "again.png", "sha256": digest, "detail": "low"}],
    )
    again = _result(client, "r3")
    assert "again.png" in again["text"] and "4x3" in again["text"]

    # a task's input and its file
    client.request(
        "t1",
        "execute",
        agent="looker",
        input={"what": "the chart"},
        attachments=[{"name": "chart.png", "data": _b64(image(5, 5, "blue"))}],
    )
    task = _result(client, "t1")
    assert task["status"] == "completed", task
    assert "Look at the chart." in task["output"] and "chart.png" in task["output"]
    assert "5x5" in task["output"]
    client.proc.stdin.close()  # type: ignore[union-attr]
    client.proc.wait(timeout=30)
    files, runs = _kept(root)
    assert files == (2, len(red) + len(report)) and runs == 4  # a task keeps no message


def test_a_refused_file_is_an_error_naming_it_and_nothing_is_stored(
    client: Client, root: Path
) -> None:
    big = image(300, 200, "green")
    assert len(big) > 200 > len(image())
    cases: list[tuple[str, Any, str, str]] = [
        (
            "run_agent",
            [{"name": "photo.png", "data": _b64(b"just some notes\n")}],
            "attachment_refused",
            "photo.png: its name says it is a PNG image, but its content is text",
        ),
        (
            "run_agent",
            [{"name": "ok.png", "data": _b64(image())}, {"name": "big.png", "data": _b64(big)}],
            "attachment_refused",
            f"big.png: the file is {len(big):,} bytes; an image may be at most 200 bytes",
        ),
        (
            "execute",
            [{"name": "big.png", "data": _b64(big)}],
            "attachment_refused",
            "big.png: the file is",
        ),
        (
            "run_agent",
            [{"name": "a.png", "data": "not base64!"}],
            "validation",
            "params.attachments.0.data is not base64",
        ),
        ("run_agent", {"name": "a.png"}, "validation", "params.attachments must be a list"),
        (
            "run_agent",
            [{"name": "a.png", "sha256": "ab" * 32}],
            "attachment_refused",
            "a.png: no file is kept under sha256 abababababab",
        ),
        (
            "execute",
            [{"name": "a.png", "path": "/etc/passwd"}],
            "validation",
            "params.attachments.0.path is not a field of a file",
        ),
    ]
    for n, (method, files, code, said) in enumerate(cases):
        params: dict[str, Any] = {"agent": "looker", "attachments": files}
        params |= {"message": "look"} if method == "run_agent" else {"input": {"what": "it"}}
        client.request(n, method, **params)
        refused, _ = client.response(n)
        assert "error" in refused, refused
        error = refused["error"]
        assert (error["code"], said in error["message"]) == (code, True), error
        assert error.get("hint"), error
    client.proc.stdin.close()  # type: ignore[union-attr]
    client.proc.wait(timeout=30)
    assert _kept(root) == ((0, 0), 0)  # no file, no run
