"""`--attach` on `run`, `chat` (and `/attach`) and `exec`, as a person uses them: a file goes
with the message, is kept once however many threads it is sent in, a file that is not what
its name says or is too large is refused with nothing run or kept, and an image for a
text-only model is answered by a fallback that reads images."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentrunner.runtime.compose import open_runner
from agentrunner.testing import MockProvider, Reply
from tests.attachment_files import image, pdf
from tests.runner.conftest import Agent
from tests.runner.test_cli_run import cli


@pytest.fixture
def files(project: Path) -> Path:
    (project / "shot.png").write_bytes(image(64, 48, "teal"))
    (project / "other.png").write_bytes(image(30, 20, "orange"))
    (project / "report.pdf").write_bytes(pdf(3))
    (project / "notes.png").write_text("a text file with a picture's name\n")
    (project / "huge.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(4_000_000))
    return project


async def _kept(project: Path) -> tuple[tuple[int, int], int]:
    runner = await open_runner(project)
    try:
        return await runner.store.attachments.stats(), len(await runner.store.runs.list())
    finally:
        await runner.close()


def test_run_sends_files_and_keeps_each_once(
    agent: Agent, files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("looker", "name: looker\nmodel: test")
    code, out, err = cli(
        capsys, "run", "looker", "what is this?", "--attach", "shot.png", "-a", "report.pdf"
    )
    assert code == 0, err
    assert "shot.png" in out and "64x48" in out and "report.pdf" in out and "3 pages" in out
    code, out, err = cli(capsys, "run", "looker", "and this?", "--new", "--attach", "other.png")
    assert code == 0, err
    assert "other.png" in out and "30x20" in out and "shot.png" not in out
    code, out, err = cli(capsys, "run", "looker", "again", "--new", "--attach", "shot.png")
    assert code == 0, err
    assert asyncio.run(_kept(files)) == (
        (3, sum((files / n).stat().st_size for n in ("shot.png", "other.png", "report.pdf"))),
        3,
    )


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("notes.png", "its content is text"),
        ("huge.png", "an image may be at most 3,750,000 bytes"),
        ("missing.pdf", "No such file"),
    ],
)
def test_a_refused_file_runs_nothing_and_keeps_nothing(
    agent: Agent, files: Path, capsys: pytest.CaptureFixture[str], name: str, said: str
) -> None:
    agent("looker", "name: looker\nmodel: test")
    code, out, err = cli(capsys, "run", "looker", "look", "--attach", "shot.png", "-a", name)
    assert code == 1 and out == ""
    assert "attachment_refused" in err and name in err and said in err, err
    assert "hint:" in err and "Traceback" not in err
    assert asyncio.run(_kept(files)) == ((0, 0), 0)  # not the good file either: no run began


def test_an_image_for_a_text_only_model_is_answered_by_a_fallback_that_reads_images(
    agent: Agent, files: Path, mock: MockProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("reader", "name: reader\nmodel: mockai:gpt-mock\nfallback: [mockant:claude-mock]")
    mock.queue(Reply(text="A teal rectangle."), model="claude-mock")
    code, out, err = cli(capsys, "run", "reader", "describe", "--attach", "shot.png")
    assert code == 0, err
    assert "A teal rectangle." in out and "mockant:claude-mock" in err
    assert [r.path for r in mock.requests] == ["/v1/messages"]  # the text-only one: never sent
    # text alone still goes to the primary
    mock.queue(Reply(text="Plain."), model="gpt-mock")
    code, out, err = cli(capsys, "run", "reader", "just words", "--new")
    assert code == 0 and "Plain." in out and "mockai:gpt-mock" in err


def test_exec_sends_files_with_the_task(
    agent: Agent, files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("looker", "name: looker\nmodel: test")
    code, out, err = cli(capsys, "exec", "looker", "--attach", "report.pdf")
    assert code == 0, err
    assert "report.pdf" in out and "3 pages" in out
    code, out, err = cli(capsys, "exec", "looker", "--attach", "notes.png")
    assert code == 1 and "attachment_refused" in err


def test_chat_attaches_with_a_command_and_a_fresh_project_runs_it(tmp_path: Path) -> None:
    """As a person does it: `agentrunner init`, then `run --attach` and `chat` with /attach, as
    subprocesses."""
    exe = [sys.executable, "-m", "agentrunner"]
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("AGENTRUNNER_DATABASE_URL", None)
    subprocess.run(
        [*exe, "init", "demo", "--model", "test"],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
    )
    project = tmp_path / "demo"
    (project / "shot.png").write_bytes(image(64, 48, "teal"))
    (project / "notes.png").write_text("not a picture")
    done = subprocess.run(
        [*exe, "run", "assistant", "what is in it?", "--attach", "shot.png"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "I was given: [image: shot.png, image/png, 64x48" in done.stdout
    chat = subprocess.run(
        [*exe, "chat", "assistant", "--new"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        input="/attach notes.png\n/attach shot.png\ndescribe it\nnothing attached now\n",
    )
    assert chat.returncode == 0, chat.stderr
    assert "attachment_refused: notes.png" in chat.stderr  # said, and the session went on
    assert "goes with your next message" in chat.stderr
    assert chat.stdout.count("I was given: [image: shot.png") == 1  # the next message only


WIRES = """
[models."mockai:gpt-mock"]
input = ["text", "image", "pdf"]

[models."mockai:gpt-resp"]
api = "responses"
input = ["text", "image", "pdf"]
"""


@pytest.mark.parametrize(
    ("model", "path"),
    [
        ("mockai:gpt-mock", "/v1/chat/completions"),
        ("mockai:gpt-resp", "/v1/responses"),
        ("mockant:claude-mock", "/v1/messages"),
    ],
)
def test_each_wire_sends_the_files_to_the_provider(
    agent: Agent,
    files: Path,
    mock: MockProvider,
    mock_server: Any,
    capsys: pytest.CaptureFixture[str],
    model: str,
    path: str,
) -> None:
    from tests.runner.conftest import CONFIG

    (files / "agentrunner.toml").write_text(
        CONFIG.format(
            openai=mock_server.openai_url, anthropic=mock_server.anthropic_url, extra=WIRES
        )
    )
    agent("viewer", f"name: viewer\nmodel: {model}")
    code, out, err = cli(
        capsys, "run", "viewer", "describe", "--attach", "shot.png", "--attach", "report.pdf"
    )
    assert code == 0, err
    assert "Echo: describe [saw 1 image, 1 pdf]" in out  # the mock decoded both parts
    assert [r.path for r in mock.requests] == [path]
    code, out, err = cli(capsys, "run", "viewer", "describe", "--new", "--attach", "other.png")
    assert code == 0 and "Echo: describe [saw 1 image]" in out, err
