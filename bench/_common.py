"""Shared by the benchmarks: timing statistics, a table printer, JSON results."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def pin_to_core(core: int) -> None:
    """One core per side (ENGINE-NOTES' method): the process under test on one core, the mock
    provider on another, so they do not steal each other's time slices."""
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > core:
        os.sched_setaffinity(0, {core})


def percentile(values: Sequence[float], pct: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(seconds: Sequence[float]) -> dict[str, float]:
    return {
        "runs": len(seconds),
        "min_s": min(seconds),
        "median_s": statistics.median(seconds),
        "p95_s": percentile(seconds, 95),
    }


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(h) for h in headers], *[[_fmt(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    print(f"\n{title}")
    for n, row in enumerate(cells):
        print(
            "  "
            + "  ".join(
                c.rjust(w) if i else c.ljust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if n == 0:
            print("  " + "  ".join("-" * w for w in widths))


def write_results(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {
        "benchmark": name,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        **data,
    }
    path.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"\nwrote {path}")
    return path


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)
