"""What a run's events mean for its record: the rows beside the events that ``RunLog`` writes.

A ``step.started`` begins a step; each ``cost.updated`` is a cost row (and the agent's day's
total) and adds to its step's usage, cost and attempts, and the attempt that succeeded completes
the step; a tool call, its result and the final answer are run messages of the step. A run that
ends inside a step fails it. A run that answers in a channel has its activity events
(``agent.working``, ``agent.failed``, ``agent.idle``) written to the channel's feed too, and
each ``approval.requested`` of its pause as a notice in the conversation. Each row
is added to the batch of the event that implies it, so it commits in the same transaction as the
event.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from agentrunner.core.ids import new_id
from agentrunner.events import (
    ACTIVITY,
    ApprovalRequested,
    CostUpdated,
    EventData,
    EventSink,
    typed,
)
from agentrunner.store.changes import channel_key
from agentrunner.store.channels import ChannelMessage
from agentrunner.store.records import to_json
from agentrunner.store.run_log import RunLog
from agentrunner.store.store import Store

__all__ = ["ChannelRun", "RunRows"]

# the events that carry something for a person, delivered where people read when nobody watches
_FOR_PEOPLE = frozenset(("agent.notify", "agent.file", "agent.note_shared", "agent.failed"))


@dataclass(frozen=True, slots=True)
class ChannelRun:
    """Where a run answers in a channel: its activity events go to the channel's feed too, for
    the people following the channel."""

    channel_id: str
    message_id: str  # the message it answers
    thread: str | None  # the first message of that message's thread; None: top level
    depth: int = 0  # in the chain of replies, its own messages' (the message's, plus one)


class RunRows:
    """A run's log (``log``), and the reader of its events that adds the rows they imply."""

    def __init__(
        self,
        store: Store,
        run_id: str,
        agent_id: str,
        forward: EventSink | None = None,
        channel: ChannelRun | None = None,
        changed: Sequence[str] = (),
        notices: str | None = None,
    ) -> None:
        self.log = RunLog(store, run_id, agent_id, forward, derive=self.derive, changed=changed)
        self._store = store
        self._channel = channel
        # where what it has for people goes while nobody watches it: its channel, else (a
        # background run's) the channel it was given
        self._notices = channel.channel_id if channel is not None else notices
        self._usage: dict[str, int] = {}  # the step in progress': summed over its attempts
        self._cost: int | None = 0  # None once an attempt's cost is unknown
        self._attempts: list[dict[str, Any]] = []

    def derive(self, kind: str, data: EventData, now: float) -> None:
        log = self.log
        if self._channel is not None:  # its activity and its requests go to its channel too
            if kind in ACTIVITY:
                self._to_channel(self._channel, kind, data, now)
            elif kind == "approval.requested":
                self._waiting_notice(self._channel, cast("ApprovalRequested", data), now)
        if self._notices is not None and kind in _FOR_PEOPLE:
            self._for_people(self._notices, kind, data, now)
        match typed(kind, data):
            case ("step.started", step):
                self._usage, self._cost, self._attempts = {}, 0, []
                log.start_step(step["step"], step["model"], now)
            case ("cost.updated", cost):
                self._charge(cost, now)
            case ("agent.tool_call", call):
                log.run_message(
                    "tool_call_message",
                    to_json(call["input"]) or "{}",
                    now,
                    tool_name=call["name"],
                    tool_input=call["input"],
                    tool_call_id=call["call_id"],
                )
            case ("agent.tool_result", result):
                log.run_message(
                    "tool_return_message",
                    result["output_summary"],
                    now,
                    tool_name=result["name"],
                    tool_call_id=result["call_id"],
                    is_error=result["is_error"],
                )
            case ("agent.message", message):
                log.run_message("assistant_message", message["text"], now)

    def _to_channel(self, channel: ChannelRun, kind: str, data: EventData, now: float) -> None:
        payload = {**data, "message_id": channel.message_id, "thread": channel.thread}
        self.log.write(
            [
                self._store.channels.activity_op(
                    channel.channel_id, new_id("a_"), self.log.run_id, kind, payload, now
                )
            ],
            changed=channel_key(channel.channel_id),
        )

    def _waiting_notice(self, channel: ChannelRun, asked: ApprovalRequested, now: float) -> None:
        """A channel run that waits for a person: a notice to the people in the conversation
        naming the agent, the tool and the command that decides — written with the pause."""
        agent, approval_id = asked["agent_id"], asked["approval_id"]
        if asked["kind"] == "tool":
            text = (
                f"{agent} waits for a person's decision to run {asked['tool']}: agentrunner "
                f"approve {approval_id} (or agentrunner deny {approval_id} --reason …)"
            )
        else:
            text = f"{agent} waits for a person's answer ({approval_id}): agentrunner approvals"
        notice = ChannelMessage(
            channel.channel_id,
            new_id("m_"),
            channel.thread,
            agent,
            "notice",
            text,
            channel.depth,
            self.log.run_id,
            now,
        )
        self.log.write(
            [self._store.channels.message_op(notice)], changed=channel_key(channel.channel_id)
        )

    def _for_people(self, channel_id: str, kind: str, data: EventData, now: float) -> None:
        """What a run has for people — ``notify_user``, a file, a shared note, and (a run
        outside a channel, whose channel service says nothing) its failure — as a notice
        where they read, written with its event: no one may be watching the run."""
        agent = str(data.get("agent_id") or self.log.agent_id)
        match typed(kind, data):
            case ("agent.notify", notify):
                text = f"{agent} notifies: {notify['message']}"
            case ("agent.file", sent):
                caption = f": {sent['caption']}" if sent["caption"] else ""
                text = f"{agent} sent a file, {sent['path']}{caption}"
            case ("agent.note_shared", note):
                text = f"{agent} shared a note, {note['title']}:\n{note['body']}"
            case ("agent.failed", failed) if self._channel is None:
                text = f"{agent} failed ({failed['error_code']}): {failed['message']}"
            case _:
                return
        channel = self._channel
        notice = ChannelMessage(
            channel_id,
            new_id("m_"),
            channel.thread if channel is not None else None,
            agent,
            "notice",
            text,
            channel.depth if channel is not None else 1,
            self.log.run_id,
            now,
        )
        self.log.write([self._store.channels.message_op(notice)], changed=channel_key(channel_id))

    def charge(self, cost: CostUpdated, now: float) -> dict[str, int]:
        """The cost row of a request's attempt (its ``cost.updated``); its usage. A request
        made for the run after its turn (``side_requests``) is recorded by this alone."""
        usage = {
            "input_tokens": cost["input_tokens"],
            "output_tokens": cost["output_tokens"],
            "cache_read_tokens": cost["cache_read_tokens"],
            "cache_write_tokens": cost["cache_write_tokens"],
        }
        self.log.cost(cost["model"], usage, cost["cost_micros"], cost["estimated"], now)
        return usage

    def _charge(self, cost: CostUpdated, now: float) -> None:
        """A cost row, and the attempt counted in its step (completed by the one that
        succeeded)."""
        usage = self.charge(cost, now)
        micros, model = cost["cost_micros"], cost["model"]
        for key, value in usage.items():
            self._usage[key] = self._usage.get(key, 0) + value
        self._cost = None if micros is None or self._cost is None else self._cost + micros
        self._attempts.append(
            {"model": model, "attempt": cost["attempt"], "outcome": cost["outcome"]}
        )
        if cost["outcome"] == "ok" and self.log.step_id is not None:
            self.log.finish_step("completed", model, self._usage, self._cost, self._attempts, now)

    def fail_step(self) -> None:
        """Mark the step in progress failed (the run ended inside it)."""
        if self.log.step_id is None:
            return
        model = self._attempts[-1]["model"] if self._attempts else "unknown"
        self.log.finish_step("failed", model, self._usage, self._cost, self._attempts, time.time())
