"""JSON text for providers: the standard library's text, whatever the value."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentrunner.engine.json_text import json_bytes, json_text


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
