"""Tasks (seed 004): templating, outcomes, the result cache, `agentrunner exec`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentrunner.runtime.compose import open_task_runner
from agentrunner.testing import MockProvider, MockProviderServer, Reply
from agentrunner.workspace.tasks import FileCache, cache_key, canonical_json
from tests.hangs import run_or_dump

CONFIG = """\
[defaults]
model = "mockai:gpt-mock"

[providers.mockai]
kind = "openai"
base_url = "{url}"
api_key_env = "MOCK_KEY"

[prices."mockai:gpt-mock"]
input_per_mtok = 1.0
output_per_mtok = 2.0
"""
WRITER = """\
---
name: Writer
prompt_template: "Write about {{input.topic}} in {{ input.style? }} style."
inputs: [company, topic, style]
cache: true
---
You write for {{input.company}}.{{input.extra.note?}}
"""
EXTRACTOR = """\
---
name: Extractor
output_schema:
  type: object
  properties: {city: {type: string}}
  required: [city]
  additionalProperties: false
prompt_template: "Find the city in: {{input.text}}"
---
You extract facts.
"""


@pytest.fixture
def tasks_project(
    tmp_path: Path, mock_server: MockProviderServer, monkeypatch: pytest.MonkeyPatch
) -> Path:
    root = tmp_path / "proj"
    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text(CONFIG.format(url=mock_server.openai_url))
    (root / "agents" / "writer.md").write_text(WRITER)
    (root / "agents" / "extractor.md").write_text(EXTRACTOR)
    monkeypatch.setenv("MOCK_KEY", "sk-mock")
    monkeypatch.chdir(root)
    return root


async def run(agent: str, input: Any, **kwargs: Any) -> Any:
    async with await open_task_runner() as tasks:
        return await tasks.execute(agent, input, **kwargs)


def test_canonical_json_and_key() -> None:
    assert (
        canonical_json({"b": 1, "a": {"y": [1, 2], "x": "é"}}) == '{"a":{"x":"é","y":[1,2]},"b":1}'
    )
    assert cache_key("w", "m", {"b": 1, "a": 2}) == cache_key("w", "m", {"a": 2, "b": 1})
    assert cache_key("w", "m", {"a": 1}) != cache_key("w", "m", {"a": 1.0})  # 1 and 1.0 differ
    assert cache_key("w", "m", {"a": 0.1}) == cache_key("w", "m", {"a": 0.1})
    assert canonical_json({"f": 0.1 + 0.2}) == '{"f":0.30000000000000004}'
    assert cache_key("w", "m1", {}) != cache_key("w", "m2", {}) != cache_key("x", "m1", {})
    assert len(cache_key("w", "m", {})) == 64


async def test_completed_outcome_and_cache_hit(tasks_project: Path, mock: MockProvider) -> None:
    mock.queue(Reply(text="An essay."))
    first = await run("writer", {"company": "Acme", "topic": "tides", "unused": 1})
    assert (first.status, first.output, first.cached) == ("completed", "An essay.", False)
    assert first.model == "mockai:gpt-mock" and first.usage["requests"] == 1 and first.cost_usd
    request = mock.requests[0].body
    system = request["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You write for Acme.\n")
    assert request["messages"][1]["content"] == "Write about tides in  style."
    again = await run("writer", {"company": "Acme", "topic": "tides", "unused": 2})  # unused value
    assert (again.cached, again.output) == (True, "An essay.")
    assert len(mock.requests) == 1
    mock.queue(Reply(text="Another."))
    changed = await run("writer", {"company": "Acme", "topic": "waves"})
    assert not changed.cached and changed.output == "Another."
    fresh = await run("writer", {"company": "Acme", "topic": "tides"}, cache=False)
    assert not fresh.cached and len(mock.requests) == 3


async def test_structured_output(tasks_project: Path, mock: MockProvider) -> None:
    mock.queue(Reply(text='{"city": "Oslo"}'))
    outcome = await run("extractor", {"text": "I live in Oslo"})
    assert outcome.output == {"city": "Oslo"}
    assert mock.requests[0].body["response_format"]["json_schema"]["schema"]["required"] == ["city"]


@pytest.mark.parametrize(
    ("agent", "input", "code"),
    [
        ("writer", {"topic": "x"}, "missing_mandatory_placeholder"),
        ("writer", {"company": "A", "topic": "x", "extra": "a string"}, "invalid_placeholder_path"),
        ("ghost", {}, "agent_not_found"),
        ("writer", ["not", "an", "object"], "validation"),
    ],
)
async def test_expected_failures_are_outcomes(
    tasks_project: Path, agent: str, input: Any, code: str
) -> None:
    outcome = await run(agent, input)
    assert outcome.status == "failed" and outcome.error["code"] == code
    assert outcome.error["message"]


async def test_model_not_found_and_provider_failure(
    tasks_project: Path, mock: MockProvider
) -> None:
    unknown = await run("writer", {"company": "A", "topic": "t"}, model="nosuch:model")
    assert unknown.error["code"] == "model_not_found"
    from agentrunner.testing import Fault

    mock.queue(Reply(fault=Fault.http(503)), Reply(fault=Fault.http(503)))
    down = await run("writer", {"company": "A", "topic": "down"})
    assert down.error["code"] == "provider_unavailable"


async def test_execution_failed_for_a_bug(
    tasks_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentrunner.engine import Engine

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(Engine, "run", broken)
    outcome = await run("writer", {"company": "A", "topic": "t"})
    assert outcome.error["code"] == "execution_failed"
    assert outcome.error["message"].startswith("Agent execution failed:")


async def test_project_failures_are_outcomes_through_execute(
    tasks_project: Path, mock: MockProvider
) -> None:
    from agentrunner import execute

    (tasks_project / "agents" / "broken.md").write_text("---\nname: B\nmodle: x\n---\nHi\n")
    outcome = await execute("writer", {"company": "A", "topic": "t"})
    assert outcome.status == "failed" and outcome.error is not None
    assert outcome.error["code"] == "invalid_specification"
    assert "broken.md" in outcome.error["message"] or "modle" in outcome.error["message"]
    (tasks_project / "agents" / "broken.md").unlink()
    (tasks_project / "agents" / "unreadable.md").mkdir()  # a directory where a file should be
    unreadable = await execute("writer", {"company": "A", "topic": "t"})
    assert unreadable.error is not None and unreadable.error["code"] == "runner_io"
    assert not mock.requests


async def test_a_task_runs_once(tasks_project: Path, mock: MockProvider) -> None:
    async with await open_task_runner() as tasks:
        task = tasks.task("writer", {"company": "A", "topic": "once"})
        assert (await task.run()).ok
        with pytest.raises(RuntimeError, match="runs once"):
            await task.run()


async def test_a_corrupt_cache_file_and_a_read_only_cache_leave_the_task_working(
    tasks_project: Path, mock: MockProvider
) -> None:
    values = {"company": "A", "topic": "resilience"}
    await run("writer", values)
    cache_dir = tasks_project / ".agentrunner" / "cache" / "writer" / "mockai:gpt-mock"
    [entry] = list(cache_dir.glob("*.json"))
    entry.write_text("{not json")
    healed = await run("writer", values)
    assert healed.ok and not healed.cached  # ran, and rewrote the entry
    assert (await run("writer", values)).cached
    cache_root = tasks_project / ".agentrunner" / "cache"
    with _read_only(cache_root):
        outcome = await run("writer", {"company": "A", "topic": "read-only"})
        assert outcome.ok and not outcome.cached
        assert not list(cache_root.rglob("*.tmp"))  # nothing half-written was left
    assert not (await run("writer", {"company": "A", "topic": "read-only"})).cached  # not kept


@contextlib.contextmanager
def _read_only(root: Path) -> Iterator[None]:
    """A directory tree nobody can write to; root ignores permissions, so it is made immutable."""
    dirs = [root, *(p for p in root.rglob("*") if p.is_dir())]
    if os.geteuid() != 0:
        for path in dirs:
            path.chmod(stat.S_IRUSR | stat.S_IXUSR)
        try:
            yield
        finally:
            for path in dirs:
                path.chmod(stat.S_IRWXU)
        return
    if (
        shutil.which("chattr") is None
        or subprocess.run(
            ["chattr", "-R", "+i", str(root)], capture_output=True, check=False
        ).returncode
    ):
        pytest.skip("running as root and this filesystem has no immutable attribute")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-R", "-i", str(root)], check=True)


async def test_file_cache_write_failure_is_swallowed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory should be")
    cache = FileCache(blocker)
    cache.put("a", "m", "k", {"output": 1})
    await cache.flush()
    assert await cache.get("a", "m", "k") is None
    assert any("not cached" in r.getMessage() for r in caplog.records)


async def test_ttl_and_size_limits(tmp_path: Path) -> None:
    cache = FileCache(tmp_path, ttl_s=0.0)
    cache.put("a", "m", "k", {"output": 1})
    await cache.flush()
    assert await cache.get("a", "m", "k") is None  # expired at once
    small = FileCache(tmp_path / "s", max_bytes=600)
    for n in range(10):
        small.put("a", "m", f"k{n}", {"output": "x" * 100})
        await small.flush()
    stats = await small.stats()
    assert stats.bytes <= 600 and 0 < stats.entries < 10
    assert await small.get("a", "m", "k9") == {"output": "x" * 100}  # the newest survive
    assert await small.get("a", "m", "k0") is None  # the oldest went first
    assert await small.clear("a") == stats.entries
    assert (await small.stats()).entries == 0


async def test_the_file_cache_walks_its_folder_off_the_loop(tmp_path: Path) -> None:
    """Stats and a clear walk the whole cache on a worker thread (the detector of
    tests/conftest.py fails a test whose loop does); a hit is one small file, read inline."""
    writer = FileCache(tmp_path)
    writer.put("a", "m", "k1", {"output": "one"})
    writer.put("b", "m", "k2", {"output": "two"})
    await writer.flush()
    cache = FileCache(tmp_path)  # nothing pending here: every hit comes from its file
    assert await cache.get("a", "m", "k1") == {"output": "one"}
    assert await cache.get("b", "m", "k2") == {"output": "two"}
    assert await cache.get("a", "m", "k2") is None
    assert (await cache.stats()).agents == {"a": 1, "b": 1}
    assert await cache.clear("a") == 1
    assert (await cache.stats()).agents == {"b": 1}


async def test_flush_ends_when_a_finished_write_was_not_taken_out(tmp_path: Path) -> None:
    """What py-spy found in a batch that hung on CI: flush spinning on finished writes whose
    done-callbacks had not taken them out. A finished write has landed, callback or not."""
    cache = FileCache(tmp_path)
    cache.put("a", "m", "k1", {"output": "one"})
    await cache.flush()
    landed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    landed.set_result(None)
    cache._writes.add(landed)  # as found: done, no callback left to run
    cache._pending[("a", "m", "k2")] = ({"output": "stale"}, landed)
    await asyncio.wait_for(cache.flush(), timeout=5)
    assert not cache._writes and not cache._pending
    assert await cache.get("a", "m", "k1") == {"output": "one"}
    assert await cache.get("a", "m", "k2") is None  # never written: a miss, not the held copy


def exec_cli(
    project: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``agentrunner exec`` as a subprocess (its stacks printed should it hang)."""
    command = [sys.executable, "-m", "agentrunner", "exec", *args]
    return run_or_dump(command, cwd=project, stdin=stdin, timeout=300)


def test_exec_twice_hits_the_cache_across_processes(
    tasks_project: Path, mock: MockProvider
) -> None:
    mock.queue(Reply(text="Cached essay."))
    first = exec_cli(
        tasks_project, "writer", "--input", '{"company": "Acme", "topic": "tides"}', "--json"
    )
    second = exec_cli(
        tasks_project,
        "writer",
        "--input",
        "-",
        "--json",
        stdin='{"topic": "tides", "company": "Acme"}',
    )
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    assert (a["cached"], b["cached"]) == (False, True)
    assert a["output"] == b["output"] == "Cached essay."
    assert len(mock.requests) == 1  # the second never reached the provider
    other_model = exec_cli(
        tasks_project,
        "writer",
        "--input",
        '{"company": "Acme", "topic": "tides"}',
        "--model",
        "test",
        "--json",
    )
    assert json.loads(other_model.stdout)["cached"] is False
    failed = exec_cli(tasks_project, "writer", "--input", '{"topic": "tides"}')
    assert failed.returncode == 1 and "missing_mandatory_placeholder" in failed.stderr
    stats = subprocess.run(
        [sys.executable, "-m", "agentrunner", "cache", "stats"],
        cwd=tasks_project,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "2 cached result(s)" in stats.stdout
    cleared = subprocess.run(
        [sys.executable, "-m", "agentrunner", "cache", "clear", "--agent", "writer"],
        cwd=tasks_project,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "removed 2" in cleared.stdout
    unknown = subprocess.run(
        [sys.executable, "-m", "agentrunner", "cache", "clear", "--agent", "writr"],
        cwd=tasks_project,
        capture_output=True,
        text=True,
        check=False,
    )
    assert unknown.returncode == 1 and "agent_not_found" in unknown.stderr
    assert "Did you mean 'writer'?" in unknown.stderr


def test_batch_of_a_thousand_in_order(tasks_project: Path, mock: MockProvider) -> None:
    lines = [json.dumps({"company": "Acme", "topic": f"t{n}"}) for n in range(1000)]
    lines[500] = json.dumps({"topic": "no company"})  # one failing input
    (tasks_project / "inputs.jsonl").write_text("\n".join(lines) + "\n")
    done = exec_cli(
        tasks_project, "writer", "--batch", "inputs.jsonl", "--concurrency", "32", "--ordered"
    )
    assert done.returncode == 1  # one failed …
    outcomes = [json.loads(line) for line in done.stdout.splitlines()]
    assert [o["line"] for o in outcomes] == list(range(1, 1001))  # … and the rest, in order
    assert sum(o["status"] == "completed" for o in outcomes) == 999
    assert outcomes[500]["error"]["code"] == "missing_mandatory_placeholder"
    assert all("Write about t" in json.dumps(r.body) for r in mock.requests[:3])


async def test_the_cache_key_covers_the_reports_a_task_may_delegate_to(
    tasks_project: Path, mock: MockProvider
) -> None:
    """The delegate tool's description lists the agent's reports: what the model sees."""
    report = tasks_project / "agents" / "researcher.md"
    mock.queue(Reply(text="Essay one."), Reply(text="Essay two."), Reply(text="Essay three."))
    topic = {"company": "Acme", "topic": "tides"}
    first = await run("writer", topic)
    report.write_text("---\nname: R\ndescription: Finds sources\nreports_to: writer\n---\nHi.\n")
    second = await run("writer", topic)  # a report now: the delegate tool is offered
    tools = {t["function"]["name"]: t for t in mock.requests[-1].body.get("tools", [])}
    assert "researcher: Finds sources" in tools["delegate"]["function"]["description"]
    report.write_text("---\nname: R\ndescription: Checks facts\nreports_to: writer\n---\nHi.\n")
    third = await run("writer", topic)
    again = await run("writer", topic)
    assert [o.output for o in (first, second, third, again)] == [
        "Essay one.",
        "Essay two.",
        "Essay three.",
        "Essay three.",
    ]
    assert again.cached and len(mock.requests) == 3


async def test_the_cache_key_covers_the_files_sent(tasks_project: Path) -> None:
    from dataclasses import replace

    from tests.attachment_files import image_attachment

    red, blue = image_attachment("a.png", color="red"), image_attachment("a.png", color="blue")
    values = {"company": "Acme", "topic": "tides"}
    first = await run("writer", values, model="test", attachments=[red])
    assert not first.cached and "a.png" in first.output  # the test model names what it saw
    assert (await run("writer", values, model="test", attachments=[red])).cached
    assert not (await run("writer", values, model="test", attachments=[blue])).cached
    renamed = replace(red, name="b.png")  # the name is sent with it (a PDF's file name)
    assert not (await run("writer", values, model="test", attachments=[renamed])).cached
    assert not (await run("writer", values, model="test")).cached  # no file: another request


async def test_the_cache_write_never_holds_up_the_result(
    tasks_project: Path, mock: MockProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seed 004: the result is returned while its cache write is still under way (issue 46
    item 11); once the write lands, the same task is a hit; a second, different task is not."""
    import threading

    release, landed = threading.Event(), threading.Event()
    write = FileCache._write

    def slow_write(self: FileCache, path: Path, entry: Any) -> None:
        release.wait(30)  # held until the result is in the caller's hands
        write(self, path, entry)
        landed.set()

    monkeypatch.setattr(FileCache, "_write", slow_write)
    mock.queue(Reply(text="An essay."), Reply(text="Another."))
    async with await open_task_runner() as tasks:
        first = await tasks.execute("writer", {"company": "Acme", "topic": "tides"})
        assert (first.status, first.output, first.cached) == ("completed", "An essay.", False)
        assert not landed.is_set()  # returned before its write
        release.set()
        await tasks.cache.flush()
        assert landed.is_set()
        again = await tasks.execute("writer", {"company": "Acme", "topic": "tides"})
        other = await tasks.execute("writer", {"company": "Acme", "topic": "waves"})
    assert (again.cached, again.output) == (True, "An essay.")
    assert (other.cached, other.output) == (False, "Another.")
    assert len(mock.requests) == 2
