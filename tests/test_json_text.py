"""JSON text: the standard library's text, whatever the value, read back exactly."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentrunner.core.json_text import json_bytes, json_text, loads_exact


def standard(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize(
    "value",
    [
        {"city": "Zürich", "note": 'say "hi"\n\t\x00\x7f\u2028 ☃ 𝄞', "n": [1, 2.5, None, True]},
        {"big": 2**70, "nested": {"list": [-(2**65)]}},  # past 64 bits: orjson refuses
        {1: "one", None: "none", 2.5: "x"},  # keys that are not strings: orjson refuses
    ],
)
def test_the_text_is_the_standard_librarys(value: Any) -> None:
    assert json_text(value) == standard(value)
    assert json_bytes(value) == standard(value).encode()
    assert json.loads(json_text(value)) == json.loads(standard(value))


def test_what_neither_can_write_fails_as_the_standard_library_does() -> None:
    with pytest.raises(TypeError):
        json_bytes({"when": object()})
    with pytest.raises(TypeError):
        json_text({"when": object()})


@pytest.mark.parametrize("number", [2**64, -(10**30) - 7, 9_223_372_036_854_775_807])
def test_integers_of_any_size_read_back_exactly(number: int) -> None:
    text = json_text({"n": number, "when": object()}, default=lambda _: "later")
    assert loads_exact(text) == {"n": number, "when": "later"}
    assert loads_exact(text.encode()) == {"n": number, "when": "later"}
    assert isinstance(loads_exact(text)["n"], int)


def test_text_without_long_numbers_reads_as_before() -> None:
    assert loads_exact('{"a": 1.5, "b": "12345678901234567"}') == {
        "a": 1.5,
        "b": "12345678901234567",
    }
    assert loads_exact(b'[1, "a digit run of 19 in a string: 1234567890123456789"]')[0] == 1
