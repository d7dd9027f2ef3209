"""Company mode (seed 002, DESIGN decision 6): a thin layer over session threads, runs and
workers — ``session`` (the active company session), ``brief`` (start and brief), ``journal``
(what each brief did, for the next session) and ``jobs`` (briefs as runs: list, follow, kill,
heal, the detached worker)."""

__all__: list[str] = []
