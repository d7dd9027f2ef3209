"""A model that failed (its tries spent on failures that may pass) is tried after the others:
by its chain for the rest of the run, and by every chain of the process for ``FAILED_REST_S``,
as a provider's asked wait holds for the process. A dead primary costs its retries once, not
at every step. Connections to the dead provider are counted where the provider is: a port that
refuses them (nothing listens: counted by the attempts made), or one that takes each connection
and drops it before answering (counted by the port)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from agentrunner.agents.spec import RetryPolicy
from agentrunner.config import ProviderConfig
from agentrunner.engine import Engine, FallbackChain, Turn, TurnError, UserMessage, run_turn
from agentrunner.errors import ErrorCode
from agentrunner.testing import Fault, MockProvider, MockProviderServer, Reply
from tests.engine.helpers import get_weather, registry

DEAD = "dead:gpt-dead"
BACKUP = "mockant:claude-mock"


@contextlib.asynccontextmanager
async def dead_port(how: str) -> AsyncIterator[tuple[str, list[int]]]:
    """The base URL of a provider that is down, and the connections it took (none taken when
    it refuses them)."""
    taken: list[int] = []
    if how == "refused":
        with socket.socket() as probe:  # a port nothing listens on
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        yield f"http://127.0.0.1:{port}/v1", taken
        return

    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        taken.append(1)
        writer.transport.abort()

    listener = await asyncio.start_server(drop, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}/v1", taken
    finally:
        listener.close()


def recording_sleep(waits: list[float]) -> Callable[[float], Awaitable[None]]:
    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(0)

    return sleep


def a_run(chain: FallbackChain, waits: list[float]) -> Turn:
    """A run of three steps (two tool calls, then the answer) on ``chain``."""
    chain.sleep = recording_sleep(waits)
    return Turn(
        system="You are helpful.",
        messages=[UserMessage("Weather in Paris, then Oslo?")],
        chain=chain,
        tools=[get_weather],
    )


def three_steps(mock: MockProvider) -> None:
    mock.queue(
        Reply(tool_calls=[("get_weather", {"city": "Paris"})]),
        Reply(tool_calls=[("get_weather", {"city": "Oslo"})]),
        Reply(text="Sunny in both."),
        model="claude-mock",
    )


@pytest.mark.parametrize("how", ["refused", "dropped"])
async def test_a_dead_primary_costs_its_retries_once_a_run(
    mock_server: MockProviderServer, mock: MockProvider, how: str
) -> None:
    async with dead_port(how) as (url, taken):
        reg = registry(mock_server)
        reg.providers["dead"] = ProviderConfig("dead", "openai", url, "MOCK_KEY")
        engine = Engine(reg)
        waits: list[float] = []
        three_steps(mock)
        result = await run_turn(a_run(engine.chain([DEAD, BACKUP], RetryPolicy()), waits))
        assert result.text == "Sunny in both." and result.model == BACKUP
        tried = [(a.model, a.outcome, a.error_kind) for a in result.attempts]
        assert tried == [
            (DEAD, "error", "connection"),
            (DEAD, "error", "connection"),
            (BACKUP, "ok", None),
            (BACKUP, "ok", None),
            (BACKUP, "ok", None),
        ]
        assert waits == [0.5]  # one backoff, between the dead primary's two tries
        assert len(taken) == (2 if how == "dropped" else 0)
        assert [r.body["model"] for r in mock.requests] == ["claude-mock"] * 3

        # Another run of the process, at once: the backup first, the primary not asked.
        three_steps(mock)
        again = await run_turn(a_run(engine.chain([DEAD, BACKUP], RetryPolicy()), waits))
        assert again.text == "Sunny in both."
        assert [(a.model, a.outcome) for a in again.attempts] == [(BACKUP, "ok")] * 3
        assert len(taken) == (2 if how == "dropped" else 0) and waits == [0.5]

        # An hour later the rest is over: the primary is tried first again (and still fails).
        three_steps(mock)
        later = engine.chain([DEAD, BACKUP], RetryPolicy())
        later.clock = lambda: time.monotonic() + 3600
        result = await run_turn(a_run(later, waits))
        assert [a.model for a in result.attempts] == [DEAD, DEAD, BACKUP, BACKUP, BACKUP]
        assert len(taken) == (4 if how == "dropped" else 0)
        await engine.aclose()


async def test_another_engine_is_another_process(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    """What one engine learnt of a dead provider is not another's: the second tries it."""
    async with dead_port("dropped") as (url, taken):
        firsts = []
        for _ in range(2):
            reg = registry(mock_server)
            reg.providers["dead"] = ProviderConfig("dead", "openai", url, "MOCK_KEY")
            engine = Engine(reg)
            three_steps(mock)
            result = await run_turn(a_run(engine.chain([DEAD, BACKUP], RetryPolicy()), []))
            firsts.append(result.attempts[0].model)
            await engine.aclose()
        assert firsts == [DEAD, DEAD] and len(taken) == 4


async def test_a_model_that_failed_is_still_the_last_resort_and_first_again_once_it_answers(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    """Step 1: the primary fails, the backup answers. Step 2: the backup (now first) fails,
    and the primary, tried last, answers. Step 3: the primary is first again."""
    mock.queue(
        Reply(fault=Fault.http(500)),
        Reply(tool_calls=[("get_weather", {"city": "Oslo"})]),
        Reply(text="Sunny in both."),
        model="gpt-mock",
    )
    mock.queue(
        Reply(tool_calls=[("get_weather", {"city": "Paris"})]),
        Reply(fault=Fault.http(502)),
        model="claude-mock",
    )
    engine = Engine(registry(mock_server))
    chain = engine.chain(["mockai:gpt-mock", BACKUP], RetryPolicy(max=1))
    result = await run_turn(a_run(chain, []))
    await engine.aclose()
    assert result.text == "Sunny in both."
    assert [(a.model, a.outcome, a.status) for a in result.attempts] == [
        ("mockai:gpt-mock", "error", 500),
        (BACKUP, "ok", None),
        (BACKUP, "error", 502),
        ("mockai:gpt-mock", "ok", None),
        ("mockai:gpt-mock", "ok", None),
    ]
    assert chain.failed == {BACKUP}
    assert list(engine.cooldowns.failed) == [BACKUP]


async def test_every_model_failing_fails_the_run_with_the_last_error(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    mock.queue(Reply(fault=Fault.http(503)), model="gpt-mock")
    mock.queue(Reply(fault=Fault.http(500)), model="claude-mock")
    engine = Engine(registry(mock_server))
    chain = engine.chain(["mockai:gpt-mock", BACKUP], RetryPolicy(max=1))
    with pytest.raises(TurnError) as info:
        await run_turn(a_run(chain, []))
    await engine.aclose()
    assert info.value.code is ErrorCode.PROVIDER_UNAVAILABLE and "500" in info.value.message
    assert chain.failed == {"mockai:gpt-mock", BACKUP}
