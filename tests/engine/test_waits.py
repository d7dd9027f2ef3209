"""Provider waits are bounded by the retry policy: a wait longer than ``retry.max_delay_s`` is
never waited for — the chain fails over at once, or with no model left fails at once with the
asked wait in the message. No timed assertions: waits are recorded by a fake ``sleep``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from agentrunner.agents.spec import RetryPolicy
from agentrunner.engine import Engine, TurnError, run_turn
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


# -- 503 and 529 with retry-after: honoured as a 429's is -------------------------------------


def bare(ref: str) -> str:
    return ref.partition(":")[2]


UNAVAILABLE = [
    (503, "mockai:gpt-mock", "mockant:claude-mock"),
    (529, "mockant:claude-mock", "mockai:gpt-mock"),
]


@pytest.mark.parametrize(("status", "primary", "backup"), UNAVAILABLE)
async def test_an_unavailable_provider_asking_past_max_delay_is_failed_over_at_once(
    mock_server: MockProviderServer, mock: MockProvider, status: int, primary: str, backup: str
) -> None:
    mock.queue(Reply(fault=Fault.http(status, retry_after=86400)), model=bare(primary))
    mock.queue(Reply(text="from the backup"), model=bare(backup))
    reg = registry(mock_server)
    waits: list[float] = []
    t = turn(reg, primary, backup, tools=(), retry=POLICY)
    t.chain.sleep = recording_sleep(waits)
    result = await run_turn(t)
    await reg.aclose()
    assert (result.text, result.model) == ("from the backup", backup)
    assert waits == []
    assert [r.body["model"] for r in mock.requests] == [bare(primary), bare(backup)]
    assert [(a.model, a.outcome, a.status) for a in result.attempts] == [
        (primary, "error", status),
        (backup, "ok", None),
    ]


@pytest.mark.parametrize("status", [503, 529])
async def test_a_day_s_rest_asked_of_the_only_provider_fails_the_turn_at_once(
    mock_server: MockProviderServer, mock: MockProvider, status: int
) -> None:
    """Both models on the provider that asked for a day's rest, with the default retry policy
    (two tries each): one request in all, not four, and the turn fails at once with the wait
    the provider asked for."""
    mock.queue(Reply(fault=Fault.http(status, retry_after=86400)), model="gpt-mock")
    mock.queue(Reply(text="must not be asked"), model="gpt-backup")
    reg = registry(mock_server)
    waits: list[float] = []
    t = turn(reg, "mockai:gpt-mock", "mockai:gpt-backup", tools=(), retry=RetryPolicy())
    t.chain.sleep = recording_sleep(waits)
    with pytest.raises(TurnError) as info:
        await run_turn(t)
    await reg.aclose()
    error = info.value
    assert error.code is ErrorCode.PROVIDER_UNAVAILABLE
    assert f"({status})" in error.message and "asked to wait 86400 s" in error.message
    assert "retry.max_delay_s (20 s)" in error.message
    assert error.hint is not None and "fallback" in error.hint
    assert waits == []
    assert [r.body["model"] for r in mock.requests] == ["gpt-mock"]
    assert [(a.model, a.outcome, a.status) for a in error.result.attempts] == [
        ("mockai:gpt-mock", "error", status),
        ("mockai:gpt-backup", "skipped", None),
    ]


@pytest.mark.parametrize(("status", "asked"), [(503, 1.5), (529, 0.75)])
async def test_an_unavailable_provider_s_shorter_wait_is_the_wait(
    mock_server: MockProviderServer, mock: MockProvider, status: int, asked: float
) -> None:
    """Within the policy's max_delay_s the provider's wait is waited, not the backoff's (none
    here): two different asked waits, two different waits."""
    mock.queue(Reply(fault=Fault.http(status, retry_after=asked)), Reply(text="after the wait"))
    reg = registry(mock_server)
    waits: list[float] = []
    t = turn(reg, "mockai:gpt-mock", tools=(), retry=POLICY)
    t.chain.sleep = recording_sleep(waits)
    result = await run_turn(t)
    await reg.aclose()
    assert result.text == "after the wait"
    assert len(waits) == 1 and asked - 0.1 <= waits[0] <= asked
    assert [(a.outcome, a.status) for a in result.attempts] == [("error", status), ("ok", None)]
    assert len(mock.requests) == 2


async def test_a_provider_s_asked_wait_holds_for_the_process_s_other_runs(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    """A run's 503 with an hour's retry-after: a later run of the same engine skips that
    provider without asking it; another engine (another process) asks it."""
    mock.queue(Reply(fault=Fault.http(503, retry_after=3600)), model="gpt-mock")
    engine = Engine(registry(mock_server))
    served = []
    for _ in range(2):
        mock.queue(Reply(text="from the backup"), model="claude-mock")
        chain = engine.chain(["mockai:gpt-mock", "mockant:claude-mock"], POLICY)
        result = await engine.run(chain=chain, message="hi")
        served.append([(a.model, a.outcome) for a in result.attempts])
    await engine.aclose()
    assert served == [
        [("mockai:gpt-mock", "error"), ("mockant:claude-mock", "ok")],
        [("mockai:gpt-mock", "skipped"), ("mockant:claude-mock", "ok")],
    ]
    assert [r.body["model"] for r in mock.requests] == ["gpt-mock", "claude-mock", "claude-mock"]
    elsewhere = Engine(registry(mock_server))
    result = await elsewhere.run(model="mockai:gpt-mock", message="hi", retry=POLICY)
    await elsewhere.aclose()
    assert result.attempts[0].outcome == "ok" and mock.requests[-1].body["model"] == "gpt-mock"


async def test_attempts_are_numbered_as_made_a_skipped_one_is_not_counted(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    """Seed 001: the primary tried twice, the second model skipped (its provider asked for an
    hour's rest), the third answering: attempts 1, 2 and 3 (the skip numbered 0), and the
    charges and failures said with those numbers (they were 1, 2 and 4)."""
    engine = Engine(registry(mock_server))
    mock.queue(Reply(fault=Fault.http(503, retry_after=3600)), model="claude-mock")
    with pytest.raises(TurnError):  # the rest asked of the second model's provider
        await engine.run(model="mockant:claude-mock", message="hi", retry=POLICY)
    mock.queue(Reply(fault=Fault.http(500)), Reply(fault=Fault.http(500)), model="gpt-mock")
    mock.queue(Reply(text="third time"), model="gpt-other")
    retry = RetryPolicy(max=2, backoff="none", max_delay_s=2)
    chain = engine.chain(["mockai:gpt-mock", "mockant:claude-mock", "mockai:gpt-other"], retry)
    said: list[tuple[str, object]] = []
    result = await engine.run(chain=chain, message="hi", emit=lambda k, d: said.append((k, d)))
    await engine.aclose()
    assert result.text == "third time"
    assert [(a.number, a.model, a.outcome) for a in result.attempts] == [
        (1, "mockai:gpt-mock", "error"),
        (2, "mockai:gpt-mock", "error"),
        (0, "mockant:claude-mock", "skipped"),
        (3, "mockai:gpt-other", "ok"),
    ]
    charged = [d["attempt"] for k, d in said if k == "cost.updated"]  # type: ignore[index]
    failed = [d["attempt"] for k, d in said if k == "model.attempt_failed"]  # type: ignore[index]
    assert (charged, failed) == ([1, 2, 3], [1, 2])
