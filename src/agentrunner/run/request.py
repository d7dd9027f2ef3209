"""What a run is asked and what it answers: ``RunAgentOverrides`` (how a run executes, for
this run only), the request a run is made from (``run_agent``'s, ``run_task``'s, a delegation's),
and ``RunResult``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from agentrunner.agents.spec import RetryPolicy
from agentrunner.core.inputs import check_text
from agentrunner.engine.messages import AssistantMessage, Attachment, Usage, UserMessage
from agentrunner.errors import AgentRunnerError, ErrorCode

if TYPE_CHECKING:
    from agentrunner.agents.spec import AgentSpec
    from agentrunner.core.model_settings import ModelSettings
    from agentrunner.engine.abort import AbortSignal
    from agentrunner.engine.budget import CostTracker
    from agentrunner.engine.tools import Tool
    from agentrunner.engine.turn import TurnResult
    from agentrunner.run.callbacks import AgentRunnerCallbacks
    from agentrunner.run.capabilities.toolset import Caller
    from agentrunner.run.run_rows import ChannelRun

__all__ = ["Parent", "RunAgentOverrides", "RunRequest", "RunResult"]


@dataclass(frozen=True, slots=True)
class RunAgentOverrides:
    """How this run executes, not what the agent is (seed 000).

    ``model`` replaces the agent's whole fallback chain for this run (a one-off choice means
    that model only), unless ``fallback`` names models to fall back to. ``tools`` are run-time
    injections (step 7), e.g. a channel's ``send_message``; ``channel_mode`` tells the prompt
    builder the agent speaks only through them; with ``history=False`` the thread's earlier
    messages are not sent (the caller's message carries the context, as a channel transcript
    does); with ``stream=False`` the model's answers arrive whole (nobody watches tokens).
    ``model_settings`` (a ``ModelSettings`` or a mapping, checked here: ``validation`` naming
    a bad setting) win over the agent file's and ``[defaults]``', setting by setting.
    ``context`` is what the caller sends for this run besides its message (an OpenAI client's
    system message): untrusted, it goes in the user position before the transcript, marked as
    the caller's, and is kept in the run's record, not in the thread (DESIGN decision 1).
    ``background``: nobody is watching (a schedule's run, seed 000): the prompt says so, and
    what it has for people — ``notify_user``, files, shared notes, its failure — is written
    as notices to ``notify_channel`` (a channel's id), where they read. ``prompt``: the system
    prompt and the user-position context sent as given instead of the agent file's, rendered
    now (a replay sends those of the run it replays, as that run logged them). ``agent``: the
    agent as this spec says instead of as its file is now (its file at a git revision, which an
    eval compares); its id must be the run's agent's. ``only_tools``: the run may use only
    these of its agent's tools (a caller narrowing them; one the agent is not granted is
    refused by name, ``validation``, before anything is written where its tools are known).
    ``output_schema`` and ``retry``: the run's in place of its agent file's, read by the same
    rules (``validation`` naming the field). ``conversation``: messages sent before the run's
    own, after its thread's (a task's, which has no thread: seed 004).
    """

    model: str | None = None
    fallback: tuple[str, ...] = ()
    max_steps: int | None = None
    background: bool = False
    notify_channel: str | None = None
    channel_mode: bool = False
    channel: ChannelRun | None = None
    history: bool = True
    tools: tuple[Tool, ...] = ()
    stream: bool = True
    model_settings: ModelSettings | Mapping[str, Any] | None = None
    context: str | None = None
    prompt: tuple[str, str | None] | None = None
    agent: AgentSpec | None = None
    only_tools: tuple[str, ...] | None = None
    output_schema: Mapping[str, Any] | None = None
    retry: RetryPolicy | Mapping[str, Any] | None = None
    conversation: tuple[UserMessage | AssistantMessage, ...] = ()

    def __post_init__(self) -> None:
        if self.fallback and self.model is None:  # else the fallbacks would be dropped unsaid
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                "fallback models need a model to fall back from",
                hint="Name the model too (--model with --fallback); the agent's own chain "
                "is in its file's fallback:.",
            )
        if self.only_tools is not None:
            given: object = self.only_tools
            if isinstance(given, str) or not all(isinstance(n, str) and n for n in self.only_tools):
                raise AgentRunnerError(
                    ErrorCode.VALIDATION,
                    "tools must be a list of tool names",
                    hint='Name the agent\'s tools the run may use, e.g. ["note_read"].',
                    details={"field": "tools"},
                )
            object.__setattr__(self, "only_tools", tuple(dict.fromkeys(self.only_tools)))
        given = self.retry is not None and not isinstance(self.retry, RetryPolicy)
        if self.output_schema is not None or given:
            from agentrunner.agents.loader import run_fields  # read as an agent file's keys

            schema, policy = run_fields(self.output_schema, self.retry if given else None)
            object.__setattr__(self, "output_schema", schema)
            object.__setattr__(self, "retry", policy or self.retry)
        if self.context is not None:  # it is stored with the run: what could not be, refused
            check_text(self.context, "context", max_chars=None)
        if self.model_settings is not None:  # pydantic only for runs that set some
            from agentrunner.core.model_settings import model_settings

            object.__setattr__(self, "model_settings", model_settings(self.model_settings))

    def applied(self, agent: AgentSpec) -> AgentSpec:
        """``agent`` with this run's output schema and retry policy over its file's."""
        if self.output_schema is None and self.retry is None:
            return agent
        schema = self.output_schema if self.output_schema is not None else agent.output_schema
        retry = self.retry if isinstance(self.retry, RetryPolicy) else agent.retry
        return replace(agent, output_schema=schema, retry=retry)

    @property
    def settings(self) -> ModelSettings | None:
        """``model_settings``, checked."""
        value = self.model_settings
        return None if isinstance(value, Mapping) else value


@dataclass(slots=True)
class RunResult:
    text: str
    run_id: str
    thread_id: str | None
    agent_id: str
    stop_reason: str
    usage: Usage
    cost_micros: int
    cost_known: bool
    model: str | None
    output: Any = None
    # a run that waits for a person (stop reason ``waiting``): what it asks (docs/approvals.md)
    approvals: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        """``completed``, ``cancelled`` or ``waiting`` (a failed run raises instead)."""
        if self.stop_reason in ("cancelled", "waiting"):
            return self.stop_reason
        return "completed"

    @classmethod
    def of(
        cls, turn: TurnResult, run_id: str, thread_id: str | None, agent_id: str, cost: CostTracker
    ) -> RunResult:
        """The result of a run whose turn completed with ``turn``, having spent ``cost``."""
        return cls(
            turn.text,
            run_id,
            thread_id,
            agent_id,
            turn.stop_reason,
            turn.usage,
            cost.micros,
            cost.known,
            turn.model,
            turn.output,
        )

    @classmethod
    def cancelled(
        cls,
        turn: TurnResult | None,
        run_id: str,
        thread_id: str | None,
        agent_id: str,
        cost: CostTracker,
    ) -> RunResult:
        """The result of a cancelled run (``turn``: what its turn did, if it began): no text."""
        usage = turn.usage if turn is not None else Usage()
        model = turn.model if turn is not None else None
        return cls(
            "", run_id, thread_id, agent_id, "cancelled", usage, cost.micros, cost.known, model
        )

    @classmethod
    def waiting(
        cls,
        requests: list[dict[str, Any]],
        run_id: str,
        thread_id: str | None,
        agent_id: str,
        cost: CostTracker,
        model: str | None,
    ) -> RunResult:
        """The result of a run that waits for a person on ``requests``: no text yet."""
        return cls(
            "",
            run_id,
            thread_id,
            agent_id,
            "waiting",
            cost.usage,
            cost.micros,
            cost.known,
            model,
            approvals=requests,
        )

    @property
    def cost_usd(self) -> float:
        return self.cost_micros / 1_000_000

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``run --json`` and of the stdio protocol's run result."""
        return {
            "status": self.status,
            "text": self.text,
            "output": self.output,
            "agent_id": self.agent_id,
            "thread_id": self.thread_id,
            "run_id": self.run_id,
            "stop_reason": self.stop_reason,
            "model": self.model,
            "usage": self.usage.to_dict(),
            "cost_usd": self.cost_usd if self.cost_known else None,
            "cost_known": self.cost_known,
            **({"approvals": self.approvals} if self.approvals else {}),
        }


@dataclass(frozen=True, slots=True)
class Parent:
    """The run that started this one through ``ask_agent`` or ``delegate``."""

    run_id: str
    thread_id: str | None
    cost: CostTracker  # the child's tracker adds to it, so its limit bounds the child too
    caller: Caller  # the child's tools and trust are within its

    @property
    def depth(self) -> int:
        return self.caller.depth


@dataclass(frozen=True, slots=True)
class RunRequest:
    """What a run was asked to do: by ``run_agent``, ``run_task``, ``ask_agent`` or
    ``delegate``."""

    agent_id: str
    thread_id: str | None  # None: a task, a run on no thread
    message: str
    callbacks: AgentRunnerCallbacks
    overrides: RunAgentOverrides
    abort: AbortSignal | None
    input: dict[str, Any]
    parent: Parent | None = None
    claimed_run_id: str | None = None  # a run already claimed from a mailbox
    attachments: tuple[Attachment, ...] = ()  # the message's files (docs/attachments.md)

    @property
    def caller(self) -> Caller | None:
        """What bounds the run's tools and trust: its parent's; None for a run no run started."""
        return self.parent.caller if self.parent is not None else None
