"""The fallback plan (seed 001): the primary model with ``retry.max`` attempts, then each
fallback model, one chain per execution, reused across the tool loop.

* Only failures that may pass (rate limit, overload, 5xx, timeout, connection) are retried or
  failed over; any other failure ends the chain at once.
* A provider's ``retry-after`` (on a 429, a 503, a 529, any failure that may pass) puts the
  provider in cooldown. The next attempt on it waits for exactly that long — unless the wait is
  longer than the retry policy's ``max_delay_s``: then the chain moves on at once and skips that
  provider while it cools down, and with no model left it fails at once (the asked wait in the
  message). No wait is ever longer than ``max_delay_s``; the turn's deadline bounds them all.
* A model the chain left after a failure that may pass (its tries spent) is tried after the
  others on the chain's later requests: for the rest of the run, and by every chain of the
  process for ``FAILED_REST_S``. It is still tried when every other model has failed, and once
  it answers it takes its place again.
* ``Cooldowns`` holds both, the providers' asked waits and the models that failed: one per
  process (the engine's), shared by every chain it builds; a chain built alone has its own.
* Every attempt is recorded (model, outcome, error code, status, duration).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from agentrunner.agents.spec import RetryPolicy
from agentrunner.engine.failures import FailureKind, ProviderError
from agentrunner.engine.fold import DeltaSink
from agentrunner.engine.http_client import ModelClient
from agentrunner.engine.messages import Attachment, InputKind, ModelRequest, ModelResponse
from agentrunner.engine.model_inputs import ALL_INPUTS
from agentrunner.engine.models import ResolvedModel
from agentrunner.telemetry.tracing import NO_TRACING, Tracing

__all__ = ["FAILED_REST_S", "Attempt", "ChainEntry", "Cooldowns", "FallbackChain"]

Sleep = Callable[[float], Awaitable[None]]

# Seconds a model that failed (its tries spent on failures that may pass) is tried after the
# others by every chain of the process: long enough that a run started meanwhile does not pay
# for its retries again, short enough that a provider back up is soon used again.
FAILED_REST_S = 30.0


@dataclass(frozen=True, slots=True)
class ChainEntry:
    model: ResolvedModel
    client: ModelClient
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    inputs: frozenset[str] = ALL_INPUTS  # what the model takes (the registry's say)


@dataclass(slots=True)
class Attempt:
    """One try of one model. ``skipped`` attempts never reached the provider: their
    ``number`` is 0, and the attempts made are numbered 1, 2, 3 … across the run (seed 001:
    ``cost.updated`` counts non-skipped attempts)."""

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


@dataclass(frozen=True, slots=True)
class _Asked:
    """A provider's request to wait: until when, and the failure that carried it."""

    until: float
    kind: FailureKind
    status: int | None


@dataclass(slots=True)
class Cooldowns:
    """What the chains of one process know of its providers, by the chains' clock: the waits
    providers asked for (``retry-after``), by provider, and the models that failed lately, by
    ``provider:model``, until when each holds."""

    asked: dict[str, _Asked] = field(default_factory=dict)
    failed: dict[str, float] = field(default_factory=dict)

    def ask(self, provider: str, until: float, error: ProviderError) -> None:
        self.asked[provider] = _Asked(until, error.kind, error.status)

    def wait(self, provider: str, now: float) -> tuple[float, _Asked | None]:
        """Seconds ``provider`` asked to be left alone from ``now``, and its request (none
        when it asked for nothing, or for a wait that has passed)."""
        asked = self.asked.get(provider)
        if asked is None:
            return 0.0, None
        if asked.until <= now:
            del self.asked[provider]
            return 0.0, None
        return asked.until - now, asked

    def fail(self, ref: str, now: float) -> None:
        self.failed[ref] = now + FAILED_REST_S

    def recover(self, ref: str) -> None:
        self.failed.pop(ref, None)

    def resting(self, ref: str, now: float) -> bool:
        """Whether ``ref`` failed within the last ``FAILED_REST_S``."""
        until = self.failed.get(ref)
        if until is None:
            return False
        if until <= now:
            del self.failed[ref]
            return False
        return True


@dataclass(slots=True)
class FallbackChain:
    entries: Sequence[ChainEntry]
    sleep: Sleep = asyncio.sleep
    clock: Callable[[], float] = time.monotonic
    attempts: list[Attempt] = field(default_factory=list)
    cooldowns: Cooldowns = field(default_factory=Cooldowns)  # the process's, from the engine
    failed: set[str] = field(default_factory=set)  # models that failed in this run, by ref
    tracing: Tracing = NO_TRACING  # telemetry on: each attempt that is sent is a span

    async def request(
        self,
        build: Callable[[ChainEntry], Awaitable[ModelRequest]],
        on_delta: DeltaSink | None,
        on_attempt: Callable[[Attempt, ChainEntry, ModelResponse | ProviderError], None],
        needs: Mapping[InputKind, Attachment] | None = None,
    ) -> tuple[ModelResponse, ChainEntry]:
        """Try the entries in order; the response and the entry that produced it. ``build``
        makes each attempt's request (and may refuse it: whatever else it raises ends the
        chain as it is). ``needs``: the kinds of input the request carries besides text
        (``messages.needed_inputs``); a model that does not take one is skipped.

        Raises the last ``ProviderError`` when every entry failed, or the first one that may
        not fail over; ``input_unsupported`` when no entry takes what is needed.
        """
        last: ProviderError | None = None
        order = self._order()
        if needs:
            order = self._taking(order, needs)
        for position, entry in enumerate(order):
            has_next = position < len(order) - 1
            provider = entry.model.provider.name
            for tries in range(1, entry.retry.max + 1):
                wait, asked = self.cooldowns.wait(provider, self.clock())
                if asked is not None:
                    if wait > entry.retry.max_delay_s:
                        self._record(entry, "skipped", 0.0, message=f"cooling down {wait:.1f}s")
                        if has_next:
                            break
                        raise _too_long(entry, wait, asked.kind, asked.status, None)
                    await self.sleep(wait)
                request = await build(entry)
                start = self.clock()
                try:
                    response = await self._send(entry, request, on_delta, last)
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
                        raise _too_long(entry, delay, exc.kind, exc.status, exc.request_id) from exc
                    if tries == entry.retry.max:
                        self._failed(entry)
                    elif exc.retry_after is None:
                        await self.sleep(delay)  # a provider's wait is waited at the loop's top
                    continue
                attempt = self._record(entry, "ok", self.clock() - start)
                on_attempt(attempt, entry, response)
                if self.failed:
                    self.failed.discard(entry.model.ref)
                self.cooldowns.recover(entry.model.ref)
                return response, entry
        assert last is not None, "a chain needs at least one entry"
        raise last

    @property
    def next_number(self) -> int:
        """The number of the next attempt made: skipped ones are not counted."""
        return sum(a.outcome != "skipped" for a in self.attempts) + 1

    def _order(self) -> Sequence[ChainEntry]:
        """The entries in the order to try them now: those that failed lately (in this run, or
        in the process's last ``FAILED_REST_S``) after the others, each group as configured."""
        if not self.failed and not self.cooldowns.failed:
            return self.entries
        now = self.clock()
        resting = {
            e.model.ref
            for e in self.entries
            if e.model.ref in self.failed or self.cooldowns.resting(e.model.ref, now)
        }
        if not resting:
            return self.entries
        return sorted(self.entries, key=lambda e: e.model.ref in resting)  # stable

    def _taking(
        self, order: Sequence[ChainEntry], needs: Mapping[InputKind, Attachment]
    ) -> Sequence[ChainEntry]:
        """The entries whose model takes every kind ``needs``; each other one recorded as
        skipped, and when none is left the refusal, before anything is sent."""
        taking = []
        for entry in order:
            missing = [kind for kind in needs if kind not in entry.inputs]
            if not missing:
                taking.append(entry)
                continue
            self._record(entry, "skipped", 0.0, message=f"takes no {missing[0]} input")
        if taking:
            return taking
        entry = order[0]
        kind = next(k for k in needs if k not in entry.inputs)
        models = ", ".join(e.model.ref for e in order)
        raise ProviderError(
            FailureKind.INPUT_UNSUPPORTED,
            f"{entry.model.ref} takes no {kind} input, and the message carries "
            f"{needs[kind].label}; no model of the chain ({models}) takes it",
            provider=entry.model.provider.name,
            model=entry.model.ref,
        )

    def _failed(self, entry: ChainEntry) -> None:
        """``entry`` spent its tries on failures that may pass: tried after the others, by
        this chain from now on and by the process's for a while."""
        self.failed.add(entry.model.ref)
        self.cooldowns.fail(entry.model.ref, self.clock())

    async def _send(
        self,
        entry: ChainEntry,
        request: ModelRequest,
        on_delta: DeltaSink | None,
        last: ProviderError | None,
    ) -> ModelResponse:
        """The request inside its ``chat`` span: siblings under the run's, the failure that
        led to a retry or a fallback named on the next one."""
        tracing = self.tracing
        with tracing.chat(
            entry,
            request,
            attempt=self.next_number,
            fallback=entry is not self.entries[0],
            retry_reason=None if last is None else str(last.code),
        ) as span:
            try:
                response = await entry.client.request(request, tracing.streaming(entry, on_delta))
            except ProviderError as exc:
                tracing.provider_error(span, exc)
                raise
            tracing.response(span, response)
            return response

    def _delay(self, entry: ChainEntry, tries: int, exc: ProviderError) -> float:
        """Seconds before the next try of this entry: the provider's own wait where it asked
        for one (a cooldown of the provider, whatever the failure), else the backoff's."""
        if exc.retry_after is not None:
            provider = entry.model.provider.name
            self.cooldowns.ask(provider, self.clock() + exc.retry_after, exc)
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
            number=0 if outcome == "skipped" else self.next_number,
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


def _too_long(
    entry: ChainEntry, wait: float, kind: FailureKind, status: int | None, request_id: str | None
) -> ProviderError:
    """A provider that asks for a longer wait than the retry policy allows (``kind`` and
    ``status``: the failure it asked with), with no model left to fail over to: failing now
    beats holding the run (and, in a worker, its agent's whole mailbox) for as long as the
    provider likes."""
    provider = entry.model.provider.name
    what = (
        f"is rate-limiting {entry.model.ref}"
        if kind is FailureKind.RATE_LIMIT
        else f"cannot serve {entry.model.ref} now" + (f" ({status})" if status else "")
    )
    error = ProviderError(
        kind,
        f"{provider} {what} and asked to wait {round(wait, 1):g} s, longer than "
        f"retry.max_delay_s ({entry.retry.max_delay_s:g} s) allows: not waiting",
        provider=provider,
        model=entry.model.name,
        status=status,
        retry_after=wait,
        request_id=request_id,
    )
    error.hint = (
        "Add a fallback model from another provider, raise retry.max_delay_s in the agent "
        "file if waiting that long is fine, or try again later."
    )
    return error
