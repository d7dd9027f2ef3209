"""A small MCP server for the tests: stdio by default, streamable HTTP with ``--http PORT``."""

from __future__ import annotations

import base64
import io
import os
import sys

from mcp.server.mcpserver import Image, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import (
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    TextContent,
    ToolAnnotations,
)

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


@server.tool()
def picture(color: str, width: int = 4, height: int = 3) -> list[TextContent | ImageContent]:
    """A picture of one colour and its caption: text and image content."""
    from PIL import Image as Picture

    out = io.BytesIO()
    Picture.new("RGB", (width, height), color).save(out, format="PNG")
    caption = TextContent(type="text", text=f"a {color} picture")
    return [caption, Image(data=out.getvalue(), format="png").to_image_content()]


@server.tool()
def report(pages: int = 1) -> EmbeddedResource:
    """A PDF of blank pages, as an embedded resource (a blob)."""
    from pypdf import PdfWriter

    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(72, 72)
    out = io.BytesIO()
    writer.write(out)
    blob = base64.b64encode(out.getvalue()).decode()
    contents = BlobResourceContents(
        uri="file:///reports/q3.pdf", mime_type="application/pdf", blob=blob
    )
    return EmbeddedResource(type="resource", resource=contents)


@server.tool()
def broken_picture() -> list[TextContent | ImageContent]:
    """Image content cut short, beside a picture that is whole."""
    from PIL import Image as Picture

    out = io.BytesIO()
    Picture.new("RGB", (2, 2), "blue").save(out, format="PNG")
    cut = base64.b64encode(out.getvalue()[:40]).decode()  # a PNG's header, and no more
    return [
        TextContent(type="text", text="two pictures"),
        ImageContent(type="image", data=cut, mime_type="image/png"),
        ImageContent(type="image", data="%% not base64", mime_type="image/jpeg"),
        Image(data=out.getvalue(), format="png").to_image_content(),
    ]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
