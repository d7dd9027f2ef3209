"""``Engine``: the engine's front door. Owns the model registry (and so one pooled client per
provider) and runs turns through a fallback chain built from model strings."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from agentrunner.agents.spec import RetryPolicy
from agentrunner.config import Config
from agentrunner.engine.abort import AbortSignal
from agentrunner.engine.budget import BudgetGate, ExternalBudget, estimate_text_tokens
from agentrunner.engine.embeddings import Embedded
from agentrunner.engine.fallback import ChainEntry, Cooldowns, FallbackChain
from agentrunner.engine.messages import Message, UserMessage
from agentrunner.engine.model_calls import cost_updated
from agentrunner.engine.models import ModelRegistry
from agentrunner.engine.tools import Tool
from agentrunner.engine.turn import (
    CostTracker,
    EventSink,
    Turn,
    TurnLimits,
    TurnResult,
    run_turn,
)
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.telemetry.tracing import NO_TRACING, Tracing

if TYPE_CHECKING:
    from agentrunner.core.model_settings import ModelSettings
    from agentrunner.engine.pause import Policy, Resumed

__all__ = ["Engine"]


class Engine:
    """Runs turns. ``async with Engine() as engine`` closes every provider client on exit.
    With ``tracing`` (telemetry on), its model requests and tool calls are spans and metrics;
    without, ``NO_TRACING``, which does nothing.
    Its chains share one ``Cooldowns``: a provider's asked wait, and a model that failed, hold
    for every run of the process."""

    def __init__(
        self, models: ModelRegistry | None = None, *, tracing: Tracing = NO_TRACING
    ) -> None:
        self.models = models or ModelRegistry()
        self.tracing = tracing
        self.cooldowns = Cooldowns()

    @classmethod
    def from_config(
        cls,
        config: Config,
        *,
        env: Mapping[str, str] | None = None,
        tracing: Tracing = NO_TRACING,
    ) -> Engine:
        return cls(ModelRegistry.from_config(config, env=env), tracing=tracing)

    async def __aenter__(self) -> Engine:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.models.aclose()

    async def embed(
        self,
        model: str,
        texts: Sequence[str],
        *,
        budget: ExternalBudget | None = None,
        emit: EventSink | None = None,
    ) -> Embedded:
        """``texts`` as vectors from ``model``, in one request: its input held against
        ``budget`` first (``budget_exceeded`` if it does not fit), what it cost reported as a
        ``cost.updated`` to ``emit``. ``validation`` for a provider with no embeddings API."""
        resolved = self.models.resolve(model)
        client = self.models.client(resolved)
        embed = getattr(client, "embed", None)
        if embed is None:
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"model {resolved.ref} cannot embed texts",
                hint="Set [embeddings] model to a model of an OpenAI-compatible provider.",
            )
        prices = self.models.prices
        gate = BudgetGate(CostTracker(), budget, prices, (), None)
        if gate.active:  # no budget: nothing to hold, an unpriced model included
            await gate.reserve_input(resolved, sum(estimate_text_tokens(t) for t in texts))
        try:
            embedded: Embedded = await embed(resolved.name, texts)
            usage = embedded.usage
            micros = prices.cost_micros(resolved.provider.name, resolved.name, usage)
            embedded.cost_micros = micros
            if emit is not None:
                emit(
                    "cost.updated", cost_updated(resolved.ref, 1, "ok", usage, micros, micros or 0)
                )
        finally:
            gate.release()  # after the cost is recorded: spent plus held never drops
        return embedded

    def chain(self, models: str | Sequence[str], retry: RetryPolicy | None = None) -> FallbackChain:
        """A fallback chain over ``models`` (primary first). Resolves every model and checks
        every credential now, so a missing key fails before any request is sent."""
        refs = [models] if isinstance(models, str) else list(models)
        policy = retry or RetryPolicy()
        entries = []
        for ref in refs:
            resolved = self.models.resolve(ref)
            client = self.models.client(resolved)
            entries.append(ChainEntry(resolved, client, policy, self.models.inputs(resolved)))
        return FallbackChain(entries, cooldowns=self.cooldowns, tracing=self.tracing)

    async def run(
        self,
        *,
        model: str | Sequence[str] | None = None,
        chain: FallbackChain | None = None,
        system: str = "",
        message: str | UserMessage | None = None,
        history: Sequence[Message] = (),
        tools: Sequence[Tool] = (),
        limits: TurnLimits | None = None,
        retry: RetryPolicy | None = None,
        emit: EventSink | None = None,
        abort: AbortSignal | None = None,
        stream: bool = True,
        output_schema: Mapping[str, Any] | None = None,
        cost: CostTracker | None = None,
        tool_context: Mapping[str, Any] | None = None,
        before_tools: Callable[[Sequence[Message]], Awaitable[None]] | None = None,
        budget: ExternalBudget | None = None,
        cache_key: str | None = None,
        settings: ModelSettings | None = None,
        policy: Policy | None = None,
        resume: Resumed | None = None,
        check_answer: Callable[[str], Awaitable[None]] | None = None,
    ) -> TurnResult:
        """Run one turn: ``history`` plus ``message`` (if given) as the new user message.

        Pass ``model`` (one string, or the fallback chain in order) or a prebuilt ``chain``
        (reuse one across a run's turns to keep its cooldowns). ``limits.max_budget_micros``
        and ``cost.limit`` bound what the turn may spend; ``budget`` adds budgets shared with
        other runs. ``cache_key`` names the conversation to the provider's prompt cache
        (``prompt_cache_key``: the same for each turn of a thread); ``settings`` are sent with
        every request, as each provider takes them. ``policy`` judges each tool call
        (``engine.pause``); ``check_answer`` sees the final answer before it is said and may
        refuse it (``Turn.check_answer``): with it, nothing is streamed. Raises ``TurnError``.
        """
        if chain is None:
            if model is None:
                raise ValueError("Engine.run needs a model or a chain")
            chain = self.chain(model, retry)
        messages = list(history)
        if message is not None:
            messages.append(message if isinstance(message, UserMessage) else UserMessage(message))
        turn = Turn(
            system=system,
            messages=messages,
            chain=chain,
            tools=tools,
            prices=self.models.prices,
            limits=limits or TurnLimits(),
            emit=emit,
            abort=abort,
            stream=stream and check_answer is None,  # an answer is said once it is checked
            output_schema=output_schema,
            cost=cost or CostTracker(),
            tool_context=tool_context or {},
            before_tools=before_tools,
            budget=budget,
            secrets=self.models.secrets,
            tracing=self.tracing,
            cache_key=cache_key,
            settings=settings,
            policy=policy,
            resume=resume,
            check_answer=check_answer,
        )
        return await run_turn(turn)
