"""A run's model settings end to end, over real HTTP to the mock provider: the run's over the
agent file's over ``[defaults]``', through the Python API, ``run --set``, stdio and tasks (whose
cache key they are part of); a dropped one recorded as a warning event. The HTTP API's:
tests/server/test_model_settings.py."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentRunner, RunAgentOverrides
from agentrunner.core.model_settings import ModelSettings
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.interfaces.cli import main
from agentrunner.interfaces.stdio import StdioServer
from agentrunner.runtime.compose import open_task_runner, runner_with_tasks
from agentrunner.testing import MockProvider, Reply
from tests.conftest import WriteAgent
from tests.runner.conftest import Agent

SETTING_FIELDS = ("temperature", "top_p", "seed", "stop", "stop_sequences", "tool_choice")


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """SQLite only: settings reach no table of their own (a queued run keeps them with its
    request, as its input)."""
    return f"sqlite:///{tmp_path / 'store.db'}"


def with_defaults(project: Path, table: str) -> None:
    config = project / "agentrunner.toml"
    config.write_text(config.read_text() + f"\n[defaults.model_settings]\n{table}\n")


def agent_text(front: str) -> str:
    return f"---\nmodel: test\n{front}\n---\nYou help.\n"


def cli(*args: str) -> int:
    try:
        main(list(args))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


def sent(mock: MockProvider) -> list[dict[str, Any]]:
    """The settings' fields of every request the mock received."""
    return [{k: r.body[k] for k in SETTING_FIELDS if k in r.body} for r in mock.requests]


async def test_a_run_wins_over_its_agent_over_the_defaults(
    project: Path, agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    with_defaults(project, "temperature = 0.1\ntop_p = 0.5\nstop = ['DEFAULT']")
    agent("helper", "model_settings: {temperature: 0.2, seed: 7}")
    agent("plain")
    runner: AgentRunner = await open_runner()
    await runner.run_agent("plain", "t0", "hi")
    await runner.run_agent("helper", "t1", "hi")
    run = RunAgentOverrides(model_settings={"temperature": 0.3, "stop": ["RUN"]})
    await runner.run_agent("helper", "t2", "hi", overrides=run)
    assert sent(mock) == [
        {"temperature": 0.1, "top_p": 0.5, "stop": ["DEFAULT"]},
        {"temperature": 0.2, "top_p": 0.5, "seed": 7, "stop": ["DEFAULT"]},
        {"temperature": 0.3, "top_p": 0.5, "seed": 7, "stop": ["RUN"]},
    ]


async def test_a_dropped_setting_is_a_stored_warning_event_of_its_run(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent(
        "claude",
        "model: mockant:claude-mock\ncapabilities: [notes]\n"
        "model_settings: {seed: 4, temperature: 0.6}",
    )
    mock.queue(Reply(tool_calls=[("note_list", {})]), Reply(text="No notes."))
    runner: AgentRunner = await open_runner()
    seen: list[tuple[str, dict[str, Any]]] = []
    from agentrunner import AgentRunnerCallbacks

    callbacks = AgentRunnerCallbacks(on_event=lambda kind, data: seen.append((kind, dict(data))))
    result = await runner.run_agent("claude", "t", "weather?", callbacks)
    assert sent(mock) == [{"temperature": 0.6}] * 2  # two requests, one warning
    warning = {"setting": "seed", "model": "mockant:claude-mock", "reason": "Anthropic has no seed"}
    assert [data for kind, data in seen if kind == "model.setting_dropped"] == [warning]
    stored = await runner.store.events.list(result.run_id)
    assert [e.payload for e in stored if e.type == "model.setting_dropped"] == [warning]


async def test_a_tool_choice_naming_no_tool_of_the_run_is_refused(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("picker", "capabilities: [notes]\nmodel_settings:\n  tool_choice: note_craete")
    agent("runner-set", "capabilities: [notes]")
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as info:
        await runner.run_agent("picker", "t1", "hi")
    assert info.value.code is ErrorCode.INVALID_SPECIFICATION
    assert (info.value.file, info.value.line) == ("agents/picker.md", 4)
    assert "did you mean 'note_create'?" in info.value.message
    overrides = RunAgentOverrides(model_settings={"tool_choice": "search"})
    with pytest.raises(AgentRunnerError) as info:
        await runner.run_agent("runner-set", "t2", "hi", overrides=overrides)
    assert info.value.code is ErrorCode.VALIDATION and info.value.file is None
    assert "names 'search', which is not one of the agent's tools" in info.value.message
    assert mock.requests == []  # refused before any request
    overrides = RunAgentOverrides(model_settings={"tool_choice": "note_list"})
    await runner.run_agent("runner-set", "t3", "hi", overrides=overrides)
    assert mock.requests[0].body["tool_choice"] == {
        "type": "function",
        "function": {"name": "note_list"},
    }


def test_agents_show_the_settings_its_runs_ask_for(
    project: Path, agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    with_defaults(project, "temperature = 0.1\ntop_p = 0.5")
    agent("helper", "model_settings: {temperature: 0.2, stop: [END]}")
    assert cli("agents", "show", "helper") == 0
    out = capsys.readouterr().out
    assert 'model settings  temperature=0.2, top_p=0.5, stop=["END"]' in out


def test_run_set_reaches_the_provider_and_a_dropped_one_is_shown(
    agent: Agent, mock: MockProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("helper")
    agent("claude", "model: mockant:claude-mock")
    assert cli("run", "helper", "hi", "--set", "temperature=0.25", "--set", "stop=END") == 0
    assert cli("run", "claude", "hi", "--set", "seed=3", "--set", "temperature=0.5") == 0
    err = capsys.readouterr().err
    assert sent(mock) == [
        {"temperature": 0.25, "stop": ["END"]},
        {"temperature": 0.5},
    ]
    assert "! mockant:claude-mock: seed not sent — Anthropic has no seed" in err


def test_exec_set_reaches_the_provider(
    agent: Agent, mock: MockProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("helper")
    assert cli("exec", "helper", "--input", "{}", "--set", "seed=12") == 0
    assert sent(mock) == [{"seed": 12}]


async def test_settings_are_part_of_the_task_cache_key(
    project: Path, agent: Agent, mock: MockProvider
) -> None:
    agent("writer", "cache: true\nprompt_template: 'Write about {{input.topic}}.'")
    topic = {"topic": "tides"}
    async with await open_task_runner(project) as tasks:
        cool = await tasks.execute("writer", topic, model_settings={"temperature": 0.2})
        again = await tasks.execute("writer", topic, model_settings={"temperature": 0.2})
        warm = await tasks.execute("writer", topic, model_settings={"temperature": 0.7})
        plain = await tasks.execute("writer", topic)
        bad = await tasks.execute("writer", topic, model_settings={"temperature": 7})
    assert (cool.cached, again.cached, warm.cached, plain.cached) == (False, True, False, False)
    assert sent(mock) == [{"temperature": 0.2}, {"temperature": 0.7}, {}]
    assert bad.status == "failed" and bad.error is not None
    assert bad.error["code"] == "validation"
    assert "'model_settings.temperature' must be a number from 0 to 2" in bad.error["message"]
    with_defaults(project, "temperature = 0.7")  # the project's default, as the run's was
    async with await open_task_runner(project) as tasks:
        same = await tasks.execute("writer", topic)
        other = await tasks.execute("writer", topic, model_settings={"top_p": 0.5})
    assert (same.cached, other.cached) == (True, False)


async def test_stdio_passes_a_runs_settings_and_answers_a_bad_one(
    project: Path, agent: Agent, mock: MockProvider
) -> None:
    agent("helper", "prompt_template: 'Say {{input.word}}.'")
    output = io.BytesIO()
    async with runner_with_tasks(project) as (runner, tasks):
        server = StdioServer(runner, tasks, output)
        for line in (
            {"id": 1, "method": "run_agent", "params": {"agent": "helper", "message": "hi"}},
            {
                "id": 2,
                "method": "run_agent",
                "params": {
                    "agent": "helper",
                    "message": "hi",
                    "model_settings": {"temperature": 0.9, "seed": 1},
                },
            },
            {
                "id": 3,
                "method": "execute",
                "params": {
                    "agent": "helper",
                    "input": {"word": "x"},
                    "model_settings": {"top_p": 0.3},
                },
            },
            {
                "id": 4,
                "method": "run_agent",
                "params": {"agent": "helper", "message": "hi", "model_settings": {"temp": 1}},
            },
        ):
            server.handle_line(json.dumps(line).encode())
            await asyncio.gather(*(task for task, _ in server._inflight.values()))
    answers = {m["id"]: m for m in map(json.loads, output.getvalue().splitlines()) if "id" in m}
    assert answers[1]["result"]["status"] == answers[2]["result"]["status"] == "completed"
    assert answers[3]["result"]["status"] == "completed"
    assert answers[4]["error"]["code"] == "validation"
    assert "'model_settings.temp' is not a model setting" in answers[4]["error"]["message"]
    assert sent(mock) == [{}, {"temperature": 0.9, "seed": 1}, {"top_p": 0.3}]


# -- refused before anything is sent ------------------------------------------------------------


def test_agents_validate_names_a_bad_setting_and_a_tool_choice_naming_no_tool(
    write_agent: WriteAgent, capsys: pytest.CaptureFixture[str]
) -> None:
    write_agent("typo", agent_text("model_settings:\n  tempreture: 0.5"))
    write_agent(
        "chooser", agent_text("tools: [read_file]\nmodel_settings:\n  tool_choice: read_fille")
    )
    write_agent("ok", agent_text("tools: [read_file]\nmodel_settings:\n  tool_choice: read_file"))
    write_agent("keyed", agent_text("model_settings:\n  extra: {antropic: {top_k: 1}}"))
    with pytest.raises(SystemExit):
        main(["agents", "validate"])
    err = capsys.readouterr().err
    assert (
        "agents/chooser.md:5: invalid_specification: 'model_settings.tool_choice' names "
        "'read_fille', which is not one of the agent's tools (its tools: read_file); did you "
        "mean 'read_file'?" in err
    )
    assert (
        "agents/keyed.md:4: invalid_specification: 'model_settings.extra' names provider "
        "'antropic', which the project does not have (did you mean 'anthropic'?)" in err
    )
    assert (
        "agents/typo.md:4: invalid_specification: 'model_settings.tempreture' is not a model "
        "setting (did you mean 'temperature'?)" in err
    )
    assert "ok.md" not in err and "3 problems" in err


def test_a_callers_bad_setting_is_a_validation_error_naming_it() -> None:
    with pytest.raises(AgentRunnerError) as info:
        RunAgentOverrides(model_settings={"temperature": "hot"})
    assert info.value.code is ErrorCode.VALIDATION
    assert info.value.message == (
        "'model_settings.temperature' must be a number from 0 to 2, got 'hot'"
    )
    assert info.value.details == {"invalid": "model_settings.temperature"}
    with pytest.raises(AgentRunnerError, match="did you mean 'top_p'"):
        RunAgentOverrides(model_settings={"topp": 0.5})
    with pytest.raises(AgentRunnerError, match="must be a mapping of settings"):
        RunAgentOverrides(model_settings="temperature=0.2")  # type: ignore[arg-type]
    checked = RunAgentOverrides(model_settings={"temperature": 0.2})
    assert checked.settings == ModelSettings(temperature=0.2)
    assert RunAgentOverrides().settings is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "temperature=hot"], "'model_settings.temperature' must be a number from 0 to 2"),
        (["--set", "temprature=0.2"], "did you mean 'temperature'?"),
        (["--set", "temperature"], "expected KEY=VALUE"),
    ],
)
def test_run_set_errors_are_one_clear_line(
    write_agent: WriteAgent, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    write_agent("helper", agent_text("name: Helper"))
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "helper", "hi", *args])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert "validation: " in err and message in err
    assert "Traceback" not in err


# -- a refused run writes nothing -----------------------------------------------------------------


def table_rows(db: Path) -> dict[str, int]:
    """The rows of every table of the store: what a refused run must leave as it was."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}


@pytest.mark.parametrize(
    ("agent_front", "args", "message"),
    [
        ("", ["--set", "tool_choice=read_file"], "'model_settings.tool_choice' names 'read_file'"),
        (
            "\nmodel_settings:\n  tool_choice: read_file",
            [],
            "'model_settings.tool_choice' names 'read_file'",
        ),
        (
            "",
            ["--set", "extra.nope.foo=1"],
            "'model_settings.extra' names provider 'nope', which the project does not have",
        ),
        ("", ["--set", "temperature=5"], "'model_settings.temperature' must be a number"),
    ],
)
def test_a_run_refused_for_its_settings_writes_nothing(
    tmp_path: Path,
    agent: Agent,
    mock: MockProvider,
    capsys: pytest.CaptureFixture[str],
    agent_front: str,
    args: list[str],
    message: str,
) -> None:
    agent("writer", "capabilities: [notes]")
    assert cli("run", "writer", "hi") == 0  # a thread with messages, a run recorded
    agent("writer", "capabilities: [notes]" + agent_front)
    capsys.readouterr()
    before, requests = table_rows(tmp_path / "store.db"), len(mock.requests)
    assert cli("run", "writer", "again", *args) == 1
    err = capsys.readouterr().err
    assert table_rows(tmp_path / "store.db") == before  # checked first: the old bug
    assert message in err and "Traceback" not in err
    assert table_rows(tmp_path / "store.db") == before  # no run row, no thread message
    assert len(mock.requests) == requests
    agent("writer", "capabilities: [notes]")
    assert cli("run", "writer", "again", "--set", "tool_choice=note_list") == 0
    after = table_rows(tmp_path / "store.db")
    assert after["runs"] == before["runs"] + 1 and after["messages"] > before["messages"]


async def test_an_extra_for_a_provider_the_project_lacks_is_refused_from_the_api(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("helper")
    runner: AgentRunner = await open_runner()
    overrides = RunAgentOverrides(model_settings={"extra": {"antropic": {"top_k": 1}}})
    with pytest.raises(AgentRunnerError) as info:
        await runner.run_agent("helper", "t1", "hi", overrides=overrides)
    assert info.value.code is ErrorCode.VALIDATION and info.value.file is None
    assert info.value.message == (
        "'model_settings.extra' names provider 'antropic', which the project does not have "
        "(did you mean 'anthropic'?)"
    )
    assert info.value.details == {"invalid": "model_settings.extra.antropic"}
    assert mock.requests == []
    overrides = RunAgentOverrides(model_settings={"extra": {"anthropic": {"top_k": 1}}})
    await runner.run_agent("helper", "t1", "hi", overrides=overrides)  # another provider's
    assert len(mock.requests) == 1 and "top_k" not in mock.requests[0].body


def test_agents_validate_lists_every_settings_problem_of_a_file_at_once(
    write_agent: WriteAgent, capsys: pytest.CaptureFixture[str]
) -> None:
    write_agent(
        "messy",
        agent_text(
            "model_settings:\n  temprature: 0.5\n  seed: 7.5\n  top_p: 3\n"
            "  tool_choice: read_file\n  extra: {nope: {foo: 1}}"
        ),
    )
    with pytest.raises(SystemExit):
        main(["agents", "validate"])
    err = capsys.readouterr().err
    for line, text in (
        (4, "'model_settings.temprature' is not a model setting (did you mean 'temperature'?)"),
        (5, "'model_settings.seed' must be a whole number, got 7.5"),
        (6, "'model_settings.top_p' must be a number from 0 to 1, got 3"),
        (7, "'model_settings.tool_choice' names 'read_file', which is not one of the agent's"),
        (8, "'model_settings.extra' names provider 'nope', which the project does not have"),
    ):
        assert f"agents/messy.md:{line}: invalid_specification: {text}" in err
    assert "5 problems" in err
