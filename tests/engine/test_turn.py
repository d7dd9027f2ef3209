"""The turn core: events, tools, limits, budgets, structured output, cancellation."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from dirty_equals import IsStr
from inline_snapshot import snapshot

from agentrunner.config import ProviderConfig
from agentrunner.engine import (
    AbortSignal,
    AssistantMessage,
    ChainEntry,
    CostTracker,
    FallbackChain,
    FunctionModel,
    ModelRegistry,
    ModelRequest,
    ScriptedModel,
    Tool,
    ToolCall,
    ToolContext,
    ToolDenied,
    ToolResult,
    ToolRetry,
    Turn,
    TurnError,
    TurnLimits,
    UserMessage,
    run_turn,
    tool,
)
from agentrunner.engine.models import ResolvedModel
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.testing import MockProvider, MockProviderServer, Reply
from tests.conftest import cut_off
from tests.engine.helpers import Recorder, get_weather, registry, turn


def scripted_turn(model: Any, *, tools: list[Tool] | None = None, **kwargs: Any) -> Turn:
    resolved = ResolvedModel("scripted:m", ProviderConfig("scripted", "test"), "m")
    return Turn(
        system="sys",
        messages=[UserMessage("go")],
        chain=FallbackChain([ChainEntry(resolved, model)]),
        tools=tools if tools is not None else [get_weather],
        **kwargs,
    )


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall(f"c_{name}_{len(args)}", name, args)


async def test_events_in_order_for_a_streamed_tool_turn(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    mock.queue(
        Reply(thinking="Let me check.", tool_calls=[("get_weather", {"city": "Paris"})]),
        Reply(text="It is sunny in Paris."),
    )
    reg = registry(mock_server)
    rec = Recorder()
    t = turn(reg, "mockant:claude-mock", emit=rec)
    result = await run_turn(t)
    await reg.aclose()
    assert rec.events == snapshot(
        [
            ("step.started", {"step": 1, "model": "mockant:claude-mock"}),
            ("agent.thinking", {"text": "Let ", "model": "mockant:claude-mock"}),
            ("agent.thinking", {"text": "me c", "model": "mockant:claude-mock"}),
            ("agent.thinking", {"text": "heck", "model": "mockant:claude-mock"}),
            ("agent.thinking", {"text": ".", "model": "mockant:claude-mock"}),
            (
                "cost.updated",
                {
                    "model": "mockant:claude-mock",
                    "attempt": 1,
                    "outcome": "ok",
                    "input_tokens": 20,
                    "output_tokens": 8,
                    "cache_read_tokens": 0,
                    "cache_write_tokens": 0,
                    "cost_micros": 180,
                    "cost_known": True,
                    "estimated": False,
                    "cumulative_cost_micros": 180,
                },
            ),
            (
                "agent.tool_call",
                {
                    "call_id": IsStr(regex=r"toolu_\d+_\d+"),
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                    "model": "mockant:claude-mock",
                },
            ),
            (
                "agent.tool_result",
                {
                    "call_id": IsStr(regex=r"toolu_\d+_\d+"),
                    "name": "get_weather",
                    "success": True,
                    "is_error": False,
                    "output_summary": "Sunny, 22C in Paris",
                    "output": "Sunny, 22C in Paris",
                },
            ),
            ("step.started", {"step": 2, "model": "mockant:claude-mock"}),
            ("agent.token", {"token": "It is s", "model": "mockant:claude-mock"}),
            ("agent.token", {"token": "unny in", "model": "mockant:claude-mock"}),
            ("agent.token", {"token": " Paris.", "model": "mockant:claude-mock"}),
            (
                "cost.updated",
                {
                    "model": "mockant:claude-mock",
                    "attempt": 2,
                    "outcome": "ok",
                    "input_tokens": 20,
                    "output_tokens": 5,
                    "cache_read_tokens": 0,
                    "cache_write_tokens": 0,
                    "cost_micros": 135,
                    "cost_known": True,
                    "estimated": False,
                    "cumulative_cost_micros": 315,
                },
            ),
            ("agent.message", {"text": "It is sunny in Paris.", "model": "mockant:claude-mock"}),
        ]
    )
    assert result.usage.requests == 2 and result.tool_calls == 1
    # The thinking block (with its signature) is kept in history and replayed to Anthropic.
    assistant = t.messages[1]
    assert isinstance(assistant, AssistantMessage) and assistant.thinking[0].signature
    followup = mock.requests[1].body["messages"][1]["content"]
    assert (
        followup[0]["type"] == "thinking"
        and followup[0]["signature"] == assistant.thinking[0].signature
    )


async def test_tool_calls_of_one_response_run_concurrently() -> None:
    started = {"a": asyncio.Event(), "b": asyncio.Event()}

    def make(name: str, other: str) -> Tool:
        async def fn(args: dict[str, Any], ctx: ToolContext) -> str:
            started[name].set()
            await asyncio.wait_for(started[other].wait(), 2)  # deadlocks if run one by one
            return f"{name} done"

        return Tool(name, "", {"type": "object"}, fn)

    model = ScriptedModel([[call("a"), call("b")], "both finished"])
    result = await run_turn(scripted_turn(model, tools=[make("a", "b"), make("b", "a")]))
    assert result.text == "both finished"
    results = [m for m in result.new_messages if isinstance(m, ToolResult)]
    assert [r.content for r in results] == ["a done", "b done"]


async def test_unknown_tool_and_invalid_arguments_are_fed_back() -> None:
    model = ScriptedModel(
        [[call("nope")], [ToolCall("c2", "get_weather", {"town": "Paris"})], "ok"]
    )
    rec = Recorder()
    result = await run_turn(scripted_turn(model, emit=rec))
    assert result.text == "ok"
    first, second = (m for m in result.new_messages if isinstance(m, ToolResult))
    assert first.is_error and first.content == "Unknown tool 'nope'. Available tools: get_weather."
    assert second.is_error and "city" in second.content


async def test_correction_budget_then_tool_failed() -> None:
    model = ScriptedModel([[call("nope")] for _ in range(5)])
    with pytest.raises(TurnError) as info:
        await run_turn(scripted_turn(model, limits=TurnLimits(max_corrections=2)))
    assert info.value.code is ErrorCode.TOOL_FAILED
    assert info.value.stop_reason == "invalid_tool_call"


async def test_tool_retry_is_fed_back() -> None:
    attempts = []

    @tool
    def flaky(n: int) -> str:
        """Fails the first time."""
        attempts.append(n)
        if len(attempts) == 1:
            raise ToolRetry("n must be even")
        return "fine"

    model = ScriptedModel(
        [[ToolCall("x1", "flaky", {"n": 1})], [ToolCall("x2", "flaky", {"n": 2})], "done"]
    )
    result = await run_turn(scripted_turn(model, tools=[flaky]))
    assert result.text == "done"
    assert [m.content for m in result.new_messages if isinstance(m, ToolResult)] == [
        "n must be even",
        "fine",
    ]


async def test_a_sync_tool_runs_on_a_worker_thread_and_an_async_one_on_the_loop() -> None:
    threads: dict[str, int] = {}

    @tool
    def plain(city: str) -> str:
        """A plain function."""
        threads["plain"] = threading.get_ident()
        return f"plain {city}"

    @tool
    async def coroutine(city: str) -> str:
        """A coroutine function."""
        threads["coroutine"] = threading.get_ident()
        return f"coroutine {city}"

    model = ScriptedModel([[call("plain", city="Oslo"), call("coroutine", city="Rome")], "done"])
    result = await run_turn(scripted_turn(model, tools=[plain, coroutine]))
    assert threads["coroutine"] == threading.get_ident()  # the loop's
    assert threads["plain"] != threading.get_ident()
    answers = [m.content for m in result.new_messages if isinstance(m, ToolResult)]
    assert answers == ["plain Oslo", "coroutine Rome"]


async def test_a_sync_tool_that_waits_leaves_the_loop_free() -> None:
    """The tool waits for the loop to release it: it can only if the tool is not on the loop
    (there, the detector of tests/conftest.py refuses the wait; without it, it would time out)."""
    waiting, released = threading.Event(), threading.Event()

    @tool
    def wait_for_release() -> bool:
        """Waits until released."""
        waiting.set()
        return released.wait(timeout=30)

    async def release() -> None:
        while not waiting.is_set():
            await asyncio.sleep(0.001)
        released.set()

    model = ScriptedModel([[call("wait_for_release")], "done"])
    releasing = asyncio.create_task(release())
    result = await run_turn(scripted_turn(model, tools=[wait_for_release]))
    await releasing
    answers = [m.content for m in result.new_messages if isinstance(m, ToolResult)]
    assert answers == ["true"] and result.text == "done"


async def test_denied_tool_is_not_fed_back() -> None:
    @tool
    def delete_all() -> str:
        """Never allowed."""
        raise ToolDenied("delete_all is not allowed here")

    model = ScriptedModel([[ToolCall("d1", "delete_all", {})], "should not be asked"])
    t = scripted_turn(model, tools=[delete_all])
    with pytest.raises(TurnError) as info:
        await run_turn(t)
    assert info.value.code is ErrorCode.TOOL_DENIED and not info.value.retryable
    assert "delete_all is not allowed here" in info.value.message
    assert len(model.requests) == 1
    assert isinstance(t.messages[-1], ToolResult)  # the history can still be resent


async def test_crashing_tool_is_tool_failed() -> None:
    @tool
    def boom() -> str:
        """Crashes."""
        raise RuntimeError("disk on fire")

    with pytest.raises(TurnError) as info:
        await run_turn(scripted_turn(ScriptedModel([[ToolCall("b1", "boom", {})]]), tools=[boom]))
    assert info.value.code is ErrorCode.TOOL_FAILED and info.value.retryable
    assert "disk on fire" in info.value.message


async def test_max_steps_is_turn_limit() -> None:
    model = ScriptedModel([[ToolCall(f"w{i}", "get_weather", {"city": "X"})] for i in range(5)])
    with pytest.raises(TurnError) as info:
        await run_turn(scripted_turn(model, limits=TurnLimits(max_steps=3)))
    assert info.value.code is ErrorCode.TURN_LIMIT and info.value.stop_reason == "max_steps"
    assert len(model.requests) == 3


async def test_max_tool_calls_and_max_tokens() -> None:
    model = ScriptedModel(
        [[call("get_weather", city="a"), ToolCall("z", "get_weather", {"city": "b"})]]
    )
    with pytest.raises(TurnError) as info:
        await run_turn(scripted_turn(model, limits=TurnLimits(max_tool_calls=1)))
    assert info.value.code is ErrorCode.TURN_LIMIT
    model = ScriptedModel([[call("get_weather", city="a")], "never"])
    with pytest.raises(TurnError) as info:
        await run_turn(scripted_turn(model, limits=TurnLimits(max_tokens=1)))
    assert info.value.stop_reason == "max_tokens_exceeded"
    assert len(model.requests) == 1


async def test_budget_is_checked_before_each_request(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    # Each request costs 100,000 × $1/Mtok = $0.10 at gpt-mock's override price.
    mock.queue(
        *(
            Reply(
                tool_calls=[("get_weather", {"city": "Rome"})],
                input_tokens=100_000,
                output_tokens=0,
            )
            for _ in range(5)
        )
    )
    reg = registry(mock_server)
    tracker = CostTracker()
    with pytest.raises(TurnError) as info:
        await run_turn(
            turn(reg, "mockai:gpt-mock", limits=TurnLimits(max_budget_micros=250_000), cost=tracker)
        )
    await reg.aclose()
    assert (
        info.value.code is ErrorCode.BUDGET_EXCEEDED and info.value.stop_reason == "budget_exceeded"
    )
    assert len(mock.requests) == 2  # a third would have overshot $0.25
    assert tracker.micros == 200_000 <= 250_000
    message = info.value.message
    assert "the run's budget of $0.2500 has $0.0500 left ($0.2000 spent" in message
    assert "the next request needs at least $0.1" in message  # it learnt the input's true size


async def test_child_costs_count_against_the_parent_budget() -> None:
    parent = CostTracker()
    child = parent.child()
    from agentrunner.engine import Usage

    child.add(700, Usage(input_tokens=5))
    assert (parent.micros, parent.usage.input_tokens) == (700, 5)
    child.add(None, Usage())
    assert not parent.known


SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city", "population"],
    "additionalProperties": False,
}


async def test_structured_output_validated_with_correction() -> None:
    model = ScriptedModel(
        ['{"city": "Paris"}', '```json\n{"city": "Paris", "population": 2100000}\n```']
    )
    result = await run_turn(scripted_turn(model, tools=[], output_schema=SCHEMA))
    assert result.output == {"city": "Paris", "population": 2100000}
    [correction] = [m for m in result.new_messages if isinstance(m, UserMessage)]
    assert "population" in correction.content


async def test_structured_output_gives_up_with_validation() -> None:
    model = ScriptedModel(["not json", "still not", "nope"])
    with pytest.raises(TurnError) as info:
        await run_turn(
            scripted_turn(
                model, tools=[], output_schema=SCHEMA, limits=TurnLimits(max_output_retries=2)
            )
        )
    assert info.value.code is ErrorCode.VALIDATION
    assert "not valid JSON" in info.value.message


async def test_structured_output_is_requested_natively(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    mock.queue(
        Reply(text='{"city": "Oslo", "population": 700000}'),
        Reply(text='{"city": "Oslo", "population": 700000}'),
    )
    reg = registry(mock_server)
    for model in ("mockai:gpt-mock", "mockant:claude-mock"):
        result = await run_turn(turn(reg, model, tools=(), output_schema=SCHEMA))
        assert result.output == {"city": "Oslo", "population": 700000}
    await reg.aclose()
    openai_body, anthropic_body = (r.body for r in mock.requests)
    assert openai_body["response_format"]["json_schema"]["schema"] == SCHEMA
    assert openai_body["response_format"]["json_schema"]["strict"] is True
    assert anthropic_body["output_config"]["format"]["schema"] == SCHEMA


async def test_prompted_structured_output_for_servers_without_it() -> None:
    seen: list[ModelRequest] = []

    def answer(request: ModelRequest) -> str:
        seen.append(request)
        return '{"city": "Lima", "population": 10}'

    reg = ModelRegistry(
        {
            "local": ProviderConfig(
                "local", "openai", "http://127.0.0.1:1/v1", structured_output="prompted"
            )
        }
    )
    local = reg.resolve("local:llama")
    t = scripted_turn(FunctionModel(answer), tools=[], output_schema=SCHEMA)
    t.chain = FallbackChain([ChainEntry(local, FunctionModel(answer))])
    result = await run_turn(t)
    assert result.output["city"] == "Lima"
    assert seen[0].output_schema is None and "JSON Schema" in seen[0].system


async def test_length_finish_is_max_tokens_exceeded(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    mock.queue(Reply(text="cut off mid-sent", finish="length"))
    reg = registry(mock_server)
    result = await run_turn(turn(reg, "mockai:gpt-mock", tools=()))
    await reg.aclose()
    assert result.stop_reason == "max_tokens_exceeded" and result.text == "cut off mid-sent"


async def test_content_filter(mock_server: MockProviderServer, mock: MockProvider) -> None:
    mock.queue(Reply(text="I can't help with that.", finish="content_filter"))
    reg = registry(mock_server)
    with pytest.raises(TurnError) as info:
        await run_turn(turn(reg, "mockant:claude-mock", tools=()))
    await reg.aclose()
    assert info.value.code is ErrorCode.CONTENT_FILTER and not info.value.retryable


# -- cancellation ------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["mockai:gpt-mock", "mockant:claude-mock"])
async def test_cancel_mid_stream(
    mock_server: MockProviderServer, mock: MockProvider, model: str
) -> None:
    mock.queue(Reply(text="word " * 100, chunk_delay_s=0.02))
    reg = registry(mock_server)
    abort = AbortSignal()
    rec = Recorder()
    t = turn(reg, model, tools=(), emit=rec, abort=abort)
    before = asyncio.all_tasks()
    task = asyncio.ensure_future(run_turn(t))
    await asyncio.sleep(0.3)
    seen = len(rec.events)
    assert rec.of("agent.token"), "tokens should be streaming when the abort comes"
    aborted_at = time.perf_counter()
    abort.abort("user pressed Ctrl-C")
    with pytest.raises(TurnError) as info:
        await task
    latency = time.perf_counter() - aborted_at
    await asyncio.sleep(0.05)
    assert info.value.code is ErrorCode.CANCELLED and info.value.stop_reason == "cancelled"
    assert latency < 0.1
    # Nothing after the abort but what the cut-off request cost, estimated: the provider sent
    # no usage, and the input and the streamed words were billed all the same.
    [(kind, cost)] = rec.events[seen:]
    assert kind == "cost.updated" and cost["estimated"] and cost["outcome"] == "cancelled"
    streamed = "".join(e["token"] for e in rec.of("agent.token"))
    assert cost["output_tokens"] >= len(streamed) // 4 > 0 and cost["input_tokens"] > 0
    assert cost["cost_micros"] > 0  # mockai/mockant are priced
    result = info.value.result
    assert result.usage.estimated and result.usage.output_tokens == cost["output_tokens"]
    assert result.cost_micros == cost["cost_micros"]
    assert asyncio.all_tasks() <= before | {asyncio.current_task()}
    partial = t.messages[-1]
    assert isinstance(partial, AssistantMessage) and partial.text == streamed
    assert partial.interrupted
    client = reg.client(reg.resolve(model))
    pool = client._client._transport._pool  # type: ignore[attr-defined]
    assert all(c.is_idle() or c.is_closed() for c in pool.connections)
    await reg.aclose()


async def charged_cut_off(reg: ModelRegistry, model: str, message: str, limit: int | None) -> int:
    """The input tokens charged for a one-tool request to ``model`` cancelled mid-stream."""
    abort, rec = AbortSignal(), Recorder()
    t = turn(reg, model, message=message, emit=rec, abort=abort, cost=CostTracker(limit=limit))
    task = asyncio.ensure_future(run_turn(t))
    while not rec.of("agent.token"):  # the reply has begun: the request is in flight
        await asyncio.sleep(0.01)
    abort.abort("Ctrl-C")
    with pytest.raises(TurnError):
        await task
    [cost] = rec.of("cost.updated")
    assert cost["estimated"] and cost["outcome"] == "cancelled"
    return int(cost["input_tokens"])


@pytest.mark.parametrize(
    ("model", "limit"), [("mockai:gpt-mock", None), ("mockant:claude-mock", 10_000_000)]
)
async def test_a_request_cut_off_is_charged_the_size_of_what_was_sent(
    mock_server: MockProviderServer, mock: MockProvider, model: str, limit: int | None
) -> None:
    """A cancelled request is charged its own size (erring high, as every estimate here),
    not the worst case its budget hold pads it to: measured against what the mock bills for
    the same request body completed, for a short and a long message, with a budget in force
    and without one."""
    mock.count_input_tokens = True  # bills each request's real size
    reg = registry(mock_server)
    billed, charged = {}, {}
    for size, message in (
        ("short", "Weather in Paris?"),
        ("long", "Weather in Paris? " + "Tell me more about the city and its seasons. " * 60),
    ):
        rec = Recorder()
        mock.queue(Reply(text="Sunny.", input_tokens=None))
        await run_turn(turn(reg, model, message=message, emit=rec, cost=CostTracker(limit=limit)))
        billed[size] = rec.of("cost.updated")[0]["input_tokens"]
        mock.queue(Reply(text="word " * 200, chunk_delay_s=0.02, input_tokens=None))
        charged[size] = await charged_cut_off(reg, model, message, limit)
    await reg.aclose()
    for size in ("short", "long"):
        assert billed[size] <= charged[size] <= 1.5 * billed[size], (size, billed, charged)
    added, billed_added = charged["long"] - charged["short"], billed["long"] - billed["short"]
    assert billed_added <= added <= 1.5 * billed_added  # the longer message, charged as longer


@pytest.mark.parametrize("deadline", ["wait_for", "timeout"])
@pytest.mark.parametrize("signal", [False, True])
async def test_a_deadline_around_a_turn_ends_in_timeout_error(
    mock_server: MockProviderServer, mock: MockProvider, deadline: str, signal: bool
) -> None:
    # The caller's own deadline cancels the task running the turn: asyncio turns that
    # cancellation into TimeoutError only when the task ends in CancelledError itself
    # (asyncio.timeout checks the type, not whether it is a subclass, before Python 3.13).
    mock.queue(Reply(text="word " * 3000, chunk_delay_s=0.01))
    reg = registry(mock_server)
    rec = Recorder()
    speaking = asyncio.Event()

    def emit(kind: str, data: dict[str, Any]) -> None:
        rec(kind, data)
        if kind == "agent.token":
            speaking.set()

    t = turn(reg, "mockai:gpt-mock", tools=(), emit=emit, abort=AbortSignal() if signal else None)
    running = asyncio.ensure_future(run_turn(t))
    await asyncio.wait_for(speaking.wait(), timeout=30)  # cut off mid-answer, however slow
    with pytest.raises(TimeoutError):
        await cut_off(running, deadline, 0.05)
    await reg.aclose()
    assert running.cancelled()
    streamed = "".join(e["token"] for e in rec.of("agent.token"))
    partial = t.messages[-1]
    assert isinstance(partial, AssistantMessage) and partial.interrupted
    assert partial.text == streamed and streamed.startswith("word")


async def test_cancel_during_tool_answers_the_call() -> None:
    abort = AbortSignal()

    @tool
    async def slow() -> str:
        """Takes a while."""
        abort.abort()
        await asyncio.sleep(10)
        return "never"

    t = scripted_turn(ScriptedModel([[ToolCall("s1", "slow", {})]]), tools=[slow], abort=abort)
    with pytest.raises(TurnError) as info:
        await run_turn(t)
    assert info.value.code is ErrorCode.CANCELLED
    last = t.messages[-1]
    assert isinstance(last, ToolResult) and last.is_error and "interrupted" in last.content


async def test_cancellation_wins_over_other_failures() -> None:
    abort = AbortSignal()
    abort.abort()
    t = scripted_turn(ScriptedModel([RuntimeError("provider exploded")]), abort=abort)
    with pytest.raises(TurnError) as info:
        await run_turn(t)
    assert info.value.code is ErrorCode.CANCELLED


async def test_provider_auth_before_any_request(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    reg = ModelRegistry(
        {"mockai": ProviderConfig("mockai", "openai", mock_server.openai_url, "MISSING_KEY_VAR")},
        env={},
    )
    model = reg.resolve("mockai:gpt-mock")
    with pytest.raises(AgentRunnerError) as info:
        reg.client(model)
    assert info.value.code is ErrorCode.PROVIDER_AUTH
    assert "MISSING_KEY_VAR" in str(info.value)
    assert mock.requests == []


async def test_internal_bug_is_internal() -> None:
    def broken(request: ModelRequest) -> str:
        raise ZeroDivisionError("oops")

    with pytest.raises(TurnError) as info:
        await run_turn(scripted_turn(FunctionModel(broken)))
    assert info.value.code is ErrorCode.INTERNAL


async def test_one_of_several_tools_raising_cancelled_error_cancels_the_turn() -> None:
    @tool
    async def quits() -> str:
        """Gives up."""
        raise asyncio.CancelledError

    @tool
    async def works() -> str:
        """Works."""
        return "done"

    model = ScriptedModel([[call("quits"), call("works")], "unreached"])
    t = scripted_turn(model, tools=[quits, works])
    with pytest.raises(asyncio.CancelledError):
        await run_turn(t)
    answered = {m.call_id for m in t.messages if isinstance(m, ToolResult)}
    assert len(answered) == 2  # both calls answered: the history can be sent again
