"""A company job's log as lines for a page: its events and its delegations', in the order they
happened (``company.jobs.replay``), said as ``agentrunner logs`` prints them — the root agent's
answer as text, its tool calls and their results, a delegated agent's tool use and answer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentrunner.events import child_of

__all__ = ["LogLine", "LogLines"]

_SHORT = 160


@dataclass(slots=True)
class LogLine:
    """``kind``: ``text`` (the root's words), ``call``, ``result``, ``error`` (a result the
    model was told is an error), ``child`` (a delegation's step), ``told`` (a tool's output
    for the person), ``warning``, ``compacted``."""

    kind: str
    text: str
    agent: str | None = None  # a delegated agent's id; None: the job's own agent
    depth: int = 0
    detail: str | None = None  # more of it, folded on the page


class LogLines:
    """A ``replay`` sink that keeps the lines."""

    def __init__(self) -> None:
        self.lines: list[LogLine] = []

    def __call__(self, kind: str, data: Any) -> None:
        child = child_of(data)
        told = _told(kind, data)
        if told is not None:
            agent, depth = child or (None, 0)
            self.lines.append(LogLine("told", told, agent, depth))
            return
        if child is not None:
            agent, depth = child
            if kind == "agent.tool_call":
                self.lines.append(LogLine("child", f"→ {data['name']}", agent, depth))
            elif kind == "agent.message":
                self.lines.append(
                    LogLine("child", "answered", agent, depth, detail=str(data.get("text", "")))
                )
            return
        match kind:
            case "agent.token":
                last = self.lines[-1] if self.lines else None
                if last is not None and last.kind == "text":
                    last.text += str(data["token"])
                else:
                    self.lines.append(LogLine("text", str(data["token"])))
            case "agent.tool_call":
                args = json.dumps(data.get("input"), ensure_ascii=False)
                said = f"→ {data['name']} {_short(args)}"
                self.lines.append(LogLine("call", said, detail=_long(args)))
            case "agent.tool_result":
                output = str(data.get("output", data.get("output_summary", "")))
                line = LogLine(
                    "error" if data.get("is_error") else "result",
                    f"{'✗' if data.get('is_error') else '←'} {_short(output)}",
                    detail=_long(output),
                )
                self.lines.append(line)
            case "model.attempt_failed":
                then = "retrying or failing over" if data.get("failover") else "not retried"
                self.lines.append(
                    LogLine("warning", f"! {data['model']}: {data['error_code']} — {then}")
                )
            case "thread.compacted":
                self.lines.append(
                    LogLine(
                        "compacted",
                        f"… {data['messages']} earlier messages summarized by {data['model']}",
                    )
                )


def _short(text: str) -> str:
    return text if len(text) <= _SHORT else text[:_SHORT] + "…"


def _long(text: str) -> str | None:
    """All of ``text`` where its line shows only the beginning."""
    return text if len(text) > _SHORT else None


def _told(kind: str, data: Any) -> str | None:
    match kind:
        case "agent.notify":
            return f"🔔 {data['message']}"
        case "agent.file":
            caption = f" — {data['caption']}" if data.get("caption") else ""
            return f"📎 file sent: {data['path']}{caption}"
        case "agent.note_shared":
            message = f" — {data['message']}" if data.get("message") else ""
            return f"📝 note shared: {data['title']} ({data['slug']}){message}"
    return None
