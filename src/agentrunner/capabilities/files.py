"""The ``files`` capability: read, write and list files within the agent's trust scope.

``sandboxed``: the agent's own workspace directory (``.agentrunner/workspaces/<agent>``);
``workspace``: the project directory; ``full``: anywhere. Outside ``full``, absolute paths,
``..`` escapes and symlinks that lead out of the scope are refused with ``tool_denied``.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path

from agentrunner.capabilities.registry import CapabilityContext
from agentrunner.engine.tools import Tool, ToolDenied, ToolRetry, tool

__all__ = ["TOOL_NAMES", "files_tools", "scope_root"]

TOOL_NAMES = ("read_file", "write_file", "list_files", "send_file")
MAX_READ = 200_000


def scope_root(ctx: CapabilityContext) -> Path | None:
    """The directory the agent's paths are confined to; None for ``full`` trust."""
    if ctx.agent.trust == "full":
        return None
    if ctx.agent.trust == "workspace":
        return ctx.project_root.resolve()
    root = (ctx.state_dir / "workspaces" / ctx.agent.id).resolve()
    root.mkdir(parents=True, exist_ok=True)
    return root


def resolve_path(ctx: CapabilityContext, path: str) -> Path:
    root = scope_root(ctx)
    raw = Path(path).expanduser()
    if root is None:
        return (raw if raw.is_absolute() else ctx.project_root / raw).resolve()
    if raw.is_absolute():
        raise ToolDenied(
            f"'{path}' is an absolute path; agent '{ctx.agent.id}' ({ctx.agent.trust} trust) "
            "may only use paths inside its scope"
        )
    resolved = (root / raw).resolve()  # follows symlinks, so a link out of the scope is caught
    if not resolved.is_relative_to(root):
        raise ToolDenied(
            f"'{path}' leads outside the scope of agent '{ctx.agent.id}' ({ctx.agent.trust} trust)"
        )
    return resolved


def files_tools(ctx: CapabilityContext) -> list[Tool]:
    @tool
    def read_file(path: str) -> str:
        """Read a text file (paths are relative to your workspace)."""
        target = resolve_path(ctx, path)
        if not target.is_file():
            raise ToolRetry(f"no file '{path}'")
        data = target.read_bytes()[:MAX_READ]
        return data.decode("utf-8", errors="replace")

    @tool
    def write_file(path: str, content: str) -> str:
        """Write a text file, creating folders as needed."""
        target = resolve_path(ctx, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content)} characters to {path}"

    @tool
    def list_files(path: str = ".") -> list[str]:
        """List the files and folders in a folder."""
        target = resolve_path(ctx, path)
        if not target.is_dir():
            raise ToolRetry(f"no folder '{path}'")
        return sorted(p.name + ("/" if p.is_dir() else "") for p in target.iterdir())[:500]

    @tool
    def send_file(path: str, caption: str | None = None) -> str:
        """Send a file to the user."""
        target = resolve_path(ctx, path)
        if not target.is_file():
            raise ToolRetry(f"no file '{path}'")
        kind = (mimetypes.guess_type(target.name)[0] or "application/octet-stream").split("/")[0]
        ctx.tell("agent.file", {"path": str(target), "caption": caption, "kind": kind})
        return f"sent {path}"

    return [read_file, write_file, list_files, send_file]
