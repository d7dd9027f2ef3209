"""A turn's model requests, attempt by attempt: what the turn hands the fallback chain (``build``,
``on_delta``, ``on_attempt``) and what it keeps of each attempt.

Apart from the turn's loop because money and secrets are settled per attempt, not per step: a
step may take several attempts (retries, failover), and one may be cut off mid-way. Each
attempt's worst case is reserved before it is sent and charged when it ends — its reservation
given back only then, so what is spent plus what is held never drops below what was really
used — and one cut off, or answered with no usage reported, is charged at the provider's
figures or an estimate marked as such. What
the model says is passed on with the secrets cut as it streams, a delta that may begin one held
back. The loop sees a reply, what the turn has spent, and whether the budget cut the reply off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, assert_never

from agentrunner.core.json_text import json_text
from agentrunner.engine.budget import BudgetGate, Reservation, estimate_output_tokens
from agentrunner.engine.failures import ProviderError
from agentrunner.engine.fallback import Attempt, ChainEntry
from agentrunner.engine.fold import Delta
from agentrunner.engine.http_client import HttpModelClient
from agentrunner.engine.messages import (
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ThinkingDelta,
    Usage,
)
from agentrunner.engine.secrets import SecretStream
from agentrunner.engine.structured_output import schema_instructions, takes_schema_natively
from agentrunner.events import CostUpdated, Emit

if TYPE_CHECKING:
    from agentrunner.core.model_settings import ModelSettings
    from agentrunner.engine.turn import Turn

__all__ = ["ModelCalls", "cost_updated", "output_cap"]


class ModelCalls:
    """One turn's requests to its model chain: each attempt's request built and reserved, its
    deltas passed on, its cost charged; ``usage``, ``cost`` and ``cost_known`` add them up."""

    def __init__(self, turn: Turn, emit: Emit) -> None:
        self.turn = turn
        self.emit = emit  # the turn's: silent once the turn is cancelled
        self.usage = Usage()
        self.cost = 0
        self.cost_known = True
        self.partial: list[str] = []  # the text the attempt in flight streamed
        self.current = ""  # the model of the attempt in flight, or of the last one
        self.definitions = [t.definition for t in turn.tools]
        self.gate = BudgetGate(
            turn.cost, turn.budget, turn.prices, self.definitions, turn.output_schema
        )
        self.inflight: tuple[ChainEntry, ModelRequest] | None = None
        settings = turn.settings
        self.settings = settings
        # A tool choice that forces a call holds until the model has called tools: forced
        # every time, it would never let the model answer.
        self.sent = settings
        self.after_tools = settings
        if settings is not None and settings.forces_tool:
            self.after_tools = settings.model_copy(update={"tool_choice": None})
        self.warned: set[str] = set()  # settings dropped with a warning: once a run each
        self.cut_by_budget: Reservation | None = None  # the last response's, if it lowered
        # What the model says is passed on with the secrets cut (None: there are none).
        self.secrets = turn.secrets if turn.secrets else None
        self.text_stream: SecretStream | None = None
        self.thinking_stream: SecretStream | None = None
        if self.secrets is not None and turn.emit is not None and turn.stream:
            self.text_stream, self.thinking_stream = self.secrets.stream(), self.secrets.stream()

    def tools_ran(self) -> None:
        """The model has called tools: its requests from now on no longer force a call."""
        self.sent = self.after_tools

    # -- requests ------------------------------------------------------------------------

    def request(self, entry: ChainEntry) -> ModelRequest:
        turn = self.turn
        native = turn.output_schema is None or takes_schema_natively(entry)
        system = turn.system if native else turn.system + schema_instructions(turn.output_schema)
        return ModelRequest(
            model=entry.model.name,
            system=system,
            messages=turn.messages,
            tools=self.definitions,
            max_output_tokens=output_cap(turn.limits.max_output_tokens, self.settings),
            output_schema=turn.output_schema if native else None,
            stream=turn.stream,
            cache_key=turn.cache_key,
            settings=self.sent,
        )

    async def build(self, entry: ChainEntry) -> ModelRequest:
        """One attempt's request, its worst case reserved against the budgets."""
        self.partial = []
        for stream in (self.text_stream, self.thinking_stream):
            if stream is not None:
                stream.rest()  # what a failed attempt held back: dropped with it
        self.current = entry.model.ref
        request = self.request(entry)
        if self.gate.active:
            await self.gate.reserve(entry.model, request)
        client = entry.client
        if request.settings is not None and isinstance(client, HttpModelClient):
            self.warn_dropped(entry, client.dropped_settings(request))
        self.inflight = (entry, request)
        return request

    def warn_dropped(self, entry: ChainEntry, dropped: list[tuple[str, str]]) -> None:
        """A setting the provider is not sent (it cannot take it, or not with the others, or
        not under this output cap) is said once a run, not sent to fail the request."""
        for setting, reason in dropped:
            if setting not in self.warned:
                self.warned.add(setting)
                self.emit(
                    "model.setting_dropped",
                    {"setting": setting, "model": entry.model.ref, "reason": reason},
                )

    # -- what the model says --------------------------------------------------------------

    def on_delta(self, delta: Delta) -> None:
        match delta:
            case TextDelta():
                self.partial.append(delta.text)
                if self.turn.emit is not None:  # no event built for a token nobody takes
                    text = delta.text
                    if self.text_stream is not None and not (text := self.text_stream.feed(text)):
                        return  # held back: it may begin a secret
                    self.emit("agent.token", {"token": text, "model": self.current})
            case ThinkingDelta():
                text = delta.text
                if self.thinking_stream is not None:
                    text = self.thinking_stream.feed(text)
                if text:
                    self.emit("agent.thinking", {"text": text, "model": self.current})
            case _:
                assert_never(delta)

    def reply(self, message: AssistantMessage) -> AssistantMessage:
        """The answer of the attempt that succeeded, as it is kept (``said``), its text and
        thinking passed on whole if it was not streamed."""
        self.partial = []
        message = self.said(message)
        if not self.turn.stream:
            self.emit_whole(message)
        return message

    def said(self, message: AssistantMessage) -> AssistantMessage:
        """A reply as it is kept, sent back and shown: what its streamed deltas held back
        passed on, and every secret cut from its text, its thinking (a block that held one is
        not sent back: its signature no longer fits) and its tool calls' arguments."""
        secrets = self.secrets
        if secrets is None:
            return message
        if self.text_stream is not None and self.thinking_stream is not None:
            if thought := self.thinking_stream.rest():
                self.emit("agent.thinking", {"text": thought, "model": self.current})
            if text := self.text_stream.rest():
                self.emit("agent.token", {"token": text, "model": self.current})
        message.text = secrets.scrub(message.text)
        for thinking in message.thinking:
            cut = secrets.scrub(thinking.text)
            if cut != thinking.text:
                thinking.text, thinking.signature = cut, None
        for call in message.tool_calls:
            call.arguments = secrets.scrub_value(call.arguments)
            if call.raw_arguments is not None:
                call.raw_arguments = secrets.scrub(call.raw_arguments)
        return message

    def emit_whole(self, message: AssistantMessage) -> None:
        for thought in message.thinking:
            if thought.text:
                self.emit("agent.thinking", {"text": thought.text, "model": self.current})
        if message.text and (message.tool_calls or self.turn.check_answer is None):
            # (an answer to be checked is said once it passed: ``Turn.check_answer``)
            self.emit("agent.token", {"token": message.text, "model": self.current})

    def cut_off(self) -> AssistantMessage | None:
        """After a cancellation or failure: the request in flight charged, and the text it
        streamed as an interrupted message (None if it streamed none)."""
        self.charge_interrupted()
        if not self.partial:
            return None
        text = "".join(self.partial)
        self.partial = []
        return AssistantMessage(
            text=self.secrets.scrub(text) if self.secrets else text,
            model=self.current or None,
            interrupted=True,
        )

    # -- charging -------------------------------------------------------------------------

    def on_attempt(
        self, attempt: Attempt, entry: ChainEntry, outcome: ModelResponse | ProviderError
    ) -> None:
        if isinstance(outcome, ModelResponse):
            usage = outcome.usage
            if usage.input_tokens or usage.output_tokens:
                micros = self.turn.prices.cost_micros(
                    entry.model.provider.name, entry.model.name, usage, outcome.model
                )
            else:  # the provider reported none (llama.cpp's server streams none): never 0
                usage, micros = self.estimated_usage(entry, _written(outcome.message))
        elif self.partial:  # it failed mid-stream, after the provider began billing
            usage, micros = self.estimated_usage(entry, "".join(self.partial))
        else:
            usage, micros = Usage(requests=1), 0
        self.inflight = None
        self.charge(entry, attempt.number, attempt.outcome, usage, micros)
        if isinstance(outcome, ProviderError):
            self.emit(
                "model.attempt_failed",
                {
                    "model": entry.model.ref,
                    "attempt": attempt.number,
                    "error_code": str(outcome.code),
                    "status": outcome.status,
                    "duration_ms": attempt.duration_ms,
                    "message": outcome.message,
                    "failover": outcome.failover,
                },
            )

    def estimated_usage(self, entry: ChainEntry, output: str) -> tuple[Usage, int | None]:
        """What the request in flight used by estimate, for a request cut off or a response
        that reported no usage: the size of what it sent (not the worst case its reservation
        holds), and of ``output``, what the model wrote."""
        request = self.inflight[1] if self.inflight is not None else self.request(entry)
        usage = Usage(
            input_tokens=self.gate.sent_tokens(entry.model, request),
            output_tokens=estimate_output_tokens(output),
            requests=1,
            estimated=True,
        )
        prices = self.turn.prices
        return usage, prices.cost_micros(entry.model.provider.name, entry.model.name, usage)

    def charge(
        self, entry: ChainEntry, attempt: int, outcome: str, usage: Usage, micros: int | None
    ) -> None:
        """Record what one attempt cost; only then is its reservation given back, so what is
        spent plus what is held never drops below what was really used."""
        self.usage.add(usage)
        self.turn.cost.add(micros, usage)
        self.turn.tracing.charged(entry, usage, micros, answered=outcome == "ok")
        if micros is None:
            self.cost_known = False
        else:
            self.cost += micros
        if self.turn.emit is not None:  # even after an abort: money is always recorded
            emit: Emit = self.turn.emit
            cumulative = self.turn.cost.root.micros
            emit(
                "cost.updated",
                cost_updated(entry.model.ref, attempt, outcome, usage, micros, cumulative),
            )
        settled = self.gate.settle(usage)
        self.cut_by_budget = settled if settled is not None and settled.lowered else None

    def charge_interrupted(self) -> None:
        """A request cut off mid-way (cancelled, or the turn failed around it) was still sent:
        charge its estimate."""
        if self.inflight is None:
            self.gate.release()
            return
        entry, _ = self.inflight
        usage, micros = self.estimated_usage(entry, "".join(self.partial))
        self.inflight = None
        self.charge(entry, self.turn.chain.next_number, "cancelled", usage, micros)
        self.cut_by_budget = None


def _written(message: AssistantMessage) -> str:
    """What a model wrote in ``message``, as output tokens bill it: its text, its thinking,
    and its tool calls' names and arguments."""
    parts = [message.text, *(thought.text for thought in message.thinking)]
    for call in message.tool_calls:
        arguments = call.raw_arguments
        if arguments is None:
            arguments = json_text(call.arguments) if call.arguments else ""
        parts += (call.name, arguments)
    return "".join(parts)


def output_cap(limit: int | None, settings: ModelSettings | None) -> int | None:
    """A request's output cap: the lower of the agent's limit and the run's
    ``max_output_tokens`` setting (what the history must leave room for, too)."""
    asked = settings.max_output_tokens if settings is not None else None
    caps = [cap for cap in (limit, asked) if cap]
    return min(caps) if caps else None


def cost_updated(
    model: str, attempt: int, outcome: str, usage: Usage, micros: int | None, cumulative: int
) -> CostUpdated:
    """What a ``cost.updated`` says of one attempt of ``model`` (a chat request's or an
    embedding's): its tokens, what it cost (None: unknown) and the run's total so far."""
    return {
        "model": model,
        "attempt": attempt,
        "outcome": outcome,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "cost_micros": micros,
        "cost_known": micros is not None,
        "estimated": usage.estimated,
        "cumulative_cost_micros": cumulative,
    }
