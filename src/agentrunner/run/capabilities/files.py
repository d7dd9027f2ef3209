"""The ``files`` capability: read, write, list and send files within the run's file scope.

What a trust level reaches, and what is refused below ``full`` however a path is spelled, is
``capabilities/scope``'s; the scope follows the run's trust, which a delegated run has narrowed
to its caller's. The tools are plain functions, so each call runs on a worker thread (``@tool``):
resolving a path, reading and writing never stall the event loop.
"""

from __future__ import annotations

import mimetypes

from agentrunner.engine.tools import Tool, ToolRetry, tool
from agentrunner.run.capabilities.registry import CapabilityContext
from agentrunner.run.capabilities.scope import FileScope

__all__ = ["TOOL_NAMES", "files_tools"]

TOOL_NAMES = ("read_file", "write_file", "list_files", "send_file")
MAX_READ = 200_000


def files_tools(ctx: CapabilityContext) -> list[Tool]:
    scope = FileScope(
        ctx.agent.id, ctx.trust, ctx.project_root, ctx.runtime_files, declared=ctx.agent.trust
    )

    @tool
    def read_file(path: str) -> str:
        """Read a text file (paths are relative to your workspace)."""
        target = scope.resolve(path)
        if not target.is_file():
            raise ToolRetry(f"no file '{path}'")
        data = target.read_bytes()[:MAX_READ]
        return data.decode("utf-8", errors="replace")

    @tool(writes=True)
    def write_file(path: str, content: str) -> str:
        """Write a text file, creating folders as needed."""
        target = scope.resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content)} characters to {path}"

    @tool
    def list_files(path: str = ".") -> list[str]:
        """List the files and folders in a folder."""
        target = scope.resolve(path)
        if not target.is_dir():
            raise ToolRetry(f"no folder '{path}'")
        return scope.listing(target)

    @tool
    def send_file(path: str, caption: str | None = None) -> str:
        """Send a file to the user."""
        target = scope.resolve(path)
        if not target.is_file():
            raise ToolRetry(f"no file '{path}'")
        kind = (mimetypes.guess_type(target.name)[0] or "application/octet-stream").split("/")[0]
        ctx.tell("agent.file", {"path": str(target), "caption": caption, "kind": kind})
        return f"sent {path}"

    return [read_file, write_file, list_files, send_file]
