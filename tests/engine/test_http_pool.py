"""The providers' transport: kept-alive connections are reused while open and dropped once the
server has closed them, through the pool's socket check (engine/http_pool)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h11
import httpcore2
import httpx2
import pytest
import trustme

from agentrunner.config import ProviderConfig
from agentrunner.engine import Engine, ModelRegistry, TurnError, http_pool
from agentrunner.errors import ErrorCode
from tests.engine.helpers import FAST, ask_once, chat_completion, one_reply_server


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


class Recorded:
    """A transport that records each write it is given, and passes everything on."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)
        self.transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


@contextlib.asynccontextmanager
async def recording_server() -> AsyncIterator[tuple[int, list[bytes]]]:
    """HTTP/1.1 on 127.0.0.1 (h11's) answering ``ok`` to each request once it has come whole;
    yields its port and each request's bytes as they came."""
    received: list[bytes] = []
    handlers: list[asyncio.Task[None]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.append(asyncio.current_task())  # type: ignore[arg-type]
        connection, raw = h11.Connection(h11.SERVER), b""
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                raw += data
                connection.receive_data(data)
            elif isinstance(event, h11.EndOfMessage):
                received.append(raw)
                raw = b""
                writer.write(
                    connection.send(
                        h11.Response(status_code=200, headers=[("Content-Length", "2")])
                    )
                    + connection.send(h11.Data(data=b"ok"))
                    + connection.send(h11.EndOfMessage())
                )
                await writer.drain()
                connection.start_next_cycle()
            elif isinstance(event, h11.ConnectionClosed):
                break
        writer.close()
        await writer.wait_closed()

    listener = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield listener.sockets[0].getsockname()[1], received
    finally:
        listener.close()
        async with asyncio.timeout(5):  # each ends as its client closes the connection
            await asyncio.gather(*handlers)


async def requests_to(
    port: int, *bodies: bytes | list[bytes] | None
) -> tuple[list[httpcore2.Response], Recorded]:
    """One request per body (a list: streamed in those chunks; None: a GET) on one connection
    of this module's; the responses, and the connection's transport's writes."""
    stream = await http_pool._Backend().connect_tcp("127.0.0.1", port)
    assert isinstance(stream, http_pool._Stream)
    recorded = stream._transport = Recorded(stream._transport)  # type: ignore[assignment]
    origin = httpcore2.Origin(b"http", b"127.0.0.1", port)
    connection = httpcore2.AsyncHTTP11Connection(origin, stream)

    async def chunks(parts: list[bytes]) -> AsyncIterator[bytes]:
        for part in parts:
            yield part

    responses = []
    async with asyncio.timeout(10):  # a request held back would wait for its answer forever
        for body in bodies:
            content = chunks(body) if isinstance(body, list) else body
            method = "GET" if body is None else "POST"
            url = f"http://127.0.0.1:{port}/v1"
            responses.append(await connection.request(method, url, content=content))
    await connection.aclose()
    return responses, recorded


def head(port: int, method: bytes, framing: bytes = b"") -> bytes:
    return b"%s /v1 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n" % (method, port, framing)


@pytest.mark.parametrize("body", [b'{"model":"m"}', b'{"model":"other","stream":true}'])
async def test_a_request_goes_out_in_one_write(body: bytes) -> None:
    """Its head and body together: one send, one segment, one wake-up of the server."""
    async with recording_server() as (port, received):
        [response], recorded = await requests_to(port, body)
    assert response.status == 200 and response.content == b"ok"
    request = head(port, b"POST", b"Content-Length: %d\r\n" % len(body)) + body
    assert recorded.writes == [request]
    assert received == [request]


async def test_every_request_of_every_shape_is_written_whole_and_in_order() -> None:
    """A request without a body, a streamed one, and one whose body looks like a request head
    itself: every byte is written, in order, none held back past its request (the server
    answers each only once it has come whole)."""
    lookalike = b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n"
    async with recording_server() as (port, received):
        responses, recorded = await requests_to(port, None, [b"ab", b"cd"], lookalike, b"{}")
    assert [r.content for r in responses] == [b"ok"] * 4
    assert received == [
        head(port, b"GET"),
        head(port, b"POST", b"Transfer-Encoding: chunked\r\n") + b"2\r\nab\r\n2\r\ncd\r\n0\r\n\r\n",
        head(port, b"POST", b"Content-Length: %d\r\n" % len(lookalike)) + lookalike,
        head(port, b"POST", b"Content-Length: 2\r\n") + b"{}",
    ]
    assert b"".join(recorded.writes) == b"".join(received)
    assert b"" not in recorded.writes


# -- the network backend's own paths: failures, timeouts, big transfers, TLS -------------------


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # nothing listens there once it is closed


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "unstreamed"])
async def test_a_refused_connection_is_a_connection_failure(stream: bool) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    engine = Engine(ModelRegistry({"p": ProviderConfig("p", "openai", url)}))
    try:
        with pytest.raises(TurnError) as caught:
            await engine.run(model="p:m", message="hi", stream=stream, retry=FAST)
    finally:
        await engine.aclose()
    assert (caught.value.code, caught.value.retryable) == (ErrorCode.PROVIDER_UNAVAILABLE, True)
    assert "connection failed: ConnectError" in caught.value.message
    assert "refused" in caught.value.message.lower()


@contextlib.contextmanager
def unanswered_port() -> Iterator[int]:
    """A port whose listener's queue is full (a backlog of 0, one connection waiting in it):
    a connection to it is never accepted, its handshake never answered (Linux's behaviour)."""
    with socket.socket() as listener, socket.socket() as waiting:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        waiting.connect(listener.getsockname())
        yield int(listener.getsockname()[1])


@pytest.mark.parametrize("timeout", [0.05, 0.2])
async def test_a_connection_that_never_opens_times_out(timeout: float) -> None:
    with unanswered_port() as port, pytest.raises(httpcore2.ConnectTimeout) as caught:
        await http_pool._Backend().connect_tcp("127.0.0.1", port, timeout=timeout)
    assert str(caught.value) == f"no connection to 127.0.0.1:{port} in {timeout}s"


@pytest.mark.parametrize("silent", [1, 2])
async def test_an_address_that_never_answers_does_not_hold_up_the_next(
    silent: int, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name's addresses are tried in turn, the next one started while the one before has not
    answered yet (happy eyeballs, as anyio's connections did, on both loops): a connection is
    made to the first address that answers, long before the connect timeout."""
    port = int(server.url.rsplit(":", 1)[1])
    with contextlib.ExitStack() as stack:
        ports = [stack.enter_context(unanswered_port()) for _ in range(silent)] + [port]
        infos = [
            (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", p))
            for p in ports
        ]

        async def addresses(loop: Any, host: str, port: int) -> list[Any]:
            assert (host, port) == ("provider.test", 443)
            return infos

        monkeypatch.setattr(http_pool, "_addresses", addresses)
        stream = await http_pool._Backend().connect_tcp("provider.test", 443, timeout=30)
        try:
            assert stream.get_extra_info("server_addr") == ("127.0.0.1", port)
        finally:
            await stream.aclose()


@pytest.mark.parametrize("size", [3 << 20, (5 << 20) + 7])
async def test_an_answer_larger_than_the_read_ahead_arrives_whole(size: int) -> None:
    """Past a megabyte unread the socket is not read until the answer is: all of it comes."""
    text = ("0123456789abcdef" * (size // 16 + 1))[:size]
    async with one_reply_server("application/json", chat_completion(text)) as (url, _):
        assert await ask_once(url) == text


def streamed_reply(texts: list[str]) -> bytes:
    """An OpenAI chat completion streamed as server-sent events, one a text."""
    events = [
        {"model": "m", "choices": [{"index": 0, "delta": {"content": text}}]} for text in texts
    ]
    events.append({"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return b"".join(b"data: " + json.dumps(event).encode() + b"\n\n" for event in events)


@pytest.mark.parametrize("pieces", [1500, 4001])
async def test_a_streamed_answer_past_the_read_ahead_arrives_whole_and_in_order(
    pieces: int,
) -> None:
    """Megabytes of events sent at once: reading stops past the read-ahead and starts again as
    the engine takes them, every event in its place."""
    texts = [f"<{n:05d}>" + "x" * 2000 for n in range(pieces)]
    async with one_reply_server("text/event-stream", streamed_reply(texts)) as (url, _):
        engine = Engine(ModelRegistry({"p": ProviderConfig("p", "openai", f"{url}/v1")}))
        try:
            result = await engine.run(model="p:m", message="hi", stream=True, retry=FAST)
        finally:
            await engine.aclose()
    assert len(result.text) > 2 << 20
    assert result.text == "".join(texts)


@pytest.mark.parametrize("timeout", [0.05, 0.2])
async def test_an_answer_that_never_comes_times_out(timeout: float) -> None:
    """A read waits for the server at most its timeout, then says so."""
    requests: list[bytes] = []
    accepted: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        requests.append(await reader.readuntil(b"\r\n\r\n"))  # and never answers

    listener = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    stream = await http_pool._Backend().connect_tcp("127.0.0.1", port)
    connection = httpcore2.AsyncHTTP11Connection(
        httpcore2.Origin(b"http", b"127.0.0.1", port), stream
    )
    try:
        with pytest.raises(httpcore2.ReadTimeout) as caught:
            await connection.request(
                "GET", f"http://127.0.0.1:{port}/v1", extensions={"timeout": {"read": timeout}}
            )
    finally:
        await connection.aclose()
        for writer in accepted:
            writer.close()
            await writer.wait_closed()
        listener.close()
    assert str(caught.value) == f"nothing was received in {timeout}s"
    assert requests == [head(port, b"GET")]  # sent whole, then waited on


class Paused(asyncio.Transport):
    """A transport that says when reading stops and starts again."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def pause_reading(self) -> None:
        self.calls.append("pause")

    def resume_reading(self) -> None:
        self.calls.append("resume")


@pytest.mark.parametrize("piece", [256 << 10, 700 << 10])
async def test_reading_stops_while_a_megabyte_waits_unread(piece: int) -> None:
    transport, protocol = Paused(), http_pool._Protocol()
    protocol.connection_made(transport)
    stream = http_pool._Stream(transport, protocol)
    sent = [bytes([n]) * piece for n in range(8)]
    for data in sent:
        protocol.data_received(data)
    assert transport.calls == ["pause"]  # once past a megabyte unread
    transport.calls.clear()
    read = b""
    while len(read) < piece * len(sent):
        read += await stream.read(65536)
        if not transport.calls:
            assert protocol.unread > 1 << 19  # read again once no more than half is left
    assert read == b"".join(sent)
    assert transport.calls == ["resume"]


@pytest.mark.parametrize("size", [16 << 20, (24 << 20) + 3])
async def test_a_request_larger_than_the_socket_takes_goes_out_whole(size: int) -> None:
    """The transport's buffer fills; the write waits for room, then the request is whole."""
    body = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    async with recording_server() as (port, received):
        [response], recorded = await requests_to(port, body)
    assert response.content == b"ok"
    assert received == [head(port, b"POST", b"Content-Length: %d\r\n" % size) + body]
    assert len(recorded.writes) == 1


async def test_a_request_the_server_never_reads_times_out() -> None:
    """A write waits for room in the transport's buffer at most its timeout."""
    accepted: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # never reads

    listener = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    stream = await http_pool._Backend().connect_tcp("127.0.0.1", port)
    connection = httpcore2.AsyncHTTP11Connection(
        httpcore2.Origin(b"http", b"127.0.0.1", port), stream
    )
    try:
        with pytest.raises(httpcore2.WriteTimeout):
            await connection.request(
                "POST",
                f"http://127.0.0.1:{port}/v1",
                content=b"x" * (256 << 20),
                extensions={"timeout": {"write": 0.2}},
            )
    finally:
        await connection.aclose()
        for writer in accepted:
            writer.close()
        listener.close()


async def test_a_stream_over_tls_reads_and_writes_as_over_plain_http(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca = trustme.CA()
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(tls)
    big = "é" * (2 << 20)  # past the read ahead, in characters of two bytes
    events = [{"content": "over "}, {"content": "TLS "}, {"content": big}]
    stream = "".join(
        "data: "
        + json.dumps({"model": "m", "choices": [{"index": 0, "delta": d}]}, ensure_ascii=False)
        + "\n\n"
        for d in events
    )
    stream += 'data: {"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    async with one_reply_server("text/event-stream", stream.encode(), tls) as (url, lines):
        engine = Engine(ModelRegistry({"p": ProviderConfig("p", "openai", f"{url}/v1")}))
        try:
            # A question past what the transport's buffer holds: the write waits for room.
            result = await engine.run(model="p:m", message="?" * (8 << 20), retry=FAST)
        finally:
            await engine.aclose()
    assert result.text == "over TLS " + big
    assert lines == [b"POST /v1/chat/completions HTTP/1.1"]


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
async def test_a_connection_the_server_ends_is_read_to_its_end_quietly(
    tls: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A server ending a connection (a kept-alive one timing out does): what it sent is read,
    then the end, and nothing is logged (over TLS a protocol asking to keep its half open, as
    over plain TCP, had asyncio's and uvloop's TLS layer warn for every such connection)."""
    ca = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_tls)
    client_tls = ssl.create_default_context()
    ca.configure_trust(client_tls)
    said = b"bye over TLS" if tls else b"bye"

    async def leave(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(said)
        await writer.drain()
        writer.close()

    listener = await asyncio.start_server(leave, "127.0.0.1", 0, ssl=server_tls if tls else None)
    port = listener.sockets[0].getsockname()[1]
    stream = await http_pool._Backend().connect_tcp("127.0.0.1", port)
    if tls:
        stream = await stream.start_tls(client_tls, "127.0.0.1")
    read = b""
    try:
        while data := await stream.read(65536, timeout=10):
            read += data
    finally:
        await stream.aclose()
        listener.close()
        await listener.wait_closed()
    assert read == said
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


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
