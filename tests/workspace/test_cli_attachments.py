"""``post``, ``dm`` and ``brief`` with ``--attach``, as a person runs them: subprocesses in a
fresh ``agentrunner init`` project (its agents on the `test` model), on SQLite and PostgreSQL.
A file that fails its check is refused before anything is posted."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentrunner.store import open_store
from tests.attachment_files import image, pdf
from tests.company.conftest import Company

OFFICE_AGENTS = ("accountant", "manager", "reception", "sales")  # #general's agents


def _init(tmp_path: Path, template: str, store_url: str) -> Company:
    project = Company(tmp_path / template, store_url)
    project.root.mkdir()
    project.ok("init", ".", "--template", template, "--model", "test")
    (project.root / "a.png").write_bytes(image(8, 6, "blue"))
    (project.root / "b.png").write_bytes(image(5, 9, "green"))
    (project.root / "r.pdf").write_bytes(pdf(pages=2))
    (project.root / "photo.png").write_text("just some notes, not a picture")
    return project


@pytest.fixture
def office(tmp_path: Path, store_url: str) -> Company:
    return _init(tmp_path, "office", store_url)


@pytest.fixture
def company(tmp_path: Path, store_url: str) -> Iterator[Company]:
    made = _init(tmp_path, "company", store_url)
    yield made
    workers = _read(store_url, lambda s: s.messages.db.fetch_all("SELECT pid FROM workers", {}))
    for row in workers:  # a detached worker a background brief started
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(row["pid"]), signal.SIGTERM)


def _read(url: str, what: Any) -> Any:
    async def main() -> Any:
        store = await open_store(url)
        try:
            return await what(store)
        finally:
            await store.close()

    return asyncio.run(main())


def _counts(url: str) -> tuple[int, int, tuple[int, int]]:
    """Channel messages, runs and kept files (how many, their bytes)."""

    async def count(store: Any) -> tuple[int, int, tuple[int, int]]:
        db = store.messages.db
        messages = await db.fetch_one("SELECT COUNT(*) AS n FROM channel_messages", {})
        runs = await db.fetch_one("SELECT COUNT(*) AS n FROM runs", {})
        return int(messages["n"]), int(runs["n"]), await store.attachments.stats()

    return _read(url, count)


def test_post_and_dm_send_their_files_to_every_agent_they_reach(office: Company) -> None:
    url = office.database_url or ""
    first = office.ok("post", "general", "what do you see?", "--attach", "a.png")
    replies = [line for line in first.out.splitlines() if "Re: what do you see?" in line]
    assert sorted(line.split()[1] for line in replies) == sorted(OFFICE_AGENTS)
    assert all("[image: a.png, image/png, 8x6" in line for line in replies)
    assert _counts(url)[2] == (1, len(image(8, 6, "blue")))

    # another file, and two at once: each agent names what this post carried, not the first
    second = office.ok("post", "general", "and these?", "--attach", "b.png", "--attach", "r.pdf")
    replies = [line for line in second.out.splitlines() if "Re: and these?" in line]
    assert len(replies) == len(OFFICE_AGENTS)
    for line in replies:
        given = line.split("I was given:")[1]
        assert "b.png, image/png, 5x9" in given and "r.pdf, application/pdf, 2 pages" in given
        assert "a.png" not in given
    assert _counts(url)[2][0] == 3

    dm = office.ok("dm", "accountant", "summarise this", "--attach", "r.pdf")
    assert "accountant" in dm.out and "[pdf: r.pdf, application/pdf, 2 pages" in dm.out
    assert _counts(url)[2][0] == 3  # the same PDF again: still one copy

    shown = office.ok("channels", "show", "general", "--limit", "100").out
    assert "attached a.png image/png · 8×6" in shown and "attached r.pdf application/pdf" in shown


@pytest.mark.parametrize("command", ["post", "dm"])
def test_a_file_that_fails_its_check_is_refused_before_anything_is_posted(
    office: Company, command: str
) -> None:
    url = office.database_url or ""
    config = office.root / "agentrunner.toml"
    config.write_text(config.read_text() + "\n[attachments]\nmax_image_mb = 0.0001\n")
    (office.root / "big.png").write_bytes(image(40, 40, "red"))
    assert len(image(40, 40, "red")) > 100 > len(image(8, 6, "blue"))
    where = ["general"] if command == "post" else ["accountant"]
    before = _counts(url)
    for path, said in (
        ("photo.png", "photo.png: its name says it is a PNG image, but its content is text"),
        ("big.png", "an image may be at most 100 bytes (0.0001 MB, [attachments] max_image_mb)"),
        ("missing.png", "cannot read missing.png"),
    ):
        # the good file first: nothing is posted when any one of them is refused
        done = office.run(command, *where, "look", "--attach", "a.png", "--attach", path)
        assert done.code == 1, done.err
        assert "error: attachment_refused: " in done.err and said in done.err
        assert "hint:" in done.err and "Traceback" not in done.err
        assert _counts(url) == before  # no message, no run, no file
    assert before == (0, 0, (0, 0))
    office.ok(command, *where, "look", "--attach", "a.png")  # within the limits
    assert _counts(url)[2][0] == 1


def test_brief_sends_its_files_to_the_root_run(company: Company) -> None:
    url = company.database_url or ""
    done = company.ok("brief", "Review the logo", "--attach", "a.png", "--attach", "r.pdf")
    assert "Re: " not in done.out  # a run of the CEO, not a channel

    [job] = company.json("jobs")
    run = _read(url, lambda store: store.runs.get(job["id"]))
    assert run.status == "completed" and run.agent_id == "ceo"
    history, _ = _read(url, lambda store: store.messages.tail(run.thread_id, 50))
    [user] = [m for m in history if m.role == "user"]
    assert [a.name for a in user.attachments] == ["a.png", "r.pdf"]
    assert "Review the logo" in user.content

    before = _counts(url)
    refused = company.run("brief", "Review this", "--attach", "photo.png")
    assert refused.code == 1 and "attachment_refused" in refused.err
    assert _counts(url) == before and len(company.json("jobs")) == 1


def test_a_background_brief_keeps_its_files_for_its_worker(company: Company) -> None:
    url = company.database_url or ""
    queued = company.ok("brief", "--background", "Look at this", "--attach", "b.png")
    job_id = queued.out.split()[-1]
    assert _read(url, lambda store: store.attachments.stats())[0] == 1  # kept with the job
    company.wait_for(
        "the job to end",
        lambda: _read(url, lambda store: store.runs.get(job_id)).status in ("completed", "failed"),
        within_s=60,
    )
    job = _read(url, lambda store: store.runs.get(job_id))
    assert job.status == "completed", job.error_message
    history, _ = _read(url, lambda store: store.messages.tail(job.thread_id, 50))
    [user] = [m for m in history if m.role == "user" and m.attachments]
    # sent with its bytes, which the worker loaded: the test model refuses a request without
    assert [a.name for a in user.attachments] == ["b.png"]
