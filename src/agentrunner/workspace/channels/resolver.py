"""Who hears a message (seed 003's resolver table). Pure: no I/O.

| message | targets |
| --- | --- |
| channel message | every member of the channel, except the sender |
| private channel message | only the channel's members, except the sender |
| DM | the other participant |
| thread reply | the thread's original author and everyone who replied in it, except the sender |

Only agents get runs; people read. Targets come out in id order (the ordering rule for one
message that triggers several agents: their runs are queued in agent-id order, in one
transaction; each agent's mailbox is FIFO and different agents run in parallel).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["resolve_targets"]

Member = tuple[str, str]  # (name, "agent" | "person")


def resolve_targets(
    *,
    kind: str,
    members: Iterable[Member],
    sender: str,
    thread_participants: Iterable[Member] | None = None,
) -> list[str]:
    """The agents that should get a run for a message from ``sender``."""
    pool = list(thread_participants) if thread_participants is not None else list(members)
    if kind == "dm" and thread_participants is None:
        pool = [m for m in pool if m[0] != sender][:1]
    return sorted({name for name, member_kind in pool if member_kind == "agent" and name != sender})
