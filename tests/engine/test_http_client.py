"""The provider client over real HTTP, on a hand-written server: what httpx2 alone would get
wrong."""

from __future__ import annotations

import json
import ssl
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

    async with one_reply_server("text/event-stream; charset=iso-8859-1", stream) as (url, _):
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
    assert result.text == "Grüße, naïve café"
    assert "".join(tokens) == "Grüße, naïve café"


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
