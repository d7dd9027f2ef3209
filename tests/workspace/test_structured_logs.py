"""``--log-format json`` (issue 26): agentrunner's log lines as one JSON object each, naming
the run they are about, with a line for each decision an agent makes — the tools it chose,
``do_nothing``, a memory update — and never what it wrote; ``text`` (the default) as before."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from agentrunner.core.log_format import JsonFormatter, in_run, use_format
from agentrunner.runtime.compose import open_workspace
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent

SECRET = "the vault code is 4321"


def _cli(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrunner", *args],
        cwd=project,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _decide(team: Path, agent: Agent, mock: MockProvider) -> None:
    """ann writes to its memory and answers; bob chooses to say nothing."""
    agent("ann", "name: Ann\nmodel: mockai:ann-mock\ncapabilities: [memory]")
    mock.queue(
        Reply(tool_calls=[("memory_append", {"label": "facts", "text": SECRET})]),
        Reply(text="Noted."),
        model="ann-mock",
    )
    mock.queue(Reply(tool_calls=[("do_nothing", {})]), Reply(text=""), model="bob-mock")


def _runs(project: Path) -> dict[str, str]:
    async def read() -> dict[str, str]:
        ws = await open_workspace(project)
        try:
            return {r.agent_id: r.id for r in await ws.runner.store.runs.list()}
        finally:
            await ws.close()

    return asyncio.run(read())


def test_json_lines_name_the_run_and_what_its_agent_decided(
    team: Path, agent: Agent, mock: MockProvider
) -> None:
    _decide(team, agent, mock)
    done = _cli(team, "--log-format", "json", "post", "team", "Remember the code")
    assert done.returncode == 0, done.stderr
    runs = _runs(team)
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    plain = [line for line in done.stderr.splitlines() if not line.startswith("{")]
    assert sorted(plain[1:]) == [  # people's, unchanged
        "ann is working…",
        "ann replied",
        "bob is working…",
        "bob stayed silent",
    ]
    for line in lines:
        assert list(line)[:4] == ["time", "level", "logger", "message"]
        assert datetime.fromisoformat(line["time"]).utcoffset() is not None
    decisions = {(line["logger"], line["agent"], line["run_id"], line["message"]) for line in lines}
    assert decisions == {
        ("agentrunner.engine", "ann", runs["ann"], "chose tools: memory_append"),
        ("agentrunner.memory", "ann", runs["ann"], "memory block 'facts' updated (append)"),
        ("agentrunner.engine", "bob", runs["bob"], "chose tools: do_nothing"),
        ("agentrunner.channels", "bob", runs["bob"], "chose to say nothing in #team (do_nothing)"),
    }
    by_message = {line["message"]: line for line in lines}
    assert by_message["chose tools: memory_append"]["tools"] == ["memory_append"]
    assert by_message["memory block 'facts' updated (append)"]["label"] == "facts"
    assert by_message["chose to say nothing in #team (do_nothing)"]["decision"] == "do_nothing"
    assert all(line["level"] == "INFO" and "trace_id" not in line for line in lines)  # no traces
    assert "4321" not in done.stderr and "sk-mock" not in done.stderr  # never what was written


def test_the_environment_variable_chooses_json_too_and_text_is_as_before(
    team: Path, agent: Agent, mock: MockProvider
) -> None:
    mock.queue(Reply(tool_calls=[("do_nothing", {})]), Reply(text=""), model="bob-mock")
    as_json = _cli(team, "dm", "bob", "Anything?", AGENTRUNNER_LOG_FORMAT="json")
    assert as_json.returncode == 0, as_json.stderr
    said = as_json.stderr.splitlines()
    assert [line for line in said if not line.startswith("{")] == [
        "bob is working…",
        "bob stayed silent",
    ]
    [chose, nothing] = [json.loads(line) for line in said if line.startswith("{")]
    assert (chose["message"], nothing["decision"]) == ("chose tools: do_nothing", "do_nothing")
    assert chose["run_id"] == nothing["run_id"] == _runs(team)["bob"]

    _decide(team, agent, mock)
    text = _cli(team, "post", "team", "Remember the code")  # the default: text
    assert text.returncode == 0, text.stderr
    said = text.stderr.splitlines()
    assert said[0].startswith("posted m_") and sorted(said[1:]) == [
        "ann is working…",
        "ann replied",
        "bob is working…",
        "bob stayed silent",
    ]  # no log line: INFO is not shown as text, as before


@pytest.mark.parametrize(
    "typed",
    [
        ("post", "team", "Remember the code", "--log-format", "json"),  # appended, as typed
        ("post", "--log-format=json", "team", "Remember the code"),
    ],
)
def test_the_log_format_may_follow_the_command(
    team: Path, agent: Agent, mock: MockProvider, typed: tuple[str, ...]
) -> None:
    _decide(team, agent, mock)
    done = _cli(team, *typed)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    runs = _runs(team)
    assert {(line["agent"], line["run_id"]) for line in lines} == {
        ("ann", runs["ann"]),
        ("bob", runs["bob"]),
    }
    # after `--`, the option's own words are a message, not an option
    mock.queue(Reply(text="a flag?"), model="ann-mock")
    mock.queue(Reply(tool_calls=[("do_nothing", {})]), Reply(text=""), model="bob-mock")
    said = _cli(team, "post", "team", "--", "--debug")
    assert said.returncode == 0, said.stderr
    assert "DEBUG" not in said.stderr and not said.stderr.lstrip().startswith("{")
    shown = _cli(team, "channels", "show", "team")
    assert "--debug" in shown.stdout and "a flag?" in shown.stdout


@pytest.mark.parametrize("how", ["option", "option after the command", "environment"])
def test_an_unknown_log_format_is_refused_naming_the_choices(tmp_path: Path, how: str) -> None:
    if how == "option":
        done = _cli(tmp_path, "--log-format", "yaml", "status")
    elif how == "option after the command":
        done = _cli(tmp_path, "status", "--log-format", "yaml")
    else:
        done = _cli(tmp_path, "status", AGENTRUNNER_LOG_FORMAT="yaml")
    assert done.returncode == 2
    assert "Invalid value for '--log-format'" in done.stderr
    assert "'yaml' is not one of 'text', 'json'" in done.stderr


def test_a_record_names_the_run_it_was_made_in_and_what_it_was_given() -> None:
    formatter = JsonFormatter()
    log = logging.getLogger("agentrunner.test")

    def line(**extra: Any) -> dict[str, Any]:
        record = log.makeRecord(log.name, logging.WARNING, __file__, 1, "a %s", ("b",), None)
        record.__dict__.update(extra)
        parsed: dict[str, Any] = json.loads(formatter.format(record))
        return parsed

    assert "run_id" not in line() and line()["message"] == "a b"
    with in_run("run_1", "ann", "ab" * 16):
        inside = line(tools=["x"])
        with in_run("run_2", "bob", None):  # a child run, inside its parent's
            child = line(agent="someone")
        after = line()
    assert (inside["run_id"], inside["agent"], inside["trace_id"]) == ("run_1", "ann", "ab" * 16)
    assert inside["tools"] == ["x"] and inside["level"] == "WARNING"
    assert (child["run_id"], child["agent"], "trace_id" in child) == ("run_2", "someone", False)
    assert after["run_id"] == "run_1"  # back in the parent's


def test_use_format_json_then_text_leaves_logging_as_it_was() -> None:
    logger = logging.getLogger("agentrunner")
    before = (list(logger.handlers), logger.level, logger.propagate)
    stream = io.StringIO()
    use_format("json", stream)
    try:
        logging.getLogger("agentrunner.engine").info("chose tools: %s", "x")
        logging.getLogger("other.library").warning("not ours")
    finally:
        use_format("text")
    assert [json.loads(line)["message"] for line in stream.getvalue().splitlines()] == [
        "chose tools: x"
    ]
    assert (list(logger.handlers), logger.level, logger.propagate) == before
