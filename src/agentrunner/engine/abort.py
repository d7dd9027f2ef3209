"""``AbortSignal``: how a caller stops a running turn (seed 000's AbortController).

Aborting cancels the task that runs the turn at its current ``await`` — the HTTP stream is closed
and running tools are cancelled at once — and the turn ends as ``cancelled``. Safe to call from
any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

__all__ = ["AbortSignal"]


class AbortSignal:
    __slots__ = ("_callbacks", "_loop", "reason")

    def __init__(self) -> None:
        self.reason: str | None = None
        self._callbacks: list[Callable[[], None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def aborted(self) -> bool:
        return self.reason is not None

    def abort(self, reason: str = "aborted by the caller") -> None:
        if self.reason is not None:
            return
        self.reason = reason
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for callback in list(self._callbacks):
            if loop is not None and loop is not running:
                loop.call_soon_threadsafe(callback)
            else:
                callback()

    def on_abort(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` when aborted (at once if already); returns an unsubscribe function."""
        with contextlib.suppress(RuntimeError):
            self._loop = asyncio.get_running_loop()
        if self.reason is not None:
            callback()
            return lambda: None
        self._callbacks.append(callback)

        def remove() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return remove
