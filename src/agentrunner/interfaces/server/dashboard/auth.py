"""Who may see the dashboard, and which forms it sent.

* **Session.** With a token (the server is beyond loopback), a person logs in once with it at
  ``/login``; the answer sets ``ar_session``, a digest of the token (never the token itself),
  ``HttpOnly`` and ``SameSite=Strict``, which ``guard`` accepts on the dashboard's paths only:
  the JSON API still wants ``Authorization: Bearer``. Changing the token ends every session.
* **CSRF.** Every form carries the value of the ``ar_csrf`` cookie (double submit), set on the
  first page a browser is given; a POST whose field and cookie differ, or whose ``Origin`` is
  another site's, is refused before it does anything. Loopback servers check it too: any web
  page a person visits could otherwise post to ``127.0.0.1``.
* **What a browser is told** (``PAGE_HEADERS``, on every answer under the dashboard's paths):
  scripts only from this site's files (no inline script, no ``eval``), styles from its
  stylesheet (plus ``style`` attributes: the cost bars' widths and the job log's indents, numbers
  the server writes, so the bars need no script), never framed (clickjacking), never sniffed as
  another type, and the address of a page sent only to this site (``same-origin``: with
  ``no-referrer`` a browser sends ``Origin: null`` on forms, which the CSRF check refuses).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "PAGE_HEADERS",
    "SESSION_COOKIE",
    "csrf_token",
    "csrf_valid",
    "is_dashboard_path",
    "is_open_path",
    "safe_next",
    "session_valid",
    "session_value",
    "set_cookie",
]

SESSION_COOKIE = "ar_session"
CSRF_COOKIE = "ar_csrf"
CSRF_FIELD = "csrf"
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "style-src-attr 'unsafe-inline'",
        "img-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
PAGE_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-frame-options": "DENY",  # frame-ancestors, for browsers that predate it
    "referrer-policy": "same-origin",
}
# Paths the session cookie opens (and that answer a browser with a login page, not a 401).
_PREFIXES = ("/ui/",)
_EXACT = frozenset({"/", "/ui", "/login", "/logout", "/favicon.ico"})


def is_dashboard_path(path: str) -> bool:
    return path in _EXACT or path.startswith(_PREFIXES)


def is_open_path(path: str) -> bool:
    """Reachable before logging in: the login form and what it is styled with (its icon too)."""
    return path in ("/login", "/favicon.ico") or path.startswith("/ui/static/")


def session_value(token: str) -> str:
    """What the session cookie holds: keyed by the token, so only its holder can make it, and
    it never carries the token itself (a cookie is stored in the browser's profile)."""
    return hmac.new(token.encode(), b"agentrunner dashboard session", hashlib.sha256).hexdigest()


def session_valid(headers: Headers, expected: str) -> bool:
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == SESSION_COOKIE:
            return hmac.compare_digest(value.encode(), expected.encode())
    return False


def csrf_token(request: Request) -> tuple[str, bool]:
    """The browser's CSRF value, and whether it is new (to be set as a cookie)."""
    given = request.cookies.get(CSRF_COOKIE, "")
    if 20 <= len(given) <= 100 and given.isascii():
        return given, False
    return secrets.token_urlsafe(32), True


def csrf_valid(request: Request, field: str | None) -> bool:
    cookie = request.cookies.get(CSRF_COOKIE, "")
    if not cookie or not field or not hmac.compare_digest(cookie.encode(), field.encode()):
        return False
    origin = request.headers.get("origin")
    if origin is None:
        # A browser sends Origin on every cross-site POST; one without is a same-site form of
        # an older browser or a tool holding the cookie, and the cookie already matched.
        return True
    return urlsplit(origin).netloc.lower() == request.headers.get("host", "").lower()


def set_cookie(response: Response, name: str, value: str, *, secure: bool) -> None:
    response.set_cookie(
        name, value, httponly=True, samesite="strict", secure=secure, path="/", max_age=None
    )


def safe_next(target: str | None) -> str:
    """Where to go after logging in: a path of this site only, never another site's address."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target
