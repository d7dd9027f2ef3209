"""A task is a run without a thread: its cache answers only the same request, it honours the
agent file's ``cache:``, it has the agent's tools, trust and budgets, and it is recorded."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentrunner.engine import AbortSignal
from agentrunner.runtime.compose import open_task_runner
from agentrunner.testing import MockProvider, MockProviderServer, Reply

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

[prices."mockai:gpt-pricey"]
input_per_mtok = 100.0
output_per_mtok = 400.0
{extra}
"""


@pytest.fixture
def project(
    tmp_path: Path, mock_server: MockProviderServer, monkeypatch: pytest.MonkeyPatch
) -> Any:
    root = tmp_path / "proj"
    (root / "agents").mkdir(parents=True)
    monkeypatch.setenv("MOCK_KEY", "sk-mock")
    monkeypatch.chdir(root)

    def make(agents: dict[str, str], extra: str = "") -> Path:
        (root / "agentrunner.toml").write_text(
            CONFIG.format(url=mock_server.openai_url, extra=extra)
        )
        for name, text in agents.items():
            (root / "agents" / f"{name}.md").write_text(text)
        return root

    return make


async def execute(agent: str, input: Any, **options: Any) -> Any:
    async with await open_task_runner() as tasks:
        return await tasks.execute(agent, input, **options)


CFO = "---\nname: CFO\nmodel: test\ncache: true\n---\nYou are {{ input.company? }}'s CFO.\n"


async def test_the_whole_input_is_in_the_key_when_it_is_the_message(project: Any) -> None:
    project({"cfo": CFO})
    acme = await execute("cfo", {"company": "Acme"})
    globex = await execute("cfo", {"company": "Globex", "question": "Should we raise?"})
    initech = await execute("cfo", {"company": "Initech"})
    assert not any(o.cached for o in (acme, globex, initech))
    assert "Globex" in globex.output and "Should we raise?" in globex.output
    assert "Initech" in initech.output and "Acme" not in initech.output
    assert (await execute("cfo", {"company": "Acme"})).cached  # the same request again
    # An input value the system prompt does not use still reaches the model: it misses.
    asked = await execute("cfo", {"company": "Acme", "question": "Cash?"})
    assert not asked.cached and "Cash?" in asked.output


async def test_the_model_chain_and_the_agent_file_are_in_the_key(
    project: Any, mock: MockProvider
) -> None:
    root = project({"cfo": CFO})
    await execute("cfo", {"company": "Acme"})
    assert (await execute("cfo", {"company": "Acme"})).cached
    other_model = await execute("cfo", {"company": "Acme"}, model="mockai:gpt-mock")
    assert not other_model.cached and len(mock.requests) == 1
    with_fallback = await execute(
        "cfo", {"company": "Acme"}, model="mockai:gpt-mock", fallback=["test"]
    )
    assert not with_fallback.cached
    # Editing the agent file — here only its tone — invalidates what it answered before.
    (root / "agents" / "cfo.md").write_text(CFO.replace("name: CFO", "name: CFO\npersona: direct"))
    assert not (await execute("cfo", {"company": "Acme"})).cached
    assert (await execute("cfo", {"company": "Acme"})).cached


async def test_memory_the_agent_wrote_is_in_the_key(project: Any) -> None:
    project(
        {
            "keeper": "---\nname: Keeper\nmodel: test\ncache: true\ncapabilities: [memory]\n"
            "memory: {notes: 'nothing yet'}\n---\nYou keep notes.\n"
        }
    )
    async with await open_task_runner() as tasks:
        asked = {"q": "memory_append x"}  # the test model writes to memory: asked by name
        first = await tasks.execute("keeper", asked)
        assert first.ok and not first.cached
        second = await tasks.execute("keeper", asked)
        assert not second.cached  # the system prompt now carries what the first one wrote


async def test_cache_false_is_honoured_and_can_be_overridden(
    project: Any, mock: MockProvider
) -> None:
    project(
        {
            "plain": "---\nname: Plain\n---\nYou answer.\n",  # cache: false is the default
            "cached": "---\nname: Cached\ncache: true\n---\nYou answer.\n",
        }
    )
    for _ in range(2):
        assert not (await execute("plain", {"q": "same"})).cached
    assert len(mock.requests) == 2
    await execute("plain", {"q": "asked"}, cache=True)
    assert (await execute("plain", {"q": "asked"}, cache=True)).cached
    await execute("cached", {"q": "same"})
    assert not (await execute("cached", {"q": "same"}, cache=False)).cached
    assert (await execute("cached", {"q": "same"})).cached


async def test_a_task_has_the_agents_tools_and_trust_and_is_recorded(project: Any) -> None:
    root = project(
        {"clerk": "---\nname: Clerk\nmodel: test\ncapabilities: [notes, files]\n---\nFile it.\n"}
    )
    async with await open_task_runner() as tasks:
        # the test model writes (a note, a file) only when asked to by name
        outcome = await tasks.execute("clerk", {"doc": "invoice", "do": "note_create, write_file"})
        assert outcome.ok and outcome.run_id
        assert "note_create" in outcome.output and "write_file" in outcome.output
        store = tasks.runner.store
        run = await store.runs.get(outcome.run_id)
        assert run is not None and (run.status, run.thread_id) == ("completed", None)
        kinds = [m.message_type for m in await store.runs.messages(run.id)]
        assert kinds.count("tool_call_message") >= 5 and kinds[-1] == "assistant_message"
        assert await store.notes.list("clerk")  # the tool really ran
    # Sandboxed trust: the file went to the agent's own workspace, not the project.
    assert (root / ".agentrunner" / "workspaces" / "clerk" / "example").is_file()
    assert not (root / "example").exists()


async def test_a_task_spends_within_budgets_and_counts_toward_the_day(
    project: Any, mock: MockProvider
) -> None:
    project(
        {"writer": "---\nname: Writer\nmodel: mockai:gpt-pricey\n---\nYou write.\n"},
        "[budgets]\nper_run_usd = 0.05\nper_agent_daily_usd = 1.0\n",
    )
    mock.queue(Reply(text="word " * 4000, input_tokens=None))
    async with await open_task_runner() as tasks:
        outcome = await tasks.execute("writer", {"topic": "everything"})
        assert outcome.error is not None and outcome.error["code"] == "budget_exceeded"
        spent = await tasks.runner.store.costs.spent_today("writer")
        assert 0 < spent <= 50_000  # recorded, and within the per-run budget


async def test_cancelling_a_task_records_it(project: Any, mock: MockProvider) -> None:
    project({"writer": "---\nname: Writer\n---\nYou write.\n"})
    mock.queue(Reply(text="slow", delay_s=5))
    async with await open_task_runner() as tasks:
        abort = AbortSignal()
        running = asyncio.ensure_future(tasks.execute("writer", {"t": 1}, abort=abort))
        await asyncio.sleep(0.3)
        abort.abort("user")
        outcome = await running
        assert outcome.error is not None and outcome.error["code"] == "cancelled"
        [run] = await tasks.runner.store.runs.list(agent_id="writer")
        assert (run.status, run.stop_reason, run.thread_id) == ("cancelled", "cancelled", None)


def _batch(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentrunner", "exec", "writer", "--batch", "in.jsonl", *args],
        cwd=root,
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_batch_outcomes_are_written_as_they_finish(project: Any, mock: MockProvider) -> None:
    root = project({"writer": "---\nname: Writer\n---\nYou write.\n"})
    (root / "in.jsonl").write_text('{"n": 1}\n{"n": 2}\nnot json\n{"n": 4}\n')
    # The first request to reach the mock is slow (usually line 1's; under load another's):
    # its outcome comes last, and every line says which input it is.
    mock.queue(Reply(text="slow", delay_s=1.0), Reply(text="b"), Reply(text="c"))
    proc = _batch(root, "--concurrency", "3")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err  # the line that is not JSON failed
    outcomes = [json.loads(line) for line in out.splitlines()]
    lines = [o["line"] for o in outcomes]
    assert sorted(lines) == [1, 2, 3, 4]
    assert outcomes[-1]["output"] == "slow"  # written as it finished: last
    if outcomes[-1]["line"] != 4:
        assert lines != [1, 2, 3, 4]  # not in the inputs' order
    assert next(o for o in outcomes if o["line"] == 3)["error"]["code"] == "validation"


def test_an_interrupted_batch_keeps_every_finished_outcome(
    project: Any, mock: MockProvider
) -> None:
    root = project({"writer": "---\nname: Writer\n---\nYou write.\n"})
    (root / "in.jsonl").write_text("".join(f'{{"n": {n}}}\n' for n in range(6)))
    mock.queue(Reply(text="fast"), Reply(text="fast"), *(Reply(text="slow", delay_s=30),) * 4)
    proc = _batch(root, "--concurrency", "3", "--ordered")
    assert proc.stdout is not None
    finished = [proc.stdout.readline(), proc.stdout.readline()]  # the two fast ones, in order
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    outcomes = [json.loads(line) for line in [*finished, *out.splitlines()] if line.strip()]
    assert [(o["line"], o["output"]) for o in outcomes] == [(1, "fast"), (2, "fast")]
    assert "Traceback" not in err

    async def runs() -> list[str]:
        async with await open_task_runner(root) as tasks:
            return [r.status for r in await tasks.runner.store.runs.list(agent_id="writer")]

    statuses = asyncio.run(runs())
    assert statuses.count("completed") == 2 and statuses.count("cancelled") >= 1
    assert "running" not in statuses  # nothing left behind as running


@pytest.mark.parametrize("as_json", [False, True])
def test_ctrl_c_during_one_task_says_so_and_keeps_its_cost(
    project: Any, mock: MockProvider, as_json: bool
) -> None:
    root = project({"writer": "---\nname: Writer\n---\nYou write.\n"})
    mock.queue(Reply(text="slow", delay_s=30))
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentrunner", "exec", "writer", "--input", '{"n": 1}']
        + (["--json"] if as_json else []),
        cwd=root,
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not mock.requests:
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    if as_json:
        outcome = json.loads(out)
        assert outcome["status"] == "failed" and outcome["error"]["code"] == "cancelled"
        assert outcome["run_id"] and outcome["usage"]["input_tokens"] > 0  # the request was sent
        assert outcome["usage"]["estimated"]
    else:
        assert out == "" and "cancelled" in err and "run_" in err  # which run, what it cost
