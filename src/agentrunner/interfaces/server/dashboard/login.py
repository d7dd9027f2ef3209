"""``/login`` and ``/logout``: a person's session on a server that a token guards. A wrong
token counts against the browser's address as a wrong bearer token does (``throttle``)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from agentrunner.interfaces.server.dashboard.auth import (
    SESSION_COOKIE,
    safe_next,
    session_value,
    set_cookie,
)
from agentrunner.interfaces.server.dashboard.forms import checked_form
from agentrunner.interfaces.server.dashboard.templating import page
from agentrunner.interfaces.server.throttle import LoginThrottle, Refused

__all__ = ["router"]

router = APIRouter()


@router.get("/login")
async def login_form(request: Request, next: str = "/") -> Response:
    if not request.app.state.dashboard_login:  # nothing to log in to on loopback
        return RedirectResponse(safe_next(next), status_code=303)
    return page(
        request, "login.html", {"next": safe_next(next), "failed": False, "retry_after": None}
    )


@router.post("/login")
async def login(request: Request) -> Response:
    form = await checked_form(request)
    target = safe_next(str(form.get("next") or "/"))
    token: str | None = request.app.state.token
    throttle: LoginThrottle | None = request.app.state.login_throttle
    given = str(form.get("token") or "")
    if token is None or throttle is None:
        return RedirectResponse(target, status_code=303)
    try:
        right = await throttle.check(request.client.host if request.client else None, given)
    except Refused as refused:
        context = {"next": target, "failed": False, "retry_after": refused.retry_after}
        answer = page(request, "login.html", context, status=429)
        answer.headers["retry-after"] = str(refused.retry_after)
        return answer
    if not right:
        context = {"next": target, "failed": True, "retry_after": None}
        return page(request, "login.html", context, status=401)
    response = RedirectResponse(target, status_code=303)
    set_cookie(response, SESSION_COOKIE, session_value(token), secure=request.url.scheme == "https")
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    await checked_form(request)
    response = RedirectResponse("/login" if request.app.state.dashboard_login else "/", 303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response
