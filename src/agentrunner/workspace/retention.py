"""``[retention]`` applied (docs/retention.md): what a settled run leaves behind, removed once
it is older than its rule says, and its token deltas merged into a row per stream. Workers
apply the rules a few seconds at a time between their runs; ``agentrunner gc`` applies them
all at once, or with ``--dry-run`` counts what it would remove.

Every rule walks the settled runs in the order they settled, a batch at a time, from where
it stopped last (``store.retention``). The rules never overlap: one that removes more takes
the older runs (``runs`` before ``events`` before ``token_deltas`` before the compaction), so
what each counts is what it removes, and a dry run walks the same batches as the real one.
What a run that has not settled needs is never a rule's: its own rows (only settled runs are
walked), its parent (a run with a child still running is kept), and its thread's transcript
(each thread's newest completed run is kept, and threads are not a rule's at all).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.events import DELTA_TEXT
from agentrunner.store.costs import today
from agentrunner.store.drivers import Op

if TYPE_CHECKING:
    from agentrunner.config.retention import Retention
    from agentrunner.store.retention import SettledRun
    from agentrunner.store.store import Store

__all__ = ["BATCH", "HOLD_S", "SETTLED_FOR_S", "Removal", "apply_retention", "pass_held"]

DAY_S = 86_400.0
BATCH = 200  # runs a transaction goes through
# A run's deltas are merged once it has been settled this long: whoever followed it live has
# read them by then (a follower that resumes later reads the merged rows, the same text).
SETTLED_FOR_S = 60.0
HOLD_S = 60.0  # how long the pass is held at a time: one whose holder died is free after it
_KEPT = "runs_kept"  # the ``runs`` rule's second walk, over the runs it kept


@dataclass(slots=True)
class Removal:
    """What each rule removed (or, dry, would remove): ``rows[rule][kind]``, kinds being
    ``runs``, ``steps``, ``run_messages``, ``events``, ``merged`` (delta rows merged into
    another) and ``costs``. ``done``: every rule went as far as it could."""

    rows: dict[str, dict[str, int]] = field(default_factory=dict)
    done: bool = True

    def add(self, rule: str, kind: str, count: int) -> None:
        if count:
            kinds = self.rows.setdefault(rule, {})
            kinds[kind] = kinds.get(kind, 0) + count

    def merge(self, other: Removal) -> None:
        for rule, kinds in other.rows.items():
            for kind, count in kinds.items():
                self.add(rule, kind, count)

    @property
    def total(self) -> int:
        return sum(sum(kinds.values()) for kinds in self.rows.values())

    def to_dict(self) -> dict[str, Any]:
        return {"rules": self.rows, "total": self.total, "done": self.done}


@dataclass(frozen=True, slots=True)
class _Rule:
    name: str
    until: float  # runs settled by then
    # A run settled by this is a bigger rule's, which removes it (or the rows this one would):
    # walked, not counted, so that a dry run counts what the real one, after the bigger rule,
    # still finds. A run the ``runs`` rule keeps is each rule's still.
    taken: float = 0.0
    taken_whole: float = 0.0  # by the ``runs`` rule: unless the run is kept


def _rules(retention: Retention, now: float) -> list[_Rule]:
    def cut(days: float | None) -> float:
        return 0.0 if days is None else now - days * DAY_S

    runs = cut(retention.runs_days)
    events = cut(retention.events_days)
    deltas = max(events, cut(retention.token_deltas_days))
    rules = []
    if retention.runs_days is not None:
        rules.append(_Rule("runs", runs))
    if retention.events_days is not None:
        rules.append(_Rule("events", events, taken_whole=runs))
    if retention.run_messages_days is not None:
        rules.append(_Rule("run_messages", cut(retention.run_messages_days), taken_whole=runs))
    if retention.token_deltas_days is not None:
        rules.append(_Rule("token_deltas", deltas, events, runs))
    if retention.compact_token_deltas:
        rules.append(_Rule("compaction", now - SETTLED_FOR_S, deltas, runs))
    return rules


async def apply_retention(
    store: Store,
    retention: Retention,
    *,
    dry_run: bool = False,
    now: float | None = None,
    seconds: float | None = None,
    pause_s: float = 0.0,
    batch: int = BATCH,
    holder: str | None = None,
    removal: Removal | None = None,
) -> Removal:
    """Apply every rule of ``retention`` as of ``now`` (default: now); with ``dry_run``, only
    count. ``seconds``: stop after about this long (``done`` False: the rest is left for the
    next time); ``pause_s``: wait this long between batches, so that a worker's runs get the
    database between them. The caller holds the pass (``pass_held``) unless it only counts;
    as ``holder``, it holds it a while longer with each batch (one that stopped, Ctrl-C or a
    kill, lets it go within ``HOLD_S``). ``removal``: what is removed is added to it as each
    batch commits (what a caller stopped midway can still say)."""
    now = time.time() if now is None else now
    deadline = None if seconds is None else time.monotonic() + seconds
    removal = Removal() if removal is None else removal
    rules = _rules(retention, now)
    for rule in rules:
        if not await _walk(store, rule, removal, dry_run, deadline, pause_s, batch, holder):
            removal.done = False
            return removal
    if retention.costs_days is not None:
        before = today(now - retention.costs_days * DAY_S)
        dropped, removal.done = await _costs(store, before, dry_run, deadline, batch)
        removal.add("costs", "costs", dropped)
        if not removal.done:
            return removal
    if rules and rules[0].name == "runs":
        # Last, with what time is left: the runs the ``runs`` rule walked past and kept (a
        # thread's newest, a run whose delegation had not settled), looked at again from the
        # first, as those that have since stopped being needed go. Everything else it walked
        # past is gone, so this reads the kept ones, round and round.
        kept = _Rule(_KEPT, min(rules[0].until, (await store.retention.cursor("runs"))[0]))
        done = await _walk(store, kept, removal, dry_run, deadline, pause_s, batch, holder)
        if done and not dry_run:
            await store.batch([store.retention.restart_op(_KEPT)])
        removal.done = done
    return removal


async def _walk(
    store: Store,
    rule: _Rule,
    removal: Removal,
    dry_run: bool,
    deadline: float | None,
    pause_s: float,
    batch: int,
    holder: str | None,
) -> bool:
    """One rule, from where it stopped to its end; False when ``deadline`` came first."""
    rows = store.retention
    after = await rows.cursor(rule.name)
    while True:
        runs = await rows.settled(after, rule.until, batch)
        if not runs:
            return True
        ops: list[Op] = []
        batch_removal = Removal()
        for run in runs:
            if run.completed_at > rule.taken and (run.kept or run.completed_at > rule.taken_whole):
                ops += await _ops(store, rule.name, run, batch_removal)
        if not dry_run:
            ops.append(rows.advance_op(rule.name, runs[-1]))
            await store.batch(ops)
            if holder is not None:
                await rows.claim(holder, HOLD_S)
        removal.merge(batch_removal)  # once committed: what a Ctrl-C stops says what went
        after = (runs[-1].completed_at, runs[-1].id)
        if deadline is not None and time.monotonic() > deadline:
            return False
        # Even for no pause: SQLite's statements run on the loop's thread, and a Ctrl-C (the
        # task cancelled) is only seen where the task yields; each batch is committed whole.
        await asyncio.sleep(pause_s)


async def _ops(store: Store, rule: str, run: SettledRun, removal: Removal) -> list[Op]:
    rows = store.retention
    if rule in ("runs", _KEPT):
        if run.kept:
            return []
        rule = "runs"
        removal.add(rule, "runs", 1)
        removal.add(rule, "steps", run.steps)
        removal.add(rule, "run_messages", run.run_messages)
        removal.add(rule, "events", run.events)
        return [rows.drop_op("events", run.id), rows.drop_op("run", run.id)]
    if rule == "events":
        removal.add(rule, "events", run.events)
        return [rows.drop_op("events", run.id), rows.mark_op(run.id, rule)] if run.events else []
    if rule == "run_messages":
        removal.add(rule, "run_messages", run.run_messages)
        if not run.run_messages:
            return []
        return [rows.drop_op("run_messages", run.id), rows.mark_op(run.id, rule)]
    if rule == "token_deltas":
        removal.add(rule, "events", run.deltas)
        return [rows.drop_op("deltas", run.id), rows.mark_op(run.id, rule)] if run.deltas else []
    if not run.following:  # the compaction: no delta right after another, nothing to merge
        return []
    ops: list[Op] = []
    for first, last, payload in _streams(await rows.deltas(run.id)):
        removal.add(rule, "merged", last[0] - first[0])
        ops.append(rows.merge_op(run.id, first[0], payload))
        ops.append(rows.drop_merged_op(run.id, first[0], last[0], first[1]))
    return ops


def _streams(
    deltas: list[dict[str, Any]],
) -> list[tuple[tuple[int, str], tuple[int, str], dict[str, Any]]]:
    """The streams of more than one row among a run's delta rows: rows of one kind, one after
    another (no other event between them) and alike but for their text — as ``RunLog`` would
    have written them as one row had it not written in between. Each as (first row, last
    row, the first's payload with the whole text)."""
    out = []
    group: list[tuple[int, str, dict[str, Any]]] = []

    def close() -> None:
        if len(group) > 1:
            seq, kind, payload = group[0]
            key = DELTA_TEXT[kind]
            whole = {**payload, key: "".join(str(p[key]) for _, _, p in group)}
            out.append(((seq, kind), (group[-1][0], kind), whole))
        group.clear()

    for row in deltas:
        payload = row["payload"]
        if isinstance(payload, str):
            payload = json.loads(payload)
        seq, kind = int(row["seq"]), str(row["type"])
        if not isinstance(payload, dict) or DELTA_TEXT[kind] not in payload:
            close()  # a row cut off mid-stream (its process died): left as it is
            continue
        if group and not _continues(group[-1], seq, kind, payload):
            close()
        group.append((seq, kind, payload))
    close()
    return out


def _continues(
    previous: tuple[int, str, dict[str, Any]], seq: int, kind: str, payload: dict[str, Any]
) -> bool:
    before_seq, before_kind, before = previous
    if seq != before_seq + 1 or kind != before_kind or len(payload) != len(before):
        return False
    key = DELTA_TEXT[kind]
    return all(k == key or before.get(k) == v for k, v in payload.items())


async def _costs(
    store: Store, before_day: str, dry_run: bool, deadline: float | None, batch: int
) -> tuple[int, bool]:
    """The cost rows of days before ``before_day`` dropped (or, dry, counted), and whether
    none is left: a drop that took fewer than it may take found the last of them."""
    if dry_run:
        return await store.retention.count_costs(before_day), True
    dropped, most = 0, batch * 10
    while True:
        gone = await store.retention.drop_costs(before_day, most)
        dropped += gone
        if gone < most:
            return dropped, True
        if deadline is not None and time.monotonic() > deadline:
            return dropped, False


@contextlib.asynccontextmanager
async def pass_held(
    store: Store,
    holder: str,
    *,
    hold_s: float = HOLD_S,
    wait_s: float = 0.0,
    waiting: Callable[[], None] | None = None,
) -> Any:
    """Hold the pass while the block runs: one process applies the rules at a time. Waits up
    to ``wait_s`` for another holder (a worker's pass is a few seconds); then, or at once,
    ``runner_io`` — unless ``wait_s`` is 0, when the block is skipped (``None`` is given).
    ``waiting`` is called once, as the wait begins."""
    waited = time.monotonic() + wait_s
    while not await store.retention.claim(holder, hold_s):
        if not wait_s:
            yield None
            return
        if waiting is not None:
            waiting()
            waiting = None
        if time.monotonic() > waited:
            raise AgentRunnerError(
                ErrorCode.RUNNER_IO,
                f"another process has been applying the [retention] rules for over {wait_s:.0f} s",
                hint="A worker applies them a few seconds at a time; run gc again in a minute.",
            )
        await asyncio.sleep(0.5)
    try:
        yield holder
    finally:
        await store.retention.release(holder)
