"""The provider client over real HTTP, on a hand-written server: what httpx2 alone would get
wrong."""

from __future__ import annotations

import gzip
import json
import ssl
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
import trustme

from agentrunner.config import ProviderConfig
from agentrunner.engine import Engine, ModelRegistry, TurnError
from agentrunner.errors import ErrorCode
from tests.engine.helpers import ask_once, chat_completion, one_reply_server


async def test_an_event_stream_is_utf8_whatever_its_content_type_says() -> None:
    """SSE is UTF-8 by definition; a server that labels its stream latin-1 still gets its
    text read as UTF-8 (read as labelled, "Grüße" would arrive as "GrÃ¼ÃŸe")."""

    def event(delta: dict[str, str], finish: str | None) -> bytes:
        chunk = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode()

    stream = (
        event({"role": "assistant", "content": "Grüße, "}, None)
        + event({"content": "naïve café"}, None)
        + event({}, "stop")
        + b"data: [DONE]\n\n"
    )

    text, tokens = await _streamed(stream, content_type="text/event-stream; charset=iso-8859-1")
    assert text == "Grüße, naïve café"
    assert "".join(tokens) == "Grüße, naïve café"


def _event(delta: dict[str, str], finish: str | None = None) -> str:
    chunk = {"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"


def _stream_of(*pieces: str) -> str:
    """A Chat Completions stream saying ``pieces``, one event each, LF line endings."""
    return (
        _event({"role": "assistant", "content": ""})
        + "".join(_event({"content": piece}) for piece in pieces)
        + _event({}, "stop")
        + "data: [DONE]\n\n"
    )


async def _streamed(
    body: bytes,
    headers: dict[str, str] | None = None,
    *,
    content_type: str = "text/event-stream",
) -> tuple[str, list[str]]:
    """``body`` served over real HTTP as an event stream: the answer, and its tokens."""
    async with one_reply_server(content_type, body, headers=headers) as (url, _):
        engine = Engine(ModelRegistry({"p": ProviderConfig("p", "openai", f"{url}/v1")}))
        tokens: list[str] = []
        try:
            result = await engine.run(
                model="p:m",
                message="hi",
                emit=lambda kind, data: (
                    tokens.append(data["token"]) if kind == "agent.token" else None
                ),
            )
        finally:
            await engine.aclose()
    return result.text, tokens


@pytest.mark.parametrize("pieces", [("line\u2028sep", "ara\u2029ted"), ("next\x85line", "!")])
async def test_a_token_holding_a_unicode_line_break_arrives_whole(pieces: tuple[str, ...]) -> None:
    """SSE lines end at CR or LF only: U+2028, U+2029 and NEL are text (JSON need not escape
    them), not the ends of lines that cut an event's JSON in two."""
    text, tokens = await _streamed(_stream_of(*pieces).encode())
    assert tokens == list(pieces)
    assert text == "".join(pieces)


@pytest.mark.parametrize("ending", ["\r\n", "\r"])
async def test_an_event_stream_may_end_its_lines_with_cr(ending: str) -> None:
    pieces = ("Bonjour", ", Paris") if ending == "\r" else ("Hello", ", world")
    text, tokens = await _streamed(_stream_of(*pieces).replace("\n", ending).encode())
    assert tokens == list(pieces)
    assert text == "".join(pieces)


@pytest.mark.parametrize(
    ("encoding", "compress"), [("gzip", gzip.compress), ("deflate", zlib.compress)]
)
async def test_a_compressed_event_stream_is_read(
    encoding: str, compress: Callable[[bytes], bytes]
) -> None:
    pieces = (f"Packed with {encoding}", ", still streamed")
    body = compress(_stream_of(*pieces).encode())
    text, tokens = await _streamed(body, {"Content-Encoding": encoding})
    assert tokens == list(pieces)
    assert text == "".join(pieces)


async def test_each_request_goes_to_its_path_under_the_base_url() -> None:
    """The path each wire names joined to the provider's base URL (its own path kept, a
    trailing slash or none), the query kept: for each request, the same one after the first."""
    async with one_reply_server("application/json", chat_completion("hi")) as (url, lines):
        providers = {
            "az": ProviderConfig("az", "openai", f"{url}/base", api_version="2024-10-21"),
            "p": ProviderConfig("p", "openai", f"{url}/v1/"),
        }
        engine = Engine(ModelRegistry(providers))
        try:
            for ref in ("az:one", "az:two", "az:one", "p:m", "p:m"):
                await engine.run(model=ref, message="hi", stream=False)
        finally:
            await engine.aclose()
    azure = b"POST /base/openai/deployments/%s/chat/completions?api-version=2024-10-21 HTTP/1.1"
    plain = b"POST /v1/chat/completions HTTP/1.1"
    assert lines == [azure % b"one", azure % b"two", azure % b"one", plain, plain]


@pytest.fixture
def private_ca(monkeypatch: pytest.MonkeyPatch) -> trustme.CA:
    """A certificate authority of the test's own, which this machine does not trust."""
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    return trustme.CA()


def _tls(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    return context


async def test_an_untrusted_certificate_says_how_to_trust_it(private_ca: trustme.CA) -> None:
    body = chat_completion("hello")
    async with one_reply_server("application/json", body, _tls(private_ca)) as (url, lines):
        with pytest.raises(TurnError) as caught:
            await ask_once(url)
    assert caught.value.code is ErrorCode.PROVIDER_UNAVAILABLE
    assert "CERTIFICATE_VERIFY_FAILED" in caught.value.message
    assert caught.value.hint is not None and "SSL_CERT_FILE" in caught.value.hint
    assert lines == []  # no request went out


async def test_ssl_cert_file_names_the_certificates_to_trust(
    private_ca: trustme.CA, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "ca.pem"
    private_ca.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    body = chat_completion("hello")
    async with one_reply_server("application/json", body, _tls(private_ca)) as (url, lines):
        assert await ask_once(url) == "hello"
    assert lines == [b"POST /v1/chat/completions HTTP/1.1"]
