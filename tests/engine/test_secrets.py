"""A provider key never escapes through an error: keys that cannot be sent are refused when they
are read (naming the variable, never the value), and every exception that leaves the HTTP
client, whatever its type and wherever it was raised, has the key scrubbed — its text, its
chain of causes, and the events and attempts recorded from it."""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable
from dataclasses import replace

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrunner.config import ProviderConfig, load_config
from agentrunner.engine import (
    ChainEntry,
    Engine,
    FallbackChain,
    ModelRegistry,
    Turn,
    TurnError,
    UserMessage,
    run_turn,
)
from agentrunner.engine.http_client import HttpModelClient
from agentrunner.engine.models import ResolvedModel
from agentrunner.engine.secrets import Secrets
from agentrunner.engine.wire_openai import OpenAIWire
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.testing import MockProvider, MockProviderServer
from tests.engine.helpers import FAST, Recorder

SECRET = "sk-proj-Zq8Xw3Lm9Tt4Vb"


def everything_said(error: BaseException) -> str:
    """All an error could show anyone: its text, its repr, its hint, and the whole traceback
    with its chain of causes and contexts."""
    hint = getattr(error, "hint", None) or ""
    return "\n".join([str(error), repr(error), hint, "".join(traceback.format_exception(error))])


def registry_with_key(server: MockProviderServer, key: str) -> ModelRegistry:
    providers = {
        "mockai": ProviderConfig("mockai", "openai", server.openai_url, "MOCK_KEY"),
        "mockant": ProviderConfig("mockant", "anthropic", server.anthropic_url, "MOCK_KEY"),
    }
    return ModelRegistry(providers, env={"MOCK_KEY": key})


@pytest.mark.parametrize(
    ("key", "what"),
    [
        ("sk-proj-Zq8Xw3\nLm9Tt4Vb", "a line break at position 15"),
        ("sk-proj-Zq8Xw3\x01Lm9Tt4Vb", "a control character at position 15"),
        ("sk-proj-Zq8Xw3\x7fLm9Tt4Vb", "a control character at position 15"),
        ("sk-proj-Zq8Xw3\u2026Lm9Tt4Vb", "a character that is not ASCII at position 15"),
        ("sk-proj-Zq8Xw3 Lm9Tt4Vb", "a space at position 15"),
    ],
    ids=["newline", "control", "delete", "ellipsis", "space"],
)
@pytest.mark.parametrize("model", ["mockai:gpt-mock", "mockant:claude-mock"])
async def test_a_key_that_cannot_be_sent_is_refused_naming_the_variable(
    mock_server: MockProviderServer, mock: MockProvider, key: str, what: str, model: str
) -> None:
    engine = Engine(registry_with_key(mock_server, key))
    try:
        with pytest.raises(AgentRunnerError) as info:
            await engine.run(model=model, message="hi", retry=FAST)
    finally:
        await engine.aclose()
    error = info.value
    assert error.code is ErrorCode.PROVIDER_AUTH
    assert "MOCK_KEY" in error.message and what in error.message
    assert error.hint is not None and "MOCK_KEY" in error.hint
    said = everything_said(error)
    for part in ("Zq8Xw3", "Lm9Tt4Vb"):
        assert part not in said
    assert mock.requests == []  # refused before anything was sent


@pytest.mark.parametrize(
    ("model", "header", "sent"),
    [
        ("mockai:gpt-mock", "authorization", f"Bearer {SECRET}"),
        ("mockant:claude-mock", "x-api-key", SECRET),
    ],
)
async def test_whitespace_around_a_key_is_trimmed(
    mock_server: MockProviderServer, mock: MockProvider, model: str, header: str, sent: str
) -> None:
    """A key read with a trailing line break (from a file, say) or stray spaces is sent bare."""
    engine = Engine(registry_with_key(mock_server, f"  {SECRET}\r\n"))
    try:
        result = await engine.run(model=model, message="hi", retry=FAST)
    finally:
        await engine.aclose()
    assert result.text == "Echo: hi"
    assert mock.requests[0].headers[header] == sent


# -- exceptions that echo the key ------------------------------------------------------------


class LeakyTransport(httpx2.AsyncBaseTransport):
    """Raises, for every request, what ``fail`` makes of the request's Authorization header."""

    def __init__(self, fail: Callable[[str], Exception]) -> None:
        self.fail = fail
        self.calls = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.calls += 1
        raise self.fail(request.headers["authorization"])


LEAKS: dict[str, tuple[Callable[[str], Exception], ErrorCode]] = {
    # What h11 says of a header value it cannot send, as httpx2 re-raises it.
    "illegal-header": (
        lambda auth: httpx2.LocalProtocolError(f"Illegal header value {auth.encode()!r}"),
        ErrorCode.INTERNAL,
    ),
    "connect-error": (
        lambda auth: httpx2.ConnectError(f"could not connect sending {auth}"),
        ErrorCode.PROVIDER_UNAVAILABLE,
    ),
    "proxy-error": (
        lambda auth: httpx2.ProxyError(f"proxy refused {auth}"),
        ErrorCode.PROVIDER_UNAVAILABLE,
    ),
    "key-error": (lambda auth: KeyError(auth), ErrorCode.INTERNAL),
    "any-exception": (lambda auth: RuntimeError(f"boom with {auth}"), ErrorCode.INTERNAL),
}


def leaky_turn(client: HttpModelClient, emit: Recorder) -> Turn:
    model = ResolvedModel("leaky:m", ProviderConfig("leaky", "openai", "http://leaky"), "m")
    return Turn(
        system="sys",
        messages=[UserMessage("hi")],
        chain=FallbackChain([ChainEntry(model, client, FAST)]),
        emit=emit,
    )


def leaky_client(transport: httpx2.AsyncBaseTransport, secret: str = SECRET) -> HttpModelClient:
    return HttpModelClient(
        OpenAIWire("leaky"),
        base_url="http://127.0.0.1:9/v1",
        headers={"authorization": f"Bearer {secret}"},
        secret=secret,
        transport=transport,
    )


@pytest.mark.parametrize("leak", list(LEAKS))
async def test_an_exception_echoing_the_key_is_scrubbed(leak: str) -> None:
    fail, code = LEAKS[leak]
    transport = LeakyTransport(fail)
    client = leaky_client(transport)
    rec = Recorder()
    try:
        with pytest.raises(TurnError) as info:
            await run_turn(leaky_turn(client, rec))
    finally:
        await client.aclose()
    error = info.value
    assert transport.calls == 1
    assert error.code is code
    assert "[redacted]" in error.message or leak == "key-error"
    said = everything_said(error)
    assert SECRET not in said and "Zq8Xw3Lm9Tt4Vb" not in said
    assert SECRET not in str(rec.events)
    assert all(SECRET not in str(a.to_dict()) for a in error.result.attempts)


async def test_an_exception_while_building_the_request_is_scrubbed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Raised before anything is sent (the wire adapter building the body), it is scrubbed the
    same way; the same adapter failing on a harmless message keeps its text."""
    for text, secret_in_it in ((f"cannot encode {SECRET}", True), ("cannot encode this", False)):
        transport = LeakyTransport(lambda auth: AssertionError("never sent"))
        client = leaky_client(transport)

        def build(request: object, text: str = text) -> dict[str, object]:
            raise ValueError(text)

        monkeypatch.setattr(client._wire, "build", build)
        try:
            with pytest.raises(TurnError) as info:
                await run_turn(leaky_turn(client, Recorder()))
        finally:
            await client.aclose()
        assert transport.calls == 0
        assert info.value.code is ErrorCode.INTERNAL
        said = everything_said(info.value)
        assert SECRET not in said
        assert ("[redacted]" in info.value.message) is secret_in_it
        assert "cannot encode" in info.value.message


@pytest.mark.parametrize(
    "form",
    [
        lambda auth: f"header {auth.encode()!r}",  # bytes repr: the backslash doubled
        lambda auth: f"header {auth!r}",  # str repr: the same, in another quoting
        lambda auth: f"header {json.dumps(auth)}",  # JSON: the backslash and quote escaped
    ],
    ids=["bytes-repr", "str-repr", "json"],
)
async def test_a_key_is_scrubbed_in_its_escaped_forms(form: Callable[[str], str]) -> None:
    """A key with characters that error texts escape (a backslash, a quote) is scrubbed in
    every spelling, not only as written."""
    secret = 'sk-Zq8\\Xw3"Lm9'
    transport = LeakyTransport(lambda auth: RuntimeError(form(auth)))
    client = leaky_client(transport, secret)
    try:
        with pytest.raises(TurnError) as info:
            await run_turn(leaky_turn(client, Recorder()))
    finally:
        await client.aclose()
    said = everything_said(info.value)
    assert "[redacted]" in info.value.message
    assert "Zq8" not in said and "Lm9" not in said


# -- the one list of the runtime's secrets (issue 39) ----------------------------------------

ENVIRON = {
    "MOCK_KEY": "sk-mock-Zq8Xw3Lm9",
    "AGENTRUNNER_API_TOKEN": "tok-Zq8Xw3Lm9Tt4Vb",
    "OTEL_EXPORTER_OTLP_HEADERS": (
        "Authorization=Basic%20dXNlcjpwYXNzd29yZA%3D%3D, x-tenant = acme-tenant-7,x-short=abc"
    ),
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "api-key=hc-Zq8Xw3Lm9",
    "AGENTRUNNER_DATABASE_URL": "postgresql://agent:pg-Zq8%40Xw3@db.internal:5432/prod",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "https://otel:ot-Pw9Zq8Xw3@collector.example:4318",
    "https_proxy": "http://me:px-Zq8Xw3Lm9@proxy.example:3128",
    "VAULT_TOKEN": "hvs.Zq8Xw3Lm9Tt4",
    "SHORT_TOKEN": "ollama",  # a placeholder key (a local server's): too short to cut anywhere
    "NOT_NAMED": "nn-Zq8Xw3Lm9Tt4",
    "HOME": "/home/someone",
}
CUT = [
    "sk-mock-Zq8Xw3Lm9",
    "tok-Zq8Xw3Lm9Tt4Vb",
    "Basic dXNlcjpwYXNzd29yZA==",
    "Basic%20dXNlcjpwYXNzd29yZA%3D%3D",
    "dXNlcjpwYXNzd29yZA==",  # the credential without its scheme
    "acme-tenant-7",
    "hc-Zq8Xw3Lm9",
    "pg-Zq8@Xw3",
    "pg-Zq8%40Xw3",
    "ot-Pw9Zq8Xw3",
    "px-Zq8Xw3Lm9",
    "hvs.Zq8Xw3Lm9Tt4",
]
KEPT = ["NOT_NAMED=nn-Zq8Xw3Lm9Tt4", "/home/someone", "db.internal:5432/prod", "x-short=abc"]


def test_the_runtime_holds_its_keys_tokens_credentials_and_what_the_operator_names() -> None:
    config = load_config(required=False, env={})
    config = replace(config, secret_env=("VAULT_TOKEN", "SHORT_TOKEN", "UNSET_TOKEN"))
    registry = ModelRegistry.from_config(config, env=ENVIRON)
    registry.providers["mockai"] = ProviderConfig("mockai", "openai", "http://x", "MOCK_KEY")
    text = "\n".join([*(f"{k}={v}" for k, v in ENVIRON.items()), *CUT, "ollama is local"])
    cut = registry.secrets.scrub(text)
    for secret in CUT:
        assert secret not in cut
    for kept in KEPT:
        assert kept in cut
    assert "SHORT_TOKEN=ollama" in cut and "ollama is local" in cut
    # Another environment holds other secrets: what it does not hold is not cut.
    other = ModelRegistry.from_config(config, env={"VAULT_TOKEN": "hvs.Other9Tt4Lm"})
    assert other.secrets.scrub(text) == text
    assert other.secrets.scrub("hvs.Other9Tt4Lm") == "[redacted]"


def test_a_password_in_a_database_urls_query_is_one_too() -> None:
    env = {"AGENTRUNNER_DATABASE_URL": "postgresql:///prod?user=a&password=qp-Zq8%2BXw3Lm9"}
    secrets = ModelRegistry(env=env).secrets
    assert secrets.scrub("qp-Zq8+Xw3Lm9 qp-Zq8%2BXw3Lm9") == "[redacted] [redacted]"


SECRET_TEXT = st.text(alphabet="sk-Zq8 ", max_size=40)


@settings(max_examples=300, deadline=None)
@given(
    before=SECRET_TEXT,
    after=SECRET_TEXT,
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=30),
)
def test_text_cut_as_it_streams_is_the_whole_text_cut(
    before: str, after: str, cuts: list[int]
) -> None:
    """However a reply is split into deltas, what is passed on adds up to the whole reply with
    its secrets cut, so no delta ever shows a secret, whole or in parts."""
    secrets = Secrets(["sk-Zq8Zq8", "Zq8-sk-s"])
    text = before + "sk-Zq8Zq8" + after + json.dumps("Zq8-sk-s") + before
    points = sorted({min(c, len(text)) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    stream = secrets.stream()
    passed = [stream.feed(piece) for piece in pieces]
    passed.append(stream.rest())
    assert "".join(passed) == secrets.scrub(text)
    assert not any("Zq8Zq8" in piece or "Zq8-sk-s" in piece for piece in passed)


def test_what_only_looked_like_a_secrets_beginning_is_passed_on() -> None:
    stream = Secrets(["sk-Zq8Xw3Lm9"]).stream()
    assert stream.feed("ask sk-Zq") == "ask "  # held: it could be the key
    assert stream.feed("uare") == "sk-Zquare"  # it was not
    assert stream.feed("s") == ""
    assert stream.rest() == "s"
