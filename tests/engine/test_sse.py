"""The SSE decoder on the bytes of a stream, however the network cuts them."""

from __future__ import annotations

import pytest

from agentrunner.engine.sse import SSEDecoder

Events = list[tuple[str | None, str]]

# Every kind of line: comments, event names, multi-line data, a field with no space after its
# colon, a field without a value, an unknown field, a blank line with no data (which forgets
# the event name), text of several bytes per character, and every line ending.
STREAM = (
    ": ping\n"
    "event: message_start\r\n"
    'data: {"a": 1}\r\n'
    "\r\n"
    "id: 7\n"
    "data:Grüße\n"
    "data\n"
    "data: naïve ☃ 𝄞\n"
    "\n"
    "event: dropped\r"
    "\r"
    "data: [DONE]\r"
    "\r"
).encode()
EVENTS: Events = [
    ("message_start", '{"a": 1}'),
    (None, "Grüße\n\nnaïve ☃ 𝄞"),
    (None, "[DONE]"),
]


def decode(*chunks: bytes) -> Events:
    decoder = SSEDecoder()
    events: Events = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    return events + decoder.flush()


def test_a_stream_in_one_chunk() -> None:
    assert decode(STREAM) == EVENTS


def test_a_stream_cut_anywhere_decodes_alike() -> None:
    """Cut between CR and LF, inside a character's bytes, inside a field name: the same."""
    for cut in range(1, len(STREAM)):
        assert decode(STREAM[:cut], STREAM[cut:]) == EVENTS, cut


def test_a_stream_byte_by_byte_decodes_alike() -> None:
    assert decode(*(STREAM[i : i + 1] for i in range(len(STREAM)))) == EVENTS


LF_STREAM = b'data: {"a": 1}\n\nevent: named\ndata: x\n\ndata: one\ndata: two\n\ndata: [DONE]\n\n'
LF_EVENTS: Events = [(None, '{"a": 1}'), ("named", "x"), (None, "one\ntwo"), (None, "[DONE]")]


def test_a_stream_of_lf_lines_cut_anywhere_decodes_alike() -> None:
    assert decode(LF_STREAM) == LF_EVENTS
    for cut in range(1, len(LF_STREAM)):
        assert decode(LF_STREAM[:cut], LF_STREAM[cut:]) == LF_EVENTS, cut


@pytest.mark.parametrize(
    ("before", "events"),
    [
        (b"data: a", [(None, "adata: x")]),  # the chunk ends a line begun before it
        (b"event: e\n", [("e", "x")]),  # its event was named in the chunk before
        (b"data: a\n", [(None, "a\nx")]),  # its event began in the chunk before
        (b"data: a\n\n", [(None, "a"), (None, "x")]),
    ],
)
def test_a_chunk_of_one_data_line_belongs_to_what_came_before(
    before: bytes, events: Events
) -> None:
    assert decode(before, b"data: x\n\n") == events


@pytest.mark.parametrize(
    ("chunk", "events"),
    [
        (b"event: e\ndata: x\n\n", [("e", "x")]),
        (b"event: \ndata: x\n\n", [("", "x")]),
        (b"event: e\ndata:x\n\n", [("e", "x")]),
        (b"event: e\ndata: x\ndata: y\n\n", [("e", "x\ny")]),
        (b"event: e\nid: 7\n\n", []),
        (b"event: e\ndata: x\n\ndata: y\n\n", [("e", "x"), (None, "y")]),
        (b"data: x\nevent: e\n\n", [("e", "x")]),
        (b"data: a\rb\n\n", [(None, "a")]),  # a CR ends the line: "b" is a field of its own
        (b"event: e\rdata: x\n\n", [("e", "x")]),
        (b"event: e\ndata: a\rb\n\n", [("e", "a")]),
    ],
)
def test_a_chunk_of_whole_events_decodes_as_line_by_line(chunk: bytes, events: Events) -> None:
    assert decode(chunk) == events
    assert decode(*(chunk[i : i + 1] for i in range(len(chunk)))) == events


def test_events_come_out_with_the_chunk_that_completes_them() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: one\n\ndata: tw") == [(None, "one")]
    assert decoder.feed(b"o\n") == []
    assert decoder.feed(b"\n") == [(None, "two")]
    assert decoder.flush() == []


@pytest.mark.parametrize(
    ("tail", "events"),
    [(b"data: last\n", [(None, "last")]), (b"event: e\ndata: unended", [("e", "unended")])],
)
def test_a_stream_that_just_ends_gives_its_last_event(tail: bytes, events: Events) -> None:
    assert decode(b"data: first\n\n", tail) == [(None, "first"), *events]


def test_only_cr_and_lf_end_lines() -> None:
    text = "a\u2028b\u2029c\x85d\x0be\x0cf\x1cg"
    assert decode(f"data: {text}\n\n".encode()) == [(None, text)]


def test_bytes_that_are_not_utf8_are_replaced() -> None:
    assert decode(b"event: \xffe\ndata: caf\xe9 ok\n\n") == [("\ufffde", "caf\ufffd ok")]


def test_a_blank_line_without_data_dispatches_nothing() -> None:
    assert decode(b"\n\n: only a comment\n\nevent: lonely\n\n") == []
