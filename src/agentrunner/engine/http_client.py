"""The engine's one network seam: a pooled httpx2 client per provider driving a wire adapter.

Transport failures are classified by exception type (timeout, connection) and HTTP failures by
status and error type (the adapter's ``error``). A stream that ends before the provider's end
marker is a dropped connection. The credential is scrubbed from every message it could echo.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import httpx2

from agentrunner.engine.failures import FailureKind, ProviderError, parse_retry_after
from agentrunner.engine.http_pool import provider_transport
from agentrunner.engine.messages import ModelRequest, ModelResponse, TextDelta, ThinkingDelta
from agentrunner.engine.sse import SSEDecoder

__all__ = ["DeltaSink", "HttpModelClient", "ModelClient", "Wire"]

DeltaSink = Callable[[TextDelta | ThinkingDelta], None]
_LIMITS = httpx2.Limits(max_connections=256, max_keepalive_connections=64)


class ModelClient(Protocol):
    """Anything that answers a ``ModelRequest``: a provider over HTTP, or a test double."""

    provider: str

    async def request(self, request: ModelRequest, on_delta: DeltaSink | None) -> ModelResponse: ...

    async def aclose(self) -> None: ...


class StreamFold(Protocol):
    @property
    def complete(self) -> bool: ...

    def feed(self, event: str | None, data: str) -> list[TextDelta | ThinkingDelta]: ...

    def result(self) -> ModelResponse: ...


class Wire(Protocol):
    provider: str

    def path(self, request: ModelRequest) -> str: ...

    def build(self, request: ModelRequest) -> dict[str, Any]: ...

    def parse(self, body: Mapping[str, Any]) -> ModelResponse: ...

    def stream(self) -> StreamFold: ...

    def error(self, status: int, body: Any, retry_after: float | None) -> ProviderError: ...


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
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self.provider = wire.provider
        self._wire = wire
        self._secret = secret
        self._client = httpx2.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers={"content-type": "application/json", **headers},
            # `read` bounds both the wait for the first byte and each idle gap in a stream.
            timeout=httpx2.Timeout(timeout_s, connect=connect_timeout_s),
            limits=_LIMITS,  # for the transports httpx2 builds where the environment names a proxy
            transport=transport or provider_transport(_LIMITS),
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def request(self, request: ModelRequest, on_delta: DeltaSink | None) -> ModelResponse:
        path = self._wire.path(request)
        content = json.dumps(self._wire.build(request), separators=(",", ":"), ensure_ascii=False)
        try:
            if not request.stream:
                response = await self._client.post(path, content=content.encode())
                if response.status_code >= 400:
                    raise self._http_error(response)
                return self._wire.parse(response.json())
            async with self._client.stream("POST", path, content=content.encode()) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise self._http_error(response)
                return await self._fold(response, on_delta)
        except ProviderError as exc:
            exc.model = request.model
            exc.message = self._scrub(exc.message)
            exc.args = (exc.message,)
            raise
        except httpx2.TimeoutException as exc:
            raise self._transport_error(FailureKind.TIMEOUT, request, exc) from exc
        except (httpx2.NetworkError, httpx2.RemoteProtocolError) as exc:
            raise self._transport_error(FailureKind.CONNECTION, request, exc) from exc
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ProviderError(
                FailureKind.UNKNOWN,
                f"{self.provider} sent a response agentrunner could not read: {type(exc).__name__}",
                provider=self.provider,
                model=request.model,
            ) from exc

    async def _fold(self, response: httpx2.Response, on_delta: DeltaSink | None) -> ModelResponse:
        fold = self._wire.stream()
        decoder = SSEDecoder()
        # Event streams are UTF-8 whatever the headers say (the SSE spec), and naming it spares
        # httpx2 parsing Content-Type through the email package on every response.
        response.encoding = "utf-8"
        async for line in response.aiter_lines():
            event = decoder.feed(line)
            if event is None:
                continue
            for delta in fold.feed(*event):
                if on_delta is not None:
                    on_delta(delta)
        tail = decoder.flush()
        if tail is not None:
            fold.feed(*tail)
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
        error = self._wire.error(response.status_code, body, parse_retry_after(response.headers))
        error.request_id = response.headers.get("request-id") or response.headers.get(
            "x-request-id"
        )
        return error

    def _transport_error(
        self, kind: FailureKind, request: ModelRequest, exc: Exception
    ) -> ProviderError:
        what = "timed out" if kind is FailureKind.TIMEOUT else "connection failed"
        error = ProviderError(
            kind,
            self._scrub(f"{self.provider} {what}: {type(exc).__name__} {exc}".strip()),
            provider=self.provider,
            model=request.model,
        )
        if _untrusted_certificate(exc):
            error.hint = _UNTRUSTED_HINT
        return error

    def _scrub(self, text: str) -> str:
        if self._secret and self._secret in text:
            return text.replace(self._secret, "[redacted]")
        return text


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
