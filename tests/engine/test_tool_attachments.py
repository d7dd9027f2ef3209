"""A tool's images and PDFs: what a tool returns (an ``Attachment`` with its bytes, or a list of
texts and attachments) becomes a result of text and files, its event names the files without
their bytes, and a file a tool gets wrong fails the call with a clear error. Over HTTP, on each
wire, in test_mock_attachments.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentrunner.config import ProviderConfig
from agentrunner.engine import (
    ChainEntry,
    FallbackChain,
    ScriptedModel,
    Tool,
    Turn,
    TurnError,
    run_turn,
    tool,
)
from agentrunner.engine.messages import (
    AssistantMessage,
    Attachment,
    ToolCall,
    ToolResult,
    UserMessage,
)
from agentrunner.engine.models import ResolvedModel
from agentrunner.engine.pause import Resumed
from agentrunner.engine.tools import render_output
from agentrunner.errors import ErrorCode
from tests.engine.attachment_files import FIRST, PNG, SECOND, b64
from tests.engine.helpers import Recorder

IMAGE, DOCUMENT = FIRST


def test_what_a_tool_returns_becomes_text_and_files() -> None:
    assert render_output("plain") == ("plain", ())
    assert render_output(IMAGE) == ("", (IMAGE,))
    assert render_output(["Two files:", IMAGE, {"pages": 1}, DOCUMENT]) == (
        'Two files:\n{"pages":1}',
        (IMAGE, DOCUMENT),
    )
    assert render_output(("A tuple too.", SECOND[0])) == ("A tuple too.", (SECOND[0],))
    # No attachment in it: a list is JSON, as it always was.
    assert render_output(["a", 1]) == ('["a",1]', ())
    assert render_output(None) == ("", ())


def test_a_file_a_tool_gets_wrong_is_its_error() -> None:
    unloaded = Attachment(IMAGE.sha256, "image/png", IMAGE.size, "chart.png", 2, 3)
    with pytest.raises(ValueError, match=r"chart.png without its bytes \(Attachment.data\)"):
        render_output(unloaded)
    text = Attachment("ab" * 32, "text/plain", 5, "notes.txt", data=b"hello")
    with pytest.raises(ValueError, match=r"notes\.txt as text/plain: a tool returns images"):
        render_output(["see", text])


def scripted(*replies: Any, tools: list[Tool], emit: Recorder | None = None) -> Turn:
    resolved = ResolvedModel("scripted:m", ProviderConfig("scripted", "test"), "m")
    return Turn(
        system="sys",
        messages=[UserMessage("go")],
        chain=FallbackChain([ChainEntry(resolved, ScriptedModel(list(replies)))]),
        tools=tools,
        emit=emit,
    )


@tool
def capture(which: int) -> list[str | Attachment]:
    """Capture the screen."""
    return [f"Screen {which}.", FIRST[0] if which == 1 else SECOND[0]]


@tool
def look() -> str:
    """Look around."""
    return "Nothing to see."


async def test_the_result_carries_the_files_and_its_event_names_them() -> None:
    rec = Recorder()
    calls = [ToolCall("c1", "capture", {"which": 1}), ToolCall("c2", "capture", {"which": 2})]
    t = scripted([*calls, ToolCall("c3", "look", {})], "done", tools=[capture, look], emit=rec)
    await run_turn(t)
    results = [m for m in t.messages if isinstance(m, ToolResult)]
    assert [(r.content, r.attachments) for r in results] == [
        ("Screen 1.", (FIRST[0],)),
        ("Screen 2.", (SECOND[0],)),
        ("Nothing to see.", ()),
    ]
    assert results[0].attachments[0].data == PNG  # loaded: the next request sends it
    # a step's calls run concurrently: their events come as each finishes
    events = {e["call_id"]: e for e in rec.of("agent.tool_result")}
    assert {call_id: e.get("attachments") for call_id, e in events.items()} == {
        "c1": [FIRST[0].to_dict()],
        "c2": [SECOND[0].to_dict()],
        "c3": None,  # a text result's event is what it always was
    }
    assert events["c1"]["output"] == "Screen 1."
    assert b64(PNG) not in json.dumps(rec.events)


async def test_a_tool_returning_a_file_without_its_bytes_fails_the_call() -> None:
    @tool
    def broken() -> Attachment:
        """Returns a reference only."""
        return Attachment(IMAGE.sha256, "image/png", IMAGE.size, "chart.png", 2, 3)

    with pytest.raises(TurnError) as info:
        await run_turn(scripted([ToolCall("b1", "broken", {})], tools=[broken]))
    assert info.value.code is ErrorCode.TOOL_FAILED
    assert "tool 'broken' failed: ValueError: returned attachment chart.png without its bytes" in (
        info.value.message
    )


async def test_a_resumed_calls_note_keeps_its_files() -> None:
    """An approved call that runs when its step resumes: the model is told the note, and
    still sent what the tool returned."""
    marks: list[tuple[str, ToolResult | None]] = []

    async def journal(call_id: str, result: ToolResult | None) -> None:
        marks.append((call_id, result))

    call = ToolCall("c1", "capture", {"which": 1})
    t = scripted("done", tools=[capture])
    t.messages.append(AssistantMessage(tool_calls=[call]))
    t.resume = Resumed([call], {}, {"c1": {"which": 1}}, journal, notes={"c1": "Approved."})
    await run_turn(t)
    result = t.messages[2]
    assert isinstance(result, ToolResult)
    assert result.content == "Approved.\nScreen 1."
    assert result.attachments == (FIRST[0],)
