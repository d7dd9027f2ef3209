"""Evals (issue 45, items 1-2): an eval file read with every problem on its line, its cases run
as ordinary runs and judged from their records; the pass rates equal the checks' outcomes
counted again from the runs table; a second model that fails three cases shows those three as
changed; the exit status follows the threshold; ``--repeat 3`` triples the runs. Against the
mock provider, whose unscripted answer echoes the message, on both back ends (``project``)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from agentrunner.agents.evals import load_eval
from agentrunner.errors import AgentFileErrors
from agentrunner.runtime.compose import open_workspace
from agentrunner.testing import Fault, MockProvider, Reply
from agentrunner.workspace.evals import run_eval
from tests.interrupt import ctrl_c
from tests.runner.conftest import Agent
from tests.runner.test_cli_run import cli

FRUITS = ["apple", "pear", "plum", "fig", "kiwi"]
WRONG = {4, 9, 14, 19}  # cases whose regex their echo cannot match


def _eval_file(project: Path, threshold: float = 0.75) -> Path:
    cases = []
    for n in range(20):
        fruit = FRUITS[n % len(FRUITS)]
        regex = "^Nothing" if n in WRONG else f"Item {n} is"
        cases.append(
            {
                "name": f"item {n}",
                "message": f"Item {n} is a {fruit}.",
                "expect": {"contains": fruit, "regex": regex, "tool_not_called": "note_delete"},
            }
        )
    path = project / "evals" / "fruit.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"agent": "clerk", "threshold": threshold, "cases": cases}))
    return path


def _echoed(text: str, message: str) -> bool:
    return message in text


async def test_twenty_cases_pass_rates_equal_what_the_runs_table_says(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", "model: mockai:gpt-mock")
    spec = await asyncio.to_thread(load_eval, _eval_file(project), agents=["clerk"])
    ws = await open_workspace(project)
    try:
        report = await run_eval(ws.runner, spec, concurrency=4)
        [first] = report.reports
        assert len(first.outcomes) == 20 and first.pass_rate == 16 / 20
        assert first.check_rates() == {
            "contains": (20, 20),
            "regex": (16, 20),
            "tool_not_called": (20, 20),
        }
        assert report.passed  # 0.8 ≥ 0.75
        # counted again from the store: each case's run, its message and its answer
        runs = await ws.runner.store.runs.list(agent_id="clerk", limit=100)
        assert len(runs) == 20 and all(r.status == "completed" for r in runs)
        by_id = {o.run_id: o for o in first.outcomes}
        assert set(by_id) == {r.id for r in runs}
        passed = 0
        for run in runs:
            logged = {
                m.message_type: m.content for m in await ws.runner.store.runs.messages(run.id)
            }
            n = int(re.search(r"Item (\d+)", logged["user_message"]).group(1))  # type: ignore[union-attr]
            answer = logged["assistant_message"]
            assert by_id[run.id].case == f"item {n}" and by_id[run.id].answer == answer
            fits = FRUITS[n % 5] in answer and re.search(
                "^Nothing" if n in WRONG else f"Item {n} is", answer
            )
            passed += bool(fits)
            assert by_id[run.id].passed == bool(fits)
        assert passed / len(runs) == first.pass_rate
    finally:
        await ws.close()


async def test_a_second_model_that_fails_three_cases_shows_them_changed(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", "model: mockai:gpt-mock")
    spec = await asyncio.to_thread(load_eval, _eval_file(project), agents=["clerk"])
    worse = {2, 7, 11}
    mock.queue(
        *(
            Reply(text="no idea" if n in worse else f"Item {n} is a {FRUITS[n % 5]}.")
            for n in range(20)
        ),
        model="gpt-other",
    )
    ws = await open_workspace(project)
    try:
        report = await run_eval(ws.runner, spec, models=[None, "mockai:gpt-other"], concurrency=1)
        ours, other = report.reports
        assert ours.pass_rate == 16 / 20 and other.pass_rate == 13 / 20
        assert report.changed() == [f"item {n}" for n in sorted(worse)]
        assert not report.passed  # 0.65 < 0.75
        said = next(o for o in other.outcomes if o.case == "item 2")
        assert [c.said for c in said.checks if not c.passed] == [
            "the answer has no 'plum'",
            "the answer does not match 'Item 2 is'",
        ]
        models = {r.model for r in await ws.runner.store.runs.list(agent_id="clerk", limit=100)}
        assert models == {"mockai:gpt-mock", "mockai:gpt-other"}
    finally:
        await ws.close()


def test_the_exit_status_follows_the_threshold_and_repeat_triples_the_runs(
    agent: Agent, project: Path, mock: MockProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("clerk", "model: mockai:gpt-mock")
    _eval_file(project, threshold=0.8)
    code, out, err = cli(capsys, "eval", "fruit", "--json", "--repeat", "3")
    assert code == 0, err
    done: dict[str, Any] = json.loads(out)
    [model] = done["models"]
    assert (model["runs"], model["passed"], done["passed"]) == (60, 48, True)
    code, out, _ = cli(capsys, "runs", "list", "--agent", "clerk", "--limit", "100", "--json")
    assert len(json.loads(out)) == 60
    code, out, err = cli(capsys, "eval", "evals/fruit.yaml", "--threshold", "0.85")
    assert code == 1
    assert "failed" in out and "16/20" in out and "80%" in out
    assert "✗ item 4: the answer does not match '^Nothing'" in err
    assert "✓ item 0" in err
    # both kept, newest first, each with its cases and their runs
    code, out, err = cli(capsys, "evals", "list", "--json")
    assert code == 0, err
    failed, passed = json.loads(out)
    assert (failed["passed"], passed["passed"]) == (False, True)
    assert (failed["threshold"], passed["repeat"]) == (0.85, 3)
    assert failed["variants"][0]["pass_rate"] == 0.8 and failed["cases_done"] == 20
    code, out, err = cli(capsys, "evals", "show", failed["id"][-8:])  # its end, as shown
    assert code == 0, err
    assert failed["id"] in out and "16/20" in out and "failed" in out
    assert out.count("✗") == 4 and out.count("✓") == 16
    code, out, err = cli(capsys, "evals", "show", failed["id"], "--json")
    shown = json.loads(out)
    runs = {r["id"] for r in json.loads(cli(capsys, "runs", "list", "--limit", "100", "--json")[1])}
    assert len(shown["cases"]) == 20 and {c["run_id"] for c in shown["cases"]} <= runs
    code, out, err = cli(capsys, "evals", "list", "fruit")
    assert code == 0 and "fruit" in out and "80%" in out
    code, _, err = cli(capsys, "evals", "show", "eval_nope")
    assert code == 1 and "no eval run 'eval_nope'" in err and "agentrunner evals" in err


@pytest.mark.parametrize(
    ("text", "line", "said"),
    [
        ("agent: clark\ncases: [{name: a, message: hi, expect: {contains: hi}}]", 1, "no agent"),
        ("agent: clerk\nthreshold: 2\ncases: []", 2, "'threshold' must be from 0 to 1"),
        (
            "agent: clerk\ncases:\n  - name: a\n    message: hi\n    expect: {contians: x}",
            5,
            "unknown key 'cases.0.expect.contians'",
        ),
        (
            "agent: clerk\ncases:\n  - name: a\n    message: hi\n    expect:\n      regex: '(['",
            6,
            "is not a regular expression",
        ),
        (
            "agent: clerk\ncases:\n  - {name: a, message: hi, expect: {contains: x}}\n"
            "  - {name: a, message: ho, expect: {contains: y}}",
            4,  # the second
            "two cases are named 'a'",
        ),
        (
            "agent: clerk\ncases:\n  - name: a\n    expect: {contains: x}",
            3,
            "case 'a' needs a 'message'",
        ),
        ("agent: [clerk\n", 2, "not valid YAML"),
        (
            "agent: clerk\ncases:\n  - name: a\n    message: hi\n    expect:\n"
            "      tool_called: {name: note_read, argumnets: {slug: x}}",
            6,
            "unknown key 'cases.0.expect.tool_called.argumnets' (did you mean 'arguments'?)",
        ),
        (
            "agent: clerk\ncases:\n  - name: a\n    message: hi\n    expect:\n"
            "      schema: {type: bogus}",
            6,
            "'schema' is no JSON schema",
        ),
        (
            "agent: clerk\ncases:\n  - name: a\n    message: 123\n    expect: {contains: x}",
            4,
            "needs a 'message' (text) to send, got 123",
        ),
    ],
    ids=[
        "agent",
        "threshold",
        "key",
        "regex",
        "twice",
        "message",
        "yaml",
        "tool-called-key",
        "schema",
        "message-type",
    ],
)
def test_a_wrong_eval_file_names_its_line_and_nothing_runs(
    agent: Agent,
    project: Path,
    mock: MockProvider,
    capsys: pytest.CaptureFixture[str],
    text: str,
    line: int,
    said: str,
) -> None:
    agent("clerk", "model: mockai:gpt-mock")
    (project / "evals").mkdir()
    (project / "evals" / "bad.yaml").write_text(text)
    with pytest.raises(AgentFileErrors) as refused:
        load_eval(project / "evals" / "bad.yaml", agents=["clerk"])
    found = [p for p in refused.value.problems if said in p.message]
    assert found and found[0].line == line, [(p.line, p.message) for p in refused.value.problems]
    code, _, err = cli(capsys, "eval", "bad")
    assert code == 1 and said in err and "Traceback" not in err
    code, _, err = cli(capsys, "agents", "validate")
    assert code == 1 and f"evals/bad.yaml:{line}" in err and said in err
    assert mock.requests == []  # nothing ran


def test_ctrl_c_stops_an_eval_and_its_runs_are_kept_cancelled(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", "model: mockai:gpt-mock")
    _eval_file(project)
    mock.queue(*(Reply(text="word " * 400, chunk_delay_s=0.02) for _ in range(4)))
    code, out, err = ctrl_c(
        project, mock, "eval", "fruit", "--concurrency", "2", "--json", requests=2
    )
    assert code == 130, err
    stopped = json.loads(out)  # what the cases that ran came to
    assert stopped["cancelled"] is True and stopped["models"][0]["runs"] == 2
    assert "cancelled" in err and "Traceback" not in err
    runs = asyncio.run(_runs(project))
    # the two in flight, cancelled and recorded so; no other case started
    assert [r.status for r in runs] == ["cancelled", "cancelled"]
    [kept] = asyncio.run(_eval_runs(project))
    assert kept.status == "cancelled" and kept.passed is None and kept.cases_done == 2
    assert kept.id in err  # where to look
    # its totals are of the two cases that ran, what they spent included
    [variant] = kept.variants
    assert (variant["runs"], variant["passed"], variant["pass_rate"]) == (2, 0, 0.0)
    assert variant["cost_usd"] is not None and variant["cost_usd"] > 0
    assert variant["tokens"] == sum(
        (r.token_usage or {}).get("input_tokens", 0) + (r.token_usage or {}).get("output_tokens", 0)
        for r in runs
    )
    assert variant["tokens"] > 0


async def _eval_runs(project: Path) -> list[Any]:
    ws = await open_workspace(project)
    try:
        return await ws.runner.store.evals.recent()
    finally:
        await ws.close()


async def _runs(project: Path) -> list[Any]:
    ws = await open_workspace(project)
    try:
        return await ws.runner.store.runs.list(agent_id="clerk", limit=100)
    finally:
        await ws.close()


def test_a_misspelt_tool_is_a_warning_and_a_model_named_twice_is_refused(
    agent: Agent, project: Path, mock: MockProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("clerk", "model: mockai:gpt-mock\ncapabilities: [notes]")
    (project / "evals").mkdir()
    (project / "evals" / "tools.yaml").write_text(
        "agent: clerk\ncases:\n  - name: a\n    message: hi\n    expect:\n"
        "      tool_not_called: note_reed\n"
    )
    code, out, err = cli(capsys, "agents", "validate")
    assert code == 0, err
    assert "1 eval file valid" in out
    assert "tool_not_called names 'note_reed'" in err and "did you mean 'note_read'?" in err
    code, _, err = cli(
        capsys, "eval", "tools", "--model", "mockai:gpt-mock", "--model", "mockai:gpt-mock"
    )
    assert code == 1 and "--model mockai:gpt-mock is given twice" in err
    assert mock.requests == []
    code, out, err = cli(
        capsys, "eval", "tools.yaml", "--model", "mockai:gpt-mock", "--model", "mockai:gpt-b"
    )
    assert code == 0, err  # evals/tools.yaml, named as a file there
    assert "mockai:gpt-b" in out and "passed" in out


def test_ctrl_c_cancels_the_cases_queued_for_workers(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    """``--workers``: Ctrl-C cancels the run a worker is running (its worker is asked) and
    those still queued (an agent's mailbox runs one at a time); nothing of the eval runs on
    after it."""
    from tests.workspace.test_workers import start_worker, stop

    agent("clerk", "model: mockai:gpt-mock")
    _eval_file(project)
    mock.queue(*(Reply(text="word " * 400, chunk_delay_s=0.02) for _ in range(20)))
    worker = start_worker(project, concurrency=2)
    try:
        deadline = time.monotonic() + 60
        while not asyncio.run(_workers(project)):
            assert time.monotonic() < deadline, "no worker came up"
            time.sleep(0.2)
        code, _, err = ctrl_c(
            project, mock, "eval", "fruit", "--workers", "--concurrency", "4", requests=1
        )
        assert code == 130, err
        assert "cancelled" in err and "Traceback" not in err
        time.sleep(1.0)  # a cancelled run's worker settles it at its next look
        runs = asyncio.run(_runs(project))
        assert len(runs) == 4 and {r.status for r in runs} == {"cancelled"}, err
        requests = len(mock.requests)
        time.sleep(1.0)
        assert len(mock.requests) == requests  # nothing runs on
    finally:
        assert stop(worker) == 0
    [kept] = asyncio.run(_eval_runs(project))
    assert kept.status == "cancelled"


async def _workers(project: Path) -> bool:
    ws = await open_workspace(project)
    try:
        return bool(await ws.runner.store.workers.alive())
    finally:
        await ws.close()


def test_a_failed_case_counts_what_it_spent_and_names_run_from_anywhere_in_the_project(
    agent: Agent, project: Path, mock: MockProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    """A case whose run fails keeps its cost known (the table says a cost, not "unknown"); the
    eval file is found and kept by its place in the project from a subdirectory; one model
    named twice under two spellings is refused."""
    agent("clerk", "model: mockai:gpt-mock")
    _eval_file(project)
    mock.queue(Reply(fault=Fault.http(400)), model="gpt-mock")
    (project / "sub").mkdir()
    os.chdir(project / "sub")
    code, out, err = cli(capsys, "eval", "evals/fruit.yaml", "--concurrency", "1", "--json")
    assert code == 0, err  # 15 of 20: the threshold, 75 %
    [model] = json.loads(out)["models"]
    failed = [c for c in model["cases"] if c["error"]]
    assert len(failed) == 1 and failed[0]["error"].startswith("validation: mockai answered 400")
    assert failed[0]["run_id"] is not None  # a failed run is a run to open
    assert model["cost_usd"] is not None and model["passed"] == 15
    code, out, _ = cli(capsys, "evals", "list", "--json")
    assert json.loads(out)[0]["file"] == "evals/fruit.yaml"
    code, _, err = cli(capsys, "eval", "fruit", "--model", "test", "--model", "test:test")
    assert code == 1 and "is given twice" in err, err
