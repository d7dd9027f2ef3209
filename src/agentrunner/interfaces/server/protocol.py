"""uvicorn as ``agentrunner serve`` runs it: deadlines for what a client sends, and a shutdown
that no client can hold up.

uvicorn bounds the idle time between requests (``timeout_keep_alive``) but not the time a
client takes to send a request: every byte received cancels its keep-alive timer, so a client
that sends half a head, or trickles it a byte at a time, holds a connection for as long as it
likes (slowloris; encode/uvicorn#157 asks for ``--timeout-request-start``), and one that sends a
head and part of its body holds it, and a shutdown waiting for it, forever. This wraps uvicorn's
HTTP protocol (httptools where installed, as uvicorn's own choice is, else h11) to close a
connection whose request head is not complete ``HEADER_TIMEOUT_S`` after its connection or its
first byte, or whose body is not complete ``BODY_TIMEOUT_S`` after its head (1 MB, the largest
body, in 10 s is 100 KB/s). A response that takes long, a stream, a kept-alive connection
waiting between requests are uvicorn's as before. On SIGTERM the server's worker stops claiming
runs at once, and connections get ``SHUTDOWN_GRACE_S`` to finish before they are cut.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

__all__ = [
    "BODY_TIMEOUT_S",
    "HEADER_TIMEOUT_S",
    "SHUTDOWN_GRACE_S",
    "header_deadline_protocol",
    "serve",
    "uvicorn_config",
]

HEADER_TIMEOUT_S = 5.0
BODY_TIMEOUT_S = 10.0
SHUTDOWN_GRACE_S = 10.0


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
                self._arm(self.header_timeout_s)
        elif self._awaiting_body():
            if self._deadline is None:  # the head just ended: the body has its own deadline
                self._arm(BODY_TIMEOUT_S)
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]

    def _awaiting_head(self) -> bool:
        """No request is being served: what has arrived, if anything, is part of a head."""
        cycle = getattr(self, "cycle", None)
        return cycle is None or bool(cycle.response_complete)

    def _awaiting_body(self) -> bool:
        """A request is being served whose body has not all arrived."""
        cycle = getattr(self, "cycle", None)
        return cycle is not None and bool(getattr(cycle, "more_body", False))

    def _arm(self, seconds: float | None = None) -> None:
        self._disarm()
        loop: asyncio.AbstractEventLoop = getattr(self, "loop", None) or asyncio.get_event_loop()
        self._deadline = loop.call_later(seconds or self.header_timeout_s, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if self._awaiting_head() or self._awaiting_body():
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


def uvicorn_config(app: Any, *, trusted_proxies: Sequence[str] = (), **options: Any) -> Any:
    """The ``uvicorn.Config`` to serve ``app`` with (``options`` as uvicorn takes them). A
    request's client is the address it came from: ``X-Forwarded-For`` (and ``-Proto``) are
    believed only from ``trusted_proxies`` (addresses or networks) — uvicorn's own default
    believes them from 127.0.0.1, where any local process, or a proxy that passes on what its
    clients send, could name any client it liked to the login throttle."""
    import uvicorn

    options.setdefault("timeout_graceful_shutdown", SHUTDOWN_GRACE_S)
    options.setdefault("proxy_headers", bool(trusted_proxies))
    if trusted_proxies:
        options.setdefault("forwarded_allow_ips", list(trusted_proxies))
    return uvicorn.Config(app, http=header_deadline_protocol(), **options)


async def serve(config: Any, sockets: list[Any]) -> None:
    """Serve until SIGINT or SIGTERM. At the signal the app's worker (``app.state.worker``)
    stops claiming runs — uvicorn would tell it only after every connection closed."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            worker = getattr(getattr(config.app, "state", None), "worker", None)
            if worker is not None:
                worker.stop()
            super().handle_exit(sig, frame)

    await Server(config).serve(sockets=sockets)
