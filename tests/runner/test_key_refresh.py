"""A 401 is tried again once with a refreshed key (seed 001, issue 46 item 6): a provider's key
comes from its environment variable, read again when the provider answers 401; where the
variable holds another key now (a host that rotates it), the request is sent once more with
it, and every later request too. The same key again: the 401 stands, not sent twice. Against
the mock provider, whose requests keep their headers."""

from __future__ import annotations

from typing import Any

import pytest

from agentrunner import AgentRunner
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.testing import MockProvider, Reply
from agentrunner.testing.replies import Fault
from tests.runner.conftest import Agent

REFUSED = Reply(text="", fault=Fault.http(401))


async def test_a_401_is_sent_again_once_with_the_key_its_variable_holds_now(
    agent: Agent, open_runner: Any, mock: MockProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent("clerk")
    runner: AgentRunner = await open_runner()
    mock.queue(Reply(text="first"))
    await runner.run_agent("clerk", "t-1", "hi")
    monkeypatch.setenv("MOCK_KEY", "sk-rotated-key")
    mock.queue(REFUSED, Reply(text="with the new key"), Reply(text="still the new key"))
    assert (await runner.run_agent("clerk", "t-2", "hi")).text == "with the new key"
    assert (await runner.run_agent("clerk", "t-3", "hi")).text == "still the new key"
    sent = [r.headers["authorization"] for r in mock.requests]
    old, new = "Bearer sk-mock-key", "Bearer sk-rotated-key"
    assert sent == [old, old, new, new]

    mock.queue(REFUSED)  # the same key: the 401 stands (sent again, it would be answered)
    with pytest.raises(AgentRunnerError) as refused:
        await runner.run_agent("clerk", "t-4", "hi")
    assert refused.value.code is ErrorCode.PROVIDER_AUTH and len(mock.requests) == 5
    assert "sk-rotated-key" not in str(refused.value) and "sk-mock-key" not in str(refused.value)

    monkeypatch.delenv("MOCK_KEY")  # unset since: the 401 stands too
    mock.queue(REFUSED)
    with pytest.raises(AgentRunnerError) as unset:
        await runner.run_agent("clerk", "t-5", "hi")
    assert unset.value.code is ErrorCode.PROVIDER_AUTH and len(mock.requests) == 6
