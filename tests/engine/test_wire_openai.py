"""The Chat Completions wire adapter's request bodies where the servers that speak it differ
(the recorded exchanges with OpenAI itself are test_wire_fixtures.py's)."""

from __future__ import annotations

from typing import Any

from agentrunner.engine.messages import (
    AssistantMessage,
    ModelRequest,
    ToolCall,
    ToolResult,
    UserMessage,
)
from agentrunner.engine.wire_openai import OpenAIWire


def sent_assistant(message: AssistantMessage) -> dict[str, Any]:
    call = message.tool_calls[0] if message.tool_calls else None
    messages = [UserMessage("What is the weather in Paris?"), message]
    if call is not None:
        messages.append(ToolResult(call.id, call.name, "Sunny"))
    body = OpenAIWire("llama").build(ModelRequest(model="m", system="", messages=messages))
    [assistant] = [m for m in body["messages"] if m["role"] == "assistant"]
    return dict(assistant)


def test_a_tool_call_without_text_is_sent_with_an_empty_text() -> None:
    # OpenAI's API takes ``"content": null`` beside tool calls, and an empty text; llama.cpp's
    # server refuses a null (500, "Input should be a valid string") and fails without the
    # field (its chat template reads it: "'dict object' has no attribute 'content'").
    call = ToolCall("call_1", "get_weather", {"city": "Paris"})
    alone = sent_assistant(AssistantMessage("", [call]))
    assert alone["content"] == ""
    assert alone["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        }
    ]
    said = sent_assistant(AssistantMessage("Let me look.", [call]))
    assert said["content"] == "Let me look." and said["tool_calls"] == alone["tool_calls"]
    answer = sent_assistant(AssistantMessage("Sunny in Paris."))
    assert answer == {"role": "assistant", "content": "Sunny in Paris."}
