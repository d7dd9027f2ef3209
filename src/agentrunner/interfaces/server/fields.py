"""Request fields as the routes declare them: ids and texts checked by the library's rules
(``agentrunner.core.inputs``) while the request is parsed, so breaking one is a 422 that names the
field; and the ``Idempotency-Key`` of a request a client may send again (``Retry``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Header, Request, Response
from pydantic import AfterValidator, BaseModel, Field
from typing_extensions import TypeAliasType

from agentrunner.core.inputs import (
    ID_PATTERN,
    MAX_ID_CHARS,
    MAX_TEXT_CHARS,
    TEXT_PATTERN,
    id_problem,
    input_problem,
    text_problem,
)
from agentrunner.run.idempotency import MAX_KEY_CHARS, IdempotencyKey

__all__ = ["Id", "Input", "Retry", "Text"]


def _id(value: str) -> str:
    problem = id_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _text(value: str) -> str:
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _input(value: dict[str, Any]) -> dict[str, Any]:
    problem = input_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


# The patterns go in the schema only: the checks are the library's (pydantic's own regex engine
# cannot name surrogates).
Id = Annotated[
    str,
    Field(min_length=1, max_length=MAX_ID_CHARS, json_schema_extra={"pattern": ID_PATTERN}),
    AfterValidator(_id),
]
Text = Annotated[
    str,
    Field(max_length=MAX_TEXT_CHARS, json_schema_extra={"pattern": TEXT_PATTERN}),
    AfterValidator(_text),
]
# ``input`` as JSON: strings without NUL, integers a database can hold (larger ones are read as
# numbers), any nesting; the nesting depth and size are the library's checks.
_KEYS: dict[str, Any] = {"propertyNames": {"pattern": TEXT_PATTERN}}
if TYPE_CHECKING:  # what mypy needs to know; the alias below is for pydantic's schema
    JsonValue = Any
else:
    JsonValue = TypeAliasType(
        "JsonValue",
        Annotated[str, Field(json_schema_extra={"pattern": TEXT_PATTERN})]
        | Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
        | float
        | bool
        | list["JsonValue"]
        | Annotated[dict[str, "JsonValue"], Field(json_schema_extra=_KEYS)]
        | None,
    )
Input = Annotated[dict[str, JsonValue], Field(json_schema_extra=_KEYS), AfterValidator(_input)]


class Retry:
    """A request a client may send again (its connection dropped, it timed out): the route's
    dependency for its ``Idempotency-Key`` header, and for saying so on a response that repeats
    the first one."""

    def __init__(
        self,
        request: Request,
        response: Response,
        idempotency_key: str | None = Header(
            default=None,
            alias="Idempotency-Key",
            min_length=1,
            max_length=MAX_KEY_CHARS,
            pattern=r"^[ -~]+$",
            description="a retry with the same key (1 to 255 printable ASCII characters) gets "
            "the first response and starts nothing",
        ),
    ) -> None:
        self._request = request
        self._response = response
        self._key = idempotency_key

    def key(self, body: BaseModel, **also: Any) -> IdempotencyKey | None:
        """The request's key, scoped to its method, path and caller (its token's digest); a
        repeat must send the same ``body`` (as parsed) and ``also``."""
        if self._key is None:
            return None
        request = self._request
        scope = f"{request.app.state.caller} {request.method} {request.url.path}"
        return IdempotencyKey.of(scope, self._key, {"body": body.model_dump(mode="json"), **also})

    def answered(self, repeated: bool) -> None:
        """Mark the response as a repeat of an earlier one when it is."""
        if repeated:
            self._response.headers["idempotent-replayed"] = "true"
