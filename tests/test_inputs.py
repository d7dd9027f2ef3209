"""The rules every caller's input meets before it is stored or sent to a model."""

from __future__ import annotations

from typing import Any

import pytest

from agentrunner.core.inputs import (
    MAX_DEPTH,
    check_id,
    check_input,
    check_text,
    id_problem,
    input_problem,
    text_problem,
)
from agentrunner.errors import AgentRunnerError, ErrorCode


def _nested(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"k": value}
    return value


@pytest.mark.parametrize(
    "value", ["t", "ceo-01a2", "Ünïcode thread", "ceo@general", "dm:ada:ceo", "a" * 200, "日本語"]
)
def test_ids_of_any_script_are_accepted(value: str) -> None:
    assert id_problem(value) is None and check_id(value, "thread_id") == value


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("", "is empty"),
        ("a" * 201, "201 characters long"),
        ("a\x00b", "control character"),
        ("line\nbreak", "control character"),
        ("tab\there", "control character"),
        ("c1\x85", "control character"),
        ("half\ud800", "unpaired surrogate"),
    ],
)
def test_bad_ids_are_refused_naming_the_field(value: str, problem: str) -> None:
    with pytest.raises(AgentRunnerError) as info:
        check_id(value, "thread_id")
    error = info.value
    assert error.code is ErrorCode.VALIDATION and error.details == {"invalid": "thread_id"}
    assert error.message.startswith("thread_id ") and problem in error.message and error.hint


def test_a_longer_bound_for_ids_the_library_composes() -> None:
    assert id_problem("a" * 500, max_chars=600) is None
    assert "601 characters" in (id_problem("a" * 601, max_chars=600) or "")


def test_texts_keep_tabs_and_line_breaks_and_refuse_what_cannot_be_stored() -> None:
    assert text_problem("tab\tand\nlines\r\n, émoji 🎉") is None
    assert "NUL character (at character 1)" in (text_problem("a\x00") or "")
    assert "unpaired surrogate" in (text_problem("a\udc00") or "")
    assert "200001 characters" in (text_problem("a" * 200_001) or "")
    assert text_problem("a" * 200_001, max_chars=None) is None
    with pytest.raises(AgentRunnerError) as info:
        check_text("a\x00", "message")
    assert info.value.details == {"invalid": "message"}


def test_input_depth_size_and_strings() -> None:
    assert (
        input_problem({"a": [1, 2.5, True, None, {"b": "c"}], "d": _nested(MAX_DEPTH - 1)}) is None
    )
    assert "nested more than 32" in (input_problem({"d": _nested(MAX_DEPTH)}) or "")
    assert "nested more than 32" in (input_problem({"d": _nested(300)}) or "")
    assert "NUL" in (input_problem({"k": ["ok", "a\x00"]}) or "")
    assert "NUL" in (input_problem({"a\x00": 1}) or "")
    assert "bytes as JSON" in (input_problem({"k": "a" * 200_000}) or "")
    assert input_problem({"k": "a" * 200_000}, max_bytes=None) is None
    # JSON takes any integer: one past 64 bits is kept, as the caller wrote it
    assert input_problem({"k": 2**70, "j": -(2**64)}) is None
    assert check_input(None) == {}
    with pytest.raises(AgentRunnerError) as info:
        check_input(["not", "an", "object"])  # type: ignore[arg-type]
    assert "must be an object" in info.value.message
