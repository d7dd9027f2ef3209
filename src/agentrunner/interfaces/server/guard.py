"""What every request passes before a route runs, as one pure ASGI middleware (it must see the
body as it arrives, which ``BaseHTTPMiddleware`` cannot):

* **Host.** A server without a token answers only requests whose ``Host`` is loopback
  (``localhost``, ``127.0.0.1``, ``[::1]``, any port) or a name in ``[server] allowed_hosts``:
  a web page that rebinds its own name to 127.0.0.1 sends its own name, and is refused (403).
* **Token.** With a token, every request but ``/health`` needs ``Authorization: Bearer`` (401;
  the scheme in any case, RFC 7235); the dashboard's pages take its session cookie instead
  (``dashboard.auth``), and send a browser that has none to ``/login``. Wrong tokens are
  counted per client with the login form's (``throttle``): slowed, then refused (429).
* **Headers.** Every response says ``X-Content-Type-Options: nosniff``; the dashboard's add
  its Content-Security-Policy and the rest of ``dashboard.auth.PAGE_HEADERS``.
* **Body size.** Bytes are counted as they arrive, chunked bodies included, and the request is
  answered 413 as soon as the limit is passed; a declared ``Content-Length`` past it is refused
  before anything is read. The limit is the JSON bodies' (``BodyBounds``), but for the two
  routes that take files: an upload (``POST /attachments``: the largest file ``[attachments]``
  takes) and the dashboard's post form (a message's files, and the JSON limit for the rest).
* **Crashes.** An unexpected exception is logged and answered 500 here, rather than re-raised to
  the server, which would then drop the client's kept-alive connection.
* **Streams cut off.** A response the app started and left unfinished (an event stream ended by
  the server's shutdown) is finished here, rather than reported by the server as a failure.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentrunner.core.attachments import AttachmentLimits
from agentrunner.interfaces.server.dashboard.auth import (
    PAGE_HEADERS,
    is_dashboard_path,
    is_open_path,
    session_valid,
    session_value,
)
from agentrunner.interfaces.server.errors import error_response
from agentrunner.interfaces.server.throttle import LoginThrottle, Refused

__all__ = ["LOOPBACK_HOSTS", "BodyBounds", "Guard", "bearer", "host_name"]

log = logging.getLogger("agentrunner.server")

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})


_EVERY = [(b"x-content-type-options", b"nosniff")]
_PAGES = _EVERY + [(name.encode(), value.encode()) for name, value in PAGE_HEADERS.items()]


class _BodyTooLarge(Exception):
    pass


@dataclass(slots=True)
class BodyBounds:
    """How many bytes a request's body may have: ``json`` for every route but the two that
    take files, whose bounds follow the project's ``[attachments]`` (``limits``, set when the
    app opens its project): an upload (``POST /attachments``), one file, at most the larger of
    an image's and a PDF's limit; the dashboard's post form (``POST /ui/channels/…/messages``),
    a message's files and ``json`` for its fields and the form's framing."""

    json: int
    limits: AttachmentLimits = field(default_factory=AttachmentLimits)

    def of(self, method: str, path: str) -> int:
        if method == "POST" and path == "/attachments":
            return max(self.limits.max_image_bytes, self.limits.max_pdf_bytes)
        if method == "POST" and path.startswith("/ui/channels/") and path.endswith("/messages"):
            return self.limits.max_message_bytes + self.json
        return self.json


def bearer(authorization: str | None) -> str | None:
    """The token an ``Authorization`` header carries, when its scheme is Bearer (in any case:
    RFC 7235); None for none or another scheme."""
    if authorization is None:
        return None
    scheme, _, credentials = authorization.partition(" ")
    return credentials.lstrip(" ") if scheme.lower() == "bearer" else None


def _headed(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    """``send``, with ``extra`` headers added to the response's start."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), *extra]}
        await send(message)

    return sending


def _to_login(scope: Scope) -> Any:
    """A browser without a session is sent to log in, and back where it was going after; a
    form posted without one (its session ended) is refused, to be sent again."""
    from urllib.parse import quote

    from starlette.responses import RedirectResponse

    if scope["method"] not in ("GET", "HEAD"):
        return error_response(
            401, "unauthorized", "not logged in", "Log in at /login, then send the form again."
        )
    target = scope["path"] + (f"?{scope['query_string'].decode()}" if scope["query_string"] else "")
    return RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)


def host_name(host: str) -> str:
    """The name in a ``Host`` header, lower-cased, without its port."""
    host = host.strip().lower()
    if host.startswith("["):  # [v6]:port
        end = host.find("]")
        return host[: end + 1] if end != -1 else host
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() else host


class Guard:
    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        allowed_hosts: Collection[str],
        bounds: BodyBounds,
        throttle: LoginThrottle | None = None,
    ) -> None:
        self.app = app
        # shared with the login form: both guess the same token
        if throttle is None and token is not None:
            throttle = LoginThrottle(token)
        self.throttle = throttle
        self.session = session_value(token) if token is not None else ""
        self.allowed_hosts = allowed_hosts  # shared: the app adds the project's names on start
        self.bounds = bounds  # shared: the app sets the project's [attachments] on start

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        send = _headed(send, _PAGES if is_dashboard_path(scope["path"]) else _EVERY)
        most = self.bounds.of(scope["method"], scope["path"])
        refusal = await self._refusal(scope, headers, most)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self._guarded(scope, receive, send, most)

    async def _refusal(self, scope: Scope, headers: Headers, most: int) -> Any:
        if self.throttle is None:
            host = headers.get("host", "")
            if host_name(host) not in LOOPBACK_HOSTS | set(self.allowed_hosts):
                return error_response(
                    403,
                    "unauthorized",
                    f"Host {host.strip().lower()[:200]!r} is not accepted by a server "
                    "without a token",
                    "Without AGENTRUNNER_API_TOKEN the server answers only localhost, "
                    "127.0.0.1 and [::1] (a web page could otherwise reach it by DNS "
                    "rebinding): call it by one of those, add the name to [server] "
                    "allowed_hosts in agentrunner.toml, or set a token.",
                )
        elif scope["path"] != "/health":
            refusal = await self._unauthorized(scope, headers, self.throttle)
            if refusal is not None:
                return refusal
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > most:
            return _too_large(most)
        return None

    async def _unauthorized(self, scope: Scope, headers: Headers, throttle: LoginThrottle) -> Any:
        """None for the right bearer token, or a dashboard page's session; else the answer."""
        given = bearer(headers.get("authorization"))
        if given is not None:
            peer = scope.get("client")
            try:
                if await throttle.check(peer[0] if peer else None, given):
                    return None
            except Refused as refused:
                return error_response(
                    429,
                    "unauthorized",
                    str(refused),
                    f"Try again in {refused.retry_after} s, with the server's "
                    "AGENTRUNNER_API_TOKEN.",
                    headers={"retry-after": str(refused.retry_after)},
                )
        if not is_dashboard_path(scope["path"]):
            return error_response(
                401,
                "unauthorized",
                "missing or wrong bearer token",
                "Send Authorization: Bearer <token>, the server's AGENTRUNNER_API_TOKEN.",
            )
        if not is_open_path(scope["path"]) and not session_valid(headers, self.session):
            return _to_login(scope)
        return None

    async def _guarded(self, scope: Scope, receive: Receive, send: Send, most: int) -> None:
        received = 0
        too_large = started = finished = False

        async def counted() -> Message:
            nonlocal received, too_large
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > most:
                    too_large = True
                    raise _BodyTooLarge
            return message

        async def answer(message: Message) -> None:
            nonlocal started, finished
            if too_large:  # whatever the app made of a cut-off body, the answer is 413
                if message["type"] == "http.response.start" and not started:
                    started = True
                    await _too_large(most)(scope, receive, send)
                return
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                finished = True
            await send(message)

        try:
            await self.app(scope, counted, answer)
            if started and not finished:
                # An event stream the server's shutdown cut off (sse-starlette returns without
                # its last message): ended as a response should be, not reported as a failure.
                with contextlib.suppress(Exception):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
        except _BodyTooLarge:
            if not started:
                started = True
                await _too_large(most)(scope, receive, send)
        except Exception:
            log.exception("unhandled error on %s %s", scope["method"], scope["path"])
            if not started:
                await error_response(500, "internal", "internal error")(scope, receive, send)


def _too_large(most: int) -> Any:
    return error_response(
        413,
        "validation",
        f"request body over {most} bytes",
        "Send less: long texts and inputs are bounded field by field too; a large file goes "
        "on its own (POST /attachments), within [attachments]' limits.",
    )
