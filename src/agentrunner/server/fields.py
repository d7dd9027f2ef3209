"""Request fields as the routes declare them: ids and texts checked by the library's rules
(``agentrunner.inputs``) while the request is parsed, so breaking one is a 422 that names the
field; and the ``Idempotency-Key`` of a request."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Request
from pydantic import AfterValidator, BaseModel, Field
from typing_extensions import TypeAliasType

from agentrunner.idempotency import IdempotencyKey
from agentrunner.inputs import (
    ID_PATTERN,
    MAX_ID_CHARS,
    MAX_TEXT_CHARS,
    TEXT_PATTERN,
    id_problem,
    input_problem,
    text_problem,
)

__all__ = ["Id", "Input", "Text", "idempotency", "mark_replayed"]


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


def idempotency(
    request: Request, key: str | None, body: BaseModel, **also: Any
) -> IdempotencyKey | None:
    """The request's key, scoped to its method, path and caller (its token's digest); a
    repeat must send the same ``body`` (as parsed) and ``also``."""
    if key is None:
        return None
    scope = f"{request.app.state.caller} {request.method} {request.url.path}"
    return IdempotencyKey.of(scope, key, {"body": body.model_dump(mode="json"), **also})


def mark_replayed(headers: Any, repeated: bool) -> None:
    """Say so on a response that repeats an earlier one."""
    if repeated:
        headers["idempotent-replayed"] = "true"
