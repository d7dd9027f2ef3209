"""``AgentRunnerCallbacks`` (seed 000): the runner's upward interface for in-process callers.

Events are the canonical record (DESIGN decision 4); the engine callbacks here are an adapter
over them. Capability callbacks are enriched with the agent and thread ids before they reach the
caller. A callback that raises is logged and never breaks the run.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.events import EventData, EventSink, from_child, typed

__all__ = [
    "AgentRunnerCallbacks",
    "MessageHandler",
    "MessageHandlers",
    "RunEvent",
    "child_callbacks",
    "event_adapter",
    "safely",
    "tee",
]

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
    the parent captures the answer — and ``on_error``: a child's failure is its caller's tool
    result, which the caller may recover from; if it does not, the caller's own run fails, and
    that is the error the caller of ``run_agent`` hears. Events say which agent they come
    from."""
    parent_on_event = callbacks.on_event
    on_event = None
    if parent_on_event is not None:

        def on_event(kind: str, data: EventData) -> None:
            parent_on_event(kind, from_child(data, agent_id, depth))

    return replace(callbacks, on_response=None, on_error=None, on_event=on_event)


def _summary(name: str, arguments: dict[str, Any]) -> str:
    text = json.dumps(arguments, ensure_ascii=False, separators=(", ", ": "))
    return f"{name}({text[1:-1][:100]})"


def tee(first: EventSink | None, second: EventSink | None) -> EventSink | None:
    """One sink that gives each event to both (either may be None: no work for it)."""
    if first is None or second is None:
        return first or second

    def both(kind: str, data: EventData) -> None:
        first(kind, data)
        second(kind, data)

    return both


@dataclass(frozen=True, slots=True)
class RunEvent:
    """What a message handler receives: one event of one run. ``data`` is the event's shape
    (``agentrunner.events``), shared with the run's other readers: read it, never change it."""

    run_id: str
    agent_id: str
    thread_id: str | None  # None: a task, a run on no thread
    kind: str
    data: EventData


MessageHandler = Callable[[RunEvent], object]  # what it returns is ignored


class MessageHandlers:
    """Named taps on every event of every run of a runner (seed 002's message handlers).

    A handler is a plain function called on the run's event loop as each event happens, deltas
    included, so it must be quick: hand slow work (a network call) to a queue or thread of its
    own. A handler that raises is logged (once per run) and never breaks the run; nor do the
    other handlers miss the event.
    """

    def __init__(self) -> None:
        self._handlers: dict[str, MessageHandler] = {}

    def register(self, name: str, handler: MessageHandler) -> None:
        if name in self._handlers:
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"message handler '{name}' is already registered",
                hint="Register each handler once (e.g. at import time of its module).",
            )
        self._handlers[name] = handler

    def items(self) -> list[tuple[str, MessageHandler]]:
        return list(self._handlers.items())

    def __len__(self) -> int:
        return len(self._handlers)

    def sink(self, run_id: str, agent_id: str, thread_id: str | None) -> EventSink | None:
        """The sink that gives one run's events to every handler; None without handlers, so a
        runner without any does no work per event."""
        if not self._handlers:
            return None
        handlers = list(self._handlers.items())
        failed: set[str] = set()

        def tap(kind: str, data: EventData) -> None:
            event = RunEvent(run_id, agent_id, thread_id, kind, data)
            for name, handler in handlers:
                try:
                    result = handler(event)
                    if inspect.isawaitable(result):
                        close = getattr(result, "close", None)
                        if close is not None:
                            close()  # never awaited: not left to warn at garbage collection
                        raise TypeError("a message handler must be a plain function, not async")
                except Exception:
                    if name not in failed:  # once per run: deltas would repeat it hundreds of times
                        failed.add(name)
                        log.warning(
                            "message handler %r failed on %s of run %s; the run goes on",
                            name,
                            kind,
                            run_id,
                            exc_info=True,
                        )

        return tap
