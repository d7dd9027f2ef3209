"""The engine's one network seam: a pooled httpx2 client per provider driving a wire adapter.

Transport failures are classified by exception type (timeout, connection) and HTTP failures by
status and error type (the adapter's ``error``). A stream that ends before the provider's end
marker is a dropped connection.

Every exception that leaves the client — whatever its type, raised building the request, sending
it or reading the answer — is a ``ProviderError`` (or the ``AgentRunnerError`` the adapter
raised) with the credential scrubbed from its text in every spelling an error message uses
(as written, escaped as in a ``repr`` of str or bytes, in JSON, URL-quoted); an exception that
echoed the credential is not chained to it either, so no traceback shows it.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import httpx2

from agentrunner.core.json_text import json_bytes, loads_exact
from agentrunner.engine.embeddings import Embedded
from agentrunner.engine.failures import FailureKind, ProviderError, http_error, parse_retry_after
from agentrunner.engine.fold import DeltaSink, ResponseFold
from agentrunner.engine.http_pool import provider_transport
from agentrunner.engine.messages import ModelRequest, ModelResponse, Usage
from agentrunner.engine.secrets import Secrets
from agentrunner.engine.sse import SSEDecoder
from agentrunner.errors import AgentRunnerError, ErrorCode

__all__ = ["HttpModelClient", "ModelClient", "Wire"]

_LIMITS = httpx2.Limits(max_connections=256, max_keepalive_connections=64)


class ModelClient(Protocol):
    """Anything that answers a ``ModelRequest``: a provider over HTTP, or a test double."""

    provider: str

    async def request(self, request: ModelRequest, on_delta: DeltaSink | None) -> ModelResponse: ...

    async def aclose(self) -> None: ...


class Wire(Protocol):
    """A provider's wire format, translated both ways and nothing more: our request → its
    JSON; its answer → part events for a ``ResponseFold``, a whole body (``fold_body``) or
    one server-sent event at a time (``fold_event``) alike."""

    provider: str

    @property
    def embeddings(self) -> bool:
        """Whether the provider's API embeds texts (``POST /embeddings``)."""
        ...

    def path(self, request: ModelRequest) -> str: ...

    def build(self, request: ModelRequest) -> dict[str, Any]: ...

    def dropped_settings(self, request: ModelRequest) -> list[tuple[str, str]]:
        """The request's model settings ``build`` leaves out (its provider cannot take them,
        or not together), each with the reason."""
        ...

    def fold_body(self, body: Mapping[str, Any], fold: ResponseFold) -> None: ...

    def fold_event(self, event: str | None, data: str, fold: ResponseFold) -> None: ...


class HttpModelClient:
    """A provider reached over HTTP. One instance per provider; close it with ``aclose``."""

    def __init__(
        self,
        wire: Wire,
        *,
        base_url: str,
        headers: Mapping[str, str],
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        secret: str | None = None,
        secrets: Secrets | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
        refresh: Callable[[], tuple[str, Mapping[str, str]] | None] | None = None,
    ) -> None:
        self.provider = wire.provider
        self._wire = wire
        self._secret = secret
        # Where the key comes from, read again when the provider answers 401: a host that
        # rotates the key in the environment is followed without a restart.
        self._refresh = refresh
        # its own key, and every other secret the runtime holds (a proxy's password, say)
        own = Secrets([secret] if secret else ())
        self._secrets = own | secrets if secrets else own
        self._urls: dict[str, httpx2.URL] = {}
        try:
            self._client = httpx2.AsyncClient(
                base_url=base_url.rstrip("/"),
                headers={"content-type": "application/json", **headers},
                # `read` bounds both the wait for the first byte and each idle gap in a stream.
                timeout=httpx2.Timeout(timeout_s, connect=connect_timeout_s),
                limits=_LIMITS,  # for the transports httpx2 builds where a proxy is named
                transport=transport or provider_transport(_LIMITS),
            )
            return
        except Exception as exc:
            error = self._leaving(self._unexpected("its HTTP client could not be set up", exc), exc)
        raise error  # out of the handler, so an exception that echoed the key is not its context

    async def aclose(self) -> None:
        await self._client.aclose()

    def dropped_settings(self, request: ModelRequest) -> list[tuple[str, str]]:
        """The model settings of ``request`` this provider is not sent, each with the reason."""
        return self._wire.dropped_settings(request)

    async def request(self, request: ModelRequest, on_delta: DeltaSink | None) -> ModelResponse:
        """The provider's answer to ``request``. A 401 is tried once more if the key's source
        holds another key now (nothing was streamed: the provider refused before answering)."""
        try:
            return await self._request(request, on_delta)
        except ProviderError as exc:
            if exc.status != 401 or not self._refreshed():
                raise
        return await self._request(request, on_delta)

    def _refreshed(self) -> bool:
        """Whether the key's source holds a key other than the one sent, now in use."""
        if self._refresh is None:
            return False
        try:
            fresh = self._refresh()
        except AgentRunnerError:  # its variable is unset now: the 401 stands
            return False
        if fresh is None or fresh[0] == self._secret:
            return False
        self._secret = fresh[0]
        self._secrets = Secrets([fresh[0]]) | self._secrets  # the old one is still cut
        self._client.headers.update(fresh[1])
        return True

    async def _request(self, request: ModelRequest, on_delta: DeltaSink | None) -> ModelResponse:
        built = False
        try:
            url = self._url(self._wire.path(request))
            body = self._wire.build(request)
            content = json_bytes(body)
            built = True
            fold = ResponseFold(self.provider, on_delta)
            if not request.stream:
                response = await self._client.post(url, content=content)
                if response.status_code >= 400:
                    raise self._http_error(response)
                # JSON is UTF-8 (RFC 8259): orjson reads it without httpx2's encoding guess.
                self._wire.fold_body(loads_exact(response.content), fold)
                return fold.result()
            async with self._client.stream("POST", url, content=content) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise self._http_error(response)
                return await self._fold(response, fold)
        except Exception as exc:
            error = self._leaving(self._failure(request.model, exc, built), exc)
        raise error  # out of the handler, so an exception that echoed the key is not its context

    async def embed(self, model: str, texts: Sequence[str]) -> Embedded:
        """``texts`` embedded by ``model`` (OpenAI's ``POST /embeddings``, which OpenAI-compatible
        servers serve too); ``validation`` for a provider whose API has none (Anthropic's)."""
        if not self._wire.embeddings:
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                f"provider '{self.provider}' has no embeddings API",
                hint="Set [embeddings] model to a model of an OpenAI-compatible provider, "
                "e.g. openai:text-embedding-3-small.",
            )
        try:
            content = json_bytes({"model": model, "input": list(texts)})
            response = await self._client.post(self._url("embeddings"), content=content)
            if response.status_code >= 400:
                raise self._http_error(response)
            body = loads_exact(response.content)
            rows = sorted(body["data"], key=lambda row: row["index"])
            vectors = [[float(x) for x in row["embedding"]] for row in rows]
            if len(vectors) != len(texts):
                raise KeyError("data")
            tokens = int((body.get("usage") or {}).get("prompt_tokens") or 0)
            usage = Usage(input_tokens=tokens, requests=1)
            embedded = Embedded(vectors, usage, str(body.get("model") or model))
        except Exception as exc:
            error = self._leaving(self._failure(model, exc, True), exc)
        else:
            return embedded
        raise error  # out of the handler, so an exception that echoed the key is not its context

    def _url(self, path: str) -> httpx2.URL:
        """``path`` under the provider's base URL, as httpx2 joins them, parsed once: a URL
        given whole is not parsed and joined again for each request."""
        url = self._urls.get(path)
        if url is None:
            url = self._client.build_request("POST", path).url
            if len(self._urls) < 256:  # one path a wire, or one a model on Azure
                self._urls[path] = url
        return url

    def _failure(self, model: str, exc: Exception, built: bool) -> AgentRunnerError:
        """``exc`` classified, its text scrubbed."""
        if isinstance(exc, AgentRunnerError):
            if isinstance(exc, ProviderError):
                exc.model = model
            self._secrets.scrub_error(exc)
            return exc
        if isinstance(exc, httpx2.TimeoutException):
            return self._transport_error(FailureKind.TIMEOUT, model, exc)
        if isinstance(exc, httpx2.NetworkError | httpx2.RemoteProtocolError | httpx2.ProxyError):
            return self._transport_error(FailureKind.CONNECTION, model, exc)
        if built and isinstance(exc, json.JSONDecodeError | KeyError | TypeError):
            return ProviderError(
                FailureKind.UNKNOWN,
                f"{self.provider} sent a response agentrunner could not read: {type(exc).__name__}",
                provider=self.provider,
                model=model,
            )
        error = self._unexpected(
            "a request failed" if built else "a request could not be built", exc
        )
        error.model = model
        return error

    def _unexpected(self, what: str, exc: Exception) -> ProviderError:
        return ProviderError(
            FailureKind.UNKNOWN,
            self._scrub(f"{self.provider}: {what}: {type(exc).__name__}: {exc}"),
            provider=self.provider,
        )

    def _leaving(self, error: AgentRunnerError, cause: Exception) -> AgentRunnerError:
        """``error`` ready to be raised outside the handler of ``cause``: chained to it (as
        ``raise … from``) unless ``cause`` or anything chained to it echoes the credential."""
        if self._echoes_secret(cause):
            error.__cause__ = error.__context__ = None
            error.__suppress_context__ = True
        elif error is not cause:
            error.__cause__ = cause
            error.__suppress_context__ = True
        return error

    def _echoes_secret(self, exc: BaseException) -> bool:
        forms = self._secrets.forms
        if not forms:
            return False
        seen: set[int] = set()
        todo: list[BaseException] = [exc]
        while todo:
            link = todo.pop()
            if id(link) in seen:
                continue
            seen.add(id(link))
            text = f"{link} {link!r}"
            if any(form in text for form in forms):
                return True
            todo += [c for c in (link.__cause__, link.__context__) if c is not None]
            if isinstance(link, BaseExceptionGroup):
                todo += link.exceptions
        return False

    async def _fold(self, response: httpx2.Response, fold: ResponseFold) -> ModelResponse:
        wire = self._wire
        decoder = SSEDecoder()
        # The body as it came off the network, unless it is compressed (or was read already):
        # httpx2's decoding layer is a generator step per chunk with nothing to do on it.
        chunks = (
            response.aiter_bytes()
            if response.is_stream_consumed or "content-encoding" in response.headers
            else response.aiter_raw()
        )
        async for chunk in chunks:
            for event, data in decoder.feed(chunk):
                wire.fold_event(event, data, fold)
        for event, data in decoder.flush():
            wire.fold_event(event, data, fold)
        if not fold.complete:
            raise ProviderError(
                FailureKind.CONNECTION,
                f"{self.provider} closed the stream before it finished",
                provider=self.provider,
            )
        return fold.result()

    def _http_error(self, response: httpx2.Response) -> ProviderError:
        try:
            body: Any = response.json()
        except ValueError:
            body = response.text
        error = http_error(
            self.provider, response.status_code, body, parse_retry_after(response.headers)
        )
        error.request_id = response.headers.get("request-id") or response.headers.get(
            "x-request-id"
        )
        return error

    def _transport_error(self, kind: FailureKind, model: str, exc: Exception) -> ProviderError:
        what = "timed out" if kind is FailureKind.TIMEOUT else "connection failed"
        error = ProviderError(
            kind,
            self._scrub(f"{self.provider} {what}: {type(exc).__name__} {exc}".strip()),
            provider=self.provider,
            model=model,
        )
        if _untrusted_certificate(exc):
            error.hint = _UNTRUSTED_HINT
        return error

    def _scrub(self, text: str) -> str:
        return self._secrets.scrub(text)


# TLS is checked against the operating system's certificates (httpx2), which a slim container
# image may not have, and which do not include a company proxy's own CA.
_UNTRUSTED_HINT = (
    "This machine's certificates do not vouch for the provider's: install the ca-certificates "
    "package, or set SSL_CERT_FILE to a CA bundle that does (a company proxy's own CA, say)."
)


def _untrusted_certificate(exc: BaseException) -> bool:
    """Whether a certificate check failed somewhere down ``exc``'s chain of causes."""
    link: BaseException | None = exc
    for _ in range(10):  # httpx2 -> httpcore2 -> ssl is three; a chain is never this long
        if link is None:
            return False
        if isinstance(link, ssl.SSLCertVerificationError):
            return True
        link = link.__cause__ or link.__context__
    return False
