"""Every fault the mock provider injects ends in the right code and retryable flag; fallback."""

from __future__ import annotations

import asyncio

import pytest

from agentrunner.agents.spec import RetryPolicy
from agentrunner.engine import TurnError, run_turn
from agentrunner.errors import ErrorCode
from agentrunner.testing import Fault, MockProvider, MockProviderServer, Reply
from tests.engine.helpers import Recorder, registry, turn

# One model a wire: Chat Completions, Anthropic Messages, OpenAI's Responses API.
BOTH = ["mockai:gpt-mock", "mockant:claude-mock", "mockresp:gpt-5-mock"]


async def fail(
    server: MockProviderServer, model: str, fault: Fault, *, timeout_s: float = 10.0
) -> TurnError:
    reg = registry(server, timeout_s=timeout_s)
    try:
        with pytest.raises(TurnError) as info:
            await run_turn(turn(reg, model))
    finally:
        await reg.aclose()
    return info.value


@pytest.mark.parametrize("model", BOTH)
@pytest.mark.parametrize(
    ("fault", "code", "retryable"),
    [
        (Fault.http(429, retry_after=0), ErrorCode.PROVIDER_RATE_LIMIT, True),
        (Fault.http(500), ErrorCode.PROVIDER_UNAVAILABLE, True),
        (Fault.http(503), ErrorCode.PROVIDER_UNAVAILABLE, True),
        (Fault.http(529), ErrorCode.PROVIDER_UNAVAILABLE, True),
        (Fault.http(503, text_body="upstream connect error"), ErrorCode.PROVIDER_UNAVAILABLE, True),
        (Fault.http(401), ErrorCode.PROVIDER_AUTH, False),
        (Fault.http(400), ErrorCode.VALIDATION, False),
        (Fault.http(404), ErrorCode.MODEL_NOT_FOUND, False),
        (Fault.drop_mid_stream(), ErrorCode.PROVIDER_UNAVAILABLE, True),
        (Fault.error_mid_stream("overloaded_error"), ErrorCode.PROVIDER_UNAVAILABLE, True),
    ],
    ids=[
        "429",
        "500",
        "503",
        "529",
        "503-text",
        "401",
        "400",
        "404",
        "drop",
        "overloaded-mid-stream",
    ],
)
async def test_fault_maps_to_code(
    mock_server: MockProviderServer,
    mock: MockProvider,
    model: str,
    fault: Fault,
    code: ErrorCode,
    retryable: bool,
) -> None:
    mock.queue(Reply(text="partial answer that will be cut", fault=fault))
    error = await fail(mock_server, model, fault)
    assert (error.code, error.retryable) == (code, retryable)
    assert error.stop_reason == "error" or error.code is not ErrorCode.CANCELLED
    assert "sk-mock-secret" not in error.message


@pytest.mark.parametrize("model", BOTH)
async def test_stalled_response_is_a_timeout(
    mock_server: MockProviderServer, mock: MockProvider, model: str
) -> None:
    mock.queue(Reply(text="late", fault=Fault.stall(2.0)))
    error = await fail(mock_server, model, Fault.stall(2.0), timeout_s=0.3)
    assert (error.code, error.retryable) == (ErrorCode.PROVIDER_UNAVAILABLE, True)
    assert "timed out" in error.message


@pytest.mark.parametrize("model", BOTH)
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "unstreamed"])
async def test_malformed_tool_arguments_go_back_to_the_model(
    mock_server: MockProviderServer, mock: MockProvider, model: str, stream: bool
) -> None:
    mock.queue(
        Reply.malformed_tool_call("get_weather"),
        Reply(tool_calls=[("get_weather", {"city": "Paris"})]),
        Reply(text="Sunny."),
    )
    reg = registry(mock_server)
    rec = Recorder()
    try:
        result = await run_turn(turn(reg, model, emit=rec, stream=stream))
    finally:
        await reg.aclose()
    assert result.text == "Sunny."
    first, second = rec.of("agent.tool_result")
    assert first["is_error"] and "not valid JSON" in first["output_summary"]
    assert second["success"]


async def test_primary_503_fails_over_and_costs_are_per_model(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    mock.queue(Reply(fault=Fault.http(503)), model="gpt-mock")
    mock.queue(
        Reply(text="from the backup", input_tokens=1000, output_tokens=500), model="gpt-backup"
    )
    reg = registry(mock_server)
    rec = Recorder()
    result = await run_turn(turn(reg, "mockai:gpt-mock", "mockai:gpt-backup", tools=(), emit=rec))
    await reg.aclose()
    assert result.text == "from the backup"
    assert result.model == "mockai:gpt-backup"
    costs = rec.of("cost.updated")
    assert [(c["model"], c["attempt"]) for c in costs] == [
        ("mockai:gpt-mock", 1),
        ("mockai:gpt-backup", 2),
    ]
    assert costs[0]["cost_micros"] == 0 and costs[0]["input_tokens"] == 0
    # 1000 × $0.5/Mtok + 500 × $1/Mtok = 1000 micro-dollars
    assert costs[1]["cost_micros"] == 1000
    assert costs[1]["cumulative_cost_micros"] == 1000
    [failed] = rec.of("model.attempt_failed")
    assert failed["error_code"] == "provider_unavailable" and failed["status"] == 503
    assert [(a.model, a.outcome) for a in result.attempts] == [
        ("mockai:gpt-mock", "error"),
        ("mockai:gpt-backup", "ok"),
    ]


async def test_bad_request_does_not_fail_over(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    mock.queue(Reply(fault=Fault.http(400)), model="gpt-mock")
    mock.queue(Reply(text="must not be used"), model="gpt-backup")
    reg = registry(mock_server)
    with pytest.raises(TurnError) as info:
        await run_turn(turn(reg, "mockai:gpt-mock", "mockai:gpt-backup", tools=()))
    await reg.aclose()
    assert info.value.code is ErrorCode.VALIDATION
    assert [r.body["model"] for r in mock.requests] == ["gpt-mock"]


@pytest.mark.parametrize("status", [401, 400])
async def test_auth_and_bad_request_are_not_retried(
    mock_server: MockProviderServer, mock: MockProvider, status: int
) -> None:
    mock.queue(Reply(fault=Fault.http(status)), Reply(text="no"))
    reg = registry(mock_server)
    with pytest.raises(TurnError):
        await run_turn(
            turn(reg, "mockai:gpt-mock", tools=(), retry=RetryPolicy(max=3, backoff="none"))
        )
    await reg.aclose()
    assert len(mock.requests) == 1


async def test_retry_after_is_honoured_exactly(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    mock.queue(Reply(fault=Fault.http(429, retry_after=1)), Reply(text="after the wait"))
    reg = registry(mock_server)
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(0)

    t = turn(
        reg,
        "mockai:gpt-mock",
        tools=(),
        retry=RetryPolicy(max=2, backoff="exponential", initial_delay_s=0.5),
    )
    t.chain.sleep = sleep
    result = await run_turn(t)
    await reg.aclose()
    assert result.text == "after the wait"
    assert len(waits) == 1 and 0.9 <= waits[0] <= 1.0


async def test_backoff_between_retries(mock_server: MockProviderServer, mock: MockProvider) -> None:
    mock.queue(Reply(fault=Fault.http(500)), Reply(fault=Fault.http(502)), Reply(text="third time"))
    reg = registry(mock_server)
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    t = turn(
        reg,
        "mockai:gpt-mock",
        tools=(),
        retry=RetryPolicy(max=3, backoff="exponential", initial_delay_s=0.25),
    )
    t.chain.sleep = sleep
    assert (await run_turn(t)).text == "third time"
    await reg.aclose()
    assert waits == [0.25, 0.5]


async def test_long_retry_after_fails_over_and_cools_the_provider(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    mock.queue(Reply(fault=Fault.http(429, retry_after=120)), model="gpt-mock")
    mock.queue(
        Reply(tool_calls=[("get_weather", {"city": "Oslo"})]),
        Reply(text="cold"),
        model="claude-mock",
    )
    reg = registry(mock_server)
    t = turn(
        reg, "mockai:gpt-mock", "mockant:claude-mock", retry=RetryPolicy(max=2, backoff="none")
    )
    result = await run_turn(t)
    await reg.aclose()
    assert result.text == "cold"
    # The second request of the tool loop skips the cooling provider instead of waiting 120 s.
    assert [r.body["model"] for r in mock.requests] == ["gpt-mock", "claude-mock", "claude-mock"]
    assert [a.outcome for a in result.attempts] == ["error", "ok", "skipped", "ok"]


async def test_mock_rejects_a_dangling_tool_call(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    from agentrunner.engine import AssistantMessage, ToolCall, UserMessage

    for model in BOTH:
        reg = registry(mock_server)
        t = turn(reg, model, tools=())
        t.messages = [
            UserMessage("hi"),
            AssistantMessage(tool_calls=[ToolCall("call_1", "get_weather", {})]),
            UserMessage("again"),
        ]
        with pytest.raises(TurnError) as info:
            await run_turn(t)
        await reg.aclose()
        assert info.value.code is ErrorCode.VALIDATION
        assert "call_1" in info.value.message
