"""A Python client of ``agentrunner stdio`` (docs/stdio.md): the runner as a child process, for
a program that wants agents run out of its own process (a crash, a memory leak or a blocking
tool of theirs stays there). Requests run concurrently and are matched to their answers by id.

A runner that dies, or writes a line that is not the protocol's, fails every request waiting on
it, and every later one, with ``runner_io`` (seed 004's ``PYTHON_RUNNER_ERROR``), naming what
happened and what it last said on stderr; an ``error`` answer is raised as the
``AgentRunnerError`` it carries."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import sys
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agentrunner.errors import AgentRunnerError, ErrorCode

__all__ = ["StdioClient"]

_STDERR_KEPT = 20  # the runner's last lines of stderr, quoted when it dies
_LINE_LIMIT = 64 * 1024 * 1024  # a result with files may be a long line


class StdioClient:
    """``async with StdioClient(project) as runner: await runner.execute("writer", {...})``.

    ``command`` starts the runner (default: this Python's ``-m agentrunner stdio``), in
    ``project``; ``on_event(request_id, kind, data)`` hears each event a request streams."""

    def __init__(
        self,
        project: str | os.PathLike[str] = ".",
        *,
        command: tuple[str, ...] | None = None,
        env: Mapping[str, str] | None = None,
        on_event: Callable[[Any, str, dict[str, Any]], None] | None = None,
    ) -> None:
        self.project = Path(project)
        self.command = command or (sys.executable, "-m", "agentrunner", "stdio")
        self.env = dict(env) if env is not None else None
        self.on_event = on_event
        self._proc: asyncio.subprocess.Process | None = None
        self._waiting: dict[Any, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._broken: AgentRunnerError | None = None
        self._stderr: deque[str] = deque(maxlen=_STDERR_KEPT)
        self._readers: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> StdioClient:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.command,
                cwd=self.project,
                env=self.env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                limit=_LINE_LIMIT,
            )
        except OSError as exc:
            raise _runner_error(f"cannot start {self.command[0]}: {exc.strerror}") from None
        self._readers = [
            asyncio.create_task(self._read_stdout()),
            asyncio.create_task(self._read_stderr()),
        ]

    async def close(self) -> None:
        """Close the runner's input (it finishes what is in flight and exits), then wait; a
        runner that broke the protocol, or does not exit within 30 s, is killed."""
        proc = self._proc
        if proc is None:
            return
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 0 if self._broken else 30)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
                proc.kill()
            await proc.wait()
        for reader in self._readers:
            await asyncio.gather(reader, return_exceptions=True)
        self._proc = None

    async def request(self, method: str, **params: Any) -> Any:
        """One request's result; ``AgentRunnerError`` with the answer's code for an error
        answer, ``runner_io`` when the runner cannot answer."""
        if self._broken is not None:
            raise self._broken
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise _runner_error("the runner is not started (use `async with StdioClient(…)`)")
        request_id = next(self._ids)
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = answer
        line = json.dumps({"id": request_id, "method": method, "params": params}) + "\n"
        try:
            proc.stdin.write(line.encode())
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            self._fail(self._died("its input is closed"))
        return await answer

    async def execute(self, agent: str, input: Mapping[str, Any], **params: Any) -> Any:
        """A task (its outcome: ``status``, ``output``, ``cached`` …)."""
        return await self.request("execute", agent=agent, input=input, **params)

    async def run_agent(self, agent: str, message: str, **params: Any) -> Any:
        """One turn on a thread (its result: ``text``, ``run_id``, ``thread_id`` …)."""
        return await self.request("run_agent", agent=agent, message=message, **params)

    async def list_agents(self) -> Any:
        return await self.request("list_agents")

    # -- reading ---------------------------------------------------------------------------

    async def _read_stdout(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        stdout = self._proc.stdout
        while True:
            try:
                raw = await stdout.readline()
            except ValueError:  # past the line limit: not the protocol's
                self._fail(_runner_error("it wrote a line too long to be the protocol's"))
                return
            if not raw:
                await self._proc.wait()
                self._fail(self._died(f"it exited ({self._proc.returncode})"))
                return
            try:
                message = json.loads(raw)
                if not isinstance(message, dict):
                    raise ValueError("not an object")
            except ValueError:
                shown = raw.decode(errors="replace").strip()[:200]
                self._fail(_runner_error(f"it wrote a line that is not the protocol's: {shown!r}"))
                return
            self._heard(message)

    def _heard(self, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        if "event" in message:
            if request_id is not None and self.on_event is not None:
                self.on_event(request_id, str(message["event"]), message.get("data") or {})
            return
        answer = self._waiting.pop(request_id, None)
        if answer is None or answer.done():
            return  # an answer to nothing asked (an id this client never sent)
        if "error" in message:
            error = message["error"] or {}
            answer.set_exception(
                AgentRunnerError(
                    _code(error.get("code")),
                    str(error.get("message") or "the runner failed the request"),
                    hint=error.get("hint"),
                )
            )
        else:
            answer.set_result(message.get("result"))

    async def _read_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        async for raw in self._proc.stderr:
            self._stderr.append(raw.decode(errors="replace").rstrip())

    def _died(self, what: str) -> AgentRunnerError:
        said = next((line for line in reversed(self._stderr) if line.strip()), None)
        return _runner_error(what + (f"; it said: {said}" if said else ""))

    def _fail(self, error: AgentRunnerError) -> None:
        """Every request waiting, and every later one, fails with ``error``."""
        self._broken = self._broken or error
        for answer in self._waiting.values():
            if not answer.done():
                answer.set_exception(self._broken)
        self._waiting.clear()


def _runner_error(details: str) -> AgentRunnerError:
    return AgentRunnerError(
        ErrorCode.RUNNER_IO,
        f"Failed to communicate with Python runner: {details}",
        hint="Run its command in the project yourself to see what it says.",
    )


def _code(given: object) -> ErrorCode:
    try:
        return ErrorCode(str(given))
    except ValueError:
        return ErrorCode.INTERNAL
