"""Agent files → AgentSpec: every field, and every way a file can be wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrunner.agents import AgentSpec, parse_agent_text
from agentrunner.config import WHOLE_WINDOW
from agentrunner.errors import AgentFileErrors, AgentRunnerError, ErrorCode

FULL = """\
---
name: Researcher
description: Finds and summarises sources
model: openai:gpt-4.1-mini
fallback: [anthropic:claude-haiku-4-5]
retry: {max: 3, backoff: linear}
tools: [read_file, ask_agent]
capabilities: [memory, agents]
mcp_servers:
  time: {command: uvx, args: [mcp-server-time]}
  remote: {url: "http://127.0.0.1:9000/mcp"}
reports_to: ceo
trust: workspace
limits: {max_steps: 8, max_budget_usd: 0.10}
output_schema: {type: object, properties: {summary: {type: string}}, required: [summary]}
cache: true
memory: {persona: "curious", human: "a journalist"}
enabled: true
inputs:
  company: The company name
  focus: {description: What to look at, default: everything}
prompt_template: "Research {{input.topic}} for {{ input.company }}."
persona: concise
---
You are {{input.company}}'s researcher. Focus: {{ input.focus? }}.
"""


def parse(text: str, default_model: str | None = None) -> AgentSpec:
    return parse_agent_text(
        text, agent_id="researcher", file="agents/researcher.md", default_model=default_model
    )


def problems(text: str, default_model: str | None = None) -> list[AgentRunnerError]:
    with pytest.raises(AgentFileErrors) as info:
        parse(text, default_model)
    return info.value.problems


def test_every_field_of_the_design_example() -> None:
    spec = parse(FULL)
    assert spec.id == "researcher"
    assert spec.name == "Researcher"
    assert spec.description == "Finds and summarises sources"
    assert spec.model == "openai:gpt-4.1-mini"
    assert spec.fallback == ("anthropic:claude-haiku-4-5",)
    assert spec.models == ("openai:gpt-4.1-mini", "anthropic:claude-haiku-4-5")
    assert (spec.retry.max, spec.retry.backoff) == (3, "linear")
    assert spec.tools == ("read_file", "ask_agent")
    assert spec.capabilities == ("memory", "agents")
    assert spec.mcp_servers["time"].command == "uvx"
    assert spec.mcp_servers["time"].args == ("mcp-server-time",)
    assert spec.mcp_servers["remote"].url == "http://127.0.0.1:9000/mcp"
    assert spec.reports_to == "ceo"
    assert spec.trust == "workspace"
    assert (spec.limits.max_steps, spec.limits.max_budget_usd) == (8, 0.10)
    assert spec.output_schema is not None and spec.output_schema["required"] == ["summary"]
    assert spec.cache is True
    assert dict(spec.memory) == {"persona": "curious", "human": "a journalist"}
    assert spec.enabled is True
    assert spec.inputs["company"].description == "The company name"
    assert spec.inputs["focus"].default == "everything"
    assert spec.inputs["focus"].required is False
    assert spec.persona == "concise"
    assert spec.line_of("limits.max_steps") == 14


def test_spec_is_immutable() -> None:
    spec = parse(FULL)
    with pytest.raises(AttributeError):
        spec.model = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.memory["persona"] = "x"  # type: ignore[index]


def test_rendering_uses_declared_defaults() -> None:
    spec = parse(FULL)
    assert spec.render_system({"company": "Acme"}).text == (
        "You are Acme's researcher. Focus: everything."
    )
    prompt = spec.render_prompt({"company": "Acme", "topic": "tides"})
    assert prompt is not None and prompt.text == "Research tides for Acme."


def test_defaults_for_a_minimal_file() -> None:
    spec = parse("---\nmodel: test\n---\nHello.\n")
    assert spec.name == "researcher"
    assert spec.trust == "sandboxed"
    assert spec.limits.max_steps == 10
    assert spec.limits.timeout_s == 600
    assert spec.retry.max == 2
    assert spec.tools == () and spec.enabled and not spec.cache
    assert spec.system.source == "Hello."


def test_file_without_frontmatter_uses_the_default_model() -> None:
    spec = parse("Just a persona.\n", default_model="test")
    assert spec.model is None
    assert spec.system.source == "Just a persona."


def test_unknown_key_names_line_and_nearest_key() -> None:
    [err] = problems("---\nmodel: test\ndescripton: x\n---\nbody\n")
    assert err.code is ErrorCode.INVALID_SPECIFICATION
    assert (err.file, err.line) == ("agents/researcher.md", 3)
    assert "unknown key 'descripton'" in err.message
    assert "did you mean 'description'" in err.message


def test_unknown_nested_key_names_its_line() -> None:
    [err] = problems("---\nmodel: test\nlimits:\n  max_steps: 3\n  max_turn: 4\n---\nbody\n")
    assert err.line == 5
    assert "limits.max_turn" in err.message and "limits.max_steps" in err.message


def test_bad_yaml_names_file_and_line() -> None:
    [err] = problems("---\nmodel: test\ntools: [a, b\ntrust: full\n---\nbody\n")
    assert err.code is ErrorCode.INVALID_SPECIFICATION
    assert err.file == "agents/researcher.md"
    assert err.line is not None and 3 <= err.line <= 5
    assert "invalid YAML" in err.message


def test_unclosed_frontmatter() -> None:
    [err] = problems("---\nmodel: test\nbody\n")
    assert err.line == 1 and "never closed" in err.message


def test_frontmatter_must_be_a_mapping() -> None:
    [err] = problems("---\n- a\n- b\n---\nbody\n")
    assert "mapping" in err.message


def test_duplicate_yaml_key() -> None:
    [err] = problems("---\nmodel: test\nmodel: other\n---\nbody\n")
    assert err.line == 3 and "duplicate key 'model'" in err.message


def test_missing_model_without_a_default() -> None:
    [err] = problems("---\nname: X\n---\nbody\n")
    assert "no model" in err.message
    assert err.hint and "model:" in err.hint


def test_placeholder_rooted_outside_input_names_its_line() -> None:
    [err] = problems("---\nmodel: test\n---\nfirst line\nHello {{ user.name }}\n")
    assert err.code is ErrorCode.INVALID_PLACEHOLDER_PATH
    assert (err.file, err.line) == ("agents/researcher.md", 5)


def test_bad_prompt_template_placeholder() -> None:
    [err] = problems('---\nmodel: test\nprompt_template: "Do {{ x.y }}"\n---\nbody\n')
    assert err.code is ErrorCode.INVALID_PLACEHOLDER_PATH
    assert err.line == 3


def test_missing_mandatory_input_names_file_and_line() -> None:
    spec = parse("---\nmodel: test\n---\n\nHello {{input.name}}\n")
    with pytest.raises(AgentRunnerError) as info:
        spec.render_system({})
    assert info.value.code is ErrorCode.MISSING_MANDATORY_PLACEHOLDER
    assert (info.value.file, info.value.line) == ("agents/researcher.md", 5)


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("trust: everything", "'trust' must be one of sandboxed, workspace, full"),
        ("limits: {max_steps: 0}", "'limits.max_steps' must be a positive integer"),
        ("limits: {max_budget_usd: cheap}", "'limits.max_budget_usd' must be a positive number"),
        ("limits: {timeout_s: 0}", "'limits.timeout_s' must be a positive number, got 0"),
        ("limits: {timeout_s: soon}", "'limits.timeout_s' must be a positive number"),
        ("limits: {history_tokens: 8}", "'limits.history_tokens' must be a whole number of"),
        ("limits: {history_tokens: 16k}", "at least 1024, or 'window', got '16k'"),
        ("limits: {history_tokens: 8000.5}", "'limits.history_tokens' must be a whole number"),
        ("limits: {history_tokens: true}", "'limits.history_tokens' must be a whole number"),
        ("limits: {history_token: 8000}", "did you mean 'limits.history_tokens'"),
        ("retry: {backoff: random}", "'retry.backoff' must be one of"),
        ("retry: 3", "'retry' must be a mapping"),
        ("tools: 3", "'tools' must be a list of names"),
        ("capabilities: [memroy]", "unknown capability 'memroy' (did you mean 'memory'?)"),
        ("persona: profesional", "did you mean 'professional'"),
        ("cache: sometimes", "'cache' must be true or false"),
        ("mcp_servers: {x: {args: [a]}}", "needs exactly one of 'command' (stdio) or 'url'"),
        ("output_schema: {type: 12}", "not a valid JSON Schema"),
        ("memory: [a, b]", "'memory' must map block labels to text"),
        ("model: 3", "'model' must be a 'provider:model' string"),
    ],
)
def test_bad_field_values(line: str, fragment: str) -> None:
    errs = problems(
        f"---\nmodel: test\n{line}\n---\nbody\n".replace("model: test\nmodel: 3", "model: 3")
    )
    assert any(fragment in e.message for e in errs), [e.message for e in errs]
    assert all(e.file == "agents/researcher.md" and e.line for e in errs)


def test_all_problems_of_a_file_are_reported_together() -> None:
    errs = problems("---\nmodel: test\nmodle: x\ntrust: nope\ntools: 3\n---\nbody\n")
    assert [e.line for e in errs] == [3, 4, 5]


@pytest.mark.parametrize("steps", [3, 7])
def test_max_turns_is_read_as_max_steps_with_a_notice(
    steps: int, caplog: pytest.LogCaptureFixture
) -> None:
    """The old key still works (two values, two limits), and the file is told to rename it."""
    text = f"---\nmodel: test\nlimits:\n  max_turns: {steps}\n---\nbody\n"
    with caplog.at_level("WARNING", logger="agentrunner.agents"):
        spec = parse(text)
    assert spec.limits.max_steps == steps
    [notice] = spec.notices
    assert notice.startswith("agents/researcher.md:4: 'limits.max_turns' is now 'limits.max_steps'")
    assert [r.getMessage() for r in caplog.records] == [notice]
    assert parse("---\nmodel: test\nlimits: {max_steps: 4}\n---\nbody\n").notices == ()


def test_max_turns_and_max_steps_together_is_an_error() -> None:
    [err] = problems("---\nmodel: test\nlimits: {max_turns: 3, max_steps: 4}\n---\nbody\n")
    assert "'limits.max_turns' and 'limits.max_steps' are the same limit" in err.message
    assert err.hint and "Delete 'limits.max_turns'" in err.hint


def test_unreadable_file_is_runner_io(tmp_path: Path) -> None:
    from agentrunner.agents import load_agent_file

    path = tmp_path / "bin.md"
    path.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(AgentFileErrors) as info:
        load_agent_file(path)
    assert info.value.problems[0].code is ErrorCode.RUNNER_IO


@pytest.mark.parametrize(("written", "seconds"), [("30", 30.0), ("2.5", 2.5)])
def test_a_run_deadline_is_read_from_limits(written: str, seconds: float) -> None:
    spec = parse(f"---\nmodel: test\nlimits:\n  timeout_s: {written}\n---\nHello.\n")
    assert spec.limits.timeout_s == seconds
    assert spec.line_of("limits.timeout_s") == 4


@pytest.mark.parametrize(
    ("written", "tokens"),
    [(None, None), ("4000", 4000), ("16000", 16000), ("window", WHOLE_WINDOW)],
)
def test_history_tokens_is_read_from_limits(written: str | None, tokens: int | None) -> None:
    """Unset, [compaction] history_tokens applies (None); "window": what the window has room
    for (WHOLE_WINDOW, above every window)."""
    limits = f"limits:\n  history_tokens: {written}\n" if written else ""
    spec = parse(f"---\nmodel: test\n{limits}---\nHello.\n")
    assert spec.limits.history_tokens == tokens
    if written:
        assert spec.line_of("limits.history_tokens") == 4
