"""Every error the HTTP API answers: a JSON body ``{"error": {"code", "message", "hint"}}`` with
a code from the taxonomy and a status from the code — never an HTML page or a traceback."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response
from starlette.routing import Match

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.interfaces.server.dashboard.auth import is_dashboard_path

__all__ = [
    "ERROR_RESPONSES",
    "ErrorBody",
    "error_body",
    "error_response",
    "install_handlers",
    "status_for",
]

_STATUS: dict[ErrorCode, int] = {
    ErrorCode.AGENT_NOT_FOUND: 404,
    ErrorCode.THREAD_NOT_FOUND: 404,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.MODEL_NOT_FOUND: 400,
    ErrorCode.VALIDATION: 400,
    ErrorCode.MISSING_MANDATORY_PLACEHOLDER: 400,
    ErrorCode.INVALID_PLACEHOLDER_PATH: 400,
    ErrorCode.INVALID_SPECIFICATION: 400,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.TOOL_DENIED: 403,
    ErrorCode.PROVIDER_AUTH: 502,
    ErrorCode.PROVIDER_RATE_LIMIT: 503,
    ErrorCode.PROVIDER_UNAVAILABLE: 503,
    ErrorCode.BUDGET_EXCEEDED: 402,
    ErrorCode.PRICE_UNKNOWN: 402,
    ErrorCode.CANCELLED: 409,
    ErrorCode.AGENT_DISABLED: 409,
    ErrorCode.QUEUE_FULL: 429,
    ErrorCode.RUN_TIMEOUT: 504,
}


class ErrorDetail(BaseModel):
    code: str
    message: str
    hint: str | None = None


class ErrorBody(BaseModel):
    """Every error response: a code from the taxonomy, a message, maybe a hint."""

    error: ErrorDetail


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in {
        400: "bad input (template and model errors, a body that is not JSON)",
        401: "missing or wrong bearer token",
        402: "budget exceeded; a model whose price is unknown under a budget",
        403: "tool denied; a Host not accepted by a server without a token",
        404: "no such agent, thread, run or channel",
        405: "method not allowed (the Allow header lists those that are)",
        409: "cancelled; the agent is disabled (enabled: false in its file)",
        413: "request body too large",
        422: "bad input: the request does not match the schema, or a field breaks its rules",
        429: "the agent's queue is full; too many wrong tokens from this client (Retry-After "
        "says when to try again)",
        500: "internal error",
        502: "the model provider rejected the credentials",
        503: "the model provider is rate limiting or unavailable, or the database is",
        504: "the run passed its deadline (limits.timeout_s)",
    }.items()
}


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


def _status(exc: AgentRunnerError) -> int:
    if exc.details.get("not_found"):
        return 404
    if exc.details.get("invalid"):  # a field of the request breaks its rules (inputs.py)
        return 422
    if exc.details.get("unavailable"):  # the database stayed away past the store's retries
        return 503
    return _STATUS.get(exc.code, 500)


def status_for(exc: AgentRunnerError) -> int:
    """The HTTP status an error is answered with (a dashboard form that shows it in place
    answers with the same)."""
    return 403 if exc.details.get("forbidden") else _status(exc)


def _for_a_person(request: Request) -> bool:
    """A dashboard page's error is a page too (the JSON API's stays JSON)."""
    return is_dashboard_path(request.url.path) and request.method in ("GET", "HEAD", "POST")


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(AgentRunnerError)
    async def runner_error(request: Request, exc: AgentRunnerError) -> Response:
        status = status_for(exc)
        if _for_a_person(request):
            from agentrunner.interfaces.server.dashboard.templating import problem

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
            from agentrunner.interfaces.server.dashboard.templating import problem

            return problem(request, 422, "validation", f"{where}: {what}")
        return error_response(422, "validation", f"{where}: {what}")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = "not_found" if exc.status_code == 404 else "validation"
        if _for_a_person(request) and exc.status_code in (404, 422):
            from agentrunner.interfaces.server.dashboard.templating import problem

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
