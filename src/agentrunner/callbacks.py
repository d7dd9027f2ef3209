"""``AgentRunnerCallbacks`` (seed 000): the runner's upward interface for in-process callers.

Events are the canonical record (DESIGN decision 4); the engine callbacks here are an adapter
over them. Capability callbacks are enriched with the agent and thread ids before they reach the
caller. A callback that raises is logged and never breaks the run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from agentrunner.events import EventData, EventSink, from_child, typed

__all__ = ["AgentRunnerCallbacks", "child_callbacks", "event_adapter", "safely"]

log = logging.getLogger("agentrunner.callbacks")


@dataclass(slots=True)
class AgentRunnerCallbacks:
    # Engine passthrough
    on_thinking: Callable[[], None] | None = None
    on_assistant_message: Callable[[str], None] | None = None
    on_tool_use: Callable[[str, dict[str, Any], str], None] | None = None
    on_tool_use_summary: Callable[[str], None] | None = None
    on_event: EventSink | None = None
    # Runner level
    on_response: Callable[[str, str, str], None] | None = None
    on_error: Callable[[str, str, str], None] | None = None
    # Capability callbacks, enriched with (agent_id, thread_id)
    on_file_send: Callable[[str, str, str, str | None, str], None] | None = None
    on_share_note: Callable[[str, str, str, str, str | None], None] | None = None
    on_pin_change: Callable[[str], None] | None = None
    on_notify_user: Callable[[str, str, str], None] | None = None


def safely(callback: Callable[..., Any] | None, *args: Any) -> None:
    if callback is None:
        return
    try:
        callback(*args)
    except Exception:
        log.warning(
            "callback %s raised; the run goes on",
            getattr(callback, "__name__", callback),
            exc_info=True,
        )


def event_adapter(
    callbacks: AgentRunnerCallbacks, agent_id: str = "", thread_id: str = ""
) -> EventSink | None:
    """An event sink that drives the callbacks — the engine's, and the capabilities' (enriched
    with the run's agent and thread); None when no callback wants events."""
    if (
        callbacks.on_thinking is None
        and callbacks.on_tool_use is None
        and callbacks.on_tool_use_summary is None
        and callbacks.on_assistant_message is None
        and callbacks.on_event is None
        and callbacks.on_notify_user is None
        and callbacks.on_file_send is None
        and callbacks.on_share_note is None
        and callbacks.on_pin_change is None
    ):
        return None
    thinking = False

    def forward(kind: str, data: EventData) -> None:
        nonlocal thinking
        match typed(kind, data):
            case ("agent.token", _):
                pass  # the most frequent, and only for on_event
            case ("agent.thinking", _):
                if not thinking:
                    thinking = True
                    safely(callbacks.on_thinking)
            case ("step.started", _):
                thinking = False
            case ("agent.tool_call", call) if callbacks.on_tool_use is not None:
                name, arguments = call["name"], call["input"]
                safely(callbacks.on_tool_use, name, arguments, _summary(name, arguments))
            case ("agent.tool_result", result):
                status = "failed" if result["is_error"] else "done"
                safely(
                    callbacks.on_tool_use_summary,
                    f"{result['name']} {status}: {result['output_summary'][:120]}",
                )
            case ("agent.message", message):
                safely(callbacks.on_assistant_message, message["text"])
            case ("agent.notify", notify):
                safely(callbacks.on_notify_user, agent_id, thread_id, notify["message"])
            case ("agent.file", file):
                safely(
                    callbacks.on_file_send,
                    agent_id,
                    thread_id,
                    file["path"],
                    file["caption"],
                    file["kind"],
                )
            case ("agent.note_shared", note):
                safely(
                    callbacks.on_share_note,
                    agent_id,
                    thread_id,
                    note["title"],
                    note["slug"],
                    note["message"],
                )
            case ("agent.memory_updated", _):
                safely(callbacks.on_pin_change, agent_id)
        safely(callbacks.on_event, kind, data)

    return forward


def child_callbacks(
    callbacks: AgentRunnerCallbacks, agent_id: str, depth: int
) -> AgentRunnerCallbacks:
    """A child run's callbacks (seed 000): forwarded from the parent, except ``on_response`` —
    the parent captures the answer. Events say which agent they come from."""
    parent_on_event = callbacks.on_event
    on_event = None
    if parent_on_event is not None:

        def on_event(kind: str, data: EventData) -> None:
            parent_on_event(kind, from_child(data, agent_id, depth))

    return replace(callbacks, on_response=None, on_event=on_event)


def _summary(name: str, arguments: dict[str, Any]) -> str:
    text = json.dumps(arguments, ensure_ascii=False, separators=(", ", ": "))
    return f"{name}({text[1:-1][:100]})"
