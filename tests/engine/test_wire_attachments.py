"""Images and PDFs on each wire, as its provider documents them (docs/attachments.md): a user
message with an image and a PDF, built for two different sets of files (two different bodies),
compared with snapshots written from the providers' documented shapes (our goldens, not
recordings: no recorded exchange carries a file); a tool's files in its result where the API
takes them (Responses, Anthropic), else (Chat Completions) named in the tool message and sent
in one user message after the step; Anthropic's cache breakpoints still placed by their rules.
What the mock provider makes of the same bodies over HTTP is test_mock_attachments.py's.
"""

from __future__ import annotations

from typing import Any

import pytest
from inline_snapshot import Is, snapshot

from agentrunner.engine.messages import (
    AssistantMessage,
    Attachment,
    Message,
    ModelRequest,
    ToolCall,
    ToolDefinition,
    ToolResult,
    UserMessage,
)
from agentrunner.engine.wire_anthropic import AnthropicWire
from agentrunner.engine.wire_openai import TOOL_FILES, OpenAIWire
from agentrunner.engine.wire_responses import ResponsesWire
from tests.engine.attachment_files import FIRST, JPEG, PDF_1, PDF_2, PNG, SECOND, b64

WIRES = {
    "chat": OpenAIWire("openai"),
    "responses": ResponsesWire("openai"),
    "anthropic": AnthropicWire("anthropic"),
}


def request(*messages: Message, system: str = "", tools: bool = False) -> ModelRequest:
    definitions = [ToolDefinition("screenshot", "Takes a screenshot.", {"type": "object"})]
    return ModelRequest("m", system, list(messages), definitions if tools else (), stream=False)


def described(files: tuple[Attachment, ...]) -> ModelRequest:
    return request(UserMessage("Describe both.", attachments=files))


def png_url() -> str:
    return f"data:image/png;base64,{b64(PNG)}"


def pdf_url(data: bytes) -> str:
    return f"data:application/pdf;base64,{b64(data)}"


# -- a user message with an image and a PDF --------------------------------------------------


def test_chat_completions_sends_image_url_and_file_parts_after_the_text() -> None:
    wire = WIRES["chat"]
    first, second = wire.build(described(FIRST)), wire.build(described(SECOND))
    assert first == snapshot(
        {
            "model": "m",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Describe both."},
                        {
                            "type": "image_url",
                            "image_url": {"url": Is(png_url()), "detail": "auto"},
                        },
                        {
                            "type": "file",
                            "file": {"filename": "report.pdf", "file_data": Is(pdf_url(PDF_1))},
                        },
                    ],
                }
            ],
            "stream": False,
        }
    )
    jpeg_url = f"data:image/jpeg;base64,{b64(JPEG)}"
    assert second["messages"][0]["content"][1:] == snapshot(
        [
            {"type": "image_url", "image_url": {"url": Is(jpeg_url), "detail": "low"}},
            # a PDF without a name still has one: the API wants a file name
            {"type": "file", "file": {"filename": "file.pdf", "file_data": Is(pdf_url(PDF_2))}},
        ]
    )
    assert first != second


def test_the_responses_api_sends_input_image_with_its_detail_and_input_file() -> None:
    wire = WIRES["responses"]
    first, second = wire.build(described(FIRST)), wire.build(described(SECOND))
    assert first == snapshot(
        {
            "model": "m",
            "input": [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "Describe both."},
                        {"type": "input_image", "image_url": Is(png_url()), "detail": "auto"},
                        {
                            "type": "input_file",
                            "filename": "report.pdf",
                            "file_data": Is(pdf_url(PDF_1)),
                        },
                    ],
                }
            ],
            "store": False,
            "stream": False,
        }
    )
    jpeg_url = f"data:image/jpeg;base64,{b64(JPEG)}"
    assert second["input"][0]["content"][1:] == snapshot(
        [
            {"type": "input_image", "image_url": Is(jpeg_url), "detail": "low"},
            {"type": "input_file", "filename": "file.pdf", "file_data": Is(pdf_url(PDF_2))},
        ]
    )
    assert first != second


def test_anthropic_sends_image_and_document_blocks_of_bare_base64_before_the_text() -> None:
    wire = WIRES["anthropic"]
    first, second = wire.build(described(FIRST)), wire.build(described(SECOND))
    assert first == snapshot(
        {
            "model": "m",
            "max_tokens": 8192,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/png",
                                "data": Is(b64(PNG)),
                            },
                        },
                        {
                            "type": "document",
                            "source": {
                                "type": "base64",
                                "media_type": "application/pdf",
                                "data": Is(b64(PDF_1)),
                            },
                            "title": "report.pdf",
                        },
                        {
                            "type": "text",
                            "text": "Describe both.",
                            "cache_control": {"type": "ephemeral"},
                        },
                    ],
                }
            ],
            "stream": False,
        }
    )
    assert second["messages"][0]["content"][:2] == snapshot(
        [
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/jpeg", "data": Is(b64(JPEG))},
            },
            # no name, no title
            {
                "type": "document",
                "source": {
                    "type": "base64",
                    "media_type": "application/pdf",
                    "data": Is(b64(PDF_2)),
                },
            },
        ]
    )
    assert first != second


@pytest.mark.parametrize("wire", WIRES)
def test_a_message_without_files_is_sent_as_it_always_was(wire: str) -> None:
    body = WIRES[wire].build(
        request(
            UserMessage("hi"),
            AssistantMessage(tool_calls=[ToolCall("c1", "screenshot", {})]),
            ToolResult("c1", "screenshot", "done"),
        )
    )
    if wire == "chat":
        assert body["messages"][0] == {"role": "user", "content": "hi"}
        assert body["messages"][2] == {"role": "tool", "tool_call_id": "c1", "content": "done"}
        assert len(body["messages"]) == 3  # no user message after the tool's
    elif wire == "responses":
        assert body["input"][0] == {"role": "user", "content": "hi"}
        assert body["input"][2]["output"] == "done"
    else:
        assert body["messages"][0]["content"][0]["text"] == "hi"
        assert body["messages"][2]["content"][0]["content"] == "done"


@pytest.mark.parametrize("wire", WIRES)
def test_a_message_of_files_alone_has_no_empty_text(wire: str) -> None:
    """Anthropic refuses an empty text block; the others would be sent an empty part."""
    body = WIRES[wire].build(request(UserMessage("", attachments=FIRST)))
    parts = (body.get("messages") or body["input"])[0]["content"]
    assert [p["type"] for p in parts] == {
        "chat": ["image_url", "file"],
        "responses": ["input_image", "input_file"],
        "anthropic": ["image", "document"],
    }[wire]


@pytest.mark.parametrize("wire", WIRES)
def test_a_file_whose_bytes_were_not_loaded_is_refused_before_sending(wire: str) -> None:
    """The runner loads the bytes before a request is built; one it did not is its bug."""
    unloaded = Attachment(FIRST[0].sha256, "image/png", FIRST[0].size, "chart.png", 2, 3)
    with pytest.raises(ValueError, match="was not loaded before the request"):
        WIRES[wire].build(request(UserMessage("hi", attachments=(unloaded,))))


# -- a tool's files --------------------------------------------------------------------------


def tool_step(*after: Message) -> ModelRequest:
    """Two calls: the first returns a text and an image, the second a PDF alone."""
    image, document = FIRST
    return request(
        UserMessage("Look at the screen."),
        AssistantMessage(
            tool_calls=[ToolCall("call_1", "screenshot", {}), ToolCall("call_2", "report", {})]
        ),
        ToolResult("call_1", "screenshot", "Here it is.", attachments=(image,)),
        ToolResult("call_2", "report", "", attachments=(document,)),
        *after,
        tools=True,
    )


def test_chat_completions_names_a_tools_files_and_sends_them_after_the_step() -> None:
    """A tool message takes text only (an image there is the API's 400): the files follow
    in one user message after the step's last tool message, before what comes next."""
    body = WIRES["chat"].build(tool_step(UserMessage("And now?")))
    png_label, pdf_label = (file.label for file in FIRST)  # "[image: chart.png, …]"
    assert body["messages"][2:] == snapshot(
        [
            {
                "role": "tool",
                "tool_call_id": "call_1",
                "content": Is(f"Here it is.\n{png_label} (attached below)"),
            },
            {
                "role": "tool",
                "tool_call_id": "call_2",
                "content": Is(f"{pdf_label} (attached below)"),
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Files returned by the tool calls above:"},
                    {"type": "image_url", "image_url": {"url": Is(png_url()), "detail": "auto"}},
                    {
                        "type": "file",
                        "file": {"filename": "report.pdf", "file_data": Is(pdf_url(PDF_1))},
                    },
                ],
            },
            {"role": "user", "content": "And now?"},
        ]
    )
    assert body["messages"][4]["content"][0]["text"] == TOOL_FILES
    # The step last in the request: its files still follow it.
    ending = WIRES["chat"].build(tool_step())["messages"]
    assert [m["role"] for m in ending] == ["user", "assistant", "tool", "tool", "user"]


def test_the_responses_api_puts_a_tools_files_in_its_output() -> None:
    body = WIRES["responses"].build(tool_step())
    assert body["input"][3:] == snapshot(
        [
            {
                "type": "function_call_output",
                "call_id": "call_1",
                "output": [
                    {"type": "input_text", "text": "Here it is."},
                    {"type": "input_image", "image_url": Is(png_url()), "detail": "auto"},
                ],
            },
            {
                "type": "function_call_output",
                "call_id": "call_2",
                "output": [
                    {
                        "type": "input_file",
                        "filename": "report.pdf",
                        "file_data": Is(pdf_url(PDF_1)),
                    }
                ],
            },
        ]
    )


def test_anthropic_puts_a_tools_files_in_its_result_and_keeps_roles_alternating() -> None:
    """A user message after the tool results joins their turn (the API wants roles to
    alternate), its files before its text; the turn's last block takes the breakpoint, the
    blocks inside a tool result none."""
    body = WIRES["anthropic"].build(tool_step(UserMessage("And now?", attachments=SECOND[:1])))
    assert [t["role"] for t in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][2]["content"] == snapshot(
        [
            {
                "type": "tool_result",
                "tool_use_id": "call_1",
                "content": [
                    {"type": "text", "text": "Here it is."},
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/png",
                            "data": Is(b64(PNG)),
                        },
                    },
                ],
            },
            {
                "type": "tool_result",
                "tool_use_id": "call_2",
                "content": [
                    {
                        "type": "document",
                        "source": {
                            "type": "base64",
                            "media_type": "application/pdf",
                            "data": Is(b64(PDF_1)),
                        },
                        "title": "report.pdf",
                    }
                ],
            },
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/jpeg", "data": Is(b64(JPEG))},
            },
            {"type": "text", "text": "And now?", "cache_control": {"type": "ephemeral"}},
        ]
    )


def marked(body: dict[str, Any]) -> list[str]:
    """Where the body's breakpoints are: each marked block's type, nested ones too."""
    found = [f"tool:{t['name']}" for t in body.get("tools", ()) if "cache_control" in t]
    found += [f"system:{b['type']}" for b in body.get("system", ()) if "cache_control" in b]
    for turn in body["messages"]:
        for block in turn["content"]:
            if "cache_control" in block:
                found.append(f"{turn['role']}:{block['type']}")
            for inner in block.get("content") if isinstance(block.get("content"), list) else ():
                if "cache_control" in inner:
                    found.append(f"inside {block['type']}:{inner['type']}")
    return found


def test_anthropic_breakpoints_land_on_a_file_that_ends_a_turn_and_stay_four() -> None:
    """Issue 27's rules (the last tool, the system prompt, the last block of the last two
    user turns) with files: a turn of files alone ends with one, which takes the breakpoint."""
    image, document = FIRST
    wire = WIRES["anthropic"]
    files_last = wire.build(
        request(
            UserMessage("First."),
            AssistantMessage("Ok."),
            UserMessage("Second.", attachments=(image,)),
            AssistantMessage("Ok."),
            UserMessage("", attachments=(image, document)),
            system="You look at files.",
            tools=True,
        )
    )
    assert marked(files_last) == [
        "tool:screenshot",
        "system:text",
        "user:text",  # "Second.": its text after its image
        "user:document",
    ]
    results_last = wire.build(tool_step())
    assert marked(results_last) == ["tool:screenshot", "user:text", "user:tool_result"]
    assert results_last["messages"][2]["content"][-1]["tool_use_id"] == "call_2"
