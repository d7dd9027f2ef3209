"""``agentrunner gc``: apply ``[retention]`` now, every rule to its end (workers apply it a few
seconds at a time); ``--dry-run`` counts what it would remove, the same rows."""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING

import typer

from agentrunner.interfaces.cli.console import Column, err, listing, out
from agentrunner.interfaces.cli.cost import with_project_store

if TYPE_CHECKING:
    from agentrunner.agents.project import Project
    from agentrunner.config.retention import Retention
    from agentrunner.store.store import Store
    from agentrunner.workspace.retention import Removal

__all__ = ["gc"]

# Each rule's words: what it removes, and the kinds of row it counts, in the order shown.
_RULES = {
    "runs": ("settled runs", ("runs", "steps", "run_messages", "events")),
    "events": ("events of settled runs", ("events",)),
    "run_messages": ("run messages of settled runs", ("run_messages",)),
    "token_deltas": ("token deltas of settled runs", ("events",)),
    "compaction": ("token deltas merged, a row per stream", ("merged",)),
    "costs": ("cost rows (the day totals stay)", ("costs",)),
}
_KINDS = {
    "runs": ("run", "runs"),
    "steps": ("step", "steps"),
    "run_messages": ("run message", "run messages"),
    "events": ("event", "events"),
    "merged": ("row merged into another", "rows merged into others"),
    "costs": ("cost row", "cost rows"),
}


def gc(
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Count what would be removed; remove nothing."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print it as JSON, for scripts."),
) -> None:
    """Remove now what the retention rules of agentrunner.toml say is old enough to go
    (workers do it as they run); --dry-run counts it."""
    from agentrunner.workspace.retention import Removal, apply_retention, pass_held

    removal = Removal()  # what went, batch by batch: what a Ctrl-C can still say

    def waiting() -> None:
        err.print(
            "[dim]another process is applying the \\[retention] rules (a worker, or a gc that "
            "stopped: it lets go within a minute); waiting for it…[/]"
        )

    async def work(project: Project, store: Store) -> Retention:
        retention = project.config.retention
        if dry_run:
            await apply_retention(store, retention, dry_run=True, removal=removal)
            return retention
        holder = f"gc:{socket.gethostname()}:{os.getpid()}"
        async with pass_held(store, holder, wait_s=90.0, waiting=waiting):
            await apply_retention(store, retention, holder=holder, removal=removal)
        return retention

    try:
        retention = with_project_store(work)
    except KeyboardInterrupt:
        # each batch is committed whole, with where its rule stopped: the next gc goes on
        if dry_run:
            err.print("[yellow]cancelled[/]")
        elif removal.total:
            err.print(
                f"[yellow]cancelled[/] after removing {removal.total:,} row(s): they stay "
                "removed, and agentrunner gc goes on from where it stopped"
            )
        else:
            err.print("[yellow]cancelled[/]: nothing was removed")
        if as_json:
            out.print_json(data={"dry_run": dry_run, **removal.to_dict(), "done": False})
        raise typer.Exit(130) from None
    if as_json:
        out.print_json(data={"dry_run": dry_run, **removal.to_dict()})
        return
    _print(retention, removal, dry_run)


def _print(retention: Retention, removal: Removal, dry_run: bool) -> None:
    rules = [  # each rule's days, as [retention] names them
        f"{key.removesuffix('_days').replace('_', ' ')} {getattr(retention, key):g} days"
        for key in retention.KEYS
        if key.endswith("_days") and getattr(retention, key) is not None
    ]
    if retention.compact_token_deltas:
        rules.append("token deltas merged a minute after a run settles")
    said = " · ".join(rules) if rules else "no rules: every row is kept"
    out.print(f"[bold]\\[retention][/] [dim]{said}[/]")
    rows = []
    for rule, (words, kinds) in _RULES.items():
        counts = removal.rows.get(rule)
        if counts is None:
            continue
        parts = [_count(counts.get(kind, 0), _KINDS[kind]) for kind in kinds]
        rows.append([rule.replace("_", " "), words, parts[0] + _with(parts[1:])])
    if not removal.total:
        out.print("[dim]nothing to remove[/]")
        return
    listing("", [Column("rule", whole=True), Column("what"), Column("rows")], rows)
    verb = "would remove" if dry_run else "removed"
    out.print(
        f"[bold]{verb} {removal.total:,} row(s)[/]" + (" [dim](--dry-run)[/]" if dry_run else "")
    )


def _count(n: int, kind: tuple[str, str]) -> str:
    return f"{n:,} {kind[0] if n == 1 else kind[1]}"


def _with(parts: list[str]) -> str:
    return f" (with {', '.join(parts)})" if parts else ""
