"""The fallback plan (seed 001): the primary model with ``retry.max`` attempts, then each
fallback model, one chain per execution, reused across the tool loop.

* Only failures that may pass (rate limit, overload, 5xx, timeout, connection) are retried or
  failed over; any other failure ends the chain at once.
* A rate limit with ``retry-after`` puts the provider in cooldown. The next attempt on it waits
  for exactly that long — unless the wait is longer than the retry policy's ``max_delay_s``:
  then the chain moves on at once and skips that provider while it cools down, and with no
  model left it fails at once (``provider_rate_limit``, the asked wait in the message). No wait
  is ever longer than ``max_delay_s``; the turn's deadline bounds them all together.
* Every attempt is recorded (model, outcome, error code, status, duration).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from agentrunner.agents.spec import RetryPolicy
from agentrunner.engine.failures import FailureKind, ProviderError
from agentrunner.engine.fold import DeltaSink
from agentrunner.engine.http_client import ModelClient
from agentrunner.engine.messages import ModelRequest, ModelResponse
from agentrunner.engine.models import ResolvedModel

if TYPE_CHECKING:
    from agentrunner.engine.tracing import Tracing

__all__ = ["Attempt", "ChainEntry", "FallbackChain"]

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ChainEntry:
    model: ResolvedModel
    client: ModelClient
    retry: RetryPolicy = field(default_factory=RetryPolicy)


@dataclass(slots=True)
class Attempt:
    """One try of one model. ``skipped`` attempts never reached the provider."""

    number: int
    model: str
    provider: str
    outcome: Literal["ok", "error", "skipped"]
    duration_ms: float = 0.0
    error_code: str | None = None
    error_kind: str | None = None
    status: int | None = None
    message: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in self.__slots__}


@dataclass(slots=True)
class FallbackChain:
    entries: Sequence[ChainEntry]
    sleep: Sleep = asyncio.sleep
    clock: Callable[[], float] = time.monotonic
    attempts: list[Attempt] = field(default_factory=list)
    cooldown_until: dict[str, float] = field(default_factory=dict)
    tracing: Tracing | None = None  # telemetry on: each attempt that is sent is a span

    async def request(
        self,
        build: Callable[[ChainEntry], Awaitable[ModelRequest]],
        on_delta: DeltaSink | None,
        on_attempt: Callable[[Attempt, ChainEntry, ModelResponse | ProviderError], None],
    ) -> tuple[ModelResponse, ChainEntry]:
        """Try the entries in order; the response and the entry that produced it. ``build``
        makes each attempt's request (and may refuse it: whatever else it raises ends the
        chain as it is).

        Raises the last ``ProviderError`` when every entry failed, or the first one that may
        not fail over.
        """
        last: ProviderError | None = None
        for index, entry in enumerate(self.entries):
            has_next = index < len(self.entries) - 1
            provider = entry.model.provider.name
            for tries in range(1, entry.retry.max + 1):
                wait = self.cooldown_until.get(provider, 0.0) - self.clock()
                if wait > 0:
                    if wait > entry.retry.max_delay_s:
                        self._record(entry, "skipped", 0.0, message=f"cooling down {wait:.1f}s")
                        if has_next:
                            break
                        raise _too_long(entry, wait)
                    await self.sleep(wait)
                request = await build(entry)
                start = self.clock()
                try:
                    if self.tracing is None:
                        response = await entry.client.request(request, on_delta)
                    else:
                        response = await self._traced(entry, request, on_delta, index > 0, last)
                except ProviderError as exc:
                    last = exc
                    attempt = self._record(entry, "error", self.clock() - start, exc)
                    on_attempt(attempt, entry, exc)
                    if not exc.failover:
                        raise
                    delay = self._delay(entry, tries, exc)
                    if delay > entry.retry.max_delay_s:  # only a provider's retry-after can be
                        if has_next:
                            break
                        raise _too_long(entry, delay, exc) from exc
                    cooling = exc.kind is FailureKind.RATE_LIMIT and exc.retry_after is not None
                    if tries < entry.retry.max and not cooling:
                        await self.sleep(delay)  # a cooldown is waited for at the loop's top
                    continue
                attempt = self._record(entry, "ok", self.clock() - start)
                on_attempt(attempt, entry, response)
                return response, entry
        assert last is not None, "a chain needs at least one entry"
        raise last

    async def _traced(
        self,
        entry: ChainEntry,
        request: ModelRequest,
        on_delta: DeltaSink | None,
        fallback: bool,
        last: ProviderError | None,
    ) -> ModelResponse:
        """The request inside its ``chat`` span: siblings under the run's, the failure that
        led to a retry or a fallback named on the next one."""
        assert self.tracing is not None
        with self.tracing.chat(
            entry,
            request,
            attempt=len(self.attempts) + 1,
            fallback=fallback,
            retry_reason=str(last.code) if last is not None else None,
        ) as span:
            try:
                response = await entry.client.request(
                    request, self.tracing.streaming(entry, on_delta)
                )
            except ProviderError as exc:
                self.tracing.provider_error(span, exc)
                raise
            self.tracing.response(span, response)
            return response

    def _delay(self, entry: ChainEntry, tries: int, exc: ProviderError) -> float:
        """Seconds before the next try of this entry, setting the provider's cooldown."""
        if exc.kind is FailureKind.RATE_LIMIT and exc.retry_after is not None:
            self.cooldown_until[entry.model.provider.name] = self.clock() + exc.retry_after
            return exc.retry_after
        policy = entry.retry
        if policy.backoff == "none":
            return 0.0
        step = tries if policy.backoff == "linear" else 2 ** (tries - 1)
        return min(policy.initial_delay_s * step, policy.max_delay_s)

    def _record(
        self,
        entry: ChainEntry,
        outcome: Literal["ok", "error", "skipped"],
        seconds: float,
        exc: ProviderError | None = None,
        message: str | None = None,
    ) -> Attempt:
        attempt = Attempt(
            number=len(self.attempts) + 1,
            model=entry.model.ref,
            provider=entry.model.provider.name,
            outcome=outcome,
            duration_ms=round(seconds * 1000, 3),
            error_code=str(exc.code) if exc else None,
            error_kind=str(exc.kind) if exc else None,
            status=exc.status if exc else None,
            message=exc.message if exc else message,
        )
        self.attempts.append(attempt)
        return attempt


def _too_long(entry: ChainEntry, wait: float, cause: ProviderError | None = None) -> ProviderError:
    """The rate limit of a provider that asks for a longer wait than the retry policy allows,
    with no model left to fail over to: failing now beats holding the run (and, in a worker,
    its agent's whole mailbox) for as long as the provider likes."""
    provider = entry.model.provider.name
    error = ProviderError(
        FailureKind.RATE_LIMIT,
        f"{provider} is rate-limiting {entry.model.ref} and asked to wait "
        f"{round(wait, 1):g} s, longer than retry.max_delay_s ({entry.retry.max_delay_s:g} s) "
        "allows: not waiting",
        provider=provider,
        model=entry.model.name,
        status=cause.status if cause is not None else None,
        retry_after=wait,
        request_id=cause.request_id if cause is not None else None,
    )
    error.hint = (
        "Add a fallback model from another provider, raise retry.max_delay_s in the agent "
        "file if waiting that long is fine, or try again later."
    )
    return error
