"""Identifiers that sort by creation time, so new rows land at the end of their B-tree indexes
instead of on random pages, and rows keyed by them list in the order they were made.

Layout (hex): 12 digits of milliseconds, 4 of a per-process sequence within that millisecond,
6 random. Strictly increasing within a process; unique across processes. The random part
comes from ``random`` (seeded from the OS, and again in a forked child), not ``secrets``: ids
are not secrets, and a system call per id was a visible part of a turn.

An id's short form, as pages show it (``short_id``), is its random end: its beginning is the
time it was made, which ids made together share. ``run_ids.find_run`` takes it back.
"""

from __future__ import annotations

import random
import time

__all__ = ["SHORT_LENGTH", "new_id", "short_id"]

SHORT_LENGTH = 6  # the random digits: what tells apart ids made in the same moment
_bits = random.getrandbits
_last_ms = 0
_sequence = 0


def new_id(prefix: str = "") -> str:
    global _last_ms, _sequence
    ms = time.time_ns() // 1_000_000
    if ms <= _last_ms:
        ms = _last_ms
        _sequence += 1
        if _sequence > 0xFFFF:  # more than 65,536 ids in one millisecond: borrow the next one
            ms, _sequence = ms + 1, 0
    else:
        _sequence = 0
    _last_ms = ms
    return f"{prefix}{ms:012x}{_sequence:04x}{_bits(24):06x}"


def short_id(identifier: str) -> str:
    """The id as a page shows it: its last ``SHORT_LENGTH`` characters (its random part)."""
    return identifier[-SHORT_LENGTH:]
