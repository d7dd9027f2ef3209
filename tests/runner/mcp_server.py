"""A small MCP server for the tests: stdio by default, streamable HTTP with ``--http PORT``."""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import ToolAnnotations

server = MCPServer("calc")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def refuse(reason: str) -> str:
    """Always fails, as a tool reports an error to the model."""
    raise ValueError(f"refused: {reason}")


@server.tool()
def strict(n: int) -> str:
    """Answers with a JSON-RPC error instead of a result."""
    raise MCPError(code=-32602, message=f"n={n} is out of range")


@server.tool()
def whoami() -> str:
    """The server's process id and its CALC_TOKEN variable."""
    return f"pid={os.getpid()} token={os.environ.get('CALC_TOKEN', '-')}"


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def wipe(what: str) -> str:
    """Marked destructive by the server (destructiveHint), as approval rules read it."""
    return f"wiped {what}"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def stamp(what: str) -> str:
    """Marked as changing things, but not destructively."""
    return f"stamped {what}"


@server.tool()
def append_line(path: str, line: str) -> str:
    """Append a line to a file: a side effect a test can count."""
    with open(path, "a", encoding="utf-8") as file:
        file.write(line + "\n")
    return f"appended to {path}"


@server.tool()
async def append_then_hang(path: str, line: str) -> str:
    """Append a line, then never answer: a process killed now has had the call's effect."""
    import anyio

    with open(path, "a", encoding="utf-8") as file:
        file.write(line + "\n")
    await anyio.sleep(3600)
    return "never"


@server.tool()
def crash() -> str:
    """The server process dies in the middle of the call."""
    os._exit(3)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
