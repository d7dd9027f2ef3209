"""Files through ``agentrunner mcp`` (docs/mcp.md): ``run_agent`` and ``execute_task`` take
``attachments`` (a file's bytes as base64 with its name, or the digest of a file already
kept), each checked by ``attach``; a refused one is a tool error led by its code, and nothing
is stored. Driven by the official MCP client over stdio."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from tests.attachment_files import image, pdf
from tests.tasks.test_mcp_server import connected, data, error_text
from tests.tasks.test_stdio_attachments import LOOKER, stored


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text("[attachments]\nmax_image_mb = 0.0002\n")  # 200 bytes
    (root / "agents" / "looker.md").write_text(LOOKER)
    return root


async def test_run_agent_and_execute_task_take_files(root: Path) -> None:
    red, report = image(4, 3, "red"), pdf(pages=2)
    async with connected(root) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        for name in ("run_agent", "execute_task"):
            schema = tools[name].input_schema["properties"]["attachments"]
            assert "anyOf" in schema or "items" in schema, schema

        def run(message: str, files: list[dict[str, Any]], **more: Any) -> Any:
            args = {"agent": "looker", "message": message, "attachments": files, **more}
            return session.call_tool("run_agent", args)

        one = data(await run("what is this?", [{"name": "red.png", "data": _b64(red)}]))
        two = data(
            await run("and this?", [{"name": "report.pdf", "data": _b64(report)}], new_thread=True)
        )
        assert "red.png" in one["text"] and "4x3" in one["text"]
        assert "report.pdf" not in one["text"]
        assert "report.pdf" in two["text"] and "2 pages" in two["text"]
        assert "red.png" not in two["text"]
        thread = data(await session.call_tool("read_thread", {"thread_id": one["thread_id"]}))
        [named] = thread["messages"][0]["attachments"]
        assert (named["name"], named["width"], named["height"]) == ("red.png", 4, 3)
        again = data(await run("again", [{"name": "again.png", "sha256": named["sha256"]}]))
        assert "again.png" in again["text"] and "4x3" in again["text"]

        task = data(
            await session.call_tool(
                "execute_task",
                {
                    "agent": "looker",
                    "input": {"what": "the chart"},
                    "attachments": [{"name": "chart.png", "data": _b64(image(5, 5, "blue"))}],
                },
            )
        )
        assert task["status"] == "completed", task
        assert "Look at the chart." in task["output"]
        assert "chart.png" in task["output"] and "5x5" in task["output"]
    files, runs = await stored(root)
    assert files == (2, len(red) + len(report)) and runs == 4


async def test_a_refused_file_is_a_tool_error_and_nothing_is_stored(root: Path) -> None:
    big = image(300, 200, "green")
    assert len(big) > 200 > len(image())
    cases: list[tuple[str, list[dict[str, Any]], str]] = [
        (
            "run_agent",
            [{"name": "photo.png", "data": _b64(b"just some notes\n")}],
            "attachment_refused: photo.png: its name says it is a PNG image, but its content "
            "is text",
        ),
        (
            "run_agent",
            [{"name": "ok.png", "data": _b64(image())}, {"name": "big.png", "data": _b64(big)}],
            f"attachment_refused: big.png: the file is {len(big):,} bytes",
        ),
        (
            "execute_task",
            [{"name": "big.png", "data": _b64(big)}],
            "attachment_refused: big.png: the file is",
        ),
        (
            "run_agent",
            [{"name": "a.png", "data": "not base64!"}],
            "validation: attachments.0.data is not base64",
        ),
    ]
    async with connected(root) as session:
        for tool, files, said in cases:
            args: dict[str, Any] = {"agent": "looker", "attachments": files}
            args |= {"message": "look"} if tool == "run_agent" else {"input": {"what": "it"}}
            refused = error_text(await session.call_tool(tool, args))
            assert refused.startswith(f"Error executing tool {tool}: "), refused
            assert said in refused and "(hint: " in refused, refused
    assert await stored(root) == ((0, 0), 0)  # no file, no run
