"""The providers' transport: kept-alive connections are reused while open and dropped once the
server has closed them, through the pool's socket check (engine/http_pool)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpcore2
import httpx2
import pytest

from agentrunner.engine import http_pool
from tests.engine.helpers import ask_once, chat_completion, one_reply_server


@dataclass
class Server:
    url: str
    close_after_reply: bool = False
    connections: int = 0
    replies: int = 0
    closed: asyncio.Event = field(default_factory=asyncio.Event)


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    """HTTP/1.1 on 127.0.0.1 that keeps connections alive, or closes each one after its reply
    without saying so (as a server whose keep-alive timed out does)."""
    state = Server(url="")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state.connections += 1
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
                state.replies += 1
                if state.close_after_reply:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()
        state.closed.set()

    listener = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    state.url = f"http://127.0.0.1:{port}"
    yield state
    listener.close()


def counting(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    seen: list[bool] = []
    real = http_pool._readable

    def spy(sock: socket.socket | None) -> bool:
        seen.append(real(sock))
        return seen[-1]

    monkeypatch.setattr(http_pool, "_readable", spy)
    return seen


async def test_an_open_idle_connection_is_reused(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = counting(monkeypatch)
    transport = http_pool.provider_transport(httpx2.Limits(max_keepalive_connections=4))
    async with httpx2.AsyncClient(base_url=server.url, transport=transport) as client:
        for _ in range(3):
            assert (await client.get("/")).text == "ok"
    assert server.connections == 1 and server.replies == 3
    assert seen and not any(seen)  # asked, through this module, and never readable


async def test_a_connection_the_server_closed_is_not_reused(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = counting(monkeypatch)
    server.close_after_reply = True
    transport = http_pool.provider_transport(httpx2.Limits(max_keepalive_connections=4))
    async with httpx2.AsyncClient(base_url=server.url, transport=transport) as client:
        assert (await client.get("/")).text == "ok"
        await asyncio.wait_for(server.closed.wait(), 5)
        await asyncio.sleep(0.05)  # the FIN reaches the client's socket
        assert (await client.get("/")).text == "ok"  # a new connection, not the dead one
    assert server.connections == 2
    assert True in seen


async def test_concurrent_requests_each_get_a_connection_then_share_them(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """32 requests at once open 32 connections; the next 32 at once reuse them, none left
    readable (dead) behind."""
    seen = counting(monkeypatch)
    transport = http_pool.provider_transport(httpx2.Limits(max_keepalive_connections=64))
    async with httpx2.AsyncClient(base_url=server.url, transport=transport) as client:
        for _ in range(2):
            replies = await asyncio.gather(*(client.get("/") for _ in range(32)))
            assert [r.text for r in replies] == ["ok"] * 32
    assert server.replies == 64
    assert server.connections <= 32
    assert seen and not any(seen)


def test_a_missing_socket_counts_as_readable() -> None:
    assert http_pool._readable(None)
    closed = socket.socket()
    closed.close()
    assert http_pool._readable(closed)


async def test_provider_requests_go_through_the_environment_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With HTTP_PROXY set, a provider's requests reach the proxy (absolute-form request line),
    as they would from any httpx2 client: the pooled transport steps aside for it."""
    for name in ("HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    body = chat_completion("through the proxy")
    async with one_reply_server("application/json", body) as (proxy_url, request_lines):
        monkeypatch.setenv("HTTP_PROXY", proxy_url)
        monkeypatch.setenv("http_proxy", proxy_url)
        answer = await ask_once("http://provider.invalid")
    assert answer == "through the proxy"
    assert request_lines == [b"POST http://provider.invalid/v1/chat/completions HTTP/1.1"]


class Recorded(httpcore2.AsyncNetworkStream):
    """A connection that records each write and answers every request with ``ok``, and what
    had been written when each answer was read."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.sent_when_read: list[bytes] = []

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self.sent_when_read.append(b"".join(self.writes))
        return b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.writes.append(buffer)

    async def aclose(self) -> None:
        return None


async def requests_over(
    stream: Recorded, *bodies: bytes | list[bytes] | None
) -> list[httpcore2.Response]:
    """One request per body (a list: streamed in those chunks) on a connection over ``stream``
    through this module's stream."""
    origin = httpcore2.Origin(b"http", b"provider.invalid", 80)
    connection = httpcore2.AsyncHTTP11Connection(origin, http_pool._Stream(stream))

    async def chunks(parts: list[bytes]) -> AsyncIterator[bytes]:
        for part in parts:
            yield part

    responses = []
    for body in bodies:
        content = chunks(body) if isinstance(body, list) else body
        method = "GET" if body is None else "POST"
        responses.append(
            await connection.request(method, "http://provider.invalid/v1", content=content)
        )
    return responses


def head(method: bytes, length: int | None = None) -> bytes:
    framing = b"Transfer-Encoding: chunked" if length is None else b"Content-Length: %d" % length
    return (
        method + b" /v1 HTTP/1.1\r\nHost: provider.invalid\r\n" + framing + b"\r\n\r\n"
        if length != 0 or method == b"POST"
        else method + b" /v1 HTTP/1.1\r\nHost: provider.invalid\r\n\r\n"
    )


@pytest.mark.parametrize("body", [b'{"model":"m"}', b'{"model":"other","stream":true}'])
async def test_a_request_goes_out_in_one_write(body: bytes) -> None:
    """Its head and body together: one send, one segment, one wake-up of the server."""
    stream = Recorded()
    [response] = await requests_over(stream, body)
    assert response.status == 200 and response.content == b"ok"
    assert stream.writes == [head(b"POST", len(body)) + body]


async def test_every_request_of_every_shape_is_written_whole_and_in_order() -> None:
    """A request without a body, a streamed one, and one whose body looks like a request head
    itself: every byte is written, in order, none held back past its request."""
    stream = Recorded()
    lookalike = b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n"
    responses = await requests_over(stream, None, [b"ab", b"cd"], lookalike, b"{}")
    assert [r.content for r in responses] == [b"ok"] * 4
    requests = [
        head(b"GET", 0),
        head(b"POST") + b"2\r\nab\r\n2\r\ncd\r\n0\r\n\r\n",
        head(b"POST", len(lookalike)) + lookalike,
        head(b"POST", 2) + b"{}",
    ]
    # Each request whole on the wire before its answer is read.
    assert stream.sent_when_read == [b"".join(requests[: n + 1]) for n in range(4)]
    assert b"" not in stream.writes


def test_requests_go_out_on_uvloop_too(mock_server: Any) -> None:
    """uvicorn runs `agentrunner serve`, and the worker inside it, on uvloop's event loop: the
    providers' transport must work there as on asyncio's (a connection option only asyncio's
    loop takes once failed every model request the server's worker made)."""
    import uvloop

    async def ask() -> int:
        transport = http_pool.provider_transport(httpx2.Limits(max_keepalive_connections=4))
        async with httpx2.AsyncClient(transport=transport, timeout=30) as client:
            first = await client.post(
                mock_server.openai_url + "/chat/completions",
                headers={"authorization": "Bearer k"},
                json={"model": "gpt-mock", "messages": [{"role": "user", "content": "hi"}]},
            )
            return first.status_code

    assert uvloop.run(ask()) == 200
