"""Tools the model may call: a name, a JSON Schema for the arguments, an async function.

``@tool`` makes one from a typed function. An ``async def`` runs on the event loop, so it must
not block; a plain ``def`` runs on a worker thread (``asyncio.to_thread``, context variables
copied), so it may read files or wait on a socket while the loop serves other runs.

A tool signals outcomes by raising:

* ``ToolRetry(msg)`` — the model got something wrong; ``msg`` goes back to it as an error result
  (counted against the turn's correction budget);
* ``ToolDenied(msg)`` — policy refused the call; the turn ends with ``tool_denied`` and the
  model is *not* asked again (re-asking a denied tool burns budget);
* anything else — the tool failed; the turn ends with ``tool_failed``.

What a tool returns is its result: a text as it is, an ``Attachment`` (an image or a PDF, with
its bytes) or a list of texts and attachments as text and files (``render_output``), anything
else as JSON.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import types
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, get_origin, overload

from agentrunner.engine.messages import IMAGE_TYPES, PDF_TYPE, Attachment, ToolDefinition

__all__ = [
    "Tool",
    "ToolContext",
    "ToolDenied",
    "ToolRetry",
    "is_strict_schema",
    "render_output",
    "render_result",
    "schema_problem",
    "tool",
]

ToolFn = Callable[[dict[str, Any], "ToolContext"], Awaitable[Any]]


class ToolRetry(Exception):
    """Raised by a tool: send this message back to the model as a correctable error."""


class ToolDenied(Exception):
    """Raised by a tool or a policy: the call is refused; the turn ends with ``tool_denied``."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a running tool knows. ``call_id`` is stable: use it as an idempotency key."""

    call_id: str
    tool_name: str
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Tool:
    """A tool a model may call. ``writes``: a call changes what outlasts the run (memory,
    notes, files: ``ToolDefinition.writes``). ``server``: for an MCP server's tool, the agent's
    name for that server; ``destructive``: the server marks the tool ``destructiveHint: true``
    (both read by approval rules: ``ApprovalRules.rule_for``)."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    fn: ToolFn
    writes: bool = False
    destructive: bool = False
    server: str | None = None
    _validator: Any = field(default=None, repr=False, compare=False)

    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(self.name, self.description, self.parameters, self.writes)

    def validation_error(self, arguments: Mapping[str, Any]) -> str | None:
        """The first JSON Schema violation of ``arguments``, as text, or None."""
        if self._validator is None:
            self._validator = _validator_for(self.parameters)
        return _first_problem(self._validator, arguments)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None, writes: bool = False
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    writes: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a ``Tool`` from a typed function (sync or async); its docstring is the description.
    A sync function runs on a worker thread, an async one on the event loop. ``writes``: a call
    changes what outlasts the run (``Tool.writes``).

    Parameters become a JSON Schema from their annotations (``str``, ``int``, ``float``,
    ``bool``, ``list[X]``, ``dict``, ``Literal[...]``, ``X | None``); those without a default are
    required. A parameter annotated ``ToolContext`` receives the call's context.
    """

    def wrap(func: Callable[..., Any]) -> Tool:
        hints = typing.get_type_hints(func)
        params = inspect.signature(func).parameters
        properties: dict[str, Any] = {}
        required: list[str] = []
        context_param: str | None = None
        for pname, param in params.items():
            annotation = hints.get(pname, Any)
            if annotation is ToolContext:
                context_param = pname
                continue
            properties[pname] = _schema_of(annotation)
            if param.default is inspect.Parameter.empty:
                required.append(pname)
        schema = {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }
        is_async = inspect.iscoroutinefunction(func)

        async def call(arguments: dict[str, Any], ctx: ToolContext) -> Any:
            kwargs = dict(arguments)
            if context_param:
                kwargs[context_param] = ctx
            if is_async:
                return await func(**kwargs)
            # A plain function may block (a file, a socket, a sleep): off the loop, it stalls
            # only its own call. Cancelled, the call stops waiting; the function runs to its end.
            return await asyncio.to_thread(func, **kwargs)

        return Tool(
            name or func.__name__,
            description if description is not None else inspect.cleandoc(func.__doc__ or ""),
            schema,
            call,
            writes,
        )

    return wrap(fn) if fn is not None else wrap


def schema_problem(schema: Mapping[str, Any], value: Any) -> str | None:
    """The first way ``value`` breaks JSON Schema ``schema``, as text, or None."""
    return _first_problem(_validator_for(schema), value)


def _first_problem(validator: Any, value: Any) -> str | None:
    error = next(iter(validator.iter_errors(value)), None)
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where + ': ' if where else ''}{error.message}"


_VALIDATORS: dict[str, Any] = {}
_BY_IDENTITY: dict[int, tuple[Mapping[str, Any], Any]] = {}


def _validator_for(schema: Mapping[str, Any]) -> Any:
    """A compiled validator, shared by every tool with the same schema (tools are rebuilt for
    each run; compiling a schema costs far more than checking arguments against it). A tool
    rebuilt from the same schema object skips even the serialising of its schema."""
    known = _BY_IDENTITY.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    validator = _validator_by_text(schema)
    if len(_BY_IDENTITY) < 4096:
        _BY_IDENTITY[id(schema)] = (schema, validator)  # holding the schema keeps its id
    return validator


def _validator_by_text(schema: Mapping[str, Any]) -> Any:
    key = json.dumps(schema, sort_keys=True, default=str)
    validator = _VALIDATORS.get(key)
    if validator is None:
        from jsonschema import validators

        validator = validators.validator_for(schema)(schema)
        if len(_VALIDATORS) < 4096:
            _VALIDATORS[key] = validator
    return validator


def render_result(value: Any) -> str:
    """How a tool's return value is shown to the model as text."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def render_output(value: Any) -> tuple[str, tuple[Attachment, ...]]:
    """A tool's return value as its result: text, and the images or PDFs it returned. A tool
    returns a file as an ``Attachment`` with its bytes (``data``), alone or in a list or tuple
    with texts (or values shown as JSON), which are joined by newlines; anything else is text
    (``render_result``). A file without its bytes, or of a type no model takes, is the tool's
    bug: ``ValueError``, and the call fails."""
    if isinstance(value, str):
        return value, ()
    if isinstance(value, Attachment):
        return "", (_returned(value),)
    if isinstance(value, list | tuple) and any(isinstance(v, Attachment) for v in value):
        texts = [render_result(v) for v in value if not isinstance(v, Attachment)]
        files = tuple(_returned(v) for v in value if isinstance(v, Attachment))
        return "\n".join(t for t in texts if t), files
    return render_result(value), ()


def _returned(file: Attachment) -> Attachment:
    name = file.name or file.sha256[:12]
    if file.data is None:
        raise ValueError(f"returned attachment {name} without its bytes (Attachment.data)")
    if file.media_type not in IMAGE_TYPES and file.media_type != PDF_TYPE:
        raise ValueError(
            f"returned attachment {name} as {file.media_type}: a tool returns images "
            f"({', '.join(IMAGE_TYPES)}) or PDFs"
        )
    return file


def _schema_of(annotation: Any) -> dict[str, Any]:
    origin = get_origin(annotation)
    if annotation is str:
        return {"type": "string"}
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is int:
        return {"type": "integer"}
    if annotation is float:
        return {"type": "number"}
    if annotation is dict or origin is dict:
        return {"type": "object"}
    if origin is list or annotation is list:
        args = get_args(annotation)
        return {"type": "array", "items": _schema_of(args[0]) if args else {}}
    if origin is Literal:
        return {"enum": list(get_args(annotation))}
    if origin in (types.UnionType, typing.Union):
        options = [a for a in get_args(annotation) if a is not type(None)]
        if len(options) == 1:
            return {"anyOf": [_schema_of(options[0]), {"type": "null"}]}
        return {"anyOf": [_schema_of(a) for a in get_args(annotation)]}
    return {}


def is_strict_schema(schema: Any) -> bool:
    """Whether OpenAI's strict mode accepts the schema: every object closed, all keys required."""
    if isinstance(schema, list):
        return all(is_strict_schema(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            return False
        if set(schema.get("required", [])) != set(props):
            return False
    return all(
        is_strict_schema(v) for k, v in schema.items() if k not in ("enum", "const", "default")
    )
