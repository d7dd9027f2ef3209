"""``[guards]``: the built-in guards a project turns on for every agent (docs/approvals.md,
"Guards and policies").

``write_paths``: the only paths the ``files`` capability's ``write_file`` may write, relative to
where its paths start (the project directory; a sandboxed agent's own workspace) or absolute —
a folder ending in ``/`` (everything below it), a file, or either with globs in its parts
(``out/*.md``). A write anywhere else is denied: the model is told why and the run goes on.
Unset: no such rule. How a path is matched is ``run.guards``'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from agentrunner.config.source import Table

__all__ = ["GUARDS_KEYS", "GuardSettings"]

GUARDS_KEYS: tuple[str, ...] = ("write_paths",)
_HINT = (
    'A list of paths write_file may write, e.g. write_paths = ["notes/", "out/*.md"]: a folder '
    "ends in /, a part may hold a glob (* ? [...]); relative to the project directory (a "
    "sandboxed agent's workspace)."
)


@dataclass(frozen=True, slots=True)
class GuardSettings:
    """``[guards]``: ``write_paths`` None when unset (then ``write_file`` may write wherever
    the agent's trust lets it)."""

    NAME: ClassVar[str] = "guards"
    KEYS: ClassVar[tuple[str, ...]] = GUARDS_KEYS

    write_paths: tuple[str, ...] | None = None

    @classmethod
    def read(cls, table: Table) -> GuardSettings:
        """``[guards]``; ``invalid_specification`` at the line of a wrong value."""
        value = table.get("write_paths")
        if value is None:
            return cls()
        if not isinstance(value, list):
            raise table.error(
                "write_paths", f"guards.write_paths must be a list of paths, got {value!r}", _HINT
            )
        for path in value:
            if not isinstance(path, str) or not path.strip() or "\0" in path:
                raise table.error(
                    "write_paths", f"guards.write_paths holds {path!r}, which is not a path", _HINT
                )
            if ".." in path.split("/"):
                raise table.error(
                    "write_paths",
                    f"guards.write_paths: {path!r} leads up a folder (..); name the folder itself",
                    _HINT,
                )
        return cls(tuple(dict.fromkeys(value)))
