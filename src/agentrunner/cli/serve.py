"""``agentrunner serve``: the HTTP API under uvicorn."""

from __future__ import annotations

import errno
import ipaddress
import os
import socket

import typer

from agentrunner.cli.console import err

__all__ = ["mcp", "serve", "stdio"]


def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind."),
    port: int = typer.Option(8765, "--port", help="Port to bind."),
    no_worker: bool = typer.Option(False, "--no-worker", help="Do not serve mailboxes here."),
    cors: list[str] = typer.Option([], "--cors", help="An allowed CORS origin (repeat)."),
) -> None:
    """Serve the HTTP API (REST, live event streams, OpenAI-compatible chat).

    Beyond loopback a bearer token is required: set AGENTRUNNER_API_TOKEN.
    """
    import asyncio

    from agentrunner.errors import AgentRunnerError, ErrorCode

    token = _token(os.environ.get("AGENTRUNNER_API_TOKEN") or None)
    if token is None and not _loopback(host):
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"refusing to serve on {host} without a bearer token",
            hint="export AGENTRUNNER_API_TOKEN=… (clients send Authorization: Bearer …), "
            "or bind 127.0.0.1.",
        )
    asyncio.run(_serve(host, port, token, not no_worker, cors or None))


async def _serve(
    host: str, port: int, token: str | None, worker: bool, cors: list[str] | None
) -> None:
    """Open the project and the port first, so a problem with either is one error line before
    anything claims to be serving; then hand both to uvicorn."""
    from agentrunner.compose import open_workspace
    from agentrunner.server import create_app
    from agentrunner.server.protocol import serve, uvicorn_config

    workspace = await open_workspace()
    try:
        sock = _listen(host, port)
        err.print(  # one line whatever the width: a log or a narrow terminal reads it whole
            f"[green]agentrunner[/] dashboard on http://{host}:{port}/ · API docs at /docs"
            + (" · token required" if token else ""),
        )
        app = create_app(token=token, worker=worker, cors_origins=cors, workspace=workspace)
        config = uvicorn_config(app, log_level="warning", access_log=False)
        await serve(config, [sock])
    finally:
        await workspace.close()


def _listen(host: str, port: int) -> socket.socket:
    from agentrunner.errors import AgentRunnerError, ErrorCode

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not left 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on
    # sockets that say so, and accepted ones take it from this one. Left on, an SSE event
    # written after another waited for the client's delayed ACK, up to 40 ms.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise AgentRunnerError(
                ErrorCode.ADDRESS_IN_USE,
                f"port {port} on {host} is already in use",
                hint=f"Stop what is listening there, or pick another port: --port {port + 1}.",
            ) from None
        raise AgentRunnerError(
            ErrorCode.RUNNER_IO,
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            hint="Check the address, and that ports below 1024 need privileges.",
        ) from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def _token(raw: str | None) -> str | None:
    """The bearer token clients must send; refused (never repeated) when it is blank or holds
    what a header value cannot: a token of spaces let ``Authorization: Bearer  `` in."""
    from agentrunner.errors import AgentRunnerError, ErrorCode

    if raw is None:
        return None
    bad = [i for i, c in enumerate(raw, 1) if not c.isascii() or not c.isprintable() or c == " "]
    if raw.strip() == "" or bad:
        what = (
            "is blank" if raw.strip() == "" else f"holds a space or control character at {bad[0]}"
        )
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"AGENTRUNNER_API_TOKEN {what}",
            hint="Set a long random one: export AGENTRUNNER_API_TOKEN=$(openssl rand -hex 32)",
        )
    return raw


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def stdio() -> None:
    """Serve JSON-lines requests on stdin with responses and events on stdout (docs/stdio.md)."""
    import asyncio

    from agentrunner.stdio import serve_stdio

    asyncio.run(serve_stdio())


def mcp() -> None:
    """Serve the project's agents over MCP on stdin/stdout, for MCP clients (docs/mcp.md)."""
    import asyncio

    from agentrunner.capabilities.mcp import sdk_missing

    try:
        from agentrunner.mcp_server import serve_mcp
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "mcp":
            raise
        raise sdk_missing() from exc
    asyncio.run(serve_mcp())
