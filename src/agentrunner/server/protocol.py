"""uvicorn as ``agentrunner serve`` runs it, with a deadline for request heads.

uvicorn bounds the idle time between requests (``timeout_keep_alive``) but not the time a
client takes to send a request's head: every byte received cancels its keep-alive timer, so a
client that sends half a head, or trickles it a byte at a time, holds a connection for as long
as it likes (slowloris; encode/uvicorn#157 asks for ``--timeout-request-start``). This wraps
uvicorn's HTTP protocol (httptools where installed, as uvicorn's own choice is, else h11) to
close a connection whose request head is not complete ``HEADER_TIMEOUT_S`` after its connection
or its first byte. The deadline covers the head only: a response that takes long, a stream, a
kept-alive connection waiting between requests are uvicorn's as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["HEADER_TIMEOUT_S", "header_deadline_protocol", "uvicorn_config"]

HEADER_TIMEOUT_S = 5.0


class _HeaderDeadline:
    """Mixed into a uvicorn HTTP protocol class (which has ``cycle``, ``loop``, ``transport``)."""

    header_timeout_s = HEADER_TIMEOUT_S
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]
        if self._awaiting_head():
            if self._deadline is None:
                self._arm()
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]

    def _awaiting_head(self) -> bool:
        """No request is being served: what has arrived, if anything, is part of a head."""
        cycle = getattr(self, "cycle", None)
        return cycle is None or bool(cycle.response_complete)

    def _arm(self) -> None:
        self._disarm()
        loop: asyncio.AbstractEventLoop = getattr(self, "loop", None) or asyncio.get_event_loop()
        self._deadline = loop.call_later(self.header_timeout_s, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if self._awaiting_head():
            transport = getattr(self, "transport", None)
            if transport is not None and not transport.is_closing():
                transport.close()


def header_deadline_protocol() -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class with the deadline for request heads."""
    base: type[Any]
    try:
        import httptools  # noqa: F401
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
    except ImportError:  # pragma: no cover - uvicorn[standard] brings httptools
        from uvicorn.protocols.http.h11_impl import H11Protocol as base
    return type("HeaderDeadlineProtocol", (_HeaderDeadline, base), {})


def uvicorn_config(app: Any, **options: Any) -> Any:
    """The ``uvicorn.Config`` to serve ``app`` with (``options`` as uvicorn takes them)."""
    import uvicorn

    return uvicorn.Config(app, http=header_deadline_protocol(), **options)
