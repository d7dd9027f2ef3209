"""A run a guard stopped, over HTTP: 403 with the code ``guard_blocked`` and the guard's name
and reason; nothing sent to a model for a blocked message (docs/approvals.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2

from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent
from tests.runner.test_guards import extension

AUTH = {"authorization": "Bearer secret-token"}

GUARD = """
def no_passwords(said):
    return "it holds a password" if "password" in said.text else None


def register(extensions):
    extensions.input_guard("no-passwords", no_passwords)
"""


def test_a_blocked_message_is_403_guard_blocked_and_sends_nothing(
    agent: Agent, server: Any, project: Path, mock: MockProvider
) -> None:
    extension(project, GUARD)
    agent("clerk", "model: mockai:gpt-mock")
    srv = server()
    mock.queue(Reply(text="hello"))
    for text, status in (("my password is x", 403), ("hi", 200)):
        asked = httpx2.post(
            f"{srv.url}/v1/chat/completions",
            headers=AUTH,
            json={"model": "clerk", "messages": [{"role": "user", "content": text}], "user": "ada"},
        )
        assert asked.status_code == status, asked.text
        if status == 403:
            error = asked.json()["error"]
            assert error["code"] == "guard_blocked"
            assert error["message"] == (
                "input guard 'no-passwords' blocked the message: it holds a password"
            )
            assert mock.requests == []
    assert asked.json()["choices"][0]["message"]["content"] == "hello"
    [request] = mock.requests
    assert "password" not in str(request.body["messages"])  # kept in the thread, never sent
