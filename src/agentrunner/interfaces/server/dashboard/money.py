"""Money as the run, costs and jobs pages write it: to the micro-dollar where that matters.

A model request often costs less than a hundredth of a cent, which ``$0.0000`` would hide;
these pages show it, as ``$0.000036``, and larger sums as ``agentrunner cost`` does."""

from __future__ import annotations

__all__ = ["money"]


def money(micros: int | None, *, trim: bool = False) -> str:
    """``trim``: no needless zeros, for a figure people set, as a limit (``$20``, ``$0.5``)."""
    if micros is None:
        return "unknown"
    if micros == 0:
        return "$0"
    dollars = micros / 1e6
    if abs(micros) < 100:  # below $0.0001
        said = f"{dollars:.6f}"
    elif abs(dollars) < 100:
        said = f"{dollars:,.4f}"
    else:
        said = f"{dollars:,.2f}"
    return "$" + (said.rstrip("0").rstrip(".") if trim else said)
