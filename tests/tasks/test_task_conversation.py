"""A task may carry a conversation (seed 004, issue 46 item 11): the messages before its own, a
person's and the agent's, sent before the task's message in order, and keyed in the cache as a
whole — the same conversation again is a hit, another (one message changed, or their order) is
not. A message that is not one is a failed outcome naming it. From Python, stdio and the CLI,
against the mock provider."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentrunner.testing import MockProvider, Reply
from tests.tasks import test_tasks
from tests.tasks.test_stdio import Client
from tests.tasks.test_tasks import exec_cli, run

tasks_project = test_tasks.tasks_project  # its project, as a fixture of this module's too

TOPIC = {"company": "Acme", "topic": "tides"}
TALK = [
    {"role": "user", "content": "Keep it under fifty words."},
    {"role": "assistant", "content": "Understood: under fifty words."},
]


def _sent(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in body["messages"] if m["role"] != "system"]


async def test_the_conversation_is_sent_before_the_task_s_message_and_keys_the_cache(
    tasks_project: Path, mock: MockProvider
) -> None:
    mock.queue(Reply(text="Short essay."), Reply(text="Long essay."), Reply(text="Other order."))
    first = await run("writer", TOPIC, conversation=TALK)
    sent = _sent(mock.requests[-1].body)
    assert sent[:2] == [(m["role"], m["content"]) for m in TALK]
    assert sent[2][0] == "user" and "Write about tides" in sent[2][1]
    recorded = await _recorded(first.run_id)
    assert recorded[1:4] == [
        ("user_message", TALK[0]["content"]),
        ("assistant_message", TALK[1]["content"]),
        ("user_message", sent[2][1]),
    ]  # the run's record shows what its model was sent
    again = await run("writer", TOPIC, conversation=TALK)
    assert (first.output, first.cached, again.output, again.cached) == (
        "Short essay.",
        False,
        "Short essay.",
        True,
    )
    longer = [TALK[0] | {"content": "Make it long."}, TALK[1]]
    other = await run("writer", TOPIC, conversation=longer)
    swapped = await run("writer", TOPIC, conversation=[TALK[1], TALK[0]])
    plain = await run("writer", TOPIC)
    assert [o.cached for o in (other, swapped, plain)] == [False, False, False]
    assert (other.output, swapped.output) == ("Long essay.", "Other order.")
    assert len(mock.requests) == 4  # the hit never reached the provider


@pytest.mark.parametrize(
    ("conversation", "field"),
    [
        ([{"role": "system", "content": "obey"}], "conversation[0].role"),
        ([TALK[0], {"role": "user", "content": "  "}], "conversation[1].content"),
        ([TALK[0], {"role": "user", "text": "hi"}], "conversation[1].text"),
        ("just text", "conversation"),
    ],
)
async def test_a_message_that_is_not_one_is_a_failed_outcome_naming_it(
    tasks_project: Path, mock: MockProvider, conversation: Any, field: str
) -> None:
    outcome = await run("writer", TOPIC, conversation=conversation)
    assert outcome.status == "failed" and outcome.error is not None
    assert outcome.error["code"] == "validation" and outcome.error["message"].startswith(field)
    assert mock.requests == []  # nothing was sent


def test_stdio_and_the_cli_carry_a_conversation(tasks_project: Path, mock: MockProvider) -> None:
    mock.queue(Reply(text="From the CLI."))
    (tasks_project / "talk.json").write_text(json.dumps(TALK))
    done = exec_cli(
        tasks_project, "writer", "--input", json.dumps(TOPIC), "--conversation", "@talk.json"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "From the CLI."
    assert _sent(mock.requests[-1].body)[:2] == [(m["role"], m["content"]) for m in TALK]
    bad = exec_cli(tasks_project, "writer", "--input", json.dumps(TOPIC), "--conversation", "[1]")
    assert bad.returncode == 1 and "conversation[0] must be an object" in bad.stderr
    missing = exec_cli(tasks_project, "writer", "-i", "{}", "--conversation", "@nope.json")
    assert missing.returncode == 1 and "cannot read --conversation file nope.json" in missing.stderr

    client = Client(tasks_project)
    try:
        assert client.lines.get(timeout=30)["event"] == "ready"
        client.request("a", "execute", agent="writer", input=TOPIC, conversation=TALK)
        answer = client.lines.get(timeout=60)
    finally:
        client.close()
    assert answer["id"] == "a" and answer["result"]["cached"] is True  # the CLI's, kept


async def _recorded(run_id: str | None) -> list[tuple[str, str]]:
    from agentrunner.runtime.compose import open_runner

    runner = await open_runner()
    try:
        messages = await runner.store.runs.messages(run_id or "")
        return [(m.message_type, m.content) for m in messages]
    finally:
        await runner.close()
