"""Metrics of runs, model requests, tool calls and mailboxes, with the OpenTelemetry metrics
API: the GenAI semantic conventions' instruments where they name one, ``agentrunner.*`` for
the rest (docs/observability.md lists each with its unit and attributes).

    agentrunner.runs.started                     a run started              (counter, {run})
    gen_ai.invoke_agent.duration                 a run that ended           (histogram, s)
    gen_ai.client.operation.duration             a model request attempt    (histogram, s)
    gen_ai.client.operation.time_to_first_chunk  a streamed reply's first   (histogram, s)
    gen_ai.client.token.usage                    an attempt's tokens        (histogram, {token})
    agentrunner.cost                             an attempt's price         (counter, USD)
    gen_ai.execute_tool.duration                 a tool call                (histogram, s)
    agentrunner.queue.depth                      runs waiting per agent     (gauge, {run})
    agentrunner.queue.wait.duration              queued until claimed       (histogram, s)

As the conventions do for HTTP, what ended is counted by its duration's histogram, with
``error.type`` when it failed: runs completed and failed, model requests by status and tool
calls by outcome are its counts, not counters of their own (each measurement costs the SDK
some microseconds, on the turn's path). Tokens and cost are recorded where the cost rows are
made, so they add up to them.

Only the API is used, as by ``telemetry/otel`` (which records these as its spans end, and as
a worker claims a run or counts the queues); the SDK's meter provider and exporter are set up
by ``telemetry/setup``, and with telemetry off this module is never imported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from agentrunner.engine.messages import Usage
from agentrunner.telemetry.names import (
    AGENT_ID,
    AGENT_NAME,
    APPROVAL_DECISION,
    ERROR_TYPE,
    OPERATION,
    SCHEDULE,
    SCHEDULE_OUTCOME,
    TOKEN_TYPE,
    TOOL_NAME,
    TOOL_TYPE,
)

__all__ = ["Metrics"]

# The conventions' advised buckets: a model request and a tool call take 10 ms to a minute or
# so, doubling (0.01, 0.02, … 81.92 s); a run 0.1 s to minutes (… 409.6 s); tokens 1 to 4^13.
_OPERATION_S = tuple(0.01 * 2**n for n in range(14))
_AGENT_S = tuple(0.1 * 2**n for n in range(13))
_TOKENS = tuple(4**n for n in range(14))
# A queued run waits from nothing (an idle worker) to as long as the agent's queue takes.
_WAIT_S = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600)


class Metrics:
    """The instruments, made once per meter (one per process: ``telemetry/setup`` keeps it),
    and what each measurement means. An error is our error code, as spans' ``error.type`` is."""

    def __init__(self, meter: Meter) -> None:
        self._depths: dict[str, int] = {}  # the last count of each agent's queued runs
        self.runs_started = meter.create_counter(
            "agentrunner.runs.started", "{run}", "Runs started, per agent."
        )
        self.run_duration = meter.create_histogram(
            "gen_ai.invoke_agent.duration",
            "s",
            "How long a run took, from its start (its thread's lock awaited) to its end; its "
            "count is the runs that ended, error.type naming a failure.",
            explicit_bucket_boundaries_advisory=_AGENT_S,
        )
        self.request_duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            "s",
            "How long a model request attempt took; its count is the attempts sent.",
            explicit_bucket_boundaries_advisory=_OPERATION_S,
        )
        self.first_chunk = meter.create_histogram(
            "gen_ai.client.operation.time_to_first_chunk",
            "s",
            "From a streamed request's sending to the first text or thinking it streamed.",
            explicit_bucket_boundaries_advisory=_OPERATION_S,
        )
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage",
            "{token}",
            "Input and output tokens of each model request attempt, as its cost row records "
            "them (the provider's count, or an estimate for a request cut off).",
            explicit_bucket_boundaries_advisory=_TOKENS,
        )
        self.cost = meter.create_counter(
            "agentrunner.cost",
            "USD",
            "Money charged for model requests, as the cost rows record it (unknown prices "
            "count as nothing).",
        )
        self.tool_duration = meter.create_histogram(
            "gen_ai.execute_tool.duration",
            "s",
            "How long a tool call took; its count is the calls made.",
            explicit_bucket_boundaries_advisory=_OPERATION_S,
        )
        self.schedule_fires = meter.create_counter(
            "agentrunner.schedule.fires",
            "{fire}",
            "Schedules' ticks decided, per schedule and outcome (queued or skipped): one per "
            "tick however many processes fire schedules.",
        )
        self.queue_wait = meter.create_histogram(
            "agentrunner.queue.wait.duration",
            "s",
            "How long a queued run waited in its agent's mailbox until a worker claimed it.",
            explicit_bucket_boundaries_advisory=_WAIT_S,
        )
        self.approval_wait = meter.create_histogram(
            "agentrunner.approval.wait.duration",
            "s",
            "How long a tool call (or a question) waited for a person's decision, by decision.",
            explicit_bucket_boundaries_advisory=_WAIT_S,
        )
        meter.create_observable_gauge(
            "agentrunner.queue.depth",
            [self._observe_depths],
            "{run}",
            "Runs queued in each agent's mailbox (the whole database's, as a worker last "
            "counted them).",
        )

    # -- runs ------------------------------------------------------------------------------

    def run_started(self, agent_id: str) -> None:
        self.runs_started.add(1, {AGENT_ID: agent_id})

    def run_ended(self, agent_id: str, name: str, seconds: float, error: str | None) -> None:
        """A run that ended: completed, or failed (``error``: its code; ``cancelled`` too)."""
        attributes = {AGENT_ID: agent_id, AGENT_NAME: name}
        if error is not None:
            attributes[ERROR_TYPE] = error
        self.run_duration.record(seconds, attributes)

    # -- model requests ----------------------------------------------------------------------

    def requested(self, request: Mapping[str, Any], seconds: float, error: str | None) -> None:
        """A model request attempt that ended; ``request`` holds its provider and model (and
        the response's model, when it answered)."""
        attributes = {OPERATION: "chat", **request}
        if error is not None:
            attributes[ERROR_TYPE] = error
        self.request_duration.record(seconds, attributes)

    def streamed(self, request: Mapping[str, Any], seconds: float) -> None:
        self.first_chunk.record(seconds, {OPERATION: "chat", **request})

    def charged(
        self,
        agent_id: str | None,
        request: Mapping[str, Any],
        usage: Usage,
        micros: int | None,
        *,
        answered: bool,
    ) -> None:
        """What one attempt was charged, as its cost row records it: its tokens if it was
        answered or they were estimated (a failure before any reply used none), and its price
        if known. ``agent_id`` is None for a request no run made (a thread's title), which no
        cost row records."""
        attributes = dict(request) if agent_id is None else {**request, AGENT_ID: agent_id}
        if answered or usage.estimated:
            tokens = {OPERATION: "chat", **attributes}
            self.token_usage.record(usage.input_tokens, {**tokens, TOKEN_TYPE: "input"})
            self.token_usage.record(usage.output_tokens, {**tokens, TOKEN_TYPE: "output"})
        if micros is not None:
            self.cost.add(micros / 1_000_000, attributes)

    # -- tool calls ---------------------------------------------------------------------------

    def tool_called(
        self, tool: str, agent: tuple[str, str] | None, seconds: float, error: str | None
    ) -> None:
        """A tool call that ended; ``agent`` is the calling run's agent (id, name)."""
        attributes: dict[str, Any] = {TOOL_NAME: tool, TOOL_TYPE: "function"}
        if agent is not None:
            attributes[AGENT_ID], attributes[AGENT_NAME] = agent
        if error is not None:
            attributes[ERROR_TYPE] = error
        self.tool_duration.record(seconds, attributes)

    # -- mailboxes ----------------------------------------------------------------------------

    def schedule_fired(self, schedule: str, agent_id: str, outcome: str) -> None:
        attributes = {SCHEDULE: schedule, AGENT_ID: agent_id, SCHEDULE_OUTCOME: outcome}
        self.schedule_fires.add(1, attributes)

    def claimed(self, agent_id: str, waited_s: float) -> None:
        self.queue_wait.record(waited_s, {AGENT_ID: agent_id})

    def approval_decided(self, agent_id: str, tool: str, decision: str, seconds: float) -> None:
        attributes = {AGENT_ID: agent_id, TOOL_NAME: tool, APPROVAL_DECISION: decision}
        self.approval_wait.record(seconds, attributes)

    def queue_depths(self, depths: Mapping[str, Mapping[str, int]]) -> None:
        """A count of every agent's queued runs (``Mailbox.depths``): the gauge reports it
        until the next, an agent counted before and not now as 0."""
        counted = {agent: statuses.get("created", 0) for agent, statuses in depths.items()}
        self._depths = dict.fromkeys(self._depths, 0) | counted

    def _observe_depths(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(n, {AGENT_ID: agent}) for agent, n in self._depths.items()]
