"""Keeping a conversation sendable: every tool call answered, the window starting cleanly, and
what a model is sent being only what was said (DESIGN decision 11)."""

from __future__ import annotations

from collections.abc import Sequence

from agentrunner.engine.messages import AssistantMessage, Message, ToolResult, UserMessage

__all__ = ["CRASHED", "CUT_NOTE", "missing_results", "stable_tail", "window"]

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


def stable_tail(recent: Sequence[Message], last_seq: int, limit: int) -> list[Message]:
    """The part of a thread's last ``limit`` messages (``recent``, oldest first, ``last_seq``
    the thread's last sequence number) that is sent: all of a thread that fits, and of a longer
    one the messages after a cut that moves in steps of half the limit — between half the
    limit and the limit of them — not with every message. A window sliding on by a turn each
    turn would change the start of every request and lose the provider's prompt cache each
    time; this one keeps its start for many turns. (Sequence numbers are counted as
    contiguous; a gap only moves where the steps fall.)"""
    if last_seq <= limit:
        return list(recent)
    step = max(1, limit // 2)
    cut = -(-(last_seq - limit) // step) * step  # the first step at or past the oldest allowed
    return list(recent[-(last_seq - cut) :])


def window(history: Sequence[Message]) -> list[Message]:
    """A thread's recent messages as a model is sent them.

    Leading messages are dropped until the first user message, so a window cut from a long
    thread never starts with a tool result whose call was cut off. A turn that was interrupted
    is sent as what it said, with ``CUT_NOTE`` where it stopped — or not at all when it said
    nothing and did nothing. Notes that earlier versions stored as assistant text —
    ``(error: …)``, ``(stopped by user)`` — are left out: errors are for people, not models.
    """
    start = next((i for i, m in enumerate(history) if isinstance(m, UserMessage)), len(history))
    out: list[Message] = []
    for message in history[start:]:
        if isinstance(message, AssistantMessage):
            if message.interrupted:
                cut = _cut(message, out[-1] if out else None)
                if cut is not None:
                    out.append(cut)
                continue
            if _legacy_note(message):
                continue
        out.append(message)
    return out


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
