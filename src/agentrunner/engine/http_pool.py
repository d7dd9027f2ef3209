"""The providers' HTTP transport: httpx2's, with a cheaper check for idle connections.

Before every request, and again as each response closes, httpcore2's pool asks each of its idle
connections whether its socket is readable (a server that closed a kept-alive connection leaves
it readable). Through anyio each ask rebuilds the socket's attribute table, calling
``getpeername`` on the way: with 16 durable runs in flight a turn took 3.0 ms of CPU, 2.5 ms
without it (on httpcore), and the cost grows with the pool; on httpcore2, with 64 turns in
flight, 1.25-1.33 ms against 1.17-1.18 ms. Here a connection's stream keeps its socket, so the
ask is one ``poll``. Everything else is httpx2's and anyio's own.
"""

from __future__ import annotations

import select
import socket
import ssl
from collections.abc import Iterable
from typing import Any
from urllib.request import getproxies

import httpcore2
import httpx2

__all__ = ["provider_transport"]

_PROXIED = ("http", "https", "all")  # the proxy variables httpx2 reads: HTTP_PROXY, …, ALL_PROXY


def provider_transport(limits: httpx2.Limits) -> httpx2.AsyncHTTPTransport | None:
    """httpx2's transport with the connection pool's streams as below; None where the
    environment names a proxy (``HTTPS_PROXY`` and the like), because httpx2 routes requests
    through those only from the transports it builds itself. httpx2 does not take a network
    backend, so it is set on its pool; if a later httpx2 keeps no such pool, the transport is
    left as it is (correct, only slower)."""
    if any(scheme in _PROXIED for scheme in getproxies()):
        return None
    transport = httpx2.AsyncHTTPTransport(limits=limits)
    pool = getattr(transport, "_pool", None)
    if isinstance(pool, httpcore2.AsyncConnectionPool) and hasattr(pool, "_network_backend"):
        pool._network_backend = _Backend()
    return transport


class _Backend(httpcore2.AsyncNetworkBackend):
    def __init__(self) -> None:
        self._anyio = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        return _Stream(
            await self._anyio.connect_tcp(host, port, timeout, local_address, socket_options)
        )

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        return _Stream(await self._anyio.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._anyio.sleep(seconds)


class _Stream(httpcore2.AsyncNetworkStream):
    """An anyio stream that remembers its socket (it never changes, TLS or not), and sends a
    request's head with the first write after it.

    httpcore2 writes a request as its head, its body, then the body's end (``b""`` when the
    head gave its length): two sends on the socket, two TCP segments (two TLS records) and two
    wake-ups of the server for one request. Held back until the next write — which every
    request makes: its end — the head goes out with the body in one send."""

    __slots__ = ("_head", "_inner", "_socket")

    def __init__(self, inner: httpcore2.AsyncNetworkStream) -> None:
        self._inner = inner
        self._socket: socket.socket | None = inner.get_extra_info("socket")
        self._head = b""

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if self._head:
            buffer, self._head = self._head + buffer, b""
        elif _is_request_head(buffer):
            self._head = buffer
            return
        if buffer:
            await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        return _Stream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return _readable(self._socket)
        return self._inner.get_extra_info(info)


def _is_request_head(buffer: bytes) -> bool:
    """Whether ``buffer`` is an HTTP/1.1 request's head (as h11 writes it: whole, at once)."""
    if not buffer.endswith(b"\r\n\r\n"):
        return False
    end = buffer.find(b"\r\n")
    return buffer.endswith(b" HTTP/1.1", 0, end)


def _readable(sock: socket.socket | None) -> bool:
    """Whether a read would return at once; a socket gone counts as readable (its next read
    is the end), as httpcore2 counts it."""
    fd = -1 if sock is None else sock.fileno()
    if fd < 0:
        return True
    if _POLL is None:
        return bool(select.select([fd], [], [], 0)[0])
    poller = _POLL()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


_POLL = getattr(select, "poll", None)  # not on Windows
