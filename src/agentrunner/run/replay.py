"""A run sent again (``runs replay``, docs/threads.md): a new run of the same agent on a fork of
its thread cut just before the run's message, so its first request carries what the original's
did — the history byte for byte (``store/forks``), the system prompt and context as the
original logged them (not the agent file's rendered now), the message with its files, the model
settings it was queued with — on the model that answered it or another. The new run is an
ordinary one (its tools run, its cost is counted), beside the original, which is left as it
is: the two answers and costs can be compared."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrunner.engine.messages import UserMessage
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.run.request import RunAgentOverrides, RunResult
from agentrunner.run.run_ids import find_run

if TYPE_CHECKING:
    from agentrunner.engine.abort import AbortSignal
    from agentrunner.engine.models import ModelRegistry
    from agentrunner.run.callbacks import AgentRunnerCallbacks
    from agentrunner.run.runner import AgentRunner
    from agentrunner.store.forks import Cut
    from agentrunner.store.records import RunRecord
    from agentrunner.store.store import Store

__all__ = ["Replay", "ReplayPlan", "plan_replay", "replay_run"]


@dataclass(frozen=True, slots=True)
class Replay:
    """The run replayed, the new run's result, and the fork it ran on."""

    original: RunRecord
    result: RunResult
    fork: Cut


@dataclass(frozen=True, slots=True)
class ReplayPlan:
    """What a replay sends, the fork made for it included: run now (``replay_run``) or queued
    for a worker (``POST /runs/{id}/replay``)."""

    original: RunRecord
    fork: Cut
    message: UserMessage  # with its files' bytes
    model: str | None
    prompt: tuple[str, str | None]  # as the original logged them
    input: dict[str, Any]
    model_settings: Mapping[str, Any] | None

    @property
    def overrides(self) -> RunAgentOverrides:
        return RunAgentOverrides(
            model=self.model, model_settings=self.model_settings, prompt=self.prompt
        )


async def plan_replay(
    store: Store, models: ModelRegistry, run_id: str, *, model: str | None = None
) -> ReplayPlan:
    """The replay of ``run_id`` (or the run whose id begins or ends with it) on ``model`` or on
    the model that answered it, its fork made. ``validation`` for a run that cannot be
    replayed — a task's (no thread), a channel's (its prompt is the channel's transcript), one
    not ended, one whose message its thread no longer holds (rewound or deleted) — before
    anything is written; ``model_not_found`` for a ``model`` ``models`` does not know, and
    ``provider_auth`` for one whose key is not set. A run no model answered (it failed first)
    is sent to its agent's models."""
    original = await find_run(store, run_id)  # an unknown run is said first: a 404
    if model is not None:
        models.check_credential(models.resolve(model))  # refused before the fork is made
    if original.thread_id is None:
        raise _refused(original, "ran on no thread (a task)", "Run the task again instead.")
    if original.channel_id is not None:
        raise _refused(
            original,
            "answered a channel (its prompt was the channel's transcript)",
            "Post the message in the channel again, or fork the agent's thread instead.",
        )
    if not original.settled:
        raise _refused(original, f"is {original.status}", "Wait for it to end.")
    seq = await store.messages.first_of_run(original.thread_id, original.id)
    said = await store.messages.page(original.thread_id, after=seq - 1, limit=1) if seq else []
    if seq is None or not said or not isinstance(said[0][1], UserMessage):
        raise _refused(
            original,
            f"left no message in thread {original.thread_id} (it was cut back, or deleted)",
            "`agentrunner runs show` prints what it said.",
        )
    [message] = await store.attachments.hydrate([said[0][1]])  # its files, sent again
    logged = {m.message_type: m.content for m in await store.runs.messages(original.id)}
    if "system_message" not in logged and "run_messages" in original.removed:
        raise _refused(
            original,
            "has no prompt left: the [retention] rules removed its run messages "
            "(run_messages_days)",
            f"Fork its thread instead: agentrunner threads fork {original.thread_id} --at SEQ.",
        )
    if "system_message" not in logged:
        raise _refused(original, "logged no prompt (it never reached a model)", None)
    if model is None and original.model is not None and models.knows(original.model):
        models.check_credential(models.resolve(original.model))
    request = original.request or {}
    return ReplayPlan(
        original,
        await store.forks.fork(original.thread_id, seq - 1),
        message,
        model or original.model,
        (logged["system_message"], logged.get("context_message")),
        dict(request.get("input") or {}),
        request.get("model_settings"),
    )


async def replay_run(
    runner: AgentRunner,
    run_id: str,
    *,
    model: str | None = None,
    callbacks: AgentRunnerCallbacks | None = None,
    abort: AbortSignal | None = None,
) -> Replay:
    """Run ``run_id`` again, here and now (``plan_replay`` says what is sent and what is
    refused)."""
    plan = await plan_replay(runner.store, runner.engine.models, run_id, model=model)
    result = await runner.run_agent(
        plan.original.agent_id,
        plan.fork.thread.id,
        plan.message.content,
        callbacks,
        plan.overrides,
        abort,
        input=plan.input,
        attachments=plan.message.attachments,
    )
    return Replay(plan.original, result, plan.fork)


def _refused(run: RunRecord, why: str, hint: str | None) -> AgentRunnerError:
    return AgentRunnerError(
        ErrorCode.VALIDATION,
        f"run {run.id} cannot be replayed: it {why}",
        hint=hint,
        details={"run_id": run.id},
    )
