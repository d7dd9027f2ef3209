"""``agentrunner serve``: the HTTP API under uvicorn."""

from __future__ import annotations

import ipaddress
import os

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
    import uvicorn

    from agentrunner.errors import AgentRunnerError, ErrorCode
    from agentrunner.server import create_app

    token = os.environ.get("AGENTRUNNER_API_TOKEN") or None
    if token is None and not _loopback(host):
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"refusing to serve on {host} without a bearer token",
            hint="export AGENTRUNNER_API_TOKEN=… (clients send Authorization: Bearer …), "
            "or bind 127.0.0.1.",
        )
    err.print(
        f"[green]agentrunner[/] on http://{host}:{port} (docs at /docs)"
        + (" · token required" if token else "")
    )
    app = create_app(token=token, worker=not no_worker, cors_origins=cors or None)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


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
