"""An agent's MCP tool that answers with files (docs/attachments.md): image content, and an
embedded resource whose blob is an image or a PDF, come back as ``Attachment``s beside the
text, each checked by the one check (``read_attachment``, the project's ``[attachments]``);
one refused is a line of the result saying so, not a failed call. A real server
(``tests/runner/mcp_server.py``) over stdio."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PIL import Image

from agentrunner import AgentRunner
from agentrunner.core.attachments import AttachmentLimits
from agentrunner.engine.messages import Attachment, ToolResult
from agentrunner.engine.tools import Tool, ToolContext
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.runner.test_mcp import stdio


def _png(color: str, width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="PNG")
    return out.getvalue()


async def _call(
    tmp_path: Path, name: str, arguments: dict[str, Any], limits: AttachmentLimits | None = None
) -> Any:
    from agentrunner.agents import parse_agent_text
    from agentrunner.run.capabilities.mcp import McpServers

    text = f"---\nmodel: test\n{stdio()}\n---\nHi.\n"
    spec = parse_agent_text(text, agent_id="a", file="agents/a.md")
    servers = McpServers(tmp_path)
    try:
        more = {} if limits is None else {"limits": limits}
        offered: Sequence[Tool] = await servers.tools(spec, **more)
        tool = next(t for t in offered if t.name == name)
        return await tool.fn(arguments, ToolContext("c1", name))
    finally:
        await servers.aclose()


async def test_image_content_and_a_pdf_blob_come_back_as_files(tmp_path: Path) -> None:
    red = await _call(tmp_path, "picture", {"color": "red", "width": 4, "height": 3})
    green = await _call(tmp_path, "picture", {"color": "green", "width": 9, "height": 2})
    for got, color, size in ((red, "red", (4, 3)), (green, "green", (9, 2))):
        text, file = got
        assert text == f"a {color} picture"
        assert isinstance(file, Attachment) and file.media_type == "image/png"
        assert (file.width, file.height) == size and file.data == _png(color, *size)
        assert file.sha256 == hashlib.sha256(file.data).hexdigest() and file.name == "image.png"
    assert red[1].sha256 != green[1].sha256

    text, pdf = await _call(tmp_path, "report", {"pages": 3})
    assert text == ""  # a resource alone: no text beside it
    assert isinstance(pdf, Attachment) and pdf.media_type == "application/pdf"
    assert (pdf.name, pdf.pages) == ("q3.pdf", 3)  # named by its URI

    plain = await _call(tmp_path, "add", {"a": 2, "b": 3})
    assert plain == "5"  # a tool without files answers text, as before


async def test_a_refused_image_is_a_line_of_the_result(tmp_path: Path) -> None:
    text, kept = await _call(tmp_path, "broken_picture", {})
    lines = text.splitlines()
    assert lines[0] == "two pictures"
    assert lines[1].startswith("[image refused: image.png: cannot be read as a PNG image")
    assert lines[2] == "[image refused: image.jpg: its bytes are not base64]"
    assert isinstance(kept, Attachment) and (kept.width, kept.height) == (2, 2)

    # the project's limits: a picture over them is refused, and the call still answers
    small = AttachmentLimits(max_image_bytes=60)
    answered = await _call(tmp_path, "picture", {"color": "red", "width": 40, "height": 40}, small)
    assert isinstance(answered, str)  # no file left: the text alone
    caption, refused = answered.splitlines()
    assert caption == "a red picture"
    assert refused.startswith("[image refused: image.png: the file is ")
    assert "an image may be at most 60 bytes" in refused


async def test_the_project_s_limits_reach_its_mcp_tools(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path
) -> None:
    """A run's MCP tools check files within the project's ``[attachments]``: a picture over
    them is a line of its result; one within them (once the engine renders a tool's files:
    ``engine.tools.render_output``) is a file of its result."""
    with (project / "agentrunner.toml").open("a") as config:
        config.write("\n[attachments]\nmax_image_mb = 0.0001\n")  # 100 bytes
        config.write('\n[models."mockai:gpt-mock"]\ninput = ["text", "image", "pdf"]\n')
    assert len(_png("green", 300, 200)) > 100 > len(_png("blue", 5, 4))
    agent("viewer", stdio())
    runner: AgentRunner = await open_runner()
    mock.queue(
        Reply(
            tool_calls=[
                ("picture", {"color": "green", "width": 300, "height": 200}),
                ("picture", {"color": "blue", "width": 5, "height": 4}),
            ]
        ),
        Reply(text="Two pictures."),
    )
    result = await runner.run_agent("viewer", "t1", "show me")
    assert result.text == "Two pictures."
    history, _ = await runner.store.messages.tail("t1", 10)
    big, small = [m for m in history if isinstance(m, ToolResult)]
    assert not big.is_error and not big.attachments
    caption, refused = big.content.splitlines()
    assert caption == "a green picture"
    assert refused.startswith("[image refused: image.png: the file is ")
    assert "at most 100 bytes" in refused
    assert small.content == "a blue picture" and not small.is_error
    [file] = small.attachments
    assert (file.name, file.width, file.height) == ("image.png", 5, 4)
