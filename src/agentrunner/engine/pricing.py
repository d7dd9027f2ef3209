"""What a response cost, in integer micro-dollars, priced by the *configured* provider.

Order: a ``[prices."provider:model"]`` override; free local providers (``test``, ``ollama``);
genai-prices for the providers it knows (under their genai-prices id). Anything else is
unknown: reported as ``None`` (``cost_known: false`` in events), warned about once, never a
crash and never a silent zero. A local OpenAI-compatible server is never priced as OpenAI.
genai-prices' data also gives most models' context windows (``listed_context_window``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from agentrunner.config import PriceOverride
from agentrunner.engine.messages import Usage

__all__ = ["CacheCost", "PriceBook", "Rates", "listed_context_window"]

log = logging.getLogger("agentrunner.pricing")

# agentrunner provider name → genai-prices provider id. Providers not listed are priced only
# by override: a custom base_url is some other server, whatever wire protocol it speaks.
GENAI_PRICES_IDS: Mapping[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "groq": "groq",
    "deepseek": "deepseek",
    "openrouter": "openrouter",
    "gemini": "google",
}
FREE_PROVIDERS = frozenset({"test", "local", "ollama", "scripted", "function"})
_MICROS = Decimal(1_000_000)


class PriceBook:
    """What models cost. ``allow_unpriced`` (``[budgets] allow_unpriced``): a model with no
    known price may run under a budget, uncounted; else a budget refuses it
    (``engine.budget``: ``price_unknown``)."""

    def __init__(
        self,
        overrides: Mapping[str, PriceOverride] | None = None,
        *,
        allow_unpriced: bool = False,
    ) -> None:
        self.allow_unpriced = allow_unpriced
        # Decimal rates are made once here: converting floats through str on every response
        # was a measurable part of a turn.
        self._overrides = {ref: _Rates.of(price) for ref, price in (overrides or {}).items()}
        self._warned: set[str] = set()
        self._rates: dict[str, Rates | None] = {}

    def refused(self, provider: str, model: str) -> bool:
        """Whether a budget refuses ``provider:model`` (``price_unknown``): its price unknown,
        and ``allow_unpriced`` not set. What ``engine.budget`` enforces and what checks made
        before a run (``agents validate``, an eval's judge) say of it."""
        return not self.allow_unpriced and self.rates(provider, model) is None

    def cost_micros(
        self, provider: str, model: str, usage: Usage, reported_model: str = ""
    ) -> int | None:
        """The cost of ``usage`` on ``provider:model`` in micro-dollars, or None if unknown."""
        override = self._overrides.get(f"{provider}:{model}")
        if override is not None:
            return override.micros(usage)
        if provider in FREE_PROVIDERS:
            return 0
        provider_id = GENAI_PRICES_IDS.get(provider)
        if provider_id is not None:
            for ref in (model, reported_model):
                if ref:
                    price = _genai_price(provider_id, ref, usage)
                    if price is not None:
                        return price
        self._warn(f"{provider}:{model}")
        return None

    def cache_cost(
        self, provider: str, model: str, read: int, written: int, requests: int = 1
    ) -> CacheCost | None:
        """What ``read`` tokens from the prompt cache and ``written`` to it cost over
        ``requests`` requests, and what the same tokens would have cost as plain input; None
        when the price is unknown. The tokens are shared out evenly over the requests, each
        priced on its own, so a model priced by tier of input size is priced at the tier
        requests of that size are in."""
        count = max(requests, 1)

        def priced(tokens: int, usage: Callable[[int], Usage]) -> int | None:
            total = 0
            share, more = divmod(tokens, count)  # ``more`` requests get one token more
            for size, times in ((share, count - more), (share + 1, more)):
                if size and times:
                    micros = self.cost_micros(provider, model, usage(size))
                    if micros is None:
                        return None
                    total += micros * times
            return total

        read_micros = priced(read, lambda n: Usage(input_tokens=n, cache_read_tokens=n))
        write_micros = priced(written, lambda n: Usage(input_tokens=n, cache_write_tokens=n))
        plain = priced(read + written, lambda n: Usage(input_tokens=n))
        if read_micros is None or write_micros is None or plain is None:
            return None
        return CacheCost(read_micros, write_micros, plain)

    def rates(self, provider: str, model: str) -> Rates | None:
        """The most ``provider:model`` can charge per token, by tier (a cache write priced as
        input where that costs more), for bounding what a request may cost; None when its
        price is unknown. Looked up once per model: genai-prices takes ~100 us a call."""
        ref = f"{provider}:{model}"
        if ref in self._rates:
            return self._rates[ref]
        override = self._overrides.get(ref)
        found: Rates | None
        if override is not None:
            found = Rates.flat(max(override.input, override.cache_write), override.output)
        elif provider in FREE_PROVIDERS:
            found = Rates.flat(Decimal(0), Decimal(0))
        else:
            provider_id = GENAI_PRICES_IDS.get(provider)
            found = _genai_rates(provider_id, model) if provider_id is not None else None
        self._rates[ref] = found
        return found

    def _warn(self, ref: str) -> None:
        if ref in self._warned:
            return
        self._warned.add(ref)
        log.warning(
            'no price known for %s: its cost is reported as unknown. Add [prices."%s"] to '
            "agentrunner.toml to price it.",
            ref,
            ref,
        )


def listed_context_window(provider: str, model: str) -> int | None:
    """The context window genai-prices lists for ``provider:model`` (its data has them for most
    models it prices), or None: a provider it does not price, a model it does not know or whose
    window it leaves out."""
    provider_id = GENAI_PRICES_IDS.get(provider)
    if provider_id is None:
        return None
    from genai_prices import Usage as GenaiUsage
    from genai_prices import calc_price

    try:
        found = calc_price(
            GenaiUsage(input_tokens=1, output_tokens=1), model_ref=model, provider_id=provider_id
        ).model
    except LookupError:
        return None
    return found.context_window


def _genai_price(provider_id: str, model: str, usage: Usage) -> int | None:
    from genai_prices import Usage as GenaiUsage
    from genai_prices import calc_price

    try:
        result = calc_price(
            GenaiUsage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens or None,
                cache_write_tokens=usage.cache_write_tokens or None,
            ),
            model_ref=model,
            provider_id=provider_id,
        )
    except LookupError:
        return None
    return int((Decimal(result.total_price) * _MICROS).to_integral_value())


@dataclass(frozen=True, slots=True)
class CacheCost:
    """Prompt-cache tokens priced, in micro-dollars: the reads, the writes, and the same tokens
    as plain input (``saved`` is the difference: negative where writes cost more than reads
    saved)."""

    read_micros: int
    write_micros: int
    plain_micros: int

    @property
    def saved_micros(self) -> int:
        return self.plain_micros - self.read_micros - self.write_micros


Tiers = tuple[tuple[int, Decimal], ...]  # (from this many input tokens on, $ per Mtok)


@dataclass(frozen=True, slots=True)
class Rates:
    """The most a model charges per token, by tier of input size. A price in dollars per
    million tokens is micro-dollars per token."""

    input: Tiers
    output: Tiers

    @classmethod
    def flat(cls, input: Decimal, output: Decimal) -> Rates:
        return cls(((0, input),), ((0, output),))

    @property
    def free(self) -> bool:
        return not any(p for _, p in self.input) and not any(p for _, p in self.output)

    def input_micros(self, input_tokens: int) -> int:
        return math.ceil(_at(self.input, input_tokens) * input_tokens)

    def output_micros(self, output_tokens: int, input_tokens: int) -> int:
        return math.ceil(_at(self.output, input_tokens) * output_tokens)

    def output_tokens_within(self, micros: int, input_tokens: int) -> int:
        """How many output tokens ``micros`` pays for (any number when output is free)."""
        if micros <= 0:
            return 0
        price = _at(self.output, input_tokens)
        return 2**31 if not price else math.floor(micros / price)


def _at(tiers: Tiers, input_tokens: int) -> Decimal:
    price = tiers[0][1]
    for start, tier_price in tiers:
        if input_tokens >= start:
            price = tier_price
    return price


def _genai_rates(provider_id: str, model: str) -> Rates | None:
    from genai_prices import Usage as GenaiUsage
    from genai_prices import calc_price

    try:
        found = calc_price(
            GenaiUsage(input_tokens=1, output_tokens=1), model_ref=model, provider_id=provider_id
        ).model_price
    except LookupError:
        return None
    input_tiers, write_tiers = _tiers(found.input_mtok), _tiers(found.cache_write_mtok)
    starts = sorted({start for start, _ in (*input_tiers, *write_tiers)})
    # A cache write may cost more than plain input (Anthropic: 1.25x): bound input by either.
    dearer = tuple((s, max(_at(input_tiers, s), _at(write_tiers, s))) for s in starts)
    return Rates(dearer, _tiers(found.output_mtok))


def _tiers(price: Any) -> Tiers:
    """genai-prices' price (a number, tiered prices, or None: not charged) as tiers."""
    if price is None:
        return ((0, Decimal(0)),)
    if isinstance(price, Decimal | int | float):
        return ((0, Decimal(str(price))),)
    tiers = [(int(tier.start), Decimal(str(tier.price))) for tier in price.tiers]
    return ((0, Decimal(str(price.base))), *tiers)


@dataclass(frozen=True, slots=True)
class _Rates:
    """An override's prices as exact decimals, dollars per million tokens."""

    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: Decimal

    @classmethod
    def of(cls, price: PriceOverride) -> _Rates:
        read = price.cache_read_per_mtok
        write = price.cache_write_per_mtok
        return cls(
            Decimal(str(price.input_per_mtok)),
            Decimal(str(price.output_per_mtok)),
            Decimal(str(read if read is not None else price.input_per_mtok)),
            Decimal(str(write if write is not None else price.input_per_mtok)),
        )

    def micros(self, usage: Usage) -> int:
        plain = usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens
        dollars_per_mtok = (
            self.input * max(plain, 0)
            + self.cache_read * usage.cache_read_tokens
            + self.cache_write * usage.cache_write_tokens
            + self.output * usage.output_tokens
        )
        # $/Mtok × tokens = micro-dollars.
        return int(dollars_per_mtok.to_integral_value())
