"""A run as people give its id: whole, its beginning (as with git's short hashes), or its end
as the dashboard shows it (``ids.short_id``). The one lookup for runs and jobs (a job is a
run), whichever interface the id was typed or copied into."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrunner.core.ids import SHORT_LENGTH
from agentrunner.errors import AgentRunnerError, ErrorCode

if TYPE_CHECKING:
    from agentrunner.store.records import RunRecord
    from agentrunner.store.store import Store

__all__ = ["find_run"]

_SHOWN = 5  # candidates named when more than one run matches
_END = SHORT_LENGTH  # the fewest characters of an id's end that name a run: what pages show


async def find_run(
    store: Store, given: str, *, kind: str = "run", hint: str = "See `agentrunner runs list`."
) -> RunRecord:
    """The run ``given`` names: the one with that id, else the only one whose id begins or
    ends with it. ``not_found`` (with ``hint``) when none does, ``validation`` naming the
    candidates when several do; ``kind`` is the word for it in both (``job``)."""
    run = await store.runs.get(given)
    if run is not None or not given:
        return _found(run, given, kind, hint)
    ids = await store.runs.ids_starting(given, _SHOWN + 1)
    # An end as the dashboard shows one, not a character or two: a typo that happens to end a
    # run's id must not name it (a replay or a kill of the wrong run).
    ending = await store.runs.ids_ending(given, _SHOWN + 1) if len(given) >= _END else []
    for more in ending:
        if more not in ids:
            ids.append(more)
    if len(ids) > 1:
        listed = ", ".join(sorted(ids)[:_SHOWN]) + (", …" if len(ids) > _SHOWN else "")
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"'{given}' could be more than one {kind}: {listed}",
            hint="Give more of the id.",
        )
    return _found(await store.runs.get(ids[0]) if ids else None, given, kind, hint)


def _found(run: RunRecord | None, given: str, kind: str, hint: str) -> RunRecord:
    if run is None:
        raise AgentRunnerError(
            ErrorCode.NOT_FOUND, f"no {kind} '{given}'", hint=hint, details={"not_found": kind}
        )
    return run
