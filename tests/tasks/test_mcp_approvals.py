"""A person in the loop over `agentrunner mcp` (docs/approvals.md), driven by the official MCP
client: a run that waits answers with its requests instead of hanging, list_approvals and
decide_approval decide them and the run goes on in the server's process; a client that supports
elicitation is asked instead."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client

from agentrunner.testing import MockProvider, MockProviderServer, Reply
from tests.tasks.test_mcp_server import data, error_text
from tests.tasks.test_stdio import CONFIG
from tests.tasks.test_stdio_approvals import CLERK


@pytest.fixture
def root(tmp_path: Path, mock_server: MockProviderServer) -> Path:
    root = tmp_path / "proj"
    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text(CONFIG.format(url=mock_server.openai_url))
    (root / "agents" / "clerk.md").write_text(CLERK)
    return root


@contextlib.asynccontextmanager
async def connected(
    root: Path, answers: list[types.ElicitResult] | None = None
) -> AsyncIterator[tuple[ClientSession, list[str]]]:
    """A client session with a fresh server process; with ``answers``, a client that supports
    elicitation and gives them in turn (the questions it was asked are kept)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "agentrunner", "mcp"],
        cwd=root,
        env={
            "MOCK_KEY": "sk-mock",
            "PATH": os.environ.get("PATH", ""),
            # this checkout's code, where an installed agentrunner is another's
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        },
    )
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        assert answers, f"asked more than expected: {params.message}"
        return answers.pop(0)

    options: dict[str, Any] = {"elicitation_callback": elicit} if answers is not None else {}
    with (root / "mcp-stderr.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as streams,
            ClientSession(*streams, **options) as session,
        ):
            await session.initialize()
            yield session, asked


def _tool_results(mock: MockProvider) -> list[dict[str, Any]]:
    return [m for m in mock.requests[-1].body["messages"] if m.get("role") == "tool"]


async def test_a_waiting_run_answers_at_once_and_is_decided_with_tools(
    root: Path, mock: MockProvider
) -> None:
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "plan", "body": "Monday"})]),
        Reply(tool_calls=[("note_create", {"title": "secret", "body": "x"})]),
        Reply(text="Noted the plan."),
        Reply(text="Understood, not noted."),
        model="gpt-mock",
    )
    async with connected(root) as (session, _):
        tools = {t.name for t in (await session.list_tools()).tools}
        assert {"list_approvals", "decide_approval"} <= tools
        runs = []
        for title in ("plan", "secret"):
            ran = data(
                await session.call_tool(
                    "run_agent", {"agent": "clerk", "message": title, "new_thread": True}
                )
            )
            assert ran["status"] == "waiting" and ran["text"] == ""
            [asked] = ran["approvals"]
            assert asked["tool"] == "note_create" and asked["arguments"]["title"] == title
            runs.append(ran)
        listed = data(await session.call_tool("list_approvals", {}))["result"]
        assert {a["id"] for a in listed} == {r["approvals"][0]["approval_id"] for r in runs}

        yes = runs[0]["approvals"][0]["approval_id"]
        approved = data(
            await session.call_tool("decide_approval", {"approval_id": yes, "decision": "approve"})
        )
        assert approved["approval"]["status"] == "approved"
        assert approved["approval"]["decided_by"] == "mcp" and approved["requeued"] is True
        assert approved["run"]["status"] == "completed"
        assert approved["run"]["text"] == "Noted the plan."
        assert "plan" in str(_tool_results(mock)[0]["content"])

        no = runs[1]["approvals"][0]["approval_id"]
        denied = data(
            await session.call_tool(
                "decide_approval",
                {"approval_id": no, "decision": "deny", "reason": "private", "by": "ana"},
            )
        )
        assert denied["approval"]["status"] == "denied"
        assert denied["run"]["text"] == "Understood, not noted."
        assert _tool_results(mock)[0]["content"] == "denied by ana: private"

        late = await session.call_tool("decide_approval", {"approval_id": yes, "decision": "deny"})
        said = error_text(late)
        assert "approval_decided" in said and "mcp" in said
        missing = await session.call_tool(
            "decide_approval", {"approval_id": "ap_nobody", "decision": "approve"}
        )
        assert "not_found" in error_text(missing)
        assert data(await session.call_tool("list_approvals", {}))["result"] == []
    assert len(mock.requests) == 4


async def test_a_client_that_elicits_is_asked_and_the_run_goes_on(
    root: Path, mock: MockProvider
) -> None:
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "plan", "body": "Monday"})]),
        Reply(text="Noted the plan."),
        Reply(tool_calls=[("note_create", {"title": "secret", "body": "x"})]),
        Reply(text="Understood."),
        Reply(tool_calls=[("note_create", {"title": "later", "body": "y"})]),
        model="gpt-mock",
    )
    answers = [
        types.ElicitResult(action="accept", content={"approve": True, "reason": ""}),
        types.ElicitResult(action="accept", content={"approve": False, "reason": "private"}),
        types.ElicitResult(action="cancel"),
    ]
    async with connected(root, answers) as (session, asked):
        said = []
        for title in ("plan", "secret", "later"):
            said.append(
                data(
                    await session.call_tool(
                        "run_agent", {"agent": "clerk", "message": title, "new_thread": True}
                    )
                )
            )
        assert [q.split(" with ")[0] for q in asked] == ["clerk asks to call note_create"] * 3
        assert ['"title": "plan"' in asked[0], '"title": "secret"' in asked[1]] == [True, True]
        approved, denied, dismissed = said
        assert approved["status"] == "completed" and approved["text"] == "Noted the plan."
        assert denied["status"] == "completed" and denied["text"] == "Understood."
        # dismissed: the run still waits, its request listed for another way to decide
        assert dismissed["status"] == "waiting"
        [pending] = data(await session.call_tool("list_approvals", {}))["result"]
        assert dismissed["approvals"][0]["approval_id"] == pending["id"]
        assert pending["arguments"]["title"] == "later"
    requests = [r.body["messages"] for r in mock.requests]
    tool_said = [[m["content"] for m in sent if m.get("role") == "tool"] for sent in requests]
    assert tool_said[3] == ["denied by mcp: private"]
    assert len(mock.requests) == 5
