"""The event types: their documentation is generated from them, and they name the same kinds
everywhere. Regenerate ``docs/events.md`` with ``python tests/test_events.py``."""

from __future__ import annotations

import ast
import subprocess
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

import pytest
from inline_snapshot import snapshot

from agentrunner import events
from agentrunner.events import (
    ACTIVITY,
    DELTA_TEXT,
    ChannelActivity,
    Event,
    EventData,
    FromChild,
    StreamEvent,
)

ROOT = Path(__file__).resolve().parent.parent

INTRO = """\
# Events

Everything that happens in a turn is reported as an event: a type and a small JSON object.
The engine emits them through the `emit(kind, data)` callback of a turn (`Engine.run(emit=…)`);
`AgentRunner.run_agent` persists them in order with a per-run sequence number (the `events`
table) and forwards each to the callbacks as it happens. Deltas are stored merged: the
`agent.token` (or `agent.thinking`) deltas that follow each other before the run's next write —
within 20 ms (5 ms while someone follows the store live), or a durable point — are one row whose
text is theirs joined, so a long answer is a few rows rather than hundreds. Callbacks (and so
the CLI and the OpenAI-compatible endpoint) still get every delta; the HTTP event streams, which
read the table, get the merged ones — join the texts either way.

Each type's data has a typed shape in Python, a `TypedDict` of `agentrunner.events` (at run
time a plain `dict`); this page is generated from them. `typed(kind, data)` pairs a type with
its shape, so a `match` narrows both:

<!-- docs-test: skip: a fragment, inside an event callback -->
```python
match typed(kind, data):
    case ("agent.tool_call", call):
        print(call["name"], call["input"])
```
"""

ORDER = """\
Order within a run: it begins with `agent.working`. Then, for each model request,
`step.started`, then `model.setting_dropped` for a setting its provider is not sent (once a run
for each), then `agent.thinking` / `agent.token` deltas as they stream, then `cost.updated`
(and `model.attempt_failed` if the attempt failed); then, if the model called tools, one
`agent.tool_call` per call followed by their `agent.tool_result`s (in the order the calls
finish: a step's calls run concurrently; `call_id` names the call); the loop repeats; the turn
ends with `agent.message`. The run ends with `agent.idle` (just after `agent.failed` if it
failed), written with the run's end whatever ended it, so a chat client can show "cto is
typing" in between. Only a run whose process died ends without one (its record says
`worker_lost`; a channel's stream gets the pair, below). A run that could not start (an agent
disabled, a thread of another agent's) sends neither.

If an attempt fails after streaming some tokens and the chain retries, the next attempt streams
its own tokens: a consumer that shows text as it arrives should drop the partial text on
`model.attempt_failed`.

A run whose thread outgrew its model's context window starts, after `agent.working` and before
its first `step.started`, with the summary's requests — a `cost.updated` for each (and
`model.attempt_failed` for a failed attempt) — and one `thread.compacted` (see
[engine.md](engine.md#history)).

After an abort no further event of the turn is emitted, but the `cost.updated`
(`outcome: "cancelled"`, `estimated: true`) of the request it cut off: what was streamed was
billed; then the run's `agent.idle` (`outcome: "cancelled"`).
"""

CHILD = """\
A child run started by `ask_agent` reports its events to its caller's callbacks with two more
fields; they are not stored (the child run stores its events as its own):
"""

STREAMS = """\
## Events of the HTTP streams

The server-sent event streams (see [http-api.md](http-api.md)) send the stored events above —
on a thread's stream with one more field, `run_id`, the run each belongs to. A channel's stream
sends its messages and, between them in the order they were stored, the `agent.working`,
`agent.failed` and `agent.idle` of its members' runs there — two agents working at once are two
pairs, each naming its agent — with two more fields (a run whose worker was lost gets its
`agent.failed` and `agent.idle` there too, `error_code` `worker_lost`, once the lease rules
fail it). Each SSE event's `id` is the stream's position, which a client reconnecting with
`Last-Event-ID` resumes from ([http-api.md](http-api.md#live-events-server-sent-events)):
"""

STREAM_KINDS = """\
The streams' own events:
"""

FIELDS_HEAD = ["| field | type | description |", "| --- | --- | --- |"]


def kinds(union: Any) -> list[tuple[str, type]]:
    """(kind, shape) for each member of a union of ``tuple[Literal[kind], Shape]``."""
    pairs = []
    for member in get_args(union):
        literal, shape = get_args(member)
        [kind] = get_args(literal)
        pairs.append((kind, shape))
    return pairs


def json_type(hint: Any) -> str:
    """A field's type as JSON names it."""
    if get_origin(hint) in (types.UnionType, typing.Union):
        return " or ".join(json_type(arg) for arg in get_args(hint))
    if get_origin(hint) is Literal:
        return " or ".join(f"`{value!r}`" for value in get_args(hint))
    if get_origin(hint) is dict:
        return "object"
    if get_origin(hint) is list:
        return f"array of {json_type(get_args(hint)[0])}s"
    names = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
    return names[hint]


def field_rows(shape: type, *, marks: bool = False) -> list[str]:
    hints = get_type_hints(shape, include_extras=True)
    listed_once = set(FromChild.__annotations__) if "from_agent" in hints and not marks else set()
    rows = []
    for name, hint in hints.items():
        if name in listed_once:
            continue
        optional = get_origin(hint) is typing.NotRequired
        if optional:
            [hint] = get_args(hint)
        assert get_origin(hint) is typing.Annotated, f"{shape.__name__}.{name} has no description"
        kind, description = get_args(hint)
        shown = json_type(kind) + (", optional" if optional else "")
        rows.append(f"| `{name}` | {shown} | {description} |")
    return rows


def when(shape: type) -> str:
    assert shape.__doc__, f"{shape.__name__} says not when it is sent"
    return " ".join(shape.__doc__.split())


def sections(pairs: list[tuple[str, type]]) -> list[str]:
    lines = []
    for kind, shape in pairs:
        text = when(shape)
        lines += ["", f"## `{kind}`", "", f"**When:** {text}.", "", *FIELDS_HEAD]
        lines += field_rows(shape)
    return lines


def events_markdown() -> str:
    run_events, stream_events = kinds(Event), kinds(StreamEvent)
    lines = [INTRO, "| type | sent when |", "| --- | --- |"]
    lines += [f"| `{kind}` | {when(shape)} |" for kind, shape in run_events]
    lines += ["", ORDER, CHILD, *FIELDS_HEAD, *field_rows(FromChild, marks=True)]
    lines += sections(run_events)
    lines += ["", STREAMS, *FIELDS_HEAD, *field_rows(ChannelActivity)]
    lines += ["", STREAM_KINDS, "| type | sent when |", "| --- | --- |"]
    lines += [f"| `{kind}` | {when(shape)} |" for kind, shape in stream_events]
    lines += sections(stream_events)
    return "\n".join(lines) + "\n"


def test_the_events_doc_is_generated_from_the_types() -> None:
    doc = ROOT / "docs" / "events.md"
    assert doc.read_text() == events_markdown(), (
        "docs/events.md is out of date: run `python tests/test_events.py`"
    )


def test_a_changed_type_changes_the_doc(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above fails when a field, its type or its description drifts."""
    before = events_markdown()
    changed = typing.Annotated[int, "the step's number, counted from 0"]
    monkeypatch.setitem(events.StepStarted.__annotations__, "step", changed)
    after = events_markdown()
    assert after != before
    assert "| `step` | integer | the step's number, counted from 0 |" in after


def emit_overloads() -> list[tuple[str, str]]:
    """(kind, shape) of each overload of ``Emit.__call__``, as written (an overload leaves no
    trace at run time that ``typing.get_overloads`` finds on a protocol)."""
    tree = ast.parse(Path(events.__file__).read_text())
    [emit] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Emit"]
    pairs = []
    for method in emit.body:
        if isinstance(method, ast.FunctionDef):
            _, kind, data = method.args.posonlyargs
            assert isinstance(kind.annotation, ast.Subscript)
            literal = kind.annotation.slice
            assert isinstance(literal, ast.Constant) and isinstance(data.annotation, ast.Name)
            pairs.append((literal.value, data.annotation.id))
    return pairs


def test_every_kind_is_named_alike_everywhere() -> None:
    """``Event``, ``EventData`` and ``Emit``'s overloads list the same kinds and shapes."""
    pairs = kinds(Event)
    assert [shape for _, shape in pairs] == list(get_args(EventData))
    assert emit_overloads() == [(kind, shape.__name__) for kind, shape in pairs]
    assert set(DELTA_TEXT) == {"agent.token", "agent.thinking"}
    for kind, field in DELTA_TEXT.items():
        assert get_type_hints(dict(pairs)[kind])[field] is str
    assert ACTIVITY == {"agent.working", "agent.failed", "agent.idle"} <= {k for k, _ in pairs}
    assert [kind for kind, _ in pairs] == snapshot(
        [
            "agent.working",
            "thread.compacted",
            "step.started",
            "agent.thinking",
            "agent.token",
            "cost.updated",
            "model.attempt_failed",
            "model.setting_dropped",
            "agent.tool_call",
            "agent.tool_result",
            "agent.message",
            "agent.notify",
            "agent.file",
            "agent.note_shared",
            "agent.memory_updated",
            "agent.failed",
            "approval.requested",
            "approval.decided",
            "agent.idle",
        ]
    )


def test_typed_pairs_a_kind_with_its_data_as_they_are() -> None:
    data: EventData = {"token": "Hi", "model": "x:m"}
    assert events.typed("agent.token", data) == ("agent.token", data)
    assert events.typed("agent.token", data)[1] is data  # no copy: it runs once per token
    marked = events.from_child(data, "worker", 2)
    assert marked == {"token": "Hi", "model": "x:m", "from_agent": "worker", "depth": 2}
    assert data == {"token": "Hi", "model": "x:m"}  # the stored event is left as it was
    assert events.child_of(marked) == ("worker", 2)
    assert events.child_of(events.from_child(data, "helper", 1)) == ("helper", 1)
    assert events.child_of(data) is None


MISMATCH = """\
from inline_snapshot import snapshot


def test_whole_value():
    assert {"token": "Hi", "model": "x:m"} == snapshot({"token": "Hello", "model": "x:m"})
"""


@pytest.mark.parametrize("ci", [True, False], ids=["in CI", "outside CI"])
def test_a_snapshot_that_does_not_match_fails(tmp_path: Path, ci: bool) -> None:
    """Never fixed silently: in CI (where inline-snapshot is off) and outside it (where it only
    reports unless asked to fix), a mismatch fails the run and the file is left as it was."""
    (tmp_path / "pyproject.toml").write_text(
        (ROOT / "pyproject.toml").read_text().replace('testpaths = ["tests"]', "")
    )
    test = tmp_path / "test_mismatch.py"
    test.write_text(MISMATCH)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    if ci:
        env["CI"] = "true"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout
    assert test.read_text() == MISMATCH


if __name__ == "__main__":
    (ROOT / "docs" / "events.md").write_text(events_markdown())


def test_a_grandchild_event_keeps_its_own_agent_on_its_way_up() -> None:
    """A delegate's delegate (ceo → cto → engineer): its events pass through the cto's
    callbacks on their way to the caller, and must still say they are the engineer's."""
    data: EventData = {"name": "write_file", "input": {}, "tool_call_id": "c1"}
    from_grandchild = events.from_child(data, "engineer", 2)
    through_child = events.from_child(from_grandchild, "cto", 1)
    assert events.child_of(through_child) == ("engineer", 2)
    assert events.child_of(events.from_child(data, "cto", 1)) == ("cto", 1)
