"""agentrunner against a real server no one here wrote: llama.cpp's (``python -m
llama_cpp.server``) on SmolLM2-135M, over real HTTP, configured as a user configures it
(``[providers.llama] kind = "openai"`` with its ``base_url``) and run through ``AgentRunner``.

What a user would see is asserted — the run's status and stop reason, the thread's stored
messages, the usage and cost recorded — for answers streamed and not, a tool call and its
follow-up, an answer cut at its output cap, a stream aborted midway, and two prompts. The
server streams no usage (``stream_options`` notwithstanding): those runs are charged at an
estimate, marked so; its unstreamed answers carry their real counts.

Greedy sampling (``temperature`` 0) keeps the model's answers stable from run to run; outputs
are capped small, so the whole module takes a few seconds on one shared server
(tests/llama_server.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentRunner, AgentRunnerCallbacks, RunAgentOverrides
from agentrunner.engine import AbortSignal, AssistantMessage, Message, ToolResult, UserMessage
from agentrunner.engine.budget import estimate_output_tokens
from agentrunner.run.request import RunResult
from agentrunner.runtime.compose import open_runner
from tests.engine.helpers import get_weather

CONFIG = """\
[project]
agents_dir = "agents"

[defaults]
model = "llama:smollm2"
title_model = "test"

[providers.llama]
kind = "openai"
base_url = "{url}"

[prices."llama:smollm2"]
input_per_mtok = 1.0
output_per_mtok = 2.0
"""
AGENT = """\
---
name: helper
model_settings: {temperature: 0, max_output_tokens: 24}
---
You are a helpful assistant. Answer in one short sentence.
"""


@pytest.fixture
async def runner(
    llama_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[AgentRunner]:
    root = tmp_path / "proj"
    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text(CONFIG.format(url=llama_server))
    (root / "agents" / "helper.md").write_text(AGENT)
    monkeypatch.setenv("AGENTRUNNER_DATABASE_URL", f"sqlite:///{tmp_path / 'store.db'}")
    monkeypatch.chdir(root)
    opened = await open_runner(root)
    try:
        yield opened
    finally:
        await opened.close()


async def ask(
    runner: AgentRunner,
    thread: str,
    message: str,
    *,
    stream: bool = True,
    tokens: list[str] | None = None,
    **settings: Any,
) -> RunResult:
    """One run of ``helper``; the tokens it streamed appended to ``tokens``."""
    seen = tokens if tokens is not None else []

    def on_event(kind: str, data: Mapping[str, Any]) -> None:
        if kind == "agent.token":
            seen.append(data["token"])

    overrides = RunAgentOverrides(
        stream=stream,
        model_settings=settings or None,
        tools=(get_weather,) if "tool_choice" in settings else (),
    )
    return await runner.run_agent(
        "helper", thread, message, AgentRunnerCallbacks(on_event=on_event), overrides
    )


async def stored(runner: AgentRunner, thread: str) -> list[Message]:
    return [m for _, m, _, _ in await runner.store.messages.page(thread)]


async def charged(runner: AgentRunner, run_id: str) -> list[dict[str, Any]]:
    """The run's ``cost.updated`` events, as its cost rows record them."""
    events = await runner.store.events.list(run_id)
    return [e.payload for e in events if e.type == "cost.updated"]


async def run_usage(runner: AgentRunner, result: RunResult) -> dict[str, Any]:
    run = await runner.store.runs.get(result.run_id)
    assert run is not None and run.status == result.status
    assert run.cost_known and run.cost_micros == result.cost_micros > 0  # priced, never free
    return dict(run.token_usage or {})


async def test_an_answer_streamed_and_not(runner: AgentRunner) -> None:
    usages = {}
    for stream in (True, False):
        thread = "streamed" if stream else "whole"
        tokens: list[str] = []
        question = "What is the capital of France?"
        result = await ask(runner, thread, question, stream=stream, tokens=tokens)
        assert result.status == "completed" and result.stop_reason == "end_turn"
        assert "Paris" in result.text and result.model == "llama:smollm2"
        # shown as it came: token by token when streamed, whole when not
        assert "".join(tokens) == result.text
        assert len(tokens) > 3 if stream else len(tokens) == 1
        user, answer = await stored(runner, thread)
        assert isinstance(user, UserMessage) and user.content == question
        assert isinstance(answer, AssistantMessage) and answer.text == result.text
        assert not answer.interrupted and not answer.tool_calls
        usage = usages[stream] = await run_usage(runner, result)
        assert usage["requests"] == 1 and usage["input_tokens"] > 0 and usage["output_tokens"] > 0
        [cost] = await charged(runner, result.run_id)
        if stream:  # llama.cpp's server streams no usage: estimated, and marked so
            assert usage["estimated"] and cost["estimated"]
            assert usage["output_tokens"] == estimate_output_tokens(result.text)
        else:  # its whole answers carry its own counts
            assert "estimated" not in usage and not cost["estimated"]
        assert (cost["input_tokens"], cost["output_tokens"]) == (
            usage["input_tokens"],
            usage["output_tokens"],
        )
    # the estimate of the same request errs high, within reason, against the server's count
    estimated, counted = usages[True]["input_tokens"], usages[False]["input_tokens"]
    assert counted <= estimated <= 4 * counted


async def test_two_prompts_two_answers(runner: AgentRunner) -> None:
    capital = await ask(runner, "a", "What is the capital of France?")
    color = await ask(runner, "b", "Name three colors of the rainbow.")
    assert capital.text and color.text and capital.text != color.text
    assert "Paris" in capital.text and "Paris" not in color.text
    first, second = await run_usage(runner, capital), await run_usage(runner, color)
    assert first["estimated"] and second["estimated"]
    assert (first["input_tokens"], first["output_tokens"]) != (
        second["input_tokens"],
        second["output_tokens"],
    )


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "unstreamed"])
async def test_a_tool_call_and_its_follow_up(runner: AgentRunner, stream: bool) -> None:
    # A 135M model rarely picks a tool itself: a named tool_choice makes llama.cpp's
    # chatml-function-calling handler write that call, its arguments held to the tool's schema.
    # The server's chat format shows the model no tool result (its template leaves a tool
    # message's content out): the follow-up, from a model that saw none, may ramble to its cap.
    result = await ask(
        runner,
        "t",
        "What is the weather in Paris?",
        stream=stream,
        tool_choice="get_weather",
        max_output_tokens=48,
    )
    assert result.status == "completed"
    assert result.stop_reason in ("end_turn", "max_tokens_exceeded")
    user, call, tool_result, answer = await stored(runner, "t")
    assert isinstance(user, UserMessage)
    assert isinstance(call, AssistantMessage) and [c.name for c in call.tool_calls] == [
        "get_weather"
    ]
    [made] = call.tool_calls
    assert made.raw_arguments is None and isinstance(made.arguments.get("city"), str)
    assert isinstance(tool_result, ToolResult) and tool_result.call_id == made.id
    assert tool_result.content == f"Sunny, 22C in {made.arguments['city']}"
    # the follow-up is asked without the forced choice, and answers in text
    assert isinstance(answer, AssistantMessage) and not answer.tool_calls
    assert answer.text == result.text != ""
    usage = await run_usage(runner, result)
    assert usage["requests"] == 2 and usage["output_tokens"] > 0
    costs = await charged(runner, result.run_id)
    assert [c["estimated"] for c in costs] == [stream, stream]


async def test_an_answer_cut_at_its_output_cap(runner: AgentRunner) -> None:
    tokens: list[str] = []
    result = await ask(
        runner, "t", "Write a long story about a dragon.", tokens=tokens, max_output_tokens=6
    )
    assert result.status == "completed" and result.stop_reason == "max_tokens_exceeded"
    assert result.text and "".join(tokens) == result.text
    [_user, answer] = await stored(runner, "t")
    assert isinstance(answer, AssistantMessage) and answer.text == result.text
    usage = await run_usage(runner, result)
    assert usage["estimated"] and 0 < usage["output_tokens"] <= estimate_output_tokens(result.text)


async def test_an_aborted_stream_is_kept_and_the_server_serves_on(runner: AgentRunner) -> None:
    abort = AbortSignal()
    tokens: list[str] = []

    def on_event(kind: str, data: Mapping[str, Any]) -> None:
        if kind == "agent.token":
            tokens.append(data["token"])
            if len(tokens) == 5:
                abort.abort("enough")

    result = await runner.run_agent(
        "helper",
        "t",
        "Write a long story about a dragon.",
        AgentRunnerCallbacks(on_event=on_event),
        RunAgentOverrides(model_settings={"max_output_tokens": 400}),
        abort=abort,
    )
    assert result.status == "cancelled" and result.stop_reason == "cancelled"
    [user, partial] = await stored(runner, "t")
    assert isinstance(user, UserMessage)
    # what streamed before the abort is kept, marked cut off
    assert isinstance(partial, AssistantMessage) and partial.interrupted
    assert partial.text and "".join(tokens).startswith(partial.text)
    run = await runner.store.runs.get(result.run_id)
    assert run is not None and (run.status, run.stop_reason) == ("cancelled", "cancelled")
    usage = run.token_usage or {}
    assert usage["estimated"] and usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    [cost] = await charged(runner, result.run_id)
    assert cost["outcome"] == "cancelled" and cost["estimated"] and run.cost_micros > 0
    # the server serves the next request, whole
    after = await asyncio.wait_for(ask(runner, "u", "What is the capital of France?"), 120)
    assert after.status == "completed" and "Paris" in after.text
