"""Keeping a conversation sendable: every tool call answered, the window starting cleanly, and
what a model is sent being only what was said (DESIGN decision 11); which of a thread's newest
turns fit a number of tokens."""

from __future__ import annotations

from collections.abc import Sequence

from agentrunner.engine.budget import estimate_message_tokens
from agentrunner.engine.messages import AssistantMessage, Message, ToolResult, UserMessage

__all__ = ["CRASHED", "CUT_NOTE", "missing_results", "newest_within", "sendable", "window"]

CRASHED = "interrupted: the run stopped before this tool call finished (it was not run again)"
# What a model reads where one of its turns was cut off, instead of the error that cut it: enough
# not to repeat a half-done action, nothing that reads as an instruction.
CUT_NOTE = "[This turn was interrupted before it finished.]"


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
    """A thread's recent messages as a model is sent them.

    Leading messages are dropped until the first user message, so a window cut from a long
    thread never starts with a tool result whose call was cut off. A turn that was interrupted
    is sent as what it said, with ``CUT_NOTE`` where it stopped — or not at all when it said
    nothing and did nothing. A message no model was sent when it was said (``unsent``: its run
    was refused before its first request) is not sent later either. Notes that earlier
    versions stored as assistant text — ``(error: …)``, ``(stopped by user)`` — are left out:
    errors are for people, not models.
    """
    return [message for _, message in sendable(list(enumerate(history)))]


def sendable(history: Sequence[tuple[int, Message]]) -> list[tuple[int, Message]]:
    """``window`` over messages paired with their sequence numbers, each message sent paired
    with the number of the one it was made from (what a summary of them is counted through)."""
    start = next(
        (i for i, (_, m) in enumerate(history) if isinstance(m, UserMessage)), len(history)
    )
    out: list[tuple[int, Message]] = []
    for seq, message in history[start:]:
        if isinstance(message, UserMessage) and message.unsent:
            continue
        if isinstance(message, AssistantMessage):
            if message.interrupted:
                cut = _cut(message, out[-1][1] if out else None)
                if cut is not None:
                    out.append((seq, cut))
                continue
            if _legacy_note(message):
                continue
        out.append((seq, message))
    return out


def newest_within(history: Sequence[Message], tokens: int) -> int:
    """Where the newest turns of ``history`` that fit ``tokens`` (by ``estimate_message_tokens``)
    begin: the index of a user message, so a tool call is never sent without its result nor a
    result without its call; ``len(history)`` when not even the newest turn fits."""
    start, used = len(history), 0
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        used += estimate_message_tokens(message)
        if used > tokens:
            break
        if isinstance(message, UserMessage):
            start = index
    return start


def _cut(message: AssistantMessage, before: Message | None) -> AssistantMessage | None:
    if message.text or message.tool_calls:
        text = f"{message.text}\n\n{CUT_NOTE}" if message.text else CUT_NOTE
        return AssistantMessage(
            text, message.tool_calls, message.thinking, message.model, message.provider
        )
    if isinstance(before, ToolResult):  # tools ran: say the turn stopped after them
        return AssistantMessage(CUT_NOTE, model=message.model, provider=message.provider)
    return None  # nothing was said or done since the user spoke (or the answer stands)


def _legacy_note(message: AssistantMessage) -> bool:
    if message.model is not None or message.tool_calls:
        return False
    text = message.text
    return text == "(stopped by user)" or (text.startswith("(error: ") and text.endswith(")"))
