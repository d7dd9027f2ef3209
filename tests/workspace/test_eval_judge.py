"""Evals (issue 45, items 1-2): the ``judge`` check — a model grading each answer against a
rubric, on the eval's own budget — the eval run and its cases stored, and variants: several
agents, and the agent's file at a git revision. Against the mock provider (whose unscripted
answer echoes the message; a scripted judge is replies queued on its own model), on both back
ends (``project``)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentrunner.agents.evals import load_eval
from agentrunner.errors import AgentFileErrors, AgentRunnerError, ErrorCode
from agentrunner.runtime.compose import open_workspace
from agentrunner.testing import MockProvider, Reply
from agentrunner.workspace.evals import run_eval
from tests.runner.conftest import Agent

FRUITS = ["apple", "pear", "plum", "fig", "kiwi"]
JUDGE_FAILS = {3, 8, 15}  # the judge's verdict on these cases' answers: failed
JUDGE_PRICES = '\n[prices."mockai:gpt-judge"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n'


def _priced_judge(project: Path) -> None:
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write(JUDGE_PRICES)


def _rubric(n: int) -> str:
    return f"The answer names item {n} and says it is a {FRUITS[n % 5]}."


def _eval_file(project: Path, *, judge: dict[str, Any] | None = None, cases: int = 20) -> Path:
    data = {
        "agent": "clerk",
        "threshold": 0.8,
        "judge": judge or {"model": "mockai:gpt-judge"},
        "cases": [
            {
                "name": f"item {n}",
                "message": f"Item {n} is a {FRUITS[n % 5]}.",
                "expect": {"contains": FRUITS[n % 5], "judge": _rubric(n)},
            }
            for n in range(cases)
        ],
    }
    path = project / "evals" / "graded.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def _verdict(passed: bool, n: int) -> Reply:
    reason = f"item {n} is right" if passed else f"item {n} is not what the rubric asks"
    return Reply(text=json.dumps({"passed": passed, "reason": reason}), output_tokens=12)


async def test_twenty_cases_with_a_scripted_judge_and_a_second_model_that_fails_three(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", "model: mockai:gpt-mock")
    _priced_judge(project)
    spec = await asyncio.to_thread(load_eval, _eval_file(project), agents=["clerk"])
    worse = {2, 7, 11}  # the second model's answers lack the fruit
    verdicts = [_verdict(n not in JUDGE_FAILS, n) for n in range(20)]
    mock.queue(*verdicts, *verdicts, model="gpt-judge")  # one model's cases, then the other's
    mock.queue(
        *(
            Reply(text="no idea" if n in worse else f"Item {n} is a {FRUITS[n % 5]}.")
            for n in range(20)
        ),
        model="gpt-other",
    )
    ws = await open_workspace(project)
    try:
        # one at a time: the judge's scripted verdicts are taken in the cases' order
        report = await run_eval(ws.runner, spec, models=[None, "mockai:gpt-other"], concurrency=1)
        ours, other = report.reports
        assert ours.pass_rate == 17 / 20 and other.pass_rate == 14 / 20
        assert ours.check_rates() == {"contains": (20, 20), "judge": (17, 20)}
        assert other.check_rates() == {"contains": (17, 20), "judge": (17, 20)}
        assert report.changed() == [f"item {n}" for n in sorted(worse)]
        assert report.passed is False  # 0.7 < 0.8
        failed = next(o for o in ours.outcomes if o.case == "item 8")
        assert [(c.kind, c.passed, c.said) for c in failed.checks] == [
            ("contains", True, ""),
            ("judge", False, "the judge: item 8 is not what the rubric asks"),
        ]

        # the judge was asked each case's message, its answer and its rubric, on its model
        asked = [r for r in mock.requests if r.body.get("model") == "gpt-judge"]
        assert len(asked) == 40
        first = asked[0].body["messages"][-1]["content"]
        assert "<message>\nItem 0 is a apple.\n</message>" in first
        assert f"<rubric>\n{_rubric(0)}\n</rubric>" in first
        assert "<answer>" in first and "Item 0 is a apple." in first.split("<answer>")[1]

        # counted again from the store: the eval run, its cases, their runs
        evals = ws.runner.store.evals
        [kept] = await evals.recent(eval="graded")
        assert kept.id == report.eval_run_id and kept.status == "completed"
        assert kept.passed is False and kept.repeats == 1
        assert [v["pass_rate"] for v in kept.variants] == [17 / 20, 14 / 20]
        cases = await evals.cases(kept.id)
        assert len(cases) == 40
        by_run = {o.run_id: o for r in report.reports for o in r.outcomes}
        for case in cases:
            assert by_run[case.run_id].passed == case.passed
            assert case.run_status == "completed"
        for variant, rate in ((0, ours.pass_rate), (1, other.pass_rate)):
            rows = [c for c in cases if c.variant == variant]
            assert sum(c.passed for c in rows) / len(rows) == rate
        runs = await ws.runner.store.runs.list(agent_id="clerk", limit=100)
        assert {r.id for r in runs} == set(by_run)  # a grade is no run of the agent
        # the judge's spend is the eval's, not its agent's: no cost row has it
        judged = sum(c.judge_cost_micros for c in cases)
        assert judged == kept.judge_cost_micros == report.judge_cost_micros > 0
        costs = await ws.runner.store.costs.summary(since="2000-01-01")
        assert "mockai:gpt-judge" not in {row["model"] for row in costs}
        assert {row["agent_id"] for row in costs} == {"clerk"}
    finally:
        await ws.close()


async def test_the_judge_never_spends_past_the_eval_budget(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    """Twelve grades, four at a time, each reply dear: the grades that would pass the budget are
    refused (their checks fail, saying so) and the judge's spend stays within it."""
    agent("clerk", "model: mockai:gpt-mock")
    _priced_judge(project)
    budget = 0.004  # dollars: a grade's worst case (512 tokens out) is about $0.001
    path = _eval_file(project, judge={"model": "mockai:gpt-judge", "budget_usd": budget}, cases=12)
    spec = await asyncio.to_thread(load_eval, path, agents=["clerk"])
    mock.queue(
        *(Reply(text='{"passed": true, "reason": "fine"}', output_tokens=300) for _ in range(12)),
        model="gpt-judge",
    )
    ws = await open_workspace(project)
    try:
        report = await run_eval(ws.runner, spec, concurrency=4)
        [ours] = report.reports
        spent = report.judge_cost_micros
        assert 0 < spent <= budget * 1_000_000
        refused = [
            c.said for o in ours.outcomes for c in o.checks if c.kind == "judge" and not c.passed
        ]
        graded = [c for o in ours.outcomes for c in o.checks if c.kind == "judge" and c.passed]
        assert refused and graded and len(refused) + len(graded) == 12
        assert all("budget_exceeded" in said for said in refused), refused
        assert all(o.error is None for o in ours.outcomes)  # the agent's runs were not refused
        [kept] = await ws.runner.store.evals.recent(eval="graded")
        assert kept.judge_cost_micros == spent
    finally:
        await ws.close()


async def test_a_judge_that_gives_no_verdict_fails_the_check_saying_why(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", "model: mockai:gpt-mock")
    _priced_judge(project)
    path = _eval_file(project, cases=2)
    spec = await asyncio.to_thread(load_eval, path, agents=["clerk"])
    mock.queue(
        _verdict(True, 0),
        *(Reply(text="Looks fine to me!") for _ in range(3)),  # then two corrections refused
        model="gpt-judge",
    )
    ws = await open_workspace(project)
    try:
        report = await run_eval(ws.runner, spec, concurrency=1)
        first, second = report.reports[0].outcomes
        assert first.passed and not second.passed
        [said] = [c.said for c in second.checks if not c.passed]
        assert said.startswith("the judge could not grade it: "), said
    finally:
        await ws.close()


async def test_a_judge_model_unknown_unpriced_or_keyless_is_refused_before_anything_runs(
    agent: Agent,
    project: Path,
    mock: MockProvider,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Refused by ``eval`` naming the file, the line and the judge's model, nothing run or
    kept; ``agents validate`` says the same of the first two, and warns of the third."""
    from tests.runner.test_cli_run import cli

    agent("clerk", "model: mockai:gpt-mock")
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write(
            '\n[prices."mockant:claude-judge"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n'
        )
    cases = (
        ("mockaj:gpt-judge", ErrorCode.MODEL_NOT_FOUND),
        ("mockai:gpt-unpriced", ErrorCode.PRICE_UNKNOWN),
        ("mockant:claude-judge", ErrorCode.PROVIDER_AUTH),
    )
    monkeypatch.setenv("MOCK_KEY", "")  # the provider known, its key unset
    ws = await open_workspace(project)
    try:
        for judge, code in cases:
            path = _eval_file(project, judge={"model": judge}, cases=2)
            spec = await asyncio.to_thread(load_eval, path, agents=["clerk"])
            with pytest.raises(AgentRunnerError) as refused:
                await run_eval(ws.runner, spec)
            assert refused.value.code is code, refused.value
            assert refused.value.message.startswith(f"judge model {judge}: ")
            assert (refused.value.file, refused.value.line) == ("evals/graded.yaml", 1)
        assert mock.requests == []
        assert await ws.runner.store.evals.recent() == []
        assert await ws.runner.store.runs.list(limit=5) == []
    finally:
        await ws.close()
    for judge, code in cases:
        _eval_file(project, judge={"model": judge}, cases=2)
        status, _, err = await asyncio.to_thread(cli, capsys, "agents", "validate")
        if code is ErrorCode.PROVIDER_AUTH:  # only in this environment: a warning
            assert "warning: evals/graded.yaml:1: provider_auth: judge model" in err, err
        else:
            assert status == 1 and f"evals/graded.yaml:1: {code}: judge model {judge}" in err


@pytest.mark.parametrize(
    ("judge_part", "expect_part", "said"),
    [
        (None, {"judge": "It is right."}, "case 'one': 'judge' has no model to ask"),
        ({"model": "mockai:gpt-judge"}, {"judge": "  "}, "'judge' must be a rubric"),
        ({"model": "mockai:gpt-judge"}, {"judge": {"rubrik": "x"}}, "did you mean 'rubric'?"),
        ({"model": "mockai:gpt-judge", "budget_usd": 0}, {"judge": "x"}, "judge.budget_usd"),
        ({"modle": "mockai:gpt-judge"}, {"judge": "x"}, "unknown key 'judge.modle'"),
    ],
)
def test_a_wrong_judge_is_named_on_its_line(
    tmp_path: Path, judge_part: dict[str, Any] | None, expect_part: dict[str, Any], said: str
) -> None:
    lines = ["agent: clerk"]
    if judge_part is not None:
        lines.append(f"judge: {json.dumps(judge_part)}")
    lines += [
        "cases:",
        "  - name: one",
        "    message: hi",
        f"    expect: {json.dumps(expect_part)}",
    ]
    path = tmp_path / "wrong.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(AgentFileErrors) as problems:
        load_eval(path, agents=["clerk"])
    found = [(p.line, p.message) for p in problems.value.problems]
    assert any(said in message for _, message in found), found
    assert all(line is not None for line, _ in found), found


def test_a_check_that_names_its_own_judge_model_needs_none_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "own.yaml"
    path.write_text(
        "agent: [clerk, scribe]\ncases:\n  - name: one\n    message: hi\n    expect:\n"
        "      judge: {rubric: Says hello., model: 'mockai:gpt-judge'}\n"
    )
    spec = load_eval(path, agents=["clerk", "scribe"])
    assert spec.agents == ("clerk", "scribe") and spec.agent == "clerk"
    assert spec.judge_models() == {"mockai:gpt-judge": 6}  # named on the check's line
    twice = tmp_path / "twice.yaml"
    twice.write_text(path.read_text().replace("[clerk, scribe]", "[clerk, clerk]"))
    with pytest.raises(AgentFileErrors, match="names an agent twice"):
        load_eval(twice, agents=["clerk"])


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


async def test_the_agent_file_at_a_git_revision_is_compared_with_the_file_now(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", "model: mockai:gpt-mock", body="Answer in English.")
    _git(project, "init", "-q")
    _git(project, "add", "agents")
    _git(project, "commit", "-qm", "clerk speaks English")
    agent("clerk", "model: mockai:gpt-other", body="Answer in French.")
    path = project / "evals" / "lang.yaml"
    path.parent.mkdir()
    path.write_text(
        "agent: clerk\nthreshold: 0.5\ncases:\n"
        "  - name: greets\n    message: Say hello.\n    expect: {contains: Bonjour}\n"
    )
    spec = await asyncio.to_thread(load_eval, path, agents=["clerk"])
    mock.queue(Reply(text="Bonjour !"), model="gpt-other")
    mock.queue(Reply(text="Hello!"), model="gpt-mock")
    ws = await open_workspace(project)
    try:
        report = await run_eval(ws.runner, spec, revisions=["HEAD"], concurrency=1)
        now, then = report.reports
        assert (now.revision, then.revision) == (None, "HEAD")
        assert now.label == "mockai:gpt-other" and then.label == "mockai:gpt-mock @HEAD"
        assert (now.pass_rate, then.pass_rate) == (1.0, 0.0)
        assert report.changed() == ["greets"]
        systems = {
            r.body["model"]: r.body["messages"][0]["content"]
            for r in mock.requests
            if r.body.get("model") in ("gpt-mock", "gpt-other")
        }
        assert "Answer in French." in systems["gpt-other"]
        assert "Answer in English." in systems["gpt-mock"]
        assert "French" not in systems["gpt-mock"]
        runs = await ws.runner.store.runs.list(agent_id="clerk", limit=5)
        assert len(runs) == 2  # both are the agent's runs, as it is named

        before = len(mock.requests)
        for rev, said in (("nope", "cannot read"), ("-p", "does not begin with '-'")):
            with pytest.raises(AgentRunnerError, match=said) as refused:
                await run_eval(ws.runner, spec, revisions=[rev])
            assert refused.value.code is ErrorCode.VALIDATION
            assert "git log --oneline" in (refused.value.hint or "")
        assert len(mock.requests) == before
        assert len(await ws.runner.store.evals.recent()) == 1
    finally:
        await ws.close()


async def test_an_eval_of_two_agents_reports_each(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", "model: mockai:gpt-mock")
    agent("scribe", "model: mockai:gpt-other")
    path = project / "evals" / "pair.yaml"
    path.parent.mkdir()
    path.write_text(
        "agent: [clerk, scribe]\ncases:\n"
        "  - name: fruit\n    message: A pear.\n    expect: {contains: pear}\n"
    )
    spec = await asyncio.to_thread(load_eval, path, agents=["clerk", "scribe"])
    mock.queue(Reply(text="No."), model="gpt-other")
    ws = await open_workspace(project)
    try:
        report = await run_eval(ws.runner, spec)
        clerk, scribe = report.reports
        assert (clerk.agent, scribe.agent) == ("clerk", "scribe")
        assert clerk.label == "clerk · mockai:gpt-mock" and clerk.pass_rate == 1.0
        assert scribe.label == "scribe · mockai:gpt-other" and scribe.pass_rate == 0.0
        assert report.changed() == ["fruit"]
        agents = {r.agent_id for r in await ws.runner.store.runs.list(limit=5)}
        assert agents == {"clerk", "scribe"}
    finally:
        await ws.close()


def test_a_version_runs_only_as_its_own_agent_and_only_if_enabled(tmp_path: Path) -> None:
    from dataclasses import replace

    from agentrunner.agents.registry import AgentRegistry

    (tmp_path / "clerk.md").write_text("---\nname: clerk\nmodel: test\n---\nNow.\n")
    registry = AgentRegistry.load(tmp_path)
    old = registry.version("clerk", "---\nname: clerk\nmodel: test\n---\nThen.\n", "clerk.md@v1")
    assert registry.runnable("clerk", old) is old and registry.runnable("clerk") is not old
    off = registry.version("clerk", "---\nmodel: test\nenabled: false\n---\nOff.\n", "c@v0")
    with pytest.raises(AgentRunnerError, match="in that version") as refused:
        registry.runnable("clerk", off)
    assert refused.value.code is ErrorCode.AGENT_DISABLED
    with pytest.raises(AgentRunnerError, match="cannot run as 'clerk'"):
        registry.runnable("clerk", replace(old, id="scribe"))
    with pytest.raises(AgentFileErrors) as broken:
        registry.version("clerk", "---\nname: clerk\nmodle: test\n---\nX.\n", "clerk.md@v2")
    assert {p.file for p in broken.value.problems} == {"clerk.md@v2"}


async def test_cases_queued_for_workers_are_judged_as_cases_run_here(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    """``--workers``: the same cases, queued for two worker processes, come to the same pass
    rates and checks as in this process; each case's run is a worker's; with no worker alive,
    or with a revision to compare, nothing is queued."""
    from tests.workspace.test_workers import start_worker, stop, wait_for

    agent("clerk", "model: mockai:gpt-mock")
    path = project / "evals" / "fruit.yaml"
    path.parent.mkdir()
    path.write_text(
        json.dumps(
            {
                "agent": "clerk",
                "cases": [
                    {
                        "name": f"item {n}",
                        "message": f"Item {n} is a {FRUITS[n % 5]}.",
                        "expect": {"contains": FRUITS[n % 5], "regex": "Item [0-4] is"},
                    }
                    for n in range(8)
                ],
            }
        )
    )
    spec = await asyncio.to_thread(load_eval, path, agents=["clerk"])
    ws = await open_workspace(project)
    try:
        with pytest.raises(AgentRunnerError, match="no worker is running") as idle:
            await run_eval(ws.runner, spec, queue=ws.runs)
        assert "agentrunner worker" in (idle.value.hint or "")
        assert await ws.runner.store.runs.list(limit=5) == []
        here = await run_eval(ws.runner, spec)
        workers = [start_worker(project, tag="w1"), start_worker(project, tag="w2")]
        try:
            await wait_for(lambda: _alive(ws, 2), 60)
            with pytest.raises(AgentRunnerError, match="runs in this process"):
                await run_eval(ws.runner, spec, queue=ws.runs, revisions=["HEAD"])
            queued = await run_eval(ws.runner, spec, queue=ws.runs, concurrency=8)
        finally:
            for worker in workers:
                assert stop(worker) == 0
        [ran_here], [ran_queued] = here.reports, queued.reports
        assert ran_queued.pass_rate == ran_here.pass_rate == 5 / 8  # items 5, 6, 7: regex
        for a, b in zip(ran_here.outcomes, ran_queued.outcomes, strict=True):
            assert (a.case, a.passed, a.answer) == (b.case, b.passed, b.answer)
            assert [c.said for c in a.checks] == [c.said for c in b.checks]
            assert b.tokens == a.tokens > 0 and b.cost_micros == a.cost_micros
        runs = {r.id: r for r in await ws.runner.store.runs.list(agent_id="clerk", limit=50)}
        taken = {runs[str(o.run_id)].worker_id for o in ran_queued.outcomes}
        assert None not in taken and len(runs) == 16
        assert all(runs[str(o.run_id)].worker_id is None for o in ran_here.outcomes)
    finally:
        await ws.close()


async def _alive(ws: Any, n: int) -> bool:
    return len(await ws.runner.store.workers.alive()) >= n


async def test_a_case_sends_its_files_with_its_message(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    """``attach``: the case's files go with its message (and only its), read from the eval
    file's folder; a file that is not there is a problem on its line, and nothing runs."""
    import io

    from PIL import Image

    agent("clerk", "model: mockai:gpt-mock")
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write('\n[models."mockai:gpt-mock"]\ninput = ["text", "image"]\n')
    (project / "evals" / "files").mkdir(parents=True)
    for name, color in (("red.png", "red"), ("blue.png", "blue")):
        out = io.BytesIO()
        Image.new("RGB", (8, 8), color).save(out, format="PNG")
        (project / "evals" / "files" / name).write_bytes(out.getvalue())
    path = project / "evals" / "look.yaml"
    path.write_text(
        "agent: clerk\ncases:\n"
        "  - name: red\n    message: What colour?\n    attach: files/red.png\n"
        "    expect: {contains: colour}\n"
        "  - name: both\n    message: Which two?\n    attach: [files/red.png, files/blue.png]\n"
        "    expect: {contains: two}\n"
        "  - name: none\n    message: Nothing to see.\n    expect: {contains: see}\n"
    )
    spec = await asyncio.to_thread(load_eval, path, agents=["clerk"])
    ws = await open_workspace(project)
    try:
        report = await run_eval(ws.runner, spec, concurrency=1)
        outcomes = report.reports[0].outcomes
        assert report.reports[0].pass_rate == 1.0, [(o.answer, o.error) for o in outcomes]
        sent = {}
        for request in mock.requests:
            parts = request.body["messages"][-1]["content"]
            parts = parts if isinstance(parts, list) else [{"type": "text", "text": parts}]
            text = next(p["text"] for p in parts if p["type"] == "text")
            sent[text] = sum(p["type"] == "image_url" for p in parts)
        assert sent == {"What colour?": 1, "Which two?": 2, "Nothing to see.": 0}
    finally:
        await ws.close()
    path.write_text(path.read_text().replace("files/blue.png", "files/green.png"))
    with pytest.raises(AgentFileErrors) as missing:
        await asyncio.to_thread(load_eval, path, agents=["clerk"])
    [problem] = missing.value.problems
    assert problem.line == 9 and "no file evals/files/green.png to attach" in problem.message
