"""The HTTP status of every error, from its code in the taxonomy (``status_for``), and what the
OpenAPI document says of an error answer: the body every one has (``ErrorBody``) and what each
status means (``ERROR_RESPONSES``).

It imports nothing of the dashboard, whose forms answer an error in place with the same status;
the handlers that answer errors, as JSON or as a dashboard page, are ``errors``'.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from agentrunner.errors import AgentRunnerError, ErrorCode

__all__ = ["ERROR_RESPONSES", "ErrorBody", "status_for"]

_STATUS: dict[ErrorCode, int] = {
    ErrorCode.AGENT_NOT_FOUND: 404,
    ErrorCode.THREAD_NOT_FOUND: 404,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.MODEL_NOT_FOUND: 400,
    ErrorCode.VALIDATION: 400,
    ErrorCode.MISSING_MANDATORY_PLACEHOLDER: 400,
    ErrorCode.INVALID_PLACEHOLDER_PATH: 400,
    ErrorCode.INVALID_SPECIFICATION: 400,
    ErrorCode.ATTACHMENT_REFUSED: 422,
    ErrorCode.MODEL_INPUT_UNSUPPORTED: 400,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.TOOL_DENIED: 403,
    ErrorCode.GUARD_BLOCKED: 403,
    ErrorCode.PROVIDER_AUTH: 502,
    ErrorCode.PROVIDER_RATE_LIMIT: 503,
    ErrorCode.PROVIDER_UNAVAILABLE: 503,
    ErrorCode.BUDGET_EXCEEDED: 402,
    ErrorCode.PRICE_UNKNOWN: 402,
    ErrorCode.CANCELLED: 409,
    ErrorCode.AGENT_DISABLED: 409,
    ErrorCode.APPROVAL_DECIDED: 409,
    ErrorCode.THREAD_WAITING: 409,
    ErrorCode.QUEUE_FULL: 429,
    ErrorCode.RUN_TIMEOUT: 504,
}


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
        403: "tool denied; a message or an answer blocked by a guard; a Host not accepted by "
        "a server without a token",
        404: "no such agent, thread, run, channel, kept file or schedule",
        405: "method not allowed (the Allow header lists those that are)",
        409: "cancelled; the agent is disabled (enabled: false in its file)",
        413: "request body too large",
        422: "bad input: the request does not match the schema, or a field breaks its rules; "
        "a file refused (`attachment_refused`)",
        429: "the agent's queue is full; too many wrong tokens from this client (Retry-After "
        "says when to try again)",
        500: "internal error",
        502: "the model provider rejected the credentials",
        503: "the model provider is rate limiting or unavailable, or the database is",
        504: "the run passed its deadline (limits.timeout_s)",
    }.items()
}
