"""A task's conversation (seed 004): the messages before its own, each a person's (``user``) or
the agent's (``assistant``), as a caller writes them — ``[{"role": "user", "content": "…"}, …]``
— read into the engine's messages, and as its cache key holds them: whole, in order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentrunner.core.inputs import check_text
from agentrunner.engine.messages import AssistantMessage, UserMessage
from agentrunner.errors import AgentRunnerError, ErrorCode

__all__ = ["MAX_MESSAGES", "conversation", "conversation_key"]

MAX_MESSAGES = 200  # a conversation longer is a thread's: open one and run the agent on it
_ROLES = ("user", "assistant")


def conversation(value: Any) -> tuple[UserMessage | AssistantMessage, ...]:
    """``value`` (None: none) read as a conversation; ``validation`` naming the first message
    that is not one (``conversation[2].role``), with what it may be."""
    if value is None:
        return ()
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise _invalid("conversation", "must be a list of messages")
    if len(value) > MAX_MESSAGES:
        raise _invalid("conversation", f"holds {len(value)} messages; at most {MAX_MESSAGES}")
    read: list[UserMessage | AssistantMessage] = []
    for n, item in enumerate(value):
        where = f"conversation[{n}]"
        if not isinstance(item, Mapping):
            raise _invalid(where, "must be an object with a role and a content")
        unknown = sorted(set(item) - {"role", "content"})
        if unknown:
            raise _invalid(f"{where}.{unknown[0]}", "is not a message's field (role, content)")
        role, content = item.get("role"), item.get("content")
        if role not in _ROLES:
            raise _invalid(f"{where}.role", f"must be 'user' or 'assistant', got {role!r}")
        if not isinstance(content, str) or not content.strip():
            raise _invalid(f"{where}.content", "must be a text that is not empty")
        check_text(content, f"{where}.content", max_chars=None)
        read.append(UserMessage(content) if role == "user" else AssistantMessage(text=content))
    return tuple(read)


def conversation_key(messages: Sequence[UserMessage | AssistantMessage]) -> list[list[str]]:
    """What a task's cache key holds of its conversation: each message's role and text."""
    return [[m.role, m.content if isinstance(m, UserMessage) else m.text] for m in messages]


def _invalid(field: str, problem: str) -> AgentRunnerError:
    return AgentRunnerError(
        ErrorCode.VALIDATION,
        f"{field} {problem}",
        hint='A conversation is [{"role": "user", "content": "…"}, {"role": "assistant", …}], '
        "the messages before the task's own.",
        details={"field": field},
    )
