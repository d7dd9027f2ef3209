"""What a span carries of a conversation: the GenAI semantic conventions' message shapes (a
role and its parts), for ``gen_ai.input.messages`` and ``gen_ai.output.messages``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentrunner.engine.messages import AssistantMessage, Message, ToolCall, UserMessage

__all__ = ["assistant_message", "conversation_message", "user_message"]


def user_message(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def assistant_message(text: str, calls: Sequence[ToolCall], finish_reason: str) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "content": text}] if text else []
    parts += [
        {"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments} for c in calls
    ]
    return {"role": "assistant", "parts": parts, "finish_reason": finish_reason}


def conversation_message(message: Message) -> dict[str, Any]:
    """One message of a request's conversation."""
    if isinstance(message, UserMessage):
        return user_message(message.content)
    if isinstance(message, AssistantMessage):
        shaped = assistant_message(message.text, message.tool_calls, "")
        del shaped["finish_reason"]
        return shaped
    return {
        "role": "tool",
        "parts": [
            {"type": "tool_call_response", "id": message.call_id, "response": message.content}
        ],
    }
