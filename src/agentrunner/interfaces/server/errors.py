"""Every error the HTTP API answers: a JSON body ``{"error": {"code", "message", "hint"}}`` with
a code from the taxonomy and a status from the code (``statuses``) — never an HTML page or a
traceback; an error on a dashboard page is answered as a page of the dashboard, with the same
status."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response
from starlette.routing import Match

from agentrunner.errors import AgentRunnerError
from agentrunner.interfaces.server.dashboard.auth import is_dashboard_path
from agentrunner.interfaces.server.dashboard.templating import problem
from agentrunner.interfaces.server.statuses import status_for

__all__ = ["error_body", "error_response", "install_handlers"]


def error_body(code: str, message: str, hint: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if hint:
        body["hint"] = hint
    return {"error": body}


def error_response(
    status: int,
    code: str,
    message: str,
    hint: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(error_body(code, message, hint), status_code=status, headers=headers)


def _for_a_person(request: Request) -> bool:
    """A dashboard page's error is a page too (the JSON API's stays JSON)."""
    return is_dashboard_path(request.url.path) and request.method in ("GET", "HEAD", "POST")


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(AgentRunnerError)
    async def runner_error(request: Request, exc: AgentRunnerError) -> Response:
        status = status_for(exc)
        if _for_a_person(request):
            return problem(request, status, str(exc.code), exc.message, exc.hint)
        retry_after = exc.details.get("retry_after_s")
        headers = {"retry-after": str(int(retry_after))} if retry_after is not None else None
        return error_response(status, str(exc.code), exc.message, exc.hint, headers)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> Response:
        # Of a union's several errors, the deepest says most (the branch that nearly fit).
        errors = sorted(exc.errors(), key=lambda e: -len(e.get("loc", ())))
        first = errors[0] if errors else {}
        if first.get("type") == "json_invalid":  # not a request that breaks rules: not JSON
            why = (first.get("ctx") or {}).get("error", "")
            return error_response(400, "validation", f"the body is not JSON: {why}".rstrip(": "))
        where = ".".join(str(p) for p in first.get("loc", ()))
        what = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
        if _for_a_person(request):
            return problem(request, 422, "validation", f"{where}: {what}")
        return error_response(422, "validation", f"{where}: {what}")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = "not_found" if exc.status_code == 404 else "validation"
        if _for_a_person(request) and exc.status_code in (404, 422):
            return problem(request, exc.status_code, code, "there is no page here", None)
        headers = {k: v for k, v in (exc.headers or {}).items() if k.lower() != "allow"}
        if exc.status_code == 405:
            headers["allow"] = ", ".join(_allowed_methods(request))
        return error_response(exc.status_code, code, str(exc.detail), headers=headers)


_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route answers at the request's path (Starlette's own ``Allow`` names
    only the first route's, where a path has one route per method)."""
    routes = request.app.router.routes
    return [
        method
        for method in _METHODS
        if any(r.matches({**request.scope, "method": method})[0] is Match.FULL for r in routes)
    ]
