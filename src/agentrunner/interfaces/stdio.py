"""``agentrunner stdio``: JSON-lines requests on stdin, responses and events on stdout.

A thin interface (DESIGN layering): every method is one call into the runner or the task
runner. Requests run concurrently, so one slow ``run_agent`` does not hold up a ``cancel`` or a
``list_agents``; responses therefore come back in completion order, matched by ``id``. The wire
format is in docs/stdio.md.
"""

from __future__ import annotations

import asyncio
import difflib
import sys
from collections.abc import Awaitable, Callable
from typing import Any, BinaryIO

import orjson

from agentrunner.core.json_text import json_bytes, loads_exact
from agentrunner.engine.abort import AbortSignal
from agentrunner.engine.messages import Attachment
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.events import EventData
from agentrunner.run.attachment_entries import attach_entries, entries_of
from agentrunner.run.callbacks import AgentRunnerCallbacks
from agentrunner.run.request import RunAgentOverrides
from agentrunner.run.runner import AgentRunner
from agentrunner.runtime.compose import runner_with_tasks
from agentrunner.workspace import decisions
from agentrunner.workspace.tasks import TaskRunner
from agentrunner.workspace.workspace import Workspace

__all__ = ["StdioServer", "serve_stdio"]

PROTOCOL_VERSION = 1


class StdioServer:
    """Serves one stream of requests until end of input, then waits for what is in flight."""

    def __init__(self, runner: AgentRunner, tasks: TaskRunner, output: BinaryIO) -> None:
        self.runner = runner
        self.app = runner.app
        self.tasks = tasks
        self.workspace = Workspace(runner)  # what serves a decided run when no worker is alive
        self._output = output
        self._inflight: dict[Any, tuple[asyncio.Task[None], AbortSignal]] = {}
        self._methods: dict[str, Callable[[Any, dict[str, Any]], Awaitable[Any]]] = {
            "execute": self._execute,
            "run_agent": self._run_agent,
            "cancel": self._cancel,
            "list_agents": self._list_agents,
            "list_approvals": self._list_approvals,
            "decide_approval": self._decide_approval,
            "ping": self._ping,
        }

    def write(self, message: dict[str, Any]) -> None:
        # One event loop thread writes whole lines, so messages never interleave.
        self._output.write(json_bytes(message, default=str) + b"\n")
        self._output.flush()

    async def serve(self, reader: asyncio.StreamReader) -> None:
        self.write({"event": "ready", "data": {"protocol": PROTOCOL_VERSION}})
        while line := await reader.readline():
            if line.strip():
                self.handle_line(line)
        if self._inflight:
            await asyncio.gather(*(task for task, _ in self._inflight.values()))

    def handle_line(self, line: bytes) -> None:
        try:
            request = loads_exact(line)
        except orjson.JSONDecodeError as exc:
            self._error(None, _invalid(f"the line is not JSON ({exc})"))
            return
        if not isinstance(request, dict):
            self._error(None, _invalid("a request is a JSON object"))
            return
        request_id = request.get("id")
        method, params = request.get("method"), request.get("params", {})
        if request_id is None or isinstance(request_id, (dict, list)):
            self._error(None, _invalid("the request has no usable `id` (a string or a number)"))
            return
        if request_id in self._inflight:
            self._error(request_id, _invalid(f"request {request_id!r} is still running"))
            return
        handler = self._methods.get(method) if isinstance(method, str) else None
        if handler is None:
            names = ", ".join(self._methods)
            self._error(request_id, _invalid(f"unknown method {method!r}; methods: {names}"))
            return
        if not isinstance(params, dict):
            self._error(request_id, _invalid("`params` must be an object"))
            return
        takes = _PARAMS[str(method)]
        unknown = [name for name in params if name not in takes]
        if unknown:  # a misspelt narrowing (`tool` for `tools`) must not run with every tool
            near = difflib.get_close_matches(str(unknown[0]), takes, n=1)
            meant = f" (did you mean '{near[0]}'?)" if near else ""
            known = ", ".join(takes) or "none"
            self._error(
                request_id,
                _invalid(f"`{method}` takes no `params.{unknown[0]}`{meant}; it takes: {known}"),
            )
            return
        abort = AbortSignal()
        task = asyncio.create_task(self._call(request_id, handler, params, abort), name=method)
        self._inflight[request_id] = (task, abort)

    async def _call(
        self,
        request_id: Any,
        handler: Callable[[Any, dict[str, Any]], Awaitable[Any]],
        params: dict[str, Any],
        abort: AbortSignal,
    ) -> None:
        try:
            result = await handler(request_id, params)
        except AgentRunnerError as exc:
            self._error(request_id, exc)
        except asyncio.CancelledError:
            self._error(request_id, AgentRunnerError(ErrorCode.CANCELLED, "cancelled by request"))
        except Exception as exc:  # a bug: reported, and the process keeps serving
            self._error(request_id, AgentRunnerError(ErrorCode.INTERNAL, repr(exc)))
        else:
            self.write({"id": request_id, "result": result})
        finally:
            self._inflight.pop(request_id, None)

    def _error(self, request_id: Any, exc: AgentRunnerError) -> None:
        self.write({"id": request_id, "error": exc.to_dict()})

    async def _execute(self, request_id: Any, params: dict[str, Any]) -> Any:
        agent = _required(params, "agent", str)
        values = _input(params)
        cache = params.get("cache")
        if cache is not None and not isinstance(cache, bool):
            raise _invalid("`params.cache` must be true, false or absent (the agent's setting)")
        files = await self._attachments(params)
        outcome = await self.tasks.execute(
            agent,
            values,
            model=params.get("model"),
            fallback=_models(params, "fallback"),
            cache=cache,
            model_settings=params.get("model_settings"),
            attachments=files,
            conversation=params.get("conversation"),
        )
        return outcome.to_dict()

    async def _run_agent(self, request_id: Any, params: dict[str, Any]) -> Any:
        agent = _required(params, "agent", str)
        message = _required(params, "message", str)
        values = _input(params)
        overrides = RunAgentOverrides(  # checked before a thread is opened
            model=params.get("model"),
            fallback=_models(params, "fallback"),
            max_steps=params.get("max_steps", params.get("max_turns")),  # its old name
            model_settings=params.get("model_settings"),
            only_tools=params.get("tools"),
            output_schema=params.get("output_schema"),
            retry=params.get("retry"),
        )
        files = await self._attachments(params)  # checked before a thread is opened
        self.runner.check_run(agent, overrides)  # a widening of its tools, too
        thread = params.get("thread")
        if thread is None:
            thread = await self.runner.session_thread(agent, new=bool(params.get("new", False)))
        else:
            thread = await self.runner.agent_thread(agent, str(thread))

        def on_event(kind: str, data: EventData) -> None:
            self.write({"id": request_id, "event": kind, "data": data})

        _, abort = self._inflight[request_id]
        result = await self.runner.run_agent(
            agent,
            str(thread),
            message,
            AgentRunnerCallbacks(on_event=on_event),
            overrides,
            abort,
            input=values,
            attachments=files,
        )
        return result.to_dict()

    async def _attachments(self, params: dict[str, Any]) -> tuple[Attachment, ...]:
        """``params.attachments``: files as the HTTP API takes them, read and checked
        (``attach_entries``); ``validation`` or ``attachment_refused`` naming one."""
        entries = entries_of(params.get("attachments"), "params.attachments")
        return await attach_entries(entries, self.runner) if entries else ()

    async def _cancel(self, request_id: Any, params: dict[str, Any]) -> Any:
        target = params.get("id")
        entry = self._inflight.get(target)
        if entry is None or target == request_id:
            return {"cancelled": False}
        task, abort = entry
        if task.get_name() == "run_agent":
            # A run stops at its next step and records "(stopped by user)" in its thread.
            abort.abort("cancelled by request")
        else:
            task.cancel()
        return {"cancelled": True}

    async def _list_agents(self, request_id: Any, params: dict[str, Any]) -> Any:
        return [
            {
                "id": spec.id,
                "name": spec.name,
                "description": spec.description,
                "model": spec.model,
                "reports_to": spec.reports_to,
            }
            for spec in self.app.agents
        ]

    async def _list_approvals(self, request_id: Any, params: dict[str, Any]) -> Any:
        return [p.to_dict() for p in await self.runner.waits.pending()]

    async def _decide_approval(self, request_id: Any, params: dict[str, Any]) -> Any:
        approval_id = _required(params, "approval_id", str)
        decision = params.get("decision")
        if decision not in ("approve", "deny"):
            raise _invalid('`params.decision` must be "approve" or "deny"')
        reason = _optional(params, "reason", str)
        arguments = _optional(params, "arguments", dict)
        always = params.get("always")
        if always not in (None, "thread", "agent"):
            raise _invalid('`params.always` must be "thread", "agent" or absent')
        by = _optional(params, "by", str) or "stdio"
        answer = _optional(params, "answer", str)  # a question's (ask_person)

        def on_event(kind: str, data: EventData) -> None:
            self.write({"id": request_id, "event": kind, "data": data})

        outcome = await decisions.decide(
            self.workspace,
            approval_id,
            approve=decision == "approve",
            by=by,
            reason=reason,
            arguments=arguments,
            always=always,
            on_event=on_event,
            answer=answer,
        )
        return outcome.to_dict()

    async def _ping(self, request_id: Any, params: dict[str, Any]) -> Any:
        return {"protocol": PROTOCOL_VERSION}


# What each method reads of its params (docs/stdio.md#methods): any other is refused by name.
_PARAMS: dict[str, tuple[str, ...]] = {
    "execute": (
        "agent",
        "input",
        "model",
        "fallback",
        "cache",
        "model_settings",
        "attachments",
        "conversation",
    ),
    "run_agent": (
        "agent",
        "message",
        "thread",
        "new",
        "input",
        "model",
        "fallback",
        "max_steps",
        "max_turns",
        "model_settings",
        "tools",
        "output_schema",
        "retry",
        "attachments",
    ),
    "cancel": ("id",),
    "list_agents": (),
    "list_approvals": (),
    "decide_approval": ("approval_id", "decision", "reason", "arguments", "always", "by", "answer"),
    "ping": (),
}


def _required(params: dict[str, Any], name: str, kind: type) -> Any:
    value = params.get(name)
    if not isinstance(value, kind) or value == "":
        raise _invalid(f"`params.{name}` is required ({kind.__name__})")
    return value


def _optional(params: dict[str, Any], name: str, kind: type) -> Any:
    value = params.get(name)
    if value is not None and not isinstance(value, kind):
        said = "an object" if kind is dict else f"a {kind.__name__}"
        raise _invalid(f"`params.{name}` must be {said} or absent")
    return value


def _models(params: dict[str, Any], name: str) -> tuple[str, ...]:
    value = params.get(name) or ()
    if not isinstance(value, list | tuple) or not all(isinstance(m, str) for m in value):
        raise _invalid(f"`params.{name}` must be a list of model names")
    return tuple(value)


def _input(params: dict[str, Any]) -> dict[str, Any]:
    values = params.get("input", {})
    if not isinstance(values, dict):
        raise _invalid("`params.input` must be an object")
    return values


def _invalid(message: str) -> AgentRunnerError:
    return AgentRunnerError(
        ErrorCode.VALIDATION, message, hint="See docs/stdio.md for the request format."
    )


async def serve_stdio() -> None:
    """Serve stdin/stdout for the project at or above the working directory."""
    async with runner_with_tasks() as (runner, tasks):
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=16 * 1024 * 1024)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        await StdioServer(runner, tasks, sys.stdout.buffer).serve(reader)
