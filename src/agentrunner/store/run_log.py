"""``RunLog``: a run's progress written as it happens — events with their sequence numbers,
steps, run messages and cost rows — so a crash mid-run leaves a truthful partial record.

The log records; it does not interpret. What an event means for the run's other rows (a step
begins, a cost is charged, a tool call is made) is its reader's to say (``run_rows``), through
``derive``, which adds those rows to the same batch as the event.

Writes are ordered write-behind: rows are submitted without waiting (a few milliseconds of
events at a time, so token bursts share one transaction) and ``flush()`` is awaited only at the
points that must be durable before going on — before tools execute, and at the end of the run.
How long rows wait depends on whether anyone tails the store (``store/changes``): nobody, up to
``FLUSH_DELAY_S``, so a quick turn's rows ride with its durable points; someone (an event
stream, the dashboard), the first event after ``LIVE_DELAY_S`` without a commit at once (the
loop's next turn) and the rest at most ``LIVE_DELAY_S`` after the last commit, so an event
reaches a reader in milliseconds while a token burst still shares transactions.
A run's writes commit in the order they were made, so events commit in sequence order and a
reader tailing the table never sees a gap that fills in later; a crash loses at most the last
unwritten rows, never their order. A transaction that writes events names what changed (the
run, and ``changed``: its thread, its parent run; a channel whose rows it writes) for the
processes tailing the store (``store/changes``): one row per transaction, not per event.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentrunner.core.ids import new_id
from agentrunner.events import DELTA_TEXT, EventData, EventSink
from agentrunner.store.changes import payload, run_key
from agentrunner.store.costs import today
from agentrunner.store.drivers import Op
from agentrunner.store.records import to_json
from agentrunner.store.store import Store

__all__ = ["Derive", "RunLog"]

# Events wait at most this long before a background flush writes them; a turn's durable points
# (before tools run, the end) flush at once. Batching a few milliseconds of tokens into one
# transaction is most of what makes a durable turn cheap.
FLUSH_DELAY_S = 0.02
# With someone tailing the store: at most one write-behind commit per run this often, the
# first after a quiet moment at once.
LIVE_DELAY_S = 0.005
Derive = Callable[[str, EventData, float], None]
"""Called with each event but the deltas, and the time it was recorded, to add the rows it
implies (through the log's row methods) to the same batch."""


class RunLog:
    def __init__(
        self,
        store: Store,
        run_id: str,
        agent_id: str,
        forward: EventSink | None = None,
        derive: Derive | None = None,
        changed: Sequence[str] = (),
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.agent_id = agent_id
        self.forward = forward
        self.derive = derive
        self.seq = 0
        self.step_id: str | None = None  # the step in progress: run messages belong to it
        self._pending: list[Op] = []
        self._step_row: dict[str, Any] | None = None  # the step's insert, while still pending
        self._stream: _Stream | None = None  # the delta row still taking deltas
        self._flushing = asyncio.Lock()
        self._timer: asyncio.TimerHandle | asyncio.Handle | None = None  # the next write
        self._tail: asyncio.Future[None] | None = None
        self._committed = float("-inf")  # when the last commit was asked for (the loop's time)
        self._listened = store.changes.listened
        self._told = 0  # the last event whose transaction said so (store/changes)
        self._also: list[str] = []  # more keys the next transaction changes (a channel's)
        sql = store.sql
        self._changed = (run_key(run_id), *changed)
        self._changes_sql = sql["changes_notify"]
        keys = {"keys": payload(self._changed)}
        self._changed_op: Op = ("changes_notify", self._changes_sql, keys)
        self._event_sql = sql["event_insert"]
        self._run_message_sql = sql["run_message_insert"]
        self._step_insert_sql = sql["step_insert"]
        self._step_finish_sql = sql["step_finish"]
        self._cost_sql = sql["cost_insert"]
        self._cost_total_sql = sql["cost_total_add"]

    # -- writing ---------------------------------------------------------------------------

    def emit(self, kind: str, data: EventData) -> None:
        """The engine's event sink: record the event (and what ``derive`` adds), forward it.

        Deltas (``agent.token``, ``agent.thinking``) are forwarded one by one but stored
        merged: the deltas of one kind that follow each other before the next write become one
        row with their text joined, so a long answer is a few rows, not hundreds."""
        text_key = DELTA_TEXT.get(kind)
        if text_key is not None:
            stream = self._stream
            delta: Mapping[str, Any] = data  # read by field name: any delta kind
            if stream is not None and stream.kind == kind and stream.matches(delta):
                stream.parts.append(delta[text_key])
                if self.forward is not None:
                    self.forward(kind, data)
                return
        if self._stream is not None:
            self._end_stream()
        self.seq += 1
        now = time.time()
        row = {
            "run_id": self.run_id,
            "seq": self.seq,
            "type": kind,
            # a delta's row gets its payload once its stream ends, its text joined: one encoding
            "payload": None if text_key is not None else to_json(data),
            "now": now,
        }
        self._pending.append(("event_insert", self._event_sql, row))
        if text_key is not None:
            self._stream = _Stream(kind, text_key, data, row)
        elif self.derive is not None:
            self.derive(kind, data, now)
        if self.forward is not None:
            self.forward(kind, data)
        if self._timer is None:
            self._schedule()

    def _end_stream(self) -> None:
        """Write the open delta row's payload, its text joined; later deltas start a new row.
        Every way rows leave ``_pending`` ends the stream first (``_take_pending``)."""
        stream, self._stream = self._stream, None
        if stream is not None:
            parts = stream.parts
            data = (
                stream.data if len(parts) == 1 else {**stream.data, stream.text_key: "".join(parts)}
            )
            stream.row["payload"] = to_json(data)

    def message(self, message_type: str, content: str) -> None:
        """A run message that is not an engine event (the system prompt, the user message)."""
        self.run_message(message_type, content, time.time())

    def write(self, rows: list[Op], *, changed: str | None = None) -> None:
        """Write ``rows`` with the run's next batch of events: within ``FLUSH_DELAY_S``, or
        sooner with the next durable point. ``changed``: the key of what they change for
        readers besides the run (``store/changes``: a channel's feed)."""
        self._pending.extend(rows)
        if changed is not None:
            self._also.append(changed)
        if self._timer is None:
            self._schedule()

    def submit(self, rows: list[Op]) -> None:
        """Commit ``rows`` behind the run's back: after every earlier write of this run, without
        waiting — on SQLite during the loop's next idle moment, typically while a model request
        is in flight. The next ``flush`` waits for it and raises its error."""
        previous = self._tail
        if previous is None or self.store.dialect == "sqlite":
            # SQLite commits submissions in order on this thread; no chaining needed.
            self._tail = self.store.submit(rows)
        else:
            self._tail = asyncio.ensure_future(self._after(previous, rows))

    async def flush(self) -> None:
        await self.flush_with([])

    async def flush_with(self, rows: list[Op]) -> None:
        """Commit what is pending together with ``rows`` in one transaction, after every earlier
        write of this run; return once it is committed."""
        async with self._flushing:
            ops = self._take_pending()
            self._committed = asyncio.get_running_loop().time()
            previous, self._tail = self._tail, None
            if previous is not None:
                await previous
            if ops or rows:
                await self.store.batch([*ops, *rows])

    async def _after(self, previous: asyncio.Future[None], rows: list[Op]) -> None:
        await previous
        await self.store.batch(rows)

    def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        if not self._listened():
            self._timer = loop.call_later(FLUSH_DELAY_S, self._kick)
            return
        delay = self._committed + LIVE_DELAY_S - loop.time()
        if delay > 0:
            self._timer = loop.call_later(delay, self._kick)
        else:
            self._timer = loop.call_soon(self._kick)

    def _kick(self) -> None:
        self._timer = None
        if self._pending:
            self._committed = asyncio.get_running_loop().time()
            self.submit(self._take_pending())

    def _take_pending(self) -> list[Op]:
        """Hand the pending rows over to be written; from here on a step's row is written, so
        finishing it takes an update."""
        self._end_stream()
        ops, self._pending = self._pending, []
        self._step_row = None
        if self._timer is not None:  # what it was to write goes now: the next rows time anew
            self._timer.cancel()
            self._timer = None
        if self.seq != self._told or self._also:  # readers of the run (or a channel) to wake
            self._told = self.seq
            if self._also:
                keys, self._also = [*self._changed, *dict.fromkeys(self._also)], []
                ops.append(("changes_notify", self._changes_sql, {"keys": payload(keys)}))
            else:
                ops.append(self._changed_op)
        return ops

    # -- rows beside the events --------------------------------------------------------------

    def run_message(
        self,
        message_type: str,
        content: str,
        now: float,
        *,
        tool_name: str | None = None,
        tool_input: Any = None,
        tool_call_id: str | None = None,
        is_error: bool | None = None,
    ) -> None:
        """A run message, in the step in progress."""
        self._pending.append(
            (
                "run_message_insert",
                self._run_message_sql,
                {
                    "id": new_id(),
                    "run_id": self.run_id,
                    "step_id": self.step_id,
                    "message_type": message_type,
                    "content": content,
                    "tool_name": tool_name,
                    "tool_input": to_json(tool_input),
                    "tool_call_id": tool_call_id,
                    "is_error": is_error,
                    "now": now,
                },
            )
        )

    def start_step(self, number: int, model: str, now: float) -> None:
        """A step row, ``running``; it is the step in progress until the next one starts."""
        self.step_id = new_id()
        self._step_row = {
            "id": self.step_id,
            "run_id": self.run_id,
            "step_number": number,
            "status": "running",
            "model_id": model,
            "token_usage": None,
            "cost_micros": None,
            "attempts": None,
            "now": now,
            "completed_at": None,
        }
        self._pending.append(("step_insert", self._step_insert_sql, self._step_row))

    def finish_step(
        self,
        status: str,
        model: str,
        usage: Mapping[str, int],
        cost_micros: int | None,
        attempts: list[dict[str, Any]],
        now: float,
    ) -> None:
        """The step in progress ends with ``status``: as an update of its row, or, while its
        insert is still pending, in that insert (one row, not two writes)."""
        finish = {
            "status": status,
            "model_id": model,
            "token_usage": to_json(usage),
            "cost_micros": cost_micros,
            "attempts": to_json(attempts),
        }
        if self._step_row is not None:
            self._step_row.update(finish, completed_at=now)
        else:
            self._pending.append(
                (
                    "step_finish",
                    self._step_finish_sql,
                    {"run_id": self.run_id, "id": self.step_id, **finish, "now": now},
                )
            )

    def cost(
        self,
        model: str,
        usage: Mapping[str, int],
        cost_micros: int | None,
        estimated: bool,
        now: float,
    ) -> None:
        """A cost row for one model request, and what it adds to its day's totals (what every
        report and budget check reads)."""
        day = today(now)
        self._pending.append(
            (
                "cost_insert",
                self._cost_sql,
                {
                    "id": new_id(),
                    "run_id": self.run_id,
                    "agent_id": self.agent_id,
                    "model": model,
                    **usage,
                    "cost_micros": cost_micros,
                    "estimated": estimated,
                    "day": day,
                    "now": now,
                },
            )
        )
        priced = cost_micros is not None
        self._pending.append(
            (
                "cost_total_add",
                self._cost_total_sql,
                {
                    "day": day,
                    "agent_id": self.agent_id,
                    "model": model,
                    **usage,
                    "micros": cost_micros or 0,
                    "unknown": 0 if priced else 1,
                    "priced_cache_read_tokens": usage["cache_read_tokens"] if priced else 0,
                    "priced_cache_write_tokens": usage["cache_write_tokens"] if priced else 0,
                },
            )
        )


class _Stream:
    """A pending delta row and the deltas merged into it so far."""

    __slots__ = ("data", "kind", "parts", "row", "text_key")

    def __init__(self, kind: str, text_key: str, data: Mapping[str, Any], row: dict[str, Any]):
        self.kind = kind
        self.text_key = text_key
        self.data = data
        self.row = row
        self.parts: list[str] = [data[text_key]]

    def matches(self, data: Mapping[str, Any]) -> bool:
        """The same stream: every field but the text equal (the model, a child's marker)."""
        first = self.data
        if len(data) != len(first):
            return False
        for key, value in data.items():  # a loop, not all(): this runs once per delta
            if key != self.text_key and first.get(key) != value:
                return False
        return True
