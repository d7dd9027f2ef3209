"""``agentrunner serve``: the HTTP API under uvicorn."""

from __future__ import annotations

import errno
import ipaddress
import os
import socket

import typer

from agentrunner.interfaces.cli.console import err, out

__all__ = ["mcp", "new_token", "serve", "stdio"]

_PORTS = 65535  # the highest port
_NEARBY = 20  # ports after a busy one tried for the hint
# Beyond loopback the token is all that keeps a stranger out: shorter than this, it is refused.
# `agentrunner token` makes one of 43 (256 random bits, URL-safe).
_TOKEN_MIN = 32


def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind."),
    port: int = typer.Option(8765, "--port", help="Port to bind."),
    no_worker: bool = typer.Option(False, "--no-worker", help="Do not serve mailboxes here."),
    cors: list[str] = typer.Option([], "--cors", help="An allowed CORS origin (repeat)."),
    trusted_proxy: list[str] = typer.Option(
        [],
        "--trusted-proxy",
        help="The address (or network) of a reverse proxy in front, whose X-Forwarded-For and "
        "X-Forwarded-Proto name the client and its scheme (repeat).",
    ),
) -> None:
    """Serve the HTTP API (REST, live event streams, OpenAI-compatible chat).

    Beyond loopback a bearer token of at least 32 characters is required: export
    AGENTRUNNER_API_TOKEN=$(agentrunner token).
    """
    import asyncio

    from agentrunner.errors import AgentRunnerError, ErrorCode

    if not 0 <= port <= _PORTS:
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"--port {port} is not a port",
            hint=f"A port is a number from 0 to {_PORTS} (0: any free one); the default is 8765.",
        )
    token = _token(os.environ.get("AGENTRUNNER_API_TOKEN") or None, public=not _loopback(host))
    if token is None and not _loopback(host):
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"refusing to serve on {host} without a bearer token",
            hint="export AGENTRUNNER_API_TOKEN=$(agentrunner token) (clients send "
            "Authorization: Bearer …), or bind 127.0.0.1.",
        )
    proxies = [_network(proxy) for proxy in trusted_proxy]
    asyncio.run(_serve(host, port, token, not no_worker, cors or None, proxies))


def new_token() -> None:
    """Print a new random token for AGENTRUNNER_API_TOKEN (256 bits, URL-safe).

    export AGENTRUNNER_API_TOKEN=$(agentrunner token)
    """
    import secrets

    out.print(secrets.token_urlsafe(32), markup=False, soft_wrap=True)


async def _serve(
    host: str,
    port: int,
    token: str | None,
    worker: bool,
    cors: list[str] | None,
    trusted_proxies: list[str],
) -> None:
    """Open the project and the port first, so a problem with either is one error line before
    anything claims to be serving; then hand both to uvicorn."""
    from agentrunner.interfaces.server import create_app
    from agentrunner.interfaces.server.protocol import serve, uvicorn_config
    from agentrunner.runtime.compose import open_workspace

    workspace = await open_workspace()
    try:
        sock = _listen(host, port)
        port = sock.getsockname()[1]  # the one the system gave, for --port 0
        err.print(  # one line whatever the width: a log or a narrow terminal reads it whole
            f"[green]agentrunner[/] dashboard on http://{host}:{port}/ · API docs at /docs"
            + (" · token required" if token else ""),
        )
        app = create_app(token=token, worker=worker, cors_origins=cors, workspace=workspace)
        config = uvicorn_config(
            app, log_level="warning", access_log=False, trusted_proxies=trusted_proxies
        )
        await serve(config, [sock])
    finally:
        await workspace.close()


def _listen(host: str, port: int) -> socket.socket:
    from agentrunner.errors import AgentRunnerError, ErrorCode

    family = _family(host)
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
                hint="Stop what is listening there, or pick another port: "
                f"--port {_free_port_after(host, port)} is free.",
            ) from None
        raise AgentRunnerError(
            ErrorCode.RUNNER_IO,
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            hint="Check the address, and that ports below 1024 need privileges.",
        ) from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _free_port_after(host: str, port: int) -> int:
    """A port on ``host`` that nothing listens on now: the first of the next few that can be
    bound as ``_listen`` binds, else one the system picks."""
    for candidate in [*range(port + 1, min(port + _NEARBY, _PORTS) + 1), 0]:
        with socket.socket(_family(host), socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, candidate))
            except OSError:
                continue
            free: int = probe.getsockname()[1]
            return free
    return 0  # nothing could be bound at all: let the system pick as it starts


def _network(given: str) -> str:
    """A ``--trusted-proxy``: an address or a network, as uvicorn takes it."""
    from agentrunner.errors import AgentRunnerError, ErrorCode

    try:
        return str(ipaddress.ip_network(given.strip(), strict=False))
    except ValueError:
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"--trusted-proxy {given!r} is not an address or a network",
            hint="Name the proxy's address as the server sees it, e.g. --trusted-proxy "
            "127.0.0.1 for a proxy on this machine, or a network such as 10.0.0.0/8.",
        ) from None


def _token(raw: str | None, *, public: bool) -> str | None:
    """The bearer token clients must send; refused (never repeated) when it is blank or holds
    what a header value cannot (a token of spaces let ``Authorization: Bearer  `` in), or,
    ``public`` (beyond loopback), when it is short enough to guess."""
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
            hint="Set a long random one: export AGENTRUNNER_API_TOKEN=$(agentrunner token)",
        )
    if public and len(raw) < _TOKEN_MIN:
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"AGENTRUNNER_API_TOKEN is {len(raw)} characters long: beyond loopback it must be "
            f"at least {_TOKEN_MIN}",
            hint="Set a long random one: export AGENTRUNNER_API_TOKEN=$(agentrunner token)",
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

    from agentrunner.interfaces.stdio import serve_stdio

    asyncio.run(serve_stdio())


def mcp() -> None:
    """Serve the project's agents over MCP on stdin/stdout, for MCP clients (docs/mcp.md)."""
    import asyncio

    from agentrunner.run.capabilities.mcp import sdk_missing

    try:
        from agentrunner.interfaces.mcp_server import serve_mcp
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "mcp":
            raise
        raise sdk_missing() from exc
    asyncio.run(serve_mcp())
