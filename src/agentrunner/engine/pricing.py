"""What a response cost, in integer micro-dollars, priced by the *configured* provider.

Order: a ``[prices."provider:model"]`` override; free local providers (``test``, ``ollama``);
genai-prices for the providers it knows (under their genai-prices id). Anything else is
unknown: reported as ``None`` (``cost_known: false`` in events), warned about once, never a
crash and never a silent zero. A local OpenAI-compatible server is never priced as OpenAI.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from agentrunner.config import PriceOverride
from agentrunner.engine.messages import Usage

__all__ = ["PriceBook"]

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
FREE_PROVIDERS = frozenset({"test", "ollama", "scripted", "function"})
_MICROS = Decimal(1_000_000)


class PriceBook:
    def __init__(self, overrides: Mapping[str, PriceOverride] | None = None) -> None:
        # Decimal rates are made once here: converting floats through str on every response
        # was a measurable part of a turn.
        self._overrides = {ref: _Rates.of(price) for ref, price in (overrides or {}).items()}
        self._warned: set[str] = set()

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
