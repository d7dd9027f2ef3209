"""Agents' MCP servers → tools (DESIGN: the official ``mcp`` SDK, stdio and streamable HTTP).

An agent file's ``mcp_servers`` name servers whose tools the agent gets. Starting a server is
slow (a stdio server is a process that imports its SDK: ~0.4 s), so a connection is opened on
the first run that needs it and kept for the runner's life, shared by every agent that declares
the same server. A server that fails to start fails the run that wanted it (``tool_failed``,
naming the agent file and the server); a connection that breaks later fails the call in flight
and is opened again by the next run.

A tool's result is its text; its images (image content) and the images and PDFs of its
embedded resources (a blob of an image or PDF type) are files beside it, each checked by the one
check (``read_attachment``, within the project's ``[attachments]``): the tool answers a list of
its text and its files, as a tool may (``engine.tools``), or its text alone when it has none. A
file refused is a line of the text saying why, not a failed call.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import unquote, urlsplit

from agentrunner.core.attachments import AttachmentLimits, attachment_name
from agentrunner.engine.attachment_checks import read_attachment, refused
from agentrunner.engine.messages import PDF_TYPE, Attachment
from agentrunner.engine.tools import Tool, ToolContext, ToolRetry, render_result
from agentrunner.errors import AgentRunnerError, ErrorCode

if TYPE_CHECKING:
    from agentrunner.agents.spec import AgentSpec, McpServerSpec

__all__ = ["McpServers", "sdk_missing", "unset_variables"]

CONNECT_TIMEOUT_S = 30.0
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_CONNECTION_CLOSED = -32000  # JSON-RPC error code the SDK gives calls cut off by a lost connection
_Key = tuple[str | None, tuple[str, ...], tuple[tuple[str, str], ...], str | None]


class McpServers:
    """The open connections to agents' MCP servers."""

    def __init__(
        self,
        project_root: Path,
        log_dir: Path | None = None,
        *,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
    ) -> None:
        self.project_root = project_root
        self.log_dir = log_dir
        self.connect_timeout_s = connect_timeout_s
        self._connections: dict[_Key, _Connection] = {}

    async def tools(
        self,
        agent: AgentSpec,
        taken: Sequence[str] = (),
        *,
        limits: AttachmentLimits | None = None,
    ) -> list[Tool]:
        """The tools of every server ``agent`` declares, connecting to those not yet open;
        ``taken`` are the names of the agent's other tools, which no server may reuse. The
        files their results carry are checked within ``limits`` (the project's
        ``[attachments]``; its defaults when not given)."""
        tools: list[Tool] = []
        seen: dict[str, str] = dict.fromkeys(taken, "its own tools")
        for name, spec in agent.mcp_servers.items():
            connection = await self._connection(agent, name, spec)
            if limits is not None:  # a runner's config: the same for every agent it runs
                connection.limits = limits
            for tool in connection.named(name):
                if tool.name in seen:
                    raise AgentRunnerError(
                        ErrorCode.VALIDATION,
                        f"agent '{agent.id}': MCP server '{name}' provides a tool named "
                        f"'{tool.name}', as does {_owner(seen[tool.name])}",
                        hint="An agent's tool names must be unique; drop one of the servers.",
                        file=_file(agent),
                        line=agent.line_of("mcp_servers"),
                    )
                seen[tool.name] = name
                tools.append(tool)
        return tools

    async def aclose(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)

    async def _connection(self, agent: AgentSpec, name: str, spec: McpServerSpec) -> _Connection:
        env = _expand_env(agent, name, spec.env)
        key: _Key = (spec.command, spec.args, tuple(sorted(env.items())), spec.url)
        connection = self._connections.get(key)
        if connection is not None and connection.broken:
            await connection.close()  # a server process still up after a failed call ends here
            connection = None
        if connection is None:
            log = self.log_dir / f"mcp-{name}.log" if self.log_dir and spec.command else None
            connection = _Connection(name, spec, env, self.project_root, log)
            self._connections[key] = connection
        try:
            await connection.ready(self.connect_timeout_s)
        except Exception as exc:
            if self._connections.get(key) is connection:
                del self._connections[key]  # the next run tries again
            if isinstance(exc, AgentRunnerError):
                raise
            where = spec.url or " ".join([spec.command or "", *spec.args])
            output = f" Its output is in {connection.log}." if connection.log else ""
            said = await asyncio.to_thread(connection.last_words)
            raise AgentRunnerError(
                ErrorCode.TOOL_FAILED,
                f"agent '{agent.id}': MCP server '{name}' ({where}) could not be reached: "
                f"{_reason(exc)}" + (f"; it said: {said}" if said else ""),
                hint=f"Check mcp_servers.{name} in the agent file: a command runs in the "
                f"project directory; a URL must serve MCP over streamable HTTP.{output}",
                file=_file(agent),
                line=_line(agent, name),
            ) from exc
        return connection


class _Connection:
    """One server's client, held open by a task of its own: the SDK's transports are anyio
    task groups, which must be left by the task that entered them."""

    def __init__(
        self, name: str, spec: McpServerSpec, env: Mapping[str, str], root: Path, log: Path | None
    ) -> None:
        self.name = name
        self.log = log
        self._log_start = 0  # where this server's output begins in its log (_open_log)
        self.broken = False
        self.limits = AttachmentLimits()  # what its tools' files are checked within
        self.tools: list[Tool] = []
        # The tools as an agent names this server (``Tool.server``, which approval rules'
        # SERVER/TOOL match): agents sharing the connection may name it differently.
        self._named: dict[str, list[Tool]] = {}
        self._client: Any = None
        self._opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._task = asyncio.ensure_future(self._hold(spec, env, root))

    def named(self, server: str) -> list[Tool]:
        """This server's tools, their ``server`` the name an agent gives it (made once)."""
        tools = self._named.get(server)
        if tools is None:
            tools = self._named[server] = [replace(t, server=server) for t in self.tools]
        return tools

    def last_words(self) -> str | None:
        """The last line this server wrote to its log, for an error message."""
        if self.log is None:
            return None
        try:
            with self.log.open("rb") as f:
                f.seek(self._log_start)
                lines = f.read(64 * 1024).decode("utf-8", "replace").splitlines()
        except OSError:
            return None
        last = next((line.strip() for line in reversed(lines) if line.strip()), None)
        return last[:300] if last else None

    async def ready(self, timeout_s: float) -> None:
        try:
            await asyncio.wait_for(asyncio.shield(self._opened), timeout_s)
        except TimeoutError:
            await self.close()
            raise TimeoutError(f"no answer within {timeout_s:g} s") from None

    async def _hold(self, spec: McpServerSpec, env: Mapping[str, str], root: Path) -> None:
        try:
            from mcp import Client
        except ImportError:
            self._fail(sdk_missing())
            return
        errlog = None
        try:
            if spec.url is not None:
                target: Any = spec.url
            else:
                # A server's own logging goes to a file, not into the CLI's output.
                if self.log is not None:
                    errlog = await asyncio.to_thread(self._open_log, self.log)
                target = _stdio(spec, env, root, errlog)
            async with Client(target) as client:
                self._client = client
                listed = await _list_tools(client)
                self.tools = [self._tool(t) for t in listed]
                self._opened.set_result(None)
                await self._closing.wait()
        except Exception as exc:
            self._fail(exc)
        finally:
            self._fail(ConnectionError(f"MCP server '{self.name}' was closed"))
            if errlog is not None:
                errlog.close()

    def _open_log(self, log: Path) -> TextIO:
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log_start = log.stat().st_size if log.exists() else 0
        return log.open("a", encoding="utf-8")

    def _fail(self, exc: BaseException) -> None:
        self.broken = True
        if not self._opened.done():
            self._opened.set_exception(exc)
            self._opened.exception()  # retrieved: a failure nobody awaits is not logged twice

    def _tool(self, listed: Any) -> Tool:
        tool_name: str = listed.name

        async def call(arguments: Mapping[str, Any], ctx: ToolContext) -> str | list[Any]:
            if self.broken:
                raise ConnectionError(f"MCP server '{self.name}' has gone away")
            try:
                result = await self._client.call_tool(tool_name, dict(arguments))
            except Exception as exc:
                error = getattr(exc, "error", None)
                if error is not None and error.code != _CONNECTION_CLOSED:
                    # The server answered with a protocol error: the model may do better.
                    raise ToolRetry(f"{tool_name}: {error.message}") from exc
                self.broken = True
                raise ConnectionError(f"MCP server '{self.name}': {_reason(exc)}") from exc
            if result.is_error:
                raise ToolRetry(_text(result.content) or f"'{tool_name}' failed")
            text, files = await _text_and_files(result.content, self.limits)
            if files:
                return [text, *files]
            if not text and result.structured_content is not None:
                return render_result(result.structured_content)
            return text

        schema = dict(listed.input_schema or {"type": "object"})
        schema.pop("title", None)
        # Only a server's explicit mark counts (the spec's default for an unmarked tool is
        # "may be destructive"; `destructive: true` asks for the ones it says are).
        hints = listed.annotations
        destructive = hints is not None and hints.destructive_hint is True
        return Tool(tool_name, listed.description or "", schema, call, destructive=destructive)

    async def close(self) -> None:
        self._closing.set()
        if not self._task.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 5.0)
            except Exception:
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task


async def _list_tools(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


def sdk_missing() -> AgentRunnerError:
    """What using MCP (an agent's servers, or ``agentrunner mcp``) says without the extra."""
    return AgentRunnerError(
        ErrorCode.INTERNAL, "MCP support is not installed", hint='pip install "agentrunner[mcp]"'
    )


def _stdio(spec: McpServerSpec, env: Mapping[str, str], root: Path, errlog: TextIO | None) -> Any:
    from mcp import StdioServerParameters
    from mcp.client.stdio import get_default_environment, stdio_client

    # The SDK passes a server only a few safe variables (PATH, HOME, …) unless told more.
    params = StdioServerParameters(
        command=spec.command or "",
        args=list(spec.args),
        env={**get_default_environment(), **env},
        cwd=root,
    )
    return stdio_client(params, errlog=errlog or sys.stderr)


def unset_variables(agent: AgentSpec) -> list[tuple[str, str]]:
    """``(mcp_servers.NAME.env.KEY, VARIABLE)`` for each ``${VARIABLE}`` the agent's MCP
    servers need that this environment does not set (a run of the agent would fail)."""
    return [
        (f"mcp_servers.{server}.env.{key}", var)
        for server, spec in agent.mcp_servers.items()
        for key, value in spec.env.items()
        for var in _VAR.findall(value)
        if var not in os.environ
    ]


def _expand_env(agent: AgentSpec, server: str, env: Mapping[str, str]) -> dict[str, str]:
    """``${NAME}`` in a value comes from agentrunner's environment, so secrets stay out of
    agent files; an unset one is an error, not an empty string."""
    out = {}
    for key, value in env.items():
        for var in _VAR.findall(value):
            if var not in os.environ:
                raise AgentRunnerError(
                    ErrorCode.VALIDATION,
                    f"agent '{agent.id}': mcp_servers.{server}.env.{key} needs the environment "
                    f"variable {var}, which is not set",
                    hint=f"export {var}=… before running",
                    file=_file(agent),
                    line=_line(agent, server),
                )
        out[key] = _VAR.sub(lambda m: os.environ[m.group(1)], value)
    return out


def _text(content: Sequence[Any]) -> str:
    return "\n".join(_said(block) for block in content)


def _said(block: Any) -> str:
    """A block as text: its text, else what it is (``[audio: audio/wav]``)."""
    text = getattr(block, "text", None)
    if text is not None:
        return str(text)
    kind = getattr(block, "type", "content")
    mime = getattr(block, "mime_type", None)
    return f"[{kind}{': ' + mime if mime else ''}]"


async def _text_and_files(
    content: Sequence[Any], limits: AttachmentLimits
) -> tuple[str, list[Attachment]]:
    """A result's text, and its files, each checked (``read_attachment``, on a worker
    thread: decoding an image takes time); one refused is a line of the text instead."""
    lines: list[str] = []
    files: list[Attachment] = []
    for block in content:
        sent = _sent_file(block)
        if sent is None:
            lines.append(_said(block))
            continue
        kind, name, encoded = sent
        try:
            files.append(await asyncio.to_thread(_checked, encoded, name, limits))
        except AgentRunnerError as exc:
            lines.append(f"[{kind} refused: {exc.message}]")
    return "\n".join(lines), files


def _sent_file(block: Any) -> tuple[str, str, str] | None:
    """``(kind, name, base64)`` of a block that is a file: image content (named by the type it
    says it is: ``image.png``), or an embedded resource whose blob is an image or a PDF (named
    by its URI's last part); else None."""
    kind = getattr(block, "type", None)
    if kind == "image":
        return "image", attachment_name("", str(block.mime_type or "")), str(block.data)
    resource = getattr(block, "resource", None) if kind == "resource" else None
    blob = getattr(resource, "blob", None)
    mime = str(getattr(resource, "mime_type", None) or "")
    if resource is None or blob is None or not (mime.startswith("image/") or mime == PDF_TYPE):
        return None
    name = PurePosixPath(unquote(urlsplit(str(resource.uri)).path)).name
    return ("document" if mime == PDF_TYPE else "image"), name, str(blob)


def _checked(encoded: str, name: str, limits: AttachmentLimits) -> Attachment:
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise refused(name or "the file", "its bytes are not base64", "decode") from None
    return read_attachment(data, name, limits)


def _reason(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _owner(source: str) -> str:
    return source if source == "its own tools" else f"MCP server '{source}'"


def _file(agent: AgentSpec) -> str | None:
    return str(agent.path) if agent.path else None


def _line(agent: AgentSpec, server: str) -> int | None:
    return agent.line_of(f"mcp_servers.{server}") or agent.line_of("mcp_servers")
