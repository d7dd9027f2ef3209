"""A person in the loop over `agentrunner stdio` (docs/approvals.md): a run that waits answers
with its requests, the client lists and decides them, and the run goes on in the stdio process
(no worker is running), its events streamed under the decision's id."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentrunner.testing import MockProvider, MockProviderServer, Reply
from tests.tasks.test_stdio import CONFIG, Client

CLERK = """\
---
name: Clerk
capabilities: [notes]
approval:
  tools: [note_create]
---
You keep notes.
"""


@pytest.fixture
def clerk(tmp_path: Path, mock_server: MockProviderServer) -> Iterator[Client]:
    root = tmp_path / "proj"
    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text(CONFIG.format(url=mock_server.openai_url))
    (root / "agents" / "clerk.md").write_text(CLERK)
    client = Client(root)
    assert client.lines.get(timeout=30)["event"] == "ready"
    yield client
    if client.proc.poll() is None:
        client.proc.kill()
    client.proc.wait(timeout=30)
    for pipe in (client.proc.stdin, client.proc.stdout, client.proc.stderr):
        if pipe is not None and not pipe.closed:
            pipe.close()


def _tool_results(mock: MockProvider) -> list[dict[str, Any]]:
    """The tool results of the last request the mock provider was sent."""
    return [m for m in mock.requests[-1].body["messages"] if m.get("role") == "tool"]


def _waits(client: Client, rid: str, title: str) -> dict[str, Any]:
    """A run of the clerk that asks to create note ``title``: its result, checked."""
    client.request(rid, "run_agent", agent="clerk", message=f"note {title}", new=True)
    ran, events = client.response(rid)
    result = ran["result"]
    assert result["status"] == "waiting" and result["stop_reason"] == "waiting"
    [asked] = result["approvals"]
    assert asked["tool"] == "note_create" and asked["arguments"]["title"] == title
    # the request reached the client as every event does, before the result
    requested = [e["data"] for e in events if e["event"] == "approval.requested"]
    assert [r["approval_id"] for r in requested] == [asked["approval_id"]]
    assert events[-1]["event"] == "agent.idle" and events[-1]["data"]["outcome"] == "waiting"
    return dict(result)


def test_a_waiting_run_is_approved_or_denied_by_the_client_and_goes_on(
    clerk: Client, mock: MockProvider
) -> None:
    mock.queue(  # in the order they are asked: both runs' first steps, then each going on
        Reply(tool_calls=[("note_create", {"title": "plan", "body": "Monday"})]),
        Reply(tool_calls=[("note_create", {"title": "secret", "body": "x"})]),
        Reply(text="Noted the plan."),
        Reply(text="Understood, not noted."),
        model="gpt-mock",
    )
    first = _waits(clerk, "r1", "plan")
    second = _waits(clerk, "r2", "secret")
    clerk.request("l", "list_approvals")
    listed, _ = clerk.response("l")
    waiting = {(a["id"], a["run_id"], a["status"]) for a in listed["result"]}
    assert waiting == {
        (first["approvals"][0]["approval_id"], first["run_id"], "pending"),
        (second["approvals"][0]["approval_id"], second["run_id"], "pending"),
    }

    yes = first["approvals"][0]["approval_id"]
    clerk.request("d1", "decide_approval", approval_id=yes, decision="approve", by="ana")
    approved, events = clerk.response("d1")
    said = approved["result"]
    assert said["approval"]["status"] == "approved" and said["approval"]["decided_by"] == "ana"
    assert said["requeued"] is True
    assert said["run"]["status"] == "completed" and said["run"]["text"] == "Noted the plan."
    assert said["run"]["run_id"] == first["run_id"] and "approvals" not in said["run"]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "approval.decided" and events[0]["data"]["by"] == "ana"
    assert "agent.tool_result" in kinds and kinds[-1] == "agent.idle"
    assert events[-1]["data"]["outcome"] == "completed"
    assert "plan" in str(_tool_results(mock)[0]["content"])  # the note was made

    no = second["approvals"][0]["approval_id"]
    clerk.request("d2", "decide_approval", approval_id=no, decision="deny", reason="private")
    denied, _ = clerk.response("d2")
    said = denied["result"]
    assert said["approval"]["status"] == "denied" and said["approval"]["decided_by"] == "stdio"
    assert said["run"]["status"] == "completed"
    assert said["run"]["text"] == "Understood, not noted."
    assert _tool_results(mock)[0]["content"] == "denied by stdio: private"

    clerk.request("l2", "list_approvals")
    assert clerk.response("l2")[0]["result"] == []
    # a second decision is refused, naming the first
    clerk.request("d3", "decide_approval", approval_id=yes, decision="deny")
    late, _ = clerk.response("d3")
    assert late["error"]["code"] == "approval_decided" and "ana" in late["error"]["message"]
    assert len(mock.requests) == 4  # nothing ran again


def test_bad_decisions_are_refused_with_what_to_send(clerk: Client, mock: MockProvider) -> None:
    for rid, params in (
        ("a", {"decision": "approve"}),
        ("b", {"approval_id": "ap_x", "decision": "maybe"}),
        ("c", {"approval_id": "ap_x", "decision": "deny", "reason": 3}),
        ("d", {"approval_id": "ap_x", "decision": "approve", "always": "forever"}),
        ("e", {"approval_id": "ap_x", "decision": "approve", "arguments": "{}"}),
    ):
        clerk.request(rid, "decide_approval", **params)
        refused, _ = clerk.response(rid)
        assert refused["error"]["code"] == "validation", refused
        assert "docs/stdio.md" in refused["error"]["hint"]
    clerk.request("f", "decide_approval", approval_id="ap_nobody", decision="approve")
    missing, _ = clerk.response("f")
    assert missing["error"]["code"] == "not_found" and "ap_nobody" in missing["error"]["message"]
    assert mock.requests == []
