"""Keeping a SQLite database's write-ahead log short without stalling the writer: checkpoints on
a thread of their own, and the WAL rewound under steady writes.

A checkpoint copies the WAL back into the database and fsyncs; done on a commit it would stall
the event loop, so the writer's connection has ``wal_autocheckpoint`` off and a background
thread does them instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading

__all__ = ["WAL_KEEP_BYTES", "Checkpointer"]

WAL_KEEP_BYTES = 64 << 20  # a rewound WAL larger than this is truncated back to it
_RESTART_FRAMES = 16384  # rewind the WAL once it holds this many frames (32 MiB of 2 KiB pages)
_CAUGHT_UP_FRAMES = 64  # a catch-up round that copied no more than this: hand over
_STOP_WAIT_S = 10.0  # a last checkpoint that takes longer is left to finish on its own


class Checkpointer:
    """Copies the WAL back into the database on its own connection and thread: a passive
    checkpoint every ``interval_s`` (one with nothing to copy costs microseconds). Once the
    WAL is long, rounds follow each other until one finds little new to copy; then
    ``restart_due`` asks the writer to copy the rest and rewind (``rewind``), and rounds
    pause until it has."""

    def __init__(self, path: str, interval_s: float = 0.1) -> None:
        self._path = path
        self._interval_s = interval_s
        self.restart_due = False
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name="agentrunner-checkpoint", daemon=True
        )
        self._thread.start()

    def rewind(self, writer: sqlite3.Connection) -> None:
        """Let the WAL start over from its beginning, on the writer's connection.

        SQLite rewinds the WAL only when a write begins with every frame already copied back,
        which a background checkpoint never sees while the writer keeps committing: under
        steady load the WAL grew without end (a gigabyte in 5,000 turns) and every commit paid
        for growing a file. So once the background thread has caught up to within a few
        frames, the writer copies those itself — between two of its own transactions, a
        millisecond or two — and its next commit rewinds the WAL.
        """
        with contextlib.suppress(sqlite3.Error):  # busy: asked again after a later round
            writer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        self.restart_due = False

    async def stop(self) -> None:
        """Ask for a last checkpoint and wait for the thread to end — on another thread, so the
        event loop goes on meanwhile."""
        self._stopping.set()
        await asyncio.to_thread(self._thread.join, _STOP_WAIT_S)

    def _loop(self) -> None:
        conn = sqlite3.connect(self._path, timeout=10, check_same_thread=False)
        try:
            while not self._stopping.wait(self._interval_s):
                self._round(conn)
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            conn.close()

    def _round(self, conn: sqlite3.Connection) -> None:
        copied_before: int | None = None
        while not self.restart_due and not self._stopping.is_set():
            try:
                _, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            except sqlite3.Error:
                return  # busy: the next round tries again
            if frames < _RESTART_FRAMES:
                return
            if copied_before is not None and 0 <= copied - copied_before <= _CAUGHT_UP_FRAMES:
                self.restart_due = True
                return
            copied_before = copied
