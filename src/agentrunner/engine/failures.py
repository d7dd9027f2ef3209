"""Provider failures: classified by HTTP status and error *type*, never by message text.

Each failure kind maps to one code of the closed taxonomy, a retryable flag, and whether the
fallback chain may move on to the next attempt (only rate limits, overload/unavailability,
timeouts, connection errors and 5xx — never auth, bad request or content filter).
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from agentrunner.errors import AgentRunnerError, ErrorCode

__all__ = [
    "FailureKind",
    "ProviderError",
    "classify_status",
    "error_fields",
    "http_error",
    "parse_retry_after",
    "stream_error",
]


class FailureKind(StrEnum):
    RATE_LIMIT = "rate_limit"
    QUOTA = "quota"
    OVERLOADED = "overloaded"
    SERVER = "server"
    CONNECTION = "connection"
    TIMEOUT = "timeout"
    AUTH = "auth"
    NOT_FOUND = "not_found"
    CONTEXT_WINDOW = "context_window"
    CONTENT_FILTER = "content_filter"
    TRUNCATED = "truncated"
    BAD_REQUEST = "bad_request"
    INPUT_UNSUPPORTED = "input_unsupported"  # no model of the chain takes a part: none sent
    UNKNOWN = "unknown"


_CODES: dict[FailureKind, tuple[ErrorCode, bool]] = {
    FailureKind.RATE_LIMIT: (ErrorCode.PROVIDER_RATE_LIMIT, True),
    FailureKind.QUOTA: (ErrorCode.PROVIDER_RATE_LIMIT, False),
    FailureKind.OVERLOADED: (ErrorCode.PROVIDER_UNAVAILABLE, True),
    FailureKind.SERVER: (ErrorCode.PROVIDER_UNAVAILABLE, True),
    FailureKind.CONNECTION: (ErrorCode.PROVIDER_UNAVAILABLE, True),
    FailureKind.TIMEOUT: (ErrorCode.PROVIDER_UNAVAILABLE, True),
    FailureKind.AUTH: (ErrorCode.PROVIDER_AUTH, False),
    FailureKind.NOT_FOUND: (ErrorCode.MODEL_NOT_FOUND, False),
    FailureKind.CONTEXT_WINDOW: (ErrorCode.VALIDATION, False),
    FailureKind.CONTENT_FILTER: (ErrorCode.CONTENT_FILTER, False),
    FailureKind.TRUNCATED: (ErrorCode.VALIDATION, False),
    FailureKind.BAD_REQUEST: (ErrorCode.VALIDATION, False),
    FailureKind.INPUT_UNSUPPORTED: (ErrorCode.MODEL_INPUT_UNSUPPORTED, False),
    FailureKind.UNKNOWN: (ErrorCode.INTERNAL, False),
}
_FAILOVER = frozenset(
    {
        FailureKind.RATE_LIMIT,
        FailureKind.OVERLOADED,
        FailureKind.SERVER,
        FailureKind.CONNECTION,
        FailureKind.TIMEOUT,
    }
)
_HINTS: dict[FailureKind, str] = {
    FailureKind.RATE_LIMIT: "Wait and retry, or add a fallback model from another provider.",
    FailureKind.QUOTA: "The account's quota is exhausted: check billing with the provider.",
    FailureKind.AUTH: "Check the API key in the provider's environment variable.",
    FailureKind.NOT_FOUND: "Check the model name: `provider:model` must name a model you can use.",
    FailureKind.CONTEXT_WINDOW: "The conversation is too long for the model: start a new thread.",
    FailureKind.TRUNCATED: "Raise limits.max_output_tokens or ask for a shorter answer.",
    FailureKind.INPUT_UNSUPPORTED: (
        "Give the agent a model that takes it (or add one as a fallback), or say what the "
        'model takes: [models."provider:model"] input = ["text", "image", "pdf"].'
    ),
}


class ProviderError(AgentRunnerError):
    """A failed model request, classified. ``failover`` says whether the chain may move on."""

    def __init__(
        self,
        kind: FailureKind,
        message: str,
        *,
        provider: str = "",
        model: str = "",
        status: int | None = None,
        retry_after: float | None = None,
        request_id: str | None = None,
    ) -> None:
        code, retryable = _CODES[kind]
        super().__init__(code, message, hint=_HINTS.get(kind), retryable=retryable)
        self.kind = kind
        self.provider = provider
        self.model = model
        self.status = status
        self.retry_after = retry_after
        self.request_id = request_id

    @property
    def failover(self) -> bool:
        return self.kind in _FAILOVER

    def __repr__(self) -> str:
        return f"ProviderError({self.kind!s}, status={self.status}, {self.message!r})"


def classify_status(
    status: int, error_type: str | None = None, error_code: str | None = None
) -> FailureKind:
    """The failure kind for an HTTP error, refined by the provider's error type/code fields."""
    by_type = _BY_TYPE.get(error_code or "") or _BY_TYPE.get(error_type or "")
    if by_type is not None:
        return by_type
    if status in (401, 403):
        return FailureKind.AUTH
    if status == 404:
        return FailureKind.NOT_FOUND
    if status == 408:
        return FailureKind.TIMEOUT
    if status == 413:
        return FailureKind.CONTEXT_WINDOW
    if status == 429:
        return FailureKind.RATE_LIMIT
    if status == 529 or status == 503:
        return FailureKind.OVERLOADED
    if status >= 500:
        return FailureKind.SERVER
    if 400 <= status < 500:
        return FailureKind.BAD_REQUEST
    return FailureKind.UNKNOWN


# Error `type` (Anthropic, OpenAI) and `code` (OpenAI) values that say more than the status.
# A stream's error is read as a 500's, so a code that is the caller's fault must be named here.
_BY_TYPE: dict[str, FailureKind] = {
    "overloaded_error": FailureKind.OVERLOADED,
    "rate_limit_error": FailureKind.RATE_LIMIT,
    "rate_limit_exceeded": FailureKind.RATE_LIMIT,
    "insufficient_quota": FailureKind.QUOTA,
    "authentication_error": FailureKind.AUTH,
    "permission_error": FailureKind.AUTH,
    "invalid_api_key": FailureKind.AUTH,
    "not_found_error": FailureKind.NOT_FOUND,
    "model_not_found": FailureKind.NOT_FOUND,
    "context_length_exceeded": FailureKind.CONTEXT_WINDOW,
    "request_too_large": FailureKind.CONTEXT_WINDOW,
    "content_filter": FailureKind.CONTENT_FILTER,
    "content_policy_violation": FailureKind.CONTENT_FILTER,
    "invalid_prompt": FailureKind.BAD_REQUEST,  # a failed Responses API response's
    "api_error": FailureKind.SERVER,
    "server_error": FailureKind.SERVER,
    "timeout_error": FailureKind.TIMEOUT,
}


def http_error(provider: str, status: int, body: Any, retry_after: float | None) -> ProviderError:
    """An HTTP error answer (an OpenAI- or Anthropic-shaped JSON body, or any text) classified."""
    etype, code, message = error_fields(body)
    if not message and isinstance(body, str):
        message = body.strip()[:300]
    return ProviderError(
        classify_status(status, etype, code),
        f"{provider} answered {status}"
        + (f" ({code or etype})" if code or etype else "")
        + (f": {message}" if message else ""),
        provider=provider,
        status=status,
        retry_after=retry_after,
    )


def stream_error(provider: str, payload: Any) -> ProviderError:
    """An error event in the middle of a stream, classified as a server error unless its type
    says more (``overloaded_error``, ``rate_limit_error``…)."""
    etype, code, message = error_fields(payload)
    return ProviderError(
        classify_status(500, etype, code),
        f"{provider} stream error ({code or etype}): {message}",
        provider=provider,
    )


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def error_fields(body: Any) -> tuple[str | None, str | None, str]:
    """(type, code, message) from an OpenAI- or Anthropic-shaped JSON error body."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return (
                _str_or_none(err.get("type")),
                _str_or_none(err.get("code")),
                str(err.get("message") or ""),
            )
        if isinstance(err, str):
            return None, None, err
    return None, None, ""


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
