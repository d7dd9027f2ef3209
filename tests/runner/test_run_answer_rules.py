"""A run's caller sets its output schema and retry policy (seed 001, issue 46 item 6): from
Python (``RunAgentOverrides.output_schema``, ``.retry``), stdio (``run_agent``'s params) and HTTP
(a queued run's body: tests/server/test_run_answer_rules_http.py), in place of the agent file's,
read by the agent file's rules (``validation`` naming the field). Against the mock provider."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentRunner, RunAgentOverrides
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.testing import MockProvider, Reply
from agentrunner.testing.replies import Fault
from tests.runner.conftest import Agent
from tests.tasks.test_stdio import Client

CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
YEAR = {
    "type": "object",
    "properties": {"year": {"type": "integer"}},
    "required": ["year"],
    "additionalProperties": False,
}


def _schema_sent(body: dict[str, Any]) -> Any:
    return body["response_format"]["json_schema"]["schema"]


async def test_each_run_answers_to_the_schema_its_caller_gives(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("clerk")
    runner: AgentRunner = await open_runner()
    answers = []
    for schema, reply in ((CITY, '{"city": "Paris"}'), (YEAR, '{"year": 1889}')):
        mock.queue(Reply(text=reply))
        overrides = RunAgentOverrides(output_schema=schema)
        result = await runner.run_agent("clerk", f"t-{len(answers)}", "when?", overrides=overrides)
        assert _schema_sent(mock.requests[-1].body) == schema
        answers.append(json.loads(result.text))
    assert answers == [{"city": "Paris"}, {"year": 1889}]
    mock.queue(Reply(text="plain words"))
    await runner.run_agent("clerk", "t-plain", "hi")  # the file's own: none
    assert "response_format" not in mock.requests[-1].body


async def test_a_run_s_retry_policy_is_its_caller_s(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("clerk", "name: clerk\nretry: {max: 1}")
    runner: AgentRunner = await open_runner()
    failing = Reply(text="", fault=Fault.http(503))
    mock.queue(failing, failing, Reply(text="third time"))
    patient = RunAgentOverrides(retry={"max": 3, "backoff": "none", "initial_delay_s": 0.01})
    result = await runner.run_agent("clerk", "t-1", "hi", overrides=patient)
    assert result.text == "third time" and len(mock.requests) == 3
    mock.reset()
    mock.queue(failing, Reply(text="never asked"))
    with pytest.raises(AgentRunnerError) as failed:  # the file's own: one attempt
        await runner.run_agent("clerk", "t-2", "hi")
    assert failed.value.code is ErrorCode.PROVIDER_UNAVAILABLE and len(mock.requests) == 1


@pytest.mark.parametrize(
    ("given", "field", "said"),
    [
        ({"output_schema": {"type": "objekt"}}, "output_schema", "is not a valid JSON Schema"),
        ({"output_schema": ["city"]}, "output_schema", "must be a JSON Schema object"),
        ({"retry": {"maxx": 2}}, "retry", "unknown key 'retry.maxx' (did you mean 'retry.max'?)"),
        ({"retry": {"max": 0}}, "retry", "'retry.max' must be a positive integer"),
        ({"retry": {"backoff": "random"}}, "retry", "'retry.backoff' must be one of"),
        ({"retry": 3}, "retry", "'retry' must be a mapping with keys max, backoff"),
        ({"retry": [1]}, "retry", "'retry' must be a mapping"),
    ],
)
def test_a_bad_schema_or_policy_is_refused_naming_it(
    given: dict[str, Any], field: str, said: str
) -> None:
    with pytest.raises(AgentRunnerError) as refused:
        RunAgentOverrides(**given)
    assert refused.value.code is ErrorCode.VALIDATION
    assert refused.value.details == {"field": field} and said in refused.value.message


def test_stdio_run_agent_takes_a_schema_and_a_retry_policy(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text("")
    (root / "agents" / "clerk.md").write_text("---\nmodel: test\n---\nYou answer.\n")
    client = Client(root)
    try:
        assert client.lines.get(timeout=30)["event"] == "ready"
        client.request("a", "run_agent", agent="clerk", message="where?", output_schema=CITY)
        client.request("b", "run_agent", agent="clerk", message="when?", output_schema=YEAR)
        client.request("c", "run_agent", agent="clerk", message="hi", retry={"max": -1})
        answered: dict[str, dict[str, Any]] = {}
        while len(answered) < 3:
            message = client.lines.get(timeout=60)
            if "event" not in message:
                answered[message["id"]] = message
    finally:
        client.close()
    # the test model answers with an example of the schema it is given
    assert set(json.loads(answered["a"]["result"]["text"])) == {"city"}
    assert set(json.loads(answered["b"]["result"]["text"])) == {"year"}
    bad = answered["c"]["error"]
    assert bad["code"] == "validation"
    assert "'retry.max' must be a positive integer" in bad["message"]
