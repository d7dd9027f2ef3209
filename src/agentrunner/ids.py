"""Identifiers that sort by creation time (a millisecond timestamp, then randomness), so new
rows land at the end of their B-tree indexes instead of on random pages."""

from __future__ import annotations

import secrets
import time

__all__ = ["new_id"]


def new_id(prefix: str = "") -> str:
    return f"{prefix}{time.time_ns() // 1_000_000:012x}{secrets.token_hex(5)}"
