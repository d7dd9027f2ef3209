"""The dashboard's Jinja2 templates: one environment for the process (templates are compiled
once and cached), autoescaping on, and the few filters every page shares."""

from __future__ import annotations

import json
import time
from functools import cache
from typing import Any

import jinja2
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from agentrunner.core.ids import short_id
from agentrunner.interfaces.server.dashboard.auth import (
    CSRF_COOKIE,
    CSRF_FIELD,
    csrf_token,
    set_cookie,
)
from agentrunner.interfaces.server.dashboard.money import money

__all__ = [
    "environment",
    "for_browser",
    "fragment",
    "keep_csrf",
    "load_templates",
    "page",
    "problem",
]


def clock(ts: float | None) -> str:
    """A time as the page says it without script: today's as ``14:02:07 UTC``, older ones with
    the date (UTC, as the API's times and the cost days are). With script, app.js writes each
    ``<time>`` in the browser's own time zone."""
    if ts is None:
        return "—"
    if time.strftime("%Y-%m-%d", time.gmtime(ts)) == time.strftime("%Y-%m-%d", time.gmtime()):
        return time.strftime("%H:%M:%S UTC", time.gmtime(ts))
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ts))


def code_spans(text: str | None) -> Markup:
    """A hint or message with its `backticked` spans as ``<code>``, the rest escaped."""
    parts = str(text or "").split("`")
    if len(parts) % 2 == 0:  # an unmatched backtick: the text as it is
        return escape(text or "")
    return Markup("").join(
        Markup("<code>{}</code>").format(part) if n % 2 else escape(part)
        for n, part in enumerate(parts)
    )


def error_said(code: str | None, message: str | None) -> Markup:
    """An error as a page says it: its code in bold, said once (``errors.in_words``), then its
    message."""
    from agentrunner.errors import in_words

    lead, text = in_words(code or "error", message)
    if lead is None:
        return escape(text)
    said = Markup('<strong class="mono">{}</strong>').format(lead)
    return said + Markup(": {}").format(text) if text else said


def iso(ts: float | None) -> str:
    return "" if ts is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min"


def time_left(deadline: float) -> str:
    """How long until ``deadline``, in words a person reads at a glance (``23 h 5 min``)."""
    left = deadline - time.time()
    if left < 60:
        return "under a minute"
    minutes = int(left // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{hours // 24} days"


def count(n: int | None) -> str:
    return "—" if n is None else f"{n:,}"


def pretty(value: Any) -> str:
    """A tool's arguments or result as indented JSON (text that is not JSON as it is)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return str(value)
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@cache
def environment() -> jinja2.Environment:
    """The environment: its templates are compiled once as the server starts (``ready`` runs
    ``load_templates`` on a worker thread), so that a page rendered on the event loop never
    reads or stats a file."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("agentrunner.interfaces.server.dashboard", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        # Never looked at again once compiled: a check for a changed file is a stat on the
        # server's loop at every page (templates are package files, changed by an upgrade).
        auto_reload=False,
        cache_size=-1,
    )
    env.filters.update(
        money=money,
        code_spans=code_spans,
        error_said=error_said,
        clock=clock,
        iso=iso,
        duration=duration,
        time_left=time_left,
        count=count,
        pretty=pretty,
        short_id=short_id,
    )
    return env


def load_templates() -> None:
    """Read and compile every template, once: a page rendered on the event loop then reads no
    file (``ready`` runs this on a worker thread as the server starts)."""
    env = environment()
    for name in env.list_templates(extensions=["html"]):
        env.get_template(name)


def fragment(name: str, context: dict[str, Any]) -> str:
    """A template's text with no request: what a live stream sends (it holds no form)."""
    text: str = environment().get_template(name).render(**context)
    return text


def for_browser(request: Request, csrf: str, name: str, context: dict[str, Any]) -> str:
    """A template's text for the browser of ``request``: its forms carry ``csrf``, that
    browser's CSRF value."""
    return fragment(name, {"request": request, "csrf": csrf, "csrf_field": CSRF_FIELD, **context})


def keep_csrf(response: Response, request: Request, token: str, new: bool) -> None:
    """The CSRF cookie set on ``response`` when the browser had none yet (``new``)."""
    if new:
        set_cookie(response, CSRF_COOKIE, token, secure=request.url.scheme == "https")


def page(
    request: Request, name: str, context: dict[str, Any], *, status: int = 200
) -> HTMLResponse:
    """A whole page (or a fragment a page asked for): rendered with ``request`` and ``csrf``
    (the browser's CSRF value, for its forms), and the CSRF cookie set when the browser has
    none yet."""
    token, new = csrf_token(request)
    response = HTMLResponse(for_browser(request, token, name, context), status_code=status)
    keep_csrf(response, request, token, new)
    return response


def problem(
    request: Request,
    status: int,
    code: str,
    message: str,
    hint: str | None = None,
    *,
    active: str = "",
    back: tuple[str, str] = ("/", "Back to the team"),
) -> HTMLResponse:
    """An error as a page: what the JSON API would say (code, message, hint), for a person;
    ``active``: the tab it belongs to, ``back``: where to go from it (address, words)."""
    titles = {401: "Not logged in", 403: "Refused", 404: "Not found", 422: "Not valid"}
    context = {
        "title": titles.get(status, "Something went wrong"),
        "code": code,
        "message": message,
        "hint": hint,
        "active": active,
        "back": back,
    }
    return page(request, "problem.html", context, status=status)
