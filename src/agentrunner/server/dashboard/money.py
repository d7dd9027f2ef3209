"""Money as the run, costs and jobs pages write it: to the micro-dollar where that matters.

A model request often costs less than a hundredth of a cent, which ``$0.0000`` would hide;
these pages show it, as ``$0.000036``, and larger sums as ``agentrunner cost`` does."""

from __future__ import annotations

__all__ = ["money"]


def money(micros: int | None) -> str:
    if micros is None:
        return "unknown"
    if micros == 0:
        return "$0"
    dollars = micros / 1e6
    if abs(micros) < 100:  # below $0.0001
        return f"${dollars:.6f}"
    if abs(dollars) < 100:
        return f"${dollars:,.4f}"
    return f"${dollars:,.2f}"
