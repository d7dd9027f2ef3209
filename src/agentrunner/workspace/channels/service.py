"""Channels as agentrunner runs them: posting routes a message to the agents that should hear
it, queueing a run in each one's mailbox; a worker serves a queued run by running the agent with
the channel's recent conversation and two tools — ``send_message`` and ``do_nothing``.

An agent speaks in a channel through ``send_message`` — mid-run, in a thread, or more than
once — and its final plain-text answer is posted for it when it used neither tool, since models
do not always call one (DESIGN decision 2); silence happens only by ``do_nothing``. Whatever an
agent says is posted and routed again, one hop deeper; a cascade of agents replying to agents
stops at the configured chain depth. A run that fails or is cancelled leaves a notice in the
conversation naming the agent and the error code: for people, never routed, never in a
transcript.

A person's message may carry files (images, PDFs: docs/attachments.md); they are kept with the
post, and each agent it reaches is sent them with it. An agent's own messages carry none.
"""

from __future__ import annotations

import difflib
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from agentrunner.config import DEFAULT_MAX_QUEUE
from agentrunner.core.ids import new_id
from agentrunner.core.inputs import check_id, check_text, invalid
from agentrunner.engine.messages import Attachment
from agentrunner.engine.tools import Tool, ToolContext, ToolRetry
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.run.idempotency import IdempotencyKey, first_result
from agentrunner.store.channels import Channel, ChannelMessage
from agentrunner.store.mailbox import NewRun
from agentrunner.workspace.channels.resolver import resolve_targets
from agentrunner.workspace.queueing import queue_runs

if TYPE_CHECKING:
    from agentrunner.run.request import RunResult
    from agentrunner.run.runner import AgentRunner
    from agentrunner.store.mailbox import ClaimedRun

__all__ = ["CHANNEL_TOOLS", "ChannelService", "Posted"]

log = logging.getLogger("agentrunner.channels")

TRANSCRIPT = 20
DEFAULT_CHAIN_DEPTH = 3
SEND_MESSAGE, DO_NOTHING = "send_message", "do_nothing"
CHANNEL_TOOLS = (SEND_MESSAGE, DO_NOTHING)  # the tools a run in a channel is given


@dataclass(frozen=True, slots=True)
class Posted:
    message: ChannelMessage
    run_ids: list[str]
    repeated: bool = False  # a repeat of an idempotent post: nothing new was written
    # telemetry on: the trace its runs were queued in, which a caller waiting for them joins
    trace_context: Mapping[str, str] | None = None


class ChannelService:
    def __init__(
        self,
        runner: AgentRunner,
        *,
        chain_depth: int = DEFAULT_CHAIN_DEPTH,
        max_queue: int = DEFAULT_MAX_QUEUE,
    ) -> None:
        self.runner = runner
        self.app = runner.app
        self.store = runner.app.store
        self.chain_depth = chain_depth
        self.max_queue = max_queue

    # -- channels -----------------------------------------------------------------------------

    async def create(
        self, name: str, *, private: bool = False, members: Sequence[str] = ()
    ) -> Channel:
        """Create ``#name`` (idempotent) and add ``members`` (agent ids, or people)."""
        name = name.lstrip("#")
        existing = await self.store.channels.by_name(name)
        typed = [(m, self._kind_of(m)) for m in members]
        if existing is None:
            await self.store.channels.create(
                new_id("ch_"), name, "private" if private else "public", typed
            )
        elif typed:
            await self.store.channels.add_members(existing.id, typed)
        channel = await self.store.channels.by_name(name)
        assert channel is not None
        return channel

    async def channel(self, name: str) -> Channel:
        check_id(name, "channel")
        channel = await self.store.channels.by_name(name.lstrip("#"))
        if channel is None:
            names = [c["name"] for c in await self.store.channels.all() if c["kind"] != "dm"]
            close = difflib.get_close_matches(name.lstrip("#"), names, n=1, cutoff=0.6)
            raise AgentRunnerError(
                ErrorCode.NOT_FOUND,
                f"no channel '#{name.lstrip('#')}'",
                hint=f"Did you mean '#{close[0]}'?"
                if close
                else "Create it with `agentrunner channels create NAME --member AGENT …`.",
                details={"not_found": "channel"},
            )
        return channel

    async def dm_channel(self, agent_id: str, person: str | None = None) -> Channel:
        """The DM between ``agent_id`` and ``person`` (default: the project's person), opened
        if new. ``validation`` for a person's name that is not one (``person``)."""
        person = self.person(person)
        self.app.agents.runnable(agent_id)  # a disabled agent is no one to write to
        a, b = sorted((agent_id, person))
        return await self._ensure(
            f"dm:{a}:{b}", "dm", [(agent_id, "agent"), (person, self._kind_of(person))]
        )

    async def _ensure(self, name: str, kind: str, members: list[tuple[str, str]]) -> Channel:
        channel = await self.store.channels.by_name(name)
        if channel is None:
            await self.store.channels.create(new_id("ch_"), name, kind, members)
            channel = await self.store.channels.by_name(name)
        assert channel is not None
        return channel

    def _kind_of(self, member: str) -> str:
        return "agent" if member in self.app.agents else "person"

    def person(self, sender: str | None) -> str:
        """Who posts from outside a run: ``sender``, else the project's person (``[defaults]
        person``). ``validation`` naming ``sender`` for a name that is no name, and for the id
        of one of the project's agents, in any case (``CEO`` reads as ``ceo`` in a transcript):
        an agent's messages come only from its runs, so no interface may post as one (its
        reports would take the words for their manager's)."""
        name = self.app.config.person if sender is None else sender
        check_id(name, "sender")
        folded = name.casefold()
        agent = next((a for a in self.app.agents.ids() if a.casefold() == folded), None)
        if agent is not None:
            whose = " ([defaults] person in agentrunner.toml)" if sender is None else ""
            raise invalid(
                "sender",
                f"'{name}'{whose} is the id of an agent"
                + ("" if agent == name else f" ('{agent}')")
                + ": a person cannot post as one",
                "Post under your own name; an agent speaks only from its runs "
                "(send_message, or its answer).",
            )
        return name

    # -- posting ------------------------------------------------------------------------------

    async def _thread_root(self, channel: Channel, message_id: str) -> str:
        """The root of the thread that ``message_id`` is in: a reply to a reply joins the
        same thread. ``not_found`` when the channel has no such message."""
        replied_to = await self.store.channels.message(channel.id, message_id)
        if replied_to is None:
            raise AgentRunnerError(
                ErrorCode.NOT_FOUND,
                f"#{channel.name} has no message '{message_id}' to reply to",
                hint=f"See its message ids with `agentrunner channels show {channel.name}`.",
            )
        return replied_to.thread_root_id or replied_to.id

    async def post(
        self,
        channel: Channel,
        sender: str | None,
        text: str,
        *,
        thread_root: str | None = None,
        idempotency: IdempotencyKey | None = None,
        attachments: Sequence[Attachment] = (),
    ) -> Posted:
        """A person's post: ``text`` from ``sender`` (``None``: the project's person), and a
        run queued for every agent that should hear it, in one transaction (nothing
        half-written); wakes idle workers. ``attachments``: the message's files (each read by
        ``runner.attach``, or a reference to a kept one), kept with it and sent to every agent
        it reaches; ``attachment_refused`` past a message's bounds, before anything is
        written. ``validation`` for a bad text or reply id, and for a sender that is no
        person's name (``person``: an agent's id included); ``queue_full`` when it would queue
        a run past an agent's bound; a repeat of ``idempotency`` returns the first post. With
        telemetry on, the post is an ``enqueue`` span whose trace its runs keep."""
        files = self.runner.check_attachments(attachments)
        return await self._send(
            channel, self.person(sender), text, thread_root, 0, None, idempotency, files
        )

    async def _speak(
        self,
        channel: Channel,
        agent_id: str,
        text: str,
        *,
        run_id: str,
        thread_root: str | None,
        depth: int,
    ) -> Posted:
        """An agent's message, from its run ``run_id`` (its ``send_message``, or its plain
        answer delivered for it): the only way an agent's words enter a channel. Bounded by
        the chain depth rather than the agents' queues; with telemetry on, its ``enqueue`` span
        is under the tool call."""
        return await self._send(channel, agent_id, text, thread_root, depth, run_id, None, ())

    async def _send(
        self,
        channel: Channel,
        sender: str,
        text: str,
        thread_root: str | None,
        depth: int,
        run_id: str | None,
        idempotency: IdempotencyKey | None,
        files: tuple[Attachment, ...],
    ) -> Posted:
        """The post, a person's or an agent's, inside its ``enqueue`` span (telemetry on)."""
        tracing = self.app.engine.tracing
        with tracing.enqueue(channel.label) as (span, carrier):
            posted, agents = await self._post(
                channel, sender, text, thread_root, depth, run_id, idempotency, carrier, files
            )
            tracing.enqueued(span, agents, posted.run_ids, repeated=posted.repeated)
            return replace(posted, trace_context=carrier)

    async def _post(
        self,
        channel: Channel,
        sender: str,
        text: str,
        thread_root: str | None,
        depth: int,
        run_id: str | None,
        idempotency: IdempotencyKey | None,
        trace_context: Mapping[str, str] | None,
        files: tuple[Attachment, ...],
    ) -> tuple[Posted, list[str]]:
        """The post, and the agents it queued a run for (none for a repeat)."""
        check_id(sender, "sender")
        check_text(text, "text")
        if not text.strip():
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                "the message is empty",
                hint="Say something: the agents who hear it will reply.",
            )
        if thread_root is not None:
            check_id(thread_root, "thread")
        first = await first_result(self.store, idempotency)
        if first is not None:
            return await self._posted(channel, first), []
        members = await self.store.channels.members(channel.id)
        sender_kind = self._kind_of(sender)
        if thread_root is not None:
            thread_root = await self._thread_root(channel, thread_root)
        if channel.kind != "public" and sender not in {m for m, _ in members}:
            raise AgentRunnerError(
                ErrorCode.TOOL_DENIED if sender_kind == "agent" else ErrorCode.VALIDATION,
                f"{sender} is not a member of #{channel.name}",
                hint="Add the member first: `agentrunner channels create NAME --member …`.",
            )
        message = ChannelMessage(
            channel.id,
            new_id("m_"),
            thread_root,
            sender,
            sender_kind,
            text,
            depth,
            run_id,
            time.time(),
            files,
        )
        participants = (
            await self.store.channels.thread_senders(channel.id, thread_root)
            if thread_root
            else None
        )
        targets = resolve_targets(
            kind=channel.kind, members=members, sender=sender, thread_participants=participants
        )
        targets = [t for t in targets if t in self.app.agents and self.app.agents.get(t).enabled]
        runs = [
            NewRun(
                new_id("run_"),
                agent_id,
                f"{agent_id}@{channel.name}",
                {"kind": "channel", "channel": channel.name, "message_id": message.id},
                depth=depth,
                trigger_message_id=message.id,
                channel_id=channel.id,
                dm_conversation_id=channel.id if channel.kind == "dm" else None,
            )
            for agent_id in (targets if depth <= self.chain_depth else ())
        ]
        run_ids = [run.id for run in runs]
        first = await queue_runs(
            self.store,
            runs,
            result={"message_id": message.id, "run_ids": run_ids},
            with_ops=self.store.channels.message_ops(message),
            max_queue=self.max_queue if depth == 0 else None,
            idempotency=idempotency,
            trace_context=trace_context,
        )
        if first is not None:
            return await self._posted(channel, first), []
        return Posted(message.without_bytes(), run_ids), [run.agent_id for run in runs]

    async def _posted(self, channel: Channel, first: dict[str, Any]) -> Posted:
        """The answer to a repeat of an idempotent post: the first post, as it was stored."""
        message = await self.store.channels.message(channel.id, first["message_id"])
        if message is None:
            raise AgentRunnerError(
                ErrorCode.NOT_FOUND,
                f"#{channel.name} no longer has message '{first['message_id']}'",
                hint="The Idempotency-Key names a post to another channel: use a new key.",
            )
        return Posted(message, list(first["run_ids"]), repeated=True)

    # -- serving a queued run -----------------------------------------------------------------

    async def serve(self, claimed: ClaimedRun, *, abort: Any = None) -> RunResult:
        """Run the agent on a queued channel run: its own earlier turns on its thread there
        (bounded as any thread's history is), then what was said in the channel since the
        message its last run answered (at most the last 20 messages, in the user position) and
        the triggering message; it may answer with ``send_message``."""
        from agentrunner.run.request import RunAgentOverrides
        from agentrunner.run.run_rows import ChannelRun

        channel = await self.store.channels.by_id(claimed.channel_id or "")
        trigger = await self.store.channels.message(
            claimed.channel_id or "", claimed.trigger_message_id or ""
        )
        if channel is None or trigger is None:
            raise AgentRunnerError(
                ErrorCode.INTERNAL, f"run {claimed.id} has no channel message to answer"
            )
        agent_id = claimed.agent_id
        thread_id = claimed.thread_id or f"{agent_id}@{channel.name}"
        earlier = await self.store.channels.before(channel.id, trigger.id, TRANSCRIPT)
        # Its own earlier turns here (its tool calls and their results too) are its history;
        # the transcript goes back only to the message its last run answered, which that
        # history holds already, and never past the last TRANSCRIPT messages.
        answered = await self.store.runs.last_trigger(thread_id, claimed.id)
        if answered is not None:
            earlier = [m for m in earlier if m.id > answered]
        spoke: list[str] = []
        tools = self._tools(channel, trigger, agent_id, claimed.id, spoke)
        try:
            result = await self.runner.run_agent(
                agent_id,
                thread_id,
                _transcript(channel, earlier, trigger),
                overrides=RunAgentOverrides(
                    channel_mode=True,
                    channel=ChannelRun(
                        channel.id, trigger.id, trigger.thread_root_id, trigger.depth + 1
                    ),
                    tools=tuple(tools),
                    background=bool(claimed.request.get("background")),  # a schedule's
                ),
                abort=abort,
                run_id=claimed.id,
                attachments=trigger.attachments,  # references: the runner loads their bytes
            )
        except AgentRunnerError as exc:
            await self._notice(
                channel,
                trigger,
                agent_id,
                claimed.id,
                f"could not reply ({exc.code}): {exc.message}",
            )
            raise
        if result.stop_reason == "waiting":  # its notice was written with its pause
            return result
        # served before (it waited for a person, or lost its worker): what it said then counts
        if not spoke and claimed.attempts > 1 and await self._spoke_before(claimed.id):
            spoke.append("before")
        if result.stop_reason == "cancelled":
            await self._notice(channel, trigger, agent_id, claimed.id, "stopped before replying")
        elif not spoke and result.text.strip():  # it answered without the tool: deliver it
            await self._speak(
                channel,
                agent_id,
                result.text.strip(),
                run_id=claimed.id,
                thread_root=trigger.thread_root_id,
                depth=trigger.depth + 1,
            )
        elif not spoke:
            await self.store.runs.set_stop_reason(claimed.id, "no_tool_call")
        return result

    async def _spoke_before(self, run_id: str) -> bool:
        """Whether run ``run_id`` called ``send_message`` or ``do_nothing`` when it was served
        before: an answer it gives now is then not delivered as a message of its own."""
        return any(
            m.message_type == "tool_call_message" and m.tool_name in (SEND_MESSAGE, DO_NOTHING)
            for m in await self.store.runs.messages(run_id)
        )

    async def _notice(
        self, channel: Channel, trigger: ChannelMessage, agent_id: str, run_id: str, text: str
    ) -> None:
        """Tell the people in the conversation what became of an agent's reply."""
        notice = ChannelMessage(
            channel.id,
            new_id("m_"),
            trigger.thread_root_id,
            agent_id,
            "notice",
            f"{agent_id} {text}",
            trigger.depth + 1,
            run_id,
            time.time(),
        )
        await self.store.batch(self.store.channels.message_ops(notice))

    def _tools(
        self,
        channel: Channel,
        trigger: ChannelMessage,
        agent_id: str,
        run_id: str,
        spoke: list[str],
    ) -> list[Tool]:
        async def send_message(args: dict[str, Any], ctx: ToolContext) -> str:
            text = str(args["text"]).strip()
            if not text:
                raise ToolRetry("send_message needs some text")
            root = (
                trigger.thread_root_id or trigger.id
                if args.get("in_thread")
                else trigger.thread_root_id
            )
            posted = await self._speak(
                channel,
                agent_id,
                text,
                run_id=run_id,
                thread_root=root,
                depth=trigger.depth + 1,
            )
            spoke.append("send_message")
            return f"posted to #{channel.name}" + (
                f"; {len(posted.run_ids)} agent(s) will see it" if posted.run_ids else ""
            )

        async def do_nothing(args: dict[str, Any], ctx: ToolContext) -> str:
            spoke.append("do_nothing")
            log.info(
                "chose to say nothing in #%s (do_nothing)",
                channel.name,
                extra={"decision": "do_nothing", "channel": channel.name},
            )
            return "ok: nothing said"

        return [
            Tool(
                SEND_MESSAGE,
                f"Post a message to #{channel.name}; this is the only way to speak there.",
                {
                    "type": "object",
                    "properties": {
                        "text": {"type": "string"},
                        "in_thread": {
                            "type": "boolean",
                            "description": "Reply in the message's thread.",
                        },
                    },
                    "required": ["text"],
                    "additionalProperties": False,
                },
                send_message,
            ),
            Tool(
                DO_NOTHING,
                "Choose not to respond to this message.",
                {"type": "object", "properties": {}, "additionalProperties": False},
                do_nothing,
            ),
        ]


def _transcript(channel: Channel, earlier: list[ChannelMessage], trigger: ChannelMessage) -> str:
    where = "a direct message" if channel.kind == "dm" else f"#{channel.name}"
    lines = [f"Recent conversation in {where} (oldest first):"]
    lines += [_said(m) for m in earlier] or ["(no earlier messages)"]
    lines += ["", f"New message from {trigger.sender}:", trigger.content]
    return "\n".join(lines)


def _said(message: ChannelMessage) -> str:
    """An earlier message in a transcript: its files named, not sent again (the message that
    carried them was)."""
    files = "".join(f" {a.label}" for a in message.attachments)
    return f"{message.sender}: {message.content}{files}"
