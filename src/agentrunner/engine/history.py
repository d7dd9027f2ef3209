"""Keeping a conversation sendable: every tool call answered, the window starting cleanly."""

from __future__ import annotations

from collections.abc import Sequence

from agentrunner.engine.messages import AssistantMessage, Message, ToolResult, UserMessage

__all__ = ["CRASHED", "missing_results", "window"]

CRASHED = "interrupted: the run stopped before this tool call finished (it was not run again)"


def missing_results(history: Sequence[Message], reason: str = CRASHED) -> list[ToolResult]:
    """Error results for the tool calls of the last assistant message that have none — what a
    run that died mid-tool-call leaves behind. Providers reject such a history; answering the
    calls (instead of running them again) makes it sendable."""
    answered: set[str] = set()
    for message in reversed(history):
        if isinstance(message, ToolResult):
            answered.add(message.call_id)
        elif isinstance(message, AssistantMessage):
            return [
                ToolResult(call.id, call.name, reason, is_error=True)
                for call in message.tool_calls
                if call.id not in answered
            ]
        else:
            return []
    return []


def window(history: Sequence[Message]) -> list[Message]:
    """Drop leading messages until the first user message, so a window cut from a long thread
    never starts with a tool result whose call was cut off."""
    for index, message in enumerate(history):
        if isinstance(message, UserMessage):
            return list(history[index:])
    return []
