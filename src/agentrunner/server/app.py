"""The HTTP API: a FastAPI app over a workspace (runner + channels), with an in-process worker.

Thin: every route parses its input, calls the library, shapes the output. Every error is a JSON
body ``{"error": {"code", "message", "hint"}}`` with a status from the error's code — never an
HTML page or a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response

from agentrunner._version import __version__
from agentrunner.errors import AgentRunnerError, ErrorCode

if TYPE_CHECKING:
    from agentrunner.compose import Workspace

__all__ = ["create_app"]

log = logging.getLogger("agentrunner.server")

_STATUS: dict[ErrorCode, int] = {
    ErrorCode.AGENT_NOT_FOUND: 404,
    ErrorCode.THREAD_NOT_FOUND: 404,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.MODEL_NOT_FOUND: 400,
    ErrorCode.VALIDATION: 400,
    ErrorCode.MISSING_MANDATORY_PLACEHOLDER: 400,
    ErrorCode.INVALID_PLACEHOLDER_PATH: 400,
    ErrorCode.INVALID_SPECIFICATION: 400,
    ErrorCode.TOOL_DENIED: 403,
    ErrorCode.PROVIDER_AUTH: 502,
    ErrorCode.PROVIDER_RATE_LIMIT: 503,
    ErrorCode.PROVIDER_UNAVAILABLE: 503,
    ErrorCode.BUDGET_EXCEEDED: 402,
    ErrorCode.CANCELLED: 409,
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
        400: "bad input (validation, template and model errors)",
        401: "missing or wrong bearer token",
        402: "budget exceeded",
        403: "tool denied",
        404: "no such agent, thread, run or channel",
        409: "cancelled",
        413: "request body too large",
        422: "the request does not match the schema",
        500: "internal error",
        502: "the model provider rejected the credentials",
        503: "the model provider is rate limiting or unavailable, or the database is",
    }.items()
}


def _report_worker_exit(task: asyncio.Task[int]) -> None:
    """The server's own worker stopped before the server did: say so, rather than leave runs
    queued with nobody serving them."""
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        log.error("the server's worker stopped: %s: %s", type(error).__name__, error)


def error_body(code: str, message: str, hint: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if hint:
        body["hint"] = hint
    return {"error": body}


def create_app(
    start: Path | None = None,
    *,
    token: str | None = None,
    worker: bool = True,
    cors_origins: list[str] | None = None,
    max_body_bytes: int = 1_000_000,
    workspace: Workspace | None = None,
) -> FastAPI:
    """The app for the project at (or above) ``start``. With ``token``, every request needs
    ``Authorization: Bearer <token>``; ``worker`` serves mailboxes in this process. An open
    ``workspace`` is used as it is (its opener closes it); otherwise the app opens and closes
    the project's own."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from agentrunner.compose import open_workspace

        opened = workspace or await open_workspace(start)
        app.state.workspace = opened
        serving = opened.worker() if worker else None
        task = asyncio.create_task(serving.run()) if serving else None
        if task is not None:
            task.add_done_callback(_report_worker_exit)
        try:
            yield
        finally:
            if serving is not None and task is not None:
                serving.stop()
                with contextlib.suppress(Exception):
                    await task
            if workspace is None:
                await opened.close()

    app = FastAPI(
        title="agentrunner",
        version=__version__,
        description="Run LLM agents: threads, runs, live events, channels, OpenAI-compatible chat.",
        lifespan=lifespan,
    )

    @app.middleware("http")
    async def guard(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        if token is not None and request.url.path not in ("/health",):
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return JSONResponse(
                    error_body(
                        "provider_auth",
                        "missing or wrong bearer token",
                        "Send Authorization: Bearer <token>.",
                    ),
                    status_code=401,
                )
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > max_body_bytes:
            return JSONResponse(
                error_body("validation", f"request body over {max_body_bytes} bytes"),
                status_code=413,
            )
        return await call_next(request)

    @app.exception_handler(AgentRunnerError)
    async def runner_error(request: Request, exc: AgentRunnerError) -> JSONResponse:
        body = error_body(str(exc.code), exc.message, exc.hint)
        if exc.details.get("unavailable"):  # the database stayed away past the store's retries
            return JSONResponse(body, status_code=503, headers={"Retry-After": "5"})
        status = 404 if exc.details.get("not_found") else _STATUS.get(exc.code, 500)
        return JSONResponse(body, status_code=status)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return JSONResponse(
            error_body("validation", f"{where}: {first.get('msg', 'invalid request')}"),
            status_code=422,
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = "not_found" if exc.status_code == 404 else "validation"
        return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def crash(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return JSONResponse(error_body("internal", "internal error"), status_code=500)

    @app.get("/health", tags=["service"])
    async def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    if cors_origins:
        # Added last, so outermost: preflights are answered before the token check, and error
        # responses carry CORS headers too.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=cors_origins,
            allow_methods=["*"],
            allow_headers=["*"],
        )

    from agentrunner.server import openai_compat, routes

    app.include_router(routes.router, responses=ERROR_RESPONSES)
    app.include_router(openai_compat.router, responses=ERROR_RESPONSES)
    return app
