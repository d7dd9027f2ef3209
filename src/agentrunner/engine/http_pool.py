"""The providers' HTTP transport: httpx2's connection pool over a network backend of asyncio's
own, instead of anyio's.

A model request is a few small writes and reads, each of which anyio dresses for any event
loop: every read and write in a cancel scope for its timeout (through ``sniffio`` and a
context manager), a pass of the event loop forced after each write, reading stopped and
restarted around each wait (two ``epoll_ctl`` calls), and, before each request and as each
response closes, the socket's attribute table rebuilt (``getpeername``) to ask whether an idle
connection is readable. Here a connection is an asyncio transport and protocol: what arrives
is kept until read, a read that finds data returns it, a wait is one future with one timer, a
write is the transport's (waiting only while its buffer is full), the idle check one ``poll``.
A turn of ``bench/engine.py`` (2 requests, counted by callgrind): on asyncio's loop 5.60 → 5.04 M
instructions streamed, 4.45 → 3.89 M not; on uvloop's 5.48 → 4.78 M and 4.44 → 3.88 M. The idle
check alone, through anyio at 16 runs in flight, was 3.0 against 2.5 ms of CPU a turn.
Connections to a Unix socket (a transport given ``uds=``) stay anyio's.

The same on asyncio's event loop and on uvloop's (uvicorn runs ``agentrunner serve`` and its
worker on uvloop): a name's addresses are tried with happy eyeballs by aiohappyeyeballs, the
socket it connects given to the loop's ``create_connection``, which on uvloop takes no
``happy_eyeballs_delay``; and the protocol takes whatever transport the loop gives it (uvloop's
are not ``asyncio.Transport``'s subclasses).

A request's head goes out with its body in one write: httpcore2 writes the head, the body and
an empty end, which were two sends, two TCP segments (two TLS records) and two wake-ups of the
provider for one request.

Timeouts and failures are httpcore2's, as its anyio backend raises them: ``ConnectTimeout``,
``ReadTimeout``, ``WriteTimeout``; ``ConnectError`` (a refused connection, a failed TLS
handshake, chained to the ``ssl`` error), ``ReadError``, ``WriteError``.
"""

from __future__ import annotations

import asyncio
import select
import socket
import ssl
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any, cast
from urllib.request import getproxies

import aiohappyeyeballs
import httpcore2
import httpx2

__all__ = ["provider_transport"]

_PROXIED = ("http", "https", "all")  # the proxy variables httpx2 reads: HTTP_PROXY, …, ALL_PROXY
_HAPPY_EYEBALLS_S = 0.25  # between connection attempts to each address of a name (anyio's)
_READ_AHEAD = 1 << 20  # bytes kept unread before the socket is no longer read


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
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                sock = await _connected_socket(loop, host, port, local_address)
                try:
                    for option in socket_options or ():
                        sock.setsockopt(*option)
                    transport, protocol = await loop.create_connection(_Protocol, sock=sock)
                except BaseException:
                    sock.close()
                    raise
        except TimeoutError as exc:
            raise httpcore2.ConnectTimeout(f"no connection to {host}:{port} in {timeout}s") from exc
        except (OSError, RuntimeError) as exc:  # ConnectionRefusedError: [Errno 111] …
            # RuntimeError: uvloop's sock_connect raises it for some failures (aiohappyeyeballs')
            raise httpcore2.ConnectError(f"{type(exc).__name__}: {exc}") from exc
        return _Stream(transport, protocol)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        return await self._anyio.connect_unix_socket(path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def _connected_socket(
    loop: asyncio.AbstractEventLoop, host: str, port: int, local_address: str | None
) -> socket.socket:
    """A socket connected to ``host``: to each of its addresses in turn, the next one tried
    when the one before failed or has not answered in ``_HAPPY_EYEBALLS_S`` (as anyio does).
    aiohappyeyeballs' rather than the loop's ``create_connection``, whose ``happy_eyeballs_delay``
    uvloop does not take."""
    addresses = await _addresses(loop, host, port)
    local = None if local_address is None else await _addresses(loop, local_address, 0)
    return await aiohappyeyeballs.start_connection(
        addresses, local_addr_infos=local, happy_eyeballs_delay=_HAPPY_EYEBALLS_S, loop=loop
    )


async def _addresses(
    loop: asyncio.AbstractEventLoop, host: str, port: int
) -> Sequence[aiohappyeyeballs.AddrInfoType]:
    """``getaddrinfo``'s answers; an IP address at once, without the resolver's thread."""
    try:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    except socket.gaierror:
        return await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)


class _Protocol(asyncio.Protocol):
    """A connection's end of asyncio: what arrived and is not read yet, whether it ended (and
    why), and the futures a read or a write waits on."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.chunks: deque[bytes] = deque()
        self.unread = 0
        self.reading_paused = False
        self.eof = False  # the server will send nothing more
        self.error: Exception | None = None  # why the connection was lost, if it failed
        self.reader: asyncio.Future[bool] | None = None  # a read waiting for data
        self.drained: asyncio.Future[None] | None = None  # while writing is paused

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # No isinstance check: uvloop's transports are not asyncio.Transport's subclasses, and
        # uvloop starts reading only once connection_made has returned (an exception raised
        # here left every read of its connections waiting for its timeout).
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.unread += len(data)
        if self.unread > _READ_AHEAD and not self.reading_paused and self.transport is not None:
            self.transport.pause_reading()
            self.reading_paused = True
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        # The transport closes itself (a client has nothing to send once its server ended):
        # over TLS, asking to keep the half open is ignored, with a warning for each connection.
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.error = exc
        self._wake()
        self.resume_writing()

    def pause_writing(self) -> None:
        if self.drained is None:
            self.drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        drained, self.drained = self.drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    def _wake(self) -> None:
        if self.reader is not None and not self.reader.done():
            self.reader.set_result(True)


def _expire(waiter: asyncio.Future[Any], result: Any) -> None:
    if not waiter.done():
        waiter.set_result(result)


class _Stream(httpcore2.AsyncNetworkStream):
    """One connection, plain or over TLS, as httpcore2 reads and writes it."""

    __slots__ = ("_closed", "_head", "_protocol", "_socket", "_transport")

    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self._socket: Any = transport.get_extra_info("socket")
        self._head = b""
        self._closed = False

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        protocol = self._protocol
        if not protocol.chunks:
            if self._closed:
                raise httpcore2.ReadError("the connection is closed")
            if not protocol.eof:
                await self._data(timeout)
            if not protocol.chunks:
                if protocol.error is not None:
                    raise httpcore2.ReadError(str(protocol.error)) from protocol.error
                return b""  # the server closed the connection
        data = protocol.chunks.popleft()
        if len(data) > max_bytes:
            protocol.chunks.appendleft(data[max_bytes:])
            data = data[:max_bytes]
        protocol.unread -= len(data)
        if protocol.reading_paused and protocol.unread <= _READ_AHEAD // 2:
            protocol.reading_paused = False
            self._transport.resume_reading()
        return data

    async def _data(self, timeout: float | None) -> None:
        """Wait for data or the connection's end, at most ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        protocol = self._protocol
        waiter = protocol.reader = loop.create_future()
        timer = None if timeout is None else loop.call_later(timeout, _expire, waiter, False)
        try:
            arrived = await waiter
        finally:
            protocol.reader = None
            if timer is not None:
                timer.cancel()
        if not arrived:
            raise httpcore2.ReadTimeout(f"nothing was received in {timeout}s")

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if self._head:
            buffer, self._head = self._head + buffer, b""
        elif _is_request_head(buffer):
            self._head = buffer  # sent with the next write: the body, or the request's end
            return
        if not buffer:
            return
        protocol = self._protocol
        if self._closed or protocol.eof or self._transport.is_closing():
            error = protocol.error
            raise httpcore2.WriteError(str(error or "the connection is closed")) from error
        self._transport.write(buffer)
        if protocol.drained is not None:  # the transport's buffer is full: wait for room
            await self._drained(protocol.drained, timeout)

    async def _drained(self, drained: asyncio.Future[None], timeout: float | None) -> None:
        """Wait for room in the transport's buffer, at most ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        drained.add_done_callback(lambda _: _expire(waiter, True))
        timer = None if timeout is None else loop.call_later(timeout, _expire, waiter, False)
        try:
            sent = await waiter
        finally:
            if timer is not None:
                timer.cancel()
        if not sent:
            raise httpcore2.WriteTimeout(f"the request was not sent in {timeout}s")
        if self._protocol.eof or self._transport.is_closing():
            error = self._protocol.error
            raise httpcore2.WriteError(str(error or "the connection was closed")) from error

    async def aclose(self) -> None:
        # At once, as anyio does: nothing is left to send on a connection the pool closes,
        # and a TLS goodbye (close_notify) would hold its socket open waiting for the server's.
        if not self._closed:
            self._closed = True
            self._transport.abort()
            await asyncio.sleep(0)  # the loop closes the socket on its next pass: let it

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(
                    self._transport, self._protocol, ssl_context, server_hostname=server_hostname
                )
        except TimeoutError as exc:
            await self.aclose()
            raise httpcore2.ConnectTimeout(f"no TLS handshake in {timeout}s") from exc
        except OSError as exc:  # ssl.SSLError included
            await self.aclose()
            raise httpcore2.ConnectError(f"{type(exc).__name__}: {exc}") from exc
        if transport is None:  # the connection was lost during the handshake
            await self.aclose()
            raise httpcore2.ConnectError("the connection was closed during the TLS handshake")
        self._protocol.transport = transport
        self._closed = True  # this stream's transport belongs to the TLS one now
        return _Stream(transport, self._protocol)

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            protocol = self._protocol
            return bool(protocol.chunks) or protocol.eof or _readable(self._socket)
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._socket
        return None


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
