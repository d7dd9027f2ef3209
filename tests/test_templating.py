"""Seed 004's template rules, one test per rule and per error code, plus properties."""

from __future__ import annotations

import json
import string
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentrunner.agents.templating import Template, render_value
from agentrunner.errors import AgentRunnerError, ErrorCode


def render(source: str, input: Any) -> str:
    return Template.parse(source).render(input)


def test_mandatory_placeholder_is_replaced() -> None:
    assert render("Hello {{input.name}}!", {"name": "Ada"}) == "Hello Ada!"


def test_optional_placeholder_missing_renders_empty() -> None:
    assert render("[{{input.name?}}]", {}) == "[]"


def test_optional_placeholder_none_renders_empty() -> None:
    assert render("[{{input.name?}}]", {"name": None}) == "[]"


def test_nested_paths_resolve_left_to_right() -> None:
    assert render("{{input.a.b.c}}", {"a": {"b": {"c": "deep"}}}) == "deep"


def test_whitespace_inside_braces_is_ignored() -> None:
    data = {"prop": "v"}
    assert render("{{ input.prop }}", data) == render("{{input.prop}}", data) == "v"
    assert render("{{\tinput . prop ? }}", data) == "v"


def test_list_index_by_decimal_segment() -> None:
    assert render("{{input.items.1.name}}", {"items": [{"name": "a"}, {"name": "b"}]}) == "b"


def test_list_index_past_end_is_missing() -> None:
    assert render("[{{input.items.5?}}]", {"items": [1]}) == "[]"
    with pytest.raises(AgentRunnerError) as info:
        render("{{input.items.5}}", {"items": [1]})
    assert info.value.code is ErrorCode.MISSING_MANDATORY_PLACEHOLDER


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain", "plain"),
        (True, "true"),
        (False, "false"),
        (3, "3"),
        (2.5, "2.5"),
        ({"a": 1, "b": [2, 3]}, '{"a":1,"b":[2,3]}'),
        (["x", "é"], '["x","é"]'),
    ],
)
def test_value_rendering(value: Any, text: str) -> None:
    assert render("{{input.v}}", {"v": value}) == text


def test_whole_input_renders_as_compact_json() -> None:
    assert render("{{input}}", {"a": 1}) == '{"a":1}'


def test_substitution_is_single_pass() -> None:
    out = render("{{input.a}}", {"a": "{{input.secret}}", "secret": "s3cret"})
    assert out == "{{input.secret}}"


def test_incomplete_braces_are_literal() -> None:
    assert render("a {{ b", {}) == "a {{ b"


def test_used_values_are_reported() -> None:
    rendered = Template.parse("{{input.a}} {{input.b.c?}} {{input.d?}}").render_with_values(
        {"a": 1, "b": {"c": "x"}, "unused": 5}
    )
    assert rendered.used == {"input.a": 1, "input.b.c": "x", "input.d": None}


# -- one test per error code -------------------------------------------------------------------


def test_missing_mandatory_placeholder() -> None:
    with pytest.raises(AgentRunnerError) as info:
        Template.parse("Hi {{ input.name }}", file="agents/x.md", first_line=7).render({})
    err = info.value
    assert err.code is ErrorCode.MISSING_MANDATORY_PLACEHOLDER
    assert "Required placeholder '{{ input.name }}' could not be resolved" in err.message
    assert (err.file, err.line) == ("agents/x.md", 7)
    assert err.hint and "{{input.name?}}" in err.hint


def test_null_mandatory_value_is_missing() -> None:
    with pytest.raises(AgentRunnerError) as info:
        render("{{input.name}}", {"name": None})
    assert info.value.code is ErrorCode.MISSING_MANDATORY_PLACEHOLDER
    assert "null" in info.value.message


@pytest.mark.parametrize(
    "source",
    ["{{ foo.bar }}", "{{ }}", "{{input.a?.b}}", "{{input..a}}", "{{inputs.a}}", "{{input.}}"],
)
def test_invalid_placeholder_path_at_parse(source: str) -> None:
    with pytest.raises(AgentRunnerError) as info:
        Template.parse(f"line one\n{source}", file="f.md", first_line=3)
    err = info.value
    assert err.code is ErrorCode.INVALID_PLACEHOLDER_PATH
    assert source in err.message
    assert err.line == 4


def test_walking_through_a_scalar_is_an_invalid_path() -> None:
    with pytest.raises(AgentRunnerError) as info:
        render("{{input.name.first}}", {"name": "Ada"})
    assert info.value.code is ErrorCode.INVALID_PLACEHOLDER_PATH
    assert "input.name" in info.value.message


def test_non_numeric_index_on_list_is_an_invalid_path() -> None:
    with pytest.raises(AgentRunnerError) as info:
        render("{{input.items.first?}}", {"items": [1]})
    assert info.value.code is ErrorCode.INVALID_PLACEHOLDER_PATH


def test_input_must_be_an_object() -> None:
    with pytest.raises(AgentRunnerError) as info:
        render("{{input.a}}", ["not", "an", "object"])
    assert info.value.code is ErrorCode.VALIDATION


# -- properties --------------------------------------------------------------------------------

keys = st.text(alphabet=string.ascii_letters + "_", min_size=1, max_size=8)
scalars = st.one_of(st.text(max_size=20), st.integers(), st.booleans(), st.floats(allow_nan=False))
literal = st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=30)
spaces = st.text(alphabet=" \t\n", max_size=3)


@given(key=keys, value=scalars, pad=st.tuples(spaces, spaces, spaces, spaces))
def test_property_whitespace_never_changes_the_result(
    key: str, value: Any, pad: tuple[str, str, str, str]
) -> None:
    a, b, c, d = pad
    spaced = f"{{{{{a}input{b}.{c}{key}{d}}}}}"
    assert render(spaced, {key: value}) == render(f"{{{{input.{key}}}}}", {key: value})


@given(before=literal, after=literal, key=keys, value=scalars)
def test_property_literal_text_is_preserved(before: str, after: str, key: str, value: Any) -> None:
    out = render(f"{before}{{{{input.{key}}}}}{after}", {key: value})
    assert out == before + render_value(value) + after


@given(key=keys, other=keys)
def test_property_optional_missing_is_empty(key: str, other: str) -> None:
    data = {} if key == other else {other: "x"}
    assert render(f"<{{{{input.{key}?}}}}>", data) == "<>"


@given(path=st.lists(keys, min_size=1, max_size=4), value=scalars)
def test_property_nested_path_resolves(path: list[str], value: Any) -> None:
    data: Any = value
    for key in reversed(path):
        data = {key: data}
    assert render("{{input." + ".".join(path) + "}}", data) == render_value(value)


@given(root=keys.filter(lambda k: k != "input"), key=keys)
def test_property_root_other_than_input_is_rejected(root: str, key: str) -> None:
    with pytest.raises(AgentRunnerError) as info:
        Template.parse(f"{{{{{root}.{key}}}}}")
    assert info.value.code is ErrorCode.INVALID_PLACEHOLDER_PATH


@given(value=st.recursive(scalars, lambda c: st.lists(c) | st.dictionaries(keys, c), max_leaves=8))
def test_property_objects_render_as_compact_json(value: Any) -> None:
    out = render("{{input.v}}", {"v": value})
    if isinstance(value, dict | list):
        assert json.loads(out) == value
        assert out == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
