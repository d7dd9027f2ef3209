"""How paths are shown to users: relative to the working directory when under it."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["display_path"]


def display_path(path: Path | str | None) -> str:
    if path is None:
        return "<memory>"
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)
    return str(path) if rel.startswith("..") else rel
