"""``[budgets]`` and ``[prices."provider:model"]``: what runs may spend, and what models cost."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from agentrunner.config.source import Table
from agentrunner.config.values import flag, usd

__all__ = ["Budgets", "PriceOverride", "Prices"]


@dataclass(frozen=True, slots=True)
class Budgets:
    """Spending limits in US dollars (DESIGN decision 5); ``None`` means no limit.
    ``allow_unpriced``: a model with no known price may run under them, its cost uncounted
    (else such a run is refused: ``price_unknown``)."""

    NAME: ClassVar[str] = "budgets"
    KEYS: ClassVar[tuple[str, ...]] = (
        "per_run_usd",
        "per_agent_daily_usd",
        "global_daily_usd",
        "allow_unpriced",
    )

    per_run_usd: float | None = None
    per_agent_daily_usd: float | None = None
    global_daily_usd: float | None = None
    allow_unpriced: bool = False

    @property
    def daily(self) -> bool:
        """Whether a daily limit is set (an agent's, everyone's)."""
        return self.per_agent_daily_usd is not None or self.global_daily_usd is not None

    @classmethod
    def read(cls, table: Table) -> Budgets:
        """``[budgets]``: each limit a non-negative number of dollars."""
        limits = {k: usd(table, k) for k in table.values if k != "allow_unpriced"}
        return cls(**limits, allow_unpriced=flag(table, "allow_unpriced", False))


@dataclass(frozen=True, slots=True)
class PriceOverride:
    """A model's price in US dollars per million tokens, overriding genai-prices."""

    KEYS: ClassVar[tuple[str, ...]] = (
        "input_per_mtok",
        "output_per_mtok",
        "cache_read_per_mtok",
        "cache_write_per_mtok",
    )

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0
    cache_read_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None

    @classmethod
    def read(cls, table: Table) -> PriceOverride:
        """One ``[prices."provider:model"]`` table."""
        table.check_entry_keys(cls.KEYS)
        return cls(**{k: usd(table, k) for k in table.values})


@dataclass(frozen=True, slots=True)
class Prices:
    """``[prices]``: a ``PriceOverride`` by model reference."""

    NAME: ClassVar[str] = "prices"
    KEYS: ClassVar[tuple[str, ...]] = ()  # a table of named tables, each checking its own

    by_model: Mapping[str, PriceOverride]

    @classmethod
    def read(cls, table: Table) -> Prices:
        not_a_table = '[prices."{name}"] must be a table of per-million-token prices'
        return cls(table.each(not_a_table, PriceOverride.read))
