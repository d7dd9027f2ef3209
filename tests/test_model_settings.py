"""``model_settings``: read from an agent file, from ``[defaults]``, from ``run --set`` and from
a caller; every way they can be wrong named with the setting (and the one meant), the file and
the line; merged run over agent over defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrunner.agents import parse_agent_text
from agentrunner.config import load_config
from agentrunner.core.model_settings import (
    ModelSettings,
    merge_settings,
    model_settings,
    parse_assignments,
    tool_choice_problem,
)
from agentrunner.errors import AgentFileErrors, AgentRunnerError, ErrorCode


def agent(front: str) -> str:
    return f"---\nmodel: test\n{front}\n---\nYou help.\n"


def parse(text: str) -> ModelSettings | None:
    return parse_agent_text(text, agent_id="a", file="agents/a.md").model_settings


def problems(text: str) -> list[str]:
    with pytest.raises(AgentFileErrors) as info:
        parse_agent_text(text, agent_id="a", file="agents/a.md")
    return [p.one_line() + (f" | {p.hint}" if p.hint else "") for p in info.value.problems]


# -- agent files -------------------------------------------------------------------------------


def test_an_agent_file_sets_every_setting() -> None:
    settings = parse(
        agent(
            "model_settings:\n"
            "  temperature: 0.2\n"
            "  top_p: 0.9\n"
            "  max_output_tokens: 500\n"
            "  stop: END\n"
            "  seed: 42\n"
            "  tool_choice: get_weather\n"
            "  parallel_tool_calls: false\n"
            "  reasoning_effort: low\n"
            "  thinking: 2048\n"
            "  extra: {anthropic: {top_k: 40}}"
        )
    )
    assert settings is not None
    assert settings.to_dict() == {
        "temperature": 0.2,
        "top_p": 0.9,
        "max_output_tokens": 500,
        "stop": ["END"],
        "seed": 42,
        "tool_choice": "get_weather",
        "parallel_tool_calls": False,
        "reasoning_effort": "low",
        "thinking": 2048,
        "extra": {"anthropic": {"top_k": 40}},
    }
    assert parse(agent("model_settings: {thinking: adaptive}")) == ModelSettings(
        thinking="adaptive"
    )
    # a whole number written with a point is that integer, as JSON has it
    assert parse(agent("model_settings: {seed: 42.0, max_output_tokens: 300.0}")) == (
        ModelSettings(seed=42, max_output_tokens=300)
    )
    assert parse(agent("name: plain")) is None


def test_an_unknown_setting_is_named_at_its_line_with_the_one_meant() -> None:
    assert problems(agent("model_settings:\n  temprature: 0.2\n  seed: 1")) == [
        "agents/a.md:4: invalid_specification: 'model_settings.temprature' is not a model "
        "setting (did you mean 'temperature'?) | Model settings: temperature, top_p, "
        "max_output_tokens, stop, seed, tool_choice, parallel_tool_calls, reasoning_effort, "
        "thinking, extra."
    ]
    assert problems(agent("model_settings: {reasoning: high}")) == [
        "agents/a.md:3: invalid_specification: 'model_settings.reasoning' is not a model "
        "setting (did you mean 'reasoning_effort'?) | Model settings: temperature, top_p, "
        "max_output_tokens, stop, seed, tool_choice, parallel_tool_calls, reasoning_effort, "
        "thinking, extra."
    ]


@pytest.mark.parametrize(
    ("front", "line", "problem"),
    [
        ("temperature: 3", 4, "'model_settings.temperature' must be a number from 0 to 2, got 3"),
        ("temperature: '0.2'", 4, "must be a number from 0 to 2, got '0.2'"),
        ("top_p: -0.1", 4, "'model_settings.top_p' must be a number from 0 to 1, got -0.1"),
        ("max_output_tokens: 0", 4, "must be a positive integer (at most 2147483647), got 0"),
        ("seed: true", 4, "'model_settings.seed' must be a whole number, got True"),
        ("seed: 4.5", 4, "'model_settings.seed' must be a whole number, got 4.5"),
        ("seed: 0x1p70", 4, "must be a whole number, got '0x1p70'"),
        (
            "seed: 1180591620717411303424",
            4,
            "must be a whole number from -9007199254740992 to 9007199254740992, got 11805",
        ),
        ("stop: ['']", 4, "'model_settings.stop' must be a string or a list of non-empty"),
        ("parallel_tool_calls: 'no'", 4, "must be true or false, got 'no'"),
        ("reasoning_effort: extreme", 4, "must be one of none, minimal, low, medium, high, xhigh"),
        ("thinking: 500", 4, "must be a budget in tokens (at least 1024) or 'adaptive', got 500"),
        ("thinking: always", 4, "(at least 1024) or 'adaptive', got 'always'"),
        ("extra: {openai: 5}", 4, "'model_settings.extra.openai' must map field names to values"),
        ("extra: {openai: {messages: []}}", 4, "'model_settings.extra.openai.messages' is built"),
    ],
)
def test_a_bad_value_is_named_with_what_it_must_be(front: str, line: int, problem: str) -> None:
    [found] = problems(agent(f"model_settings:\n  {front}"))
    assert found.startswith(f"agents/a.md:{line}: invalid_specification: ")
    assert problem in found


def test_every_bad_setting_of_a_file_is_listed() -> None:
    found = problems(agent("model_settings: {temperature: 9, seed: x, colour: red}"))
    assert len(found) == 3
    assert [f.split("'")[1] for f in found] == [
        "model_settings.temperature",
        "model_settings.seed",
        "model_settings.colour",
    ]
    assert problems(agent("model_settings: [temperature]")) == [
        "agents/a.md:3: invalid_specification: 'model_settings' must be a mapping of settings, "
        "got ['temperature'] | Model settings: temperature, top_p, max_output_tokens, stop, "
        "seed, tool_choice, parallel_tool_calls, reasoning_effort, thinking, extra."
    ]


# -- [defaults] --------------------------------------------------------------------------------


def test_defaults_set_model_settings_and_a_bad_one_names_the_file(project_dir: Path) -> None:
    config = project_dir / "agentrunner.toml"
    config.write_text("[defaults]\nmodel = 'test'\nmodel_settings = {temperature = 0.4}\n")
    assert load_config(project_dir).model_settings == ModelSettings(temperature=0.4)
    config.write_text("[defaults]\nmodel = 'test'\n\n[defaults.model_settings]\ntemperatur = 1\n")
    with pytest.raises(AgentRunnerError) as info:
        load_config(project_dir)
    assert info.value.code is ErrorCode.INVALID_SPECIFICATION
    assert info.value.one_line() == (
        "agentrunner.toml:5: invalid_specification: 'defaults.model_settings.temperatur' is "
        "not a model setting (did you mean 'temperature'?)"
    )
    config.write_text("[defaults]\nmodel_settings = {seed = 1.5}\n")
    with pytest.raises(
        AgentRunnerError, match=r"'defaults\.model_settings\.seed' must be a whole number"
    ):
        load_config(project_dir)
    config.write_text("[defaults]\nmodel = 'test'\n")
    assert load_config(project_dir).model_settings is None


# -- a run's: --set and the Python API ---------------------------------------------------------


def test_set_reads_values_as_toml_and_bare_words_as_text() -> None:
    raw = parse_assignments(
        [
            "temperature=0.2",
            "seed=42",
            "parallel_tool_calls=false",
            "tool_choice=auto",
            'stop=["END", "STOP"]',
            "thinking=adaptive",
            "extra.anthropic.top_k=40",
            "extra.anthropic.metadata={user_id = 'u'}",
            "temperature = 0.3",  # the last one wins
        ]
    )
    assert raw == {
        "temperature": 0.3,
        "seed": 42,
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "stop": ["END", "STOP"],
        "thinking": "adaptive",
        "extra": {"anthropic": {"top_k": 40, "metadata": {"user_id": "u"}}},
    }
    assert model_settings(raw) == ModelSettings.model_validate(raw)
    assert parse_assignments(["stop=END"]) != parse_assignments(["stop=STOP"])


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("temperature", "--set 'temperature': expected KEY=VALUE"),
        ("=0.2", "--set '=0.2': expected KEY=VALUE"),
        (
            "temprature=0.2",
            "--set temprature: 'temprature' is not a model setting (did you mean 'temperature'?)",
        ),
        ("top.p=1", "--set top.p: 'top.p' is not a model setting (did you mean 'top_p'?)"),
        ("seed.x=1", "--set seed.x: only extra takes a dotted key, as extra.PROVIDER.FIELD"),
        ("extra.openai=1", "--set extra.openai: only extra takes a dotted key"),
    ],
)
def test_set_refuses_what_is_not_a_setting(pair: str, message: str) -> None:
    with pytest.raises(AgentRunnerError) as info:
        parse_assignments([pair])
    assert info.value.code is ErrorCode.VALIDATION
    assert info.value.message.startswith(message)
    assert info.value.hint


# -- merging and the tool choice ---------------------------------------------------------------


def test_a_run_wins_over_the_agent_over_the_defaults_setting_by_setting() -> None:
    defaults = ModelSettings(temperature=0.1, top_p=0.5, extra={"openai": {"a": 1, "b": 1}})
    agent_file = ModelSettings(temperature=0.2, seed=3, extra={"openai": {"b": 2}})
    run = ModelSettings(temperature=0.3, extra={"anthropic": {"top_k": 4}})
    assert merge_settings(defaults, agent_file, run) == ModelSettings(
        temperature=0.3,
        top_p=0.5,
        seed=3,
        extra={"openai": {"a": 1, "b": 2}, "anthropic": {"top_k": 4}},
    )
    assert merge_settings(defaults, None, None) == defaults
    assert merge_settings(None, None, None) is None


def test_a_tool_choice_names_one_of_the_agents_tools() -> None:
    def problem(choice: str, tools: list[str]) -> str | None:
        return tool_choice_problem(ModelSettings(tool_choice=choice), tools)

    assert problem("get_weather", ["get_weather", "read_file"]) is None
    assert problem("auto", []) is None and problem("none", []) is None
    assert problem("required", ["x"]) is None
    assert problem("required", []) == "is 'required', but the agent has no tools"
    assert problem("get_wether", ["get_weather", "read_file"]) == (
        "names 'get_wether', which is not one of the agent's tools (its tools: get_weather, "
        "read_file); did you mean 'get_weather'?"
    )
    assert problem("x", []) == "names 'x', which is not one of the agent's tools (it has no tools)"


def test_a_seeds_bounds_are_the_same_read_as_integers_or_as_numbers() -> None:
    """The schema's bounds are what is accepted, and each survives a double (a JSON reader
    that reads numbers as doubles, as the schema test's generator did): int64's 2**63 - 1 read
    so is 2**63, past the bound, which the server refused as the schema allowed it."""
    from agentrunner.core.model_settings import ModelSettings, model_settings

    seed = ModelSettings.model_json_schema()["properties"]["seed"]["anyOf"][0]
    low, high = seed["minimum"], seed["maximum"]
    assert float(low) == low and float(high) == high
    for good in (low, high, 0, 42):
        assert model_settings({"seed": good}).seed == good  # type: ignore[union-attr]
    for bad in (low - 1, high + 1, 2**63 - 1):
        with pytest.raises(AgentRunnerError, match="must be a whole number from"):
            model_settings({"seed": bad})
