"""Provider waits are bounded by the retry policy: a wait longer than ``retry.max_delay_s`` is
never waited for — the chain fails over at once, or with no model left fails at once with the
asked wait in the message. No timed assertions: waits are recorded by a fake ``sleep``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from agentrunner.agents.spec import RetryPolicy
from agentrunner.engine import TurnError, run_turn
from agentrunner.errors import ErrorCode
from agentrunner.testing import Fault, MockProvider, MockProviderServer, Reply
from tests.engine.helpers import registry, turn

POLICY = RetryPolicy(max=3, backoff="none", max_delay_s=2)


def recording_sleep(waits: list[float]) -> Callable[[float], Awaitable[None]]:
    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(0)

    return sleep


@pytest.mark.parametrize("asked", [30, 3600])
async def test_a_wait_past_max_delay_fails_over_at_once(
    mock_server: MockProviderServer, mock: MockProvider, asked: int
) -> None:
    mock.queue(Reply(fault=Fault.http(429, retry_after=asked)), model="gpt-mock")
    mock.queue(Reply(text="from the backup"), model="claude-mock")
    reg = registry(mock_server)
    waits: list[float] = []
    t = turn(reg, "mockai:gpt-mock", "mockant:claude-mock", tools=(), retry=POLICY)
    t.chain.sleep = recording_sleep(waits)
    result = await run_turn(t)
    await reg.aclose()
    assert (result.text, result.model) == ("from the backup", "mockant:claude-mock")
    assert waits == []
    assert [r.body["model"] for r in mock.requests] == ["gpt-mock", "claude-mock"]
    assert [(a.model, a.outcome, a.status) for a in result.attempts] == [
        ("mockai:gpt-mock", "error", 429),
        ("mockant:claude-mock", "ok", None),
    ]


@pytest.mark.parametrize("asked", [30, 3600])
async def test_a_wait_past_max_delay_with_no_model_left_fails_at_once(
    mock_server: MockProviderServer, mock: MockProvider, asked: int
) -> None:
    mock.queue(Reply(fault=Fault.http(429, retry_after=asked)), Reply(text="must not be asked"))
    reg = registry(mock_server)
    waits: list[float] = []
    t = turn(reg, "mockai:gpt-mock", tools=(), retry=POLICY)
    t.chain.sleep = recording_sleep(waits)
    with pytest.raises(TurnError) as info:
        await run_turn(t)
    await reg.aclose()
    error = info.value
    assert error.code is ErrorCode.PROVIDER_RATE_LIMIT
    assert f"asked to wait {asked} s" in error.message
    assert "retry.max_delay_s (2 s)" in error.message
    assert error.hint is not None and "fallback" in error.hint and "max_delay_s" in error.hint
    assert waits == []
    assert len(mock.requests) == 1
    assert [(a.outcome, a.status) for a in error.result.attempts] == [("error", 429)]


async def test_a_wait_within_max_delay_is_waited_for(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    """The same fault with a wait the policy allows: waited for, then answered."""
    mock.queue(Reply(fault=Fault.http(429, retry_after=1.5)), Reply(text="after the wait"))
    reg = registry(mock_server)
    waits: list[float] = []
    t = turn(reg, "mockai:gpt-mock", tools=(), retry=POLICY)
    t.chain.sleep = recording_sleep(waits)
    result = await run_turn(t)
    await reg.aclose()
    assert result.text == "after the wait"
    assert len(waits) == 1 and 1.4 <= waits[0] <= 1.5
    assert [a.outcome for a in result.attempts] == ["error", "ok"]


async def test_a_cooling_provider_as_the_last_model_is_not_waited_for(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    """Both models on one provider: the 429 of the first cools the provider, and the last
    model of the chain, on the same provider, fails at once instead of waiting an hour."""
    mock.queue(Reply(fault=Fault.http(429, retry_after=3600)), model="gpt-mock")
    mock.queue(Reply(text="must not be asked"), model="gpt-backup")
    reg = registry(mock_server)
    waits: list[float] = []
    t = turn(reg, "mockai:gpt-mock", "mockai:gpt-backup", tools=(), retry=POLICY)
    t.chain.sleep = recording_sleep(waits)
    with pytest.raises(TurnError) as info:
        await run_turn(t)
    await reg.aclose()
    assert info.value.code is ErrorCode.PROVIDER_RATE_LIMIT
    assert "mockai:gpt-backup" in info.value.message and "3600 s" in info.value.message
    assert waits == []
    assert [r.body["model"] for r in mock.requests] == ["gpt-mock"]
    assert [(a.model, a.outcome) for a in info.value.result.attempts] == [
        ("mockai:gpt-mock", "error"),
        ("mockai:gpt-backup", "skipped"),
    ]
