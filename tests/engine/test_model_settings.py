"""Model settings on the wire: each setting in its provider's own form — as the recorded real
exchanges in tests/fixtures/providers/ and tests/fixtures/openai-responses/ send it, and as the
mock provider receives it over real HTTP — a setting a provider cannot take left out with one
warning a run, and a fallback to another provider's model sent the settings in that provider's
form."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot

from agentrunner.core.model_settings import ModelSettings
from agentrunner.engine import ModelRequest, ToolDefinition, UserMessage, run_turn
from agentrunner.engine.wire_anthropic import AnthropicWire
from agentrunner.engine.wire_openai import OpenAIWire
from agentrunner.engine.wire_responses import ResponsesWire
from agentrunner.testing import Fault, MockProvider, MockProviderServer, Reply
from tests.engine.helpers import Recorder, registry, turn
from tests.engine.test_wire_fixtures import anthropic_request, openai_request
from tests.engine.test_wire_responses import conversation

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "providers"
RESPONSES = Path(__file__).resolve().parents[1] / "fixtures" / "openai-responses"
# Every field a setting may become, in either provider's body (``n``: sent through ``extra``).
SETTING_FIELDS = (
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "stop_sequences",
    "seed",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning_effort",
    "thinking",
    "n",
    "max_output_tokens",  # the Responses API's
    "reasoning",
)
WEATHER = ToolDefinition(
    "get_weather",
    "Get the weather.",
    {"type": "object", "properties": {"city": {"type": "string"}}},
)


def openai_wire() -> OpenAIWire:
    return OpenAIWire("openai", max_tokens_field="max_completion_tokens")  # as the registry's


def settings_fields(body: dict[str, Any]) -> dict[str, Any]:
    return {key: body[key] for key in SETTING_FIELDS if key in body}


# -- against the recorded requests ------------------------------------------------------------

# Recorded exchanges that set something, and the settings that say the same to agentrunner.
RECORDED: dict[str, dict[str, Any]] = {
    "anthropic/cache_creation_max_tokens": {"temperature": 0.1, "max_output_tokens": 100},
    "anthropic/stop_sequence_prefill_stream": {"temperature": 1.0, "stop": "```"},
    "anthropic/thinking": {"thinking": 1024, "max_output_tokens": 4096},
    "anthropic/thinking_stream": {"thinking": 1024, "temperature": 1.0, "max_output_tokens": 8192},
    "anthropic/tool_use_single": {"tool_choice": "auto", "max_output_tokens": 4096},
    "openai/error_400_unsupported_parameter": {
        "seed": 42,
        "stop": ["4242"],
        "max_output_tokens": 500,
    },
    "openai/error_429_rate_limit": {"temperature": 0.7, "extra": {"openai": {"n": 1}}},
    "openai/tool_call_single": {"tool_choice": "auto"},
}


@pytest.mark.parametrize("name", list(RECORDED))
def test_settings_are_sent_as_the_recorded_requests_sent_them(name: str) -> None:
    recorded = json.loads((FIXTURES / f"{name}.json").read_text())
    body, provider = recorded["request"]["body"], recorded["provider"]
    settings = ModelSettings.model_validate(RECORDED[name])
    if provider == "openai":
        request, wire = openai_request(body), openai_wire()
    else:
        request, wire = anthropic_request(body), AnthropicWire("anthropic")
    # the turn folds the max_output_tokens setting into the request's output cap
    request = replace(request, settings=settings, max_output_tokens=settings.max_output_tokens)
    assert settings_fields(wire.build(request)) == settings_fields(body)
    assert wire.dropped_settings(request) == []
    assert settings_fields(wire.build(replace(request, settings=None))) != settings_fields(body)


# Recorded Responses API exchanges that set something, and the settings that say the same.
RECORDED_RESPONSES: dict[str, dict[str, Any]] = {
    "incomplete_max_output_tokens": {"max_output_tokens": 50},
    "tool_call_single": {"tool_choice": "auto"},
    "previous_response_id_tool_result": {"tool_choice": "auto"},
    "reasoning_summary_stream": {"reasoning_effort": "medium", "thinking": "adaptive"},
}


@pytest.mark.parametrize("name", list(RECORDED_RESPONSES))
def test_settings_are_sent_as_the_recorded_responses_requests_sent_them(name: str) -> None:
    body = json.loads((RESPONSES / f"{name}.json").read_text())["request"]["body"]
    settings = ModelSettings.model_validate(RECORDED_RESPONSES[name])
    request = replace(
        conversation(body), settings=settings, max_output_tokens=settings.max_output_tokens
    )
    wire = ResponsesWire("openai")
    assert settings_fields(wire.build(request)) == settings_fields(body)
    assert wire.dropped_settings(request) == []
    unset = replace(request, settings=None, max_output_tokens=None)
    assert settings_fields(wire.build(unset)) != settings_fields(body)


# -- each setting, in each provider's form ----------------------------------------------------

CASES: dict[str, dict[str, Any]] = {
    "temperature": {"temperature": 0.2},
    "top_p": {"top_p": 0.9},
    "max_output_tokens": {"max_output_tokens": 300},
    "stop": {"stop": ["END", "STOP"]},
    "seed": {"seed": 7},
    "tool_choice auto": {"tool_choice": "auto"},
    "tool_choice required": {"tool_choice": "required"},
    "tool_choice none": {"tool_choice": "none"},
    "tool_choice a tool": {"tool_choice": "get_weather"},
    "parallel_tool_calls": {"parallel_tool_calls": False},
    "parallel_tool_calls with a tool": {"parallel_tool_calls": True, "tool_choice": "get_weather"},
    "reasoning_effort": {"reasoning_effort": "low"},
    "thinking": {"thinking": 2048},
    "thinking adaptive": {"thinking": "adaptive"},
    "extra": {"extra": {"openai": {"logit_bias": {"42": -100}}, "anthropic": {"top_k": 40}}},
}


def sent(
    wire: OpenAIWire | AnthropicWire | ResponsesWire,
    values: dict[str, Any],
    tools: bool = True,
    model: str = "m",
) -> Any:
    """What ``values`` change in the body, and what the wire says it leaves out."""
    settings = ModelSettings.model_validate(values)
    plain = ModelRequest(model, "sys", [UserMessage("hi")], tools=[WEATHER] if tools else [])
    asked = replace(plain, settings=settings, max_output_tokens=settings.max_output_tokens)
    before, after = wire.build(plain), wire.build(asked)
    changed = {k: v for k, v in after.items() if before.get(k) != v}
    dropped = wire.dropped_settings(asked)
    return {"sent": changed, "dropped": dict(dropped)} if dropped else changed


def test_each_setting_in_the_openai_form() -> None:
    assert {case: sent(openai_wire(), values) for case, values in CASES.items()} == snapshot(
        {
            "temperature": {"temperature": 0.2},
            "top_p": {"top_p": 0.9},
            "max_output_tokens": {"max_completion_tokens": 300},
            "stop": {"stop": ["END", "STOP"]},
            "seed": {"seed": 7},
            "tool_choice auto": {"tool_choice": "auto"},
            "tool_choice required": {"tool_choice": "required"},
            "tool_choice none": {"tool_choice": "none"},
            "tool_choice a tool": {
                "tool_choice": {"type": "function", "function": {"name": "get_weather"}}
            },
            "parallel_tool_calls": {"parallel_tool_calls": False},
            "parallel_tool_calls with a tool": {
                "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
                "parallel_tool_calls": True,
            },
            "reasoning_effort": {"reasoning_effort": "low"},
            "thinking": {
                "sent": {},
                "dropped": {"thinking": "openai takes reasoning_effort, not a thinking budget"},
            },
            "thinking adaptive": {
                "sent": {},
                "dropped": {"thinking": "openai takes reasoning_effort, not a thinking budget"},
            },
            "extra": {"logit_bias": {"42": -100}},
        }
    )


def test_each_setting_in_the_responses_form() -> None:
    """For a model that does not reason, and for one that does (no temperature or top_p)."""
    wire = ResponsesWire("openai")
    forms = {
        case: (sent(wire, values, model="gpt-4.1"), sent(wire, values, model="gpt-5"))
        for case, values in CASES.items()
    }
    assert {case: a if a == b else (a, b) for case, (a, b) in forms.items()} == snapshot(
        {
            "temperature": (
                {"temperature": 0.2},
                {
                    "sent": {},
                    "dropped": {
                        "temperature": "gpt-5 is a reasoning model: it takes no temperature"
                    },
                },
            ),
            "top_p": (
                {"top_p": 0.9},
                {"sent": {}, "dropped": {"top_p": "gpt-5 is a reasoning model: it takes no top_p"}},
            ),
            "max_output_tokens": {"max_output_tokens": 300},
            "stop": {"sent": {}, "dropped": {"stop": "the Responses API has no stop sequences"}},
            "seed": {"sent": {}, "dropped": {"seed": "the Responses API has no seed"}},
            "tool_choice auto": {"tool_choice": "auto"},
            "tool_choice required": {"tool_choice": "required"},
            "tool_choice none": {"tool_choice": "none"},
            "tool_choice a tool": {"tool_choice": {"type": "function", "name": "get_weather"}},
            "parallel_tool_calls": {"parallel_tool_calls": False},
            "parallel_tool_calls with a tool": {
                "tool_choice": {"type": "function", "name": "get_weather"},
                "parallel_tool_calls": True,
            },
            "reasoning_effort": {"reasoning": {"effort": "low"}},
            "thinking": {"reasoning": {"summary": "auto"}},
            "thinking adaptive": {"reasoning": {"summary": "auto"}},
            "extra": {"logit_bias": {"42": -100}},
        }
    )


def test_each_setting_in_the_anthropic_form() -> None:
    wire = AnthropicWire("anthropic")
    assert {case: sent(wire, values) for case, values in CASES.items()} == snapshot(
        {
            "temperature": {"temperature": 0.2},
            "top_p": {"top_p": 0.9},
            "max_output_tokens": {"max_tokens": 300},
            "stop": {"stop_sequences": ["END", "STOP"]},
            "seed": {"sent": {}, "dropped": {"seed": "Anthropic has no seed"}},
            "tool_choice auto": {"tool_choice": {"type": "auto"}},
            "tool_choice required": {"tool_choice": {"type": "any"}},
            "tool_choice none": {"tool_choice": {"type": "none"}},
            "tool_choice a tool": {"tool_choice": {"type": "tool", "name": "get_weather"}},
            "parallel_tool_calls": {
                "tool_choice": {"type": "auto", "disable_parallel_tool_use": True}
            },
            "parallel_tool_calls with a tool": {
                "tool_choice": {
                    "type": "tool",
                    "name": "get_weather",
                    "disable_parallel_tool_use": False,
                }
            },
            "reasoning_effort": {
                "sent": {},
                "dropped": {"reasoning_effort": "Anthropic takes thinking, not reasoning_effort"},
            },
            "thinking": {
                "max_tokens": 10240,
                "thinking": {"type": "enabled", "budget_tokens": 2048},
            },
            "thinking adaptive": {"thinking": {"type": "adaptive"}},
            "extra": {"top_k": 40},
        }
    )


def test_anthropic_rules_decide_what_is_sent_with_what() -> None:
    """What the Messages API refuses together is not sent together: thinking takes no
    temperature but 1, top_p only from 0.95, no forced tool call, a budget below the cap."""
    wire = AnthropicWire("anthropic")
    assert {
        "temperature above 1": sent(wire, {"temperature": 1.5}),
        "temperature and top_p": sent(wire, {"temperature": 0.5, "top_p": 0.9}),
        "thinking and temperature": sent(wire, {"thinking": 2048, "temperature": 0.5}),
        "thinking and temperature 1": sent(wire, {"thinking": 2048, "temperature": 1}),
        "thinking and a low top_p": sent(wire, {"thinking": 2048, "top_p": 0.5}),
        "thinking and top_p 0.97": sent(wire, {"thinking": 2048, "top_p": 0.97}),
        "thinking and a forced tool": sent(
            wire, {"thinking": 2048, "tool_choice": "required", "parallel_tool_calls": False}
        ),
        "thinking over the cap": sent(wire, {"thinking": 4096, "max_output_tokens": 4096}),
        "thinking with no cap": sent(wire, {"thinking": 20000}),
    } == snapshot(
        {
            "temperature above 1": {
                "sent": {},
                "dropped": {"temperature": "Anthropic's temperature goes from 0 to 1"},
            },
            "temperature and top_p": {
                "sent": {"temperature": 0.5},
                "dropped": {
                    "top_p": "Anthropic's current models take temperature or top_p, not both"
                },
            },
            "thinking and temperature": {
                "sent": {
                    "max_tokens": 10240,
                    "thinking": {"type": "enabled", "budget_tokens": 2048},
                },
                "dropped": {"temperature": "Anthropic takes no temperature but 1 with thinking"},
            },
            "thinking and temperature 1": {
                "max_tokens": 10240,
                "thinking": {"type": "enabled", "budget_tokens": 2048},
                "temperature": 1.0,
            },
            "thinking and a low top_p": {
                "sent": {
                    "max_tokens": 10240,
                    "thinking": {"type": "enabled", "budget_tokens": 2048},
                },
                "dropped": {"top_p": "with thinking, Anthropic takes top_p from 0.95 to 1"},
            },
            "thinking and top_p 0.97": {
                "max_tokens": 10240,
                "thinking": {"type": "enabled", "budget_tokens": 2048},
                "top_p": 0.97,
            },
            "thinking and a forced tool": {
                "sent": {
                    "max_tokens": 10240,
                    "thinking": {"type": "enabled", "budget_tokens": 2048},
                    "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
                },
                "dropped": {"tool_choice": "Anthropic forces no tool call with thinking"},
            },
            "thinking over the cap": {
                "sent": {"max_tokens": 4096},
                "dropped": {
                    "thinking": "its budget (4096) must be below the output cap (4096); "
                    "raise max_output_tokens"
                },
            },
            "thinking with no cap": {
                "max_tokens": 28192,
                "thinking": {"type": "enabled", "budget_tokens": 20000},
            },
        }
    )


def test_tool_settings_go_only_with_tools() -> None:
    """OpenAI refuses tool_choice and parallel_tool_calls in a request without tools."""
    values = {"tool_choice": "none", "parallel_tool_calls": False, "seed": 3}
    assert sent(openai_wire(), values, tools=False) == {"seed": 3}
    assert sent(AnthropicWire("anthropic"), values, tools=False) == {
        "sent": {},
        "dropped": {"seed": "Anthropic has no seed"},
    }


@pytest.mark.parametrize("wire", [openai_wire(), AnthropicWire("anthropic")], ids=str)
def test_two_values_make_two_bodies(wire: OpenAIWire | AnthropicWire) -> None:
    request = ModelRequest("m", "sys", [UserMessage("hi")], tools=[WEATHER])
    cool = wire.build(replace(request, settings=ModelSettings(temperature=0.2, stop=("A",))))
    warm = wire.build(replace(request, settings=ModelSettings(temperature=0.7, stop=("B",))))
    assert cool != warm
    assert (cool["temperature"], warm["temperature"]) == (0.2, 0.7)


def test_extra_goes_only_to_its_provider() -> None:
    extra = {"extra": {"openai": {"user": "u-1"}, "anthropic": {"top_k": 5}}}
    assert sent(openai_wire(), extra) == {"user": "u-1"}
    assert sent(AnthropicWire("anthropic"), extra) == {"top_k": 5}
    assert sent(OpenAIWire("groq"), extra) == {}  # another OpenAI-compatible provider


# -- over real HTTP, through a turn -----------------------------------------------------------


def last_body(mock: MockProvider) -> dict[str, Any]:
    return mock.requests[-1].body


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_the_mock_provider_receives_each_setting_in_its_providers_form(
    mock_server: MockProviderServer, mock: MockProvider, stream: bool
) -> None:
    reg = registry(mock_server)
    settings = ModelSettings(
        temperature=0.3,
        top_p=0.8,
        max_output_tokens=256,
        stop=("END",),
        seed=11,
        tool_choice="auto",
        parallel_tool_calls=False,
        reasoning_effort="high",
        extra={"mockai": {"user": "u-7"}, "mockant": {"top_k": 3}},
    )
    try:
        mock.queue(Reply(text="ok"), Reply(text="ok"))
        await run_turn(turn(reg, "mockai:gpt-mock", stream=stream, settings=settings))
        assert settings_fields(last_body(mock)) | {"user": last_body(mock)["user"]} == {
            "max_tokens": 256,  # a compatible provider's name for the cap
            "temperature": 0.3,
            "top_p": 0.8,
            "seed": 11,
            "reasoning_effort": "high",
            "stop": ["END"],
            "tool_choice": "auto",
            "parallel_tool_calls": False,
            "user": "u-7",
        }
        events = Recorder()
        await run_turn(
            turn(reg, "mockant:claude-mock", stream=stream, settings=settings, emit=events)
        )
        body = last_body(mock)
        assert settings_fields(body) | {"top_k": body["top_k"]} == {
            "max_tokens": 256,
            "temperature": 0.3,
            "stop_sequences": ["END"],
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
            "top_k": 3,
        }
        assert [(d["setting"], d["model"]) for d in events.of("model.setting_dropped")] == [
            ("top_p", "mockant:claude-mock"),
            ("seed", "mockant:claude-mock"),
            ("reasoning_effort", "mockant:claude-mock"),
        ]
    finally:
        await reg.aclose()


async def test_a_dropped_setting_is_warned_of_once_a_run_and_never_sent(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    """A tool turn makes two requests; the seed Anthropic cannot take is in neither, and the
    warning comes once, before the first request's tokens."""
    reg = registry(mock_server)
    events = Recorder()
    try:
        mock.queue(Reply(tool_calls=[("get_weather", {"city": "Paris"})]), Reply(text="Sunny."))
        settings = ModelSettings(seed=5, thinking=2048)
        await run_turn(turn(reg, "mockant:claude-mock", settings=settings, emit=events))
    finally:
        await reg.aclose()
    bodies = [r.body for r in mock.requests]
    assert len(bodies) == 2
    assert all("seed" not in b for b in bodies)
    assert [b["thinking"] for b in bodies] == [{"type": "enabled", "budget_tokens": 2048}] * 2
    assert events.of("model.setting_dropped") == [
        {"setting": "seed", "model": "mockant:claude-mock", "reason": "Anthropic has no seed"}
    ]
    kinds = events.kinds()
    assert kinds.index("model.setting_dropped") < kinds.index("agent.tool_call")
    assert kinds.index("step.started") < kinds.index("model.setting_dropped")


async def test_a_fallback_to_another_provider_is_sent_the_settings_in_its_form(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    reg = registry(mock_server)
    events = Recorder()
    settings = ModelSettings(
        temperature=0.4, stop=("X",), seed=9, parallel_tool_calls=False, thinking=1024
    )
    try:
        mock.queue(Reply(fault=Fault.http(503)), model="gpt-mock")
        mock.queue(Reply(text="from the fallback"), model="claude-mock")
        result = await run_turn(
            turn(reg, "mockai:gpt-mock", "mockant:claude-mock", settings=settings, emit=events)
        )
    finally:
        await reg.aclose()
    assert result.text == "from the fallback"
    first, second = (settings_fields(r.body) for r in mock.requests)
    assert first == {
        "temperature": 0.4,
        "seed": 9,
        "stop": ["X"],
        "parallel_tool_calls": False,
    }
    assert second == {
        "max_tokens": 8192 + 1024,  # no cap asked for: the thinking budget comes on top
        "stop_sequences": ["X"],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    assert [(d["setting"], d["model"]) for d in events.of("model.setting_dropped")] == [
        ("thinking", "mockai:gpt-mock"),
        ("temperature", "mockant:claude-mock"),
        ("seed", "mockant:claude-mock"),
    ]


async def test_the_mock_provider_receives_each_setting_in_the_responses_form(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    reg = registry(mock_server)
    events = Recorder()
    settings = ModelSettings(
        temperature=0.3,
        max_output_tokens=256,
        stop=("END",),
        seed=11,
        tool_choice="required",
        parallel_tool_calls=False,
        reasoning_effort="high",
        thinking="adaptive",
        extra={"mockresp": {"user": "u-7"}, "mockai": {"top_k": 3}},
    )
    try:
        mock.queue(Reply(tool_calls=[("get_weather", {"city": "Oslo"})]), Reply(text="Cold."))
        t = turn(reg, "mockresp:gpt-5-mock", settings=settings, emit=events)
        await run_turn(t)
    finally:
        await reg.aclose()
    first, second = (r.body for r in mock.requests)
    assert settings_fields(first) | {"user": first["user"]} == {
        "max_output_tokens": 256,
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "reasoning": {"effort": "high", "summary": "auto"},
        "user": "u-7",
    }
    assert "tool_choice" not in second  # a forced choice holds until the model has called tools
    assert [(d["setting"], d["reason"]) for d in events.of("model.setting_dropped")] == [
        ("temperature", "gpt-5-mock is a reasoning model: it takes no temperature"),
        ("seed", "the Responses API has no seed"),
        ("stop", "the Responses API has no stop sequences"),
    ]


@pytest.mark.parametrize("model", ["mockai:gpt-mock", "mockant:claude-mock", "mockresp:gpt-5-mock"])
async def test_a_forced_tool_choice_holds_until_the_model_has_called_tools(
    mock_server: MockProviderServer, mock: MockProvider, model: str
) -> None:
    """Forced at every request, the model could never answer: the run would end at max_steps."""
    reg = registry(mock_server)
    try:
        mock.queue(Reply(tool_calls=[("get_weather", {"city": "Oslo"})]), Reply(text="Cold."))
        settings = ModelSettings(tool_choice="get_weather")
        result = await run_turn(turn(reg, model, settings=settings))
    finally:
        await reg.aclose()
    assert result.text == "Cold."
    first, second = (r.body.get("tool_choice") for r in mock.requests)
    assert first in (
        {"type": "function", "function": {"name": "get_weather"}},
        {"type": "tool", "name": "get_weather"},
        {"type": "function", "name": "get_weather"},  # the Responses API's
    )
    assert second is None


@pytest.mark.parametrize(
    ("setting", "limit", "cap"), [(300, None, 300), (300, 200, 200), (100, 200, 100)]
)
async def test_the_output_cap_is_the_lower_of_the_setting_and_the_limit(
    mock_server: MockProviderServer,
    mock: MockProvider,
    setting: int,
    limit: int | None,
    cap: int,
) -> None:
    from agentrunner.engine import TurnLimits

    reg = registry(mock_server)
    try:
        mock.queue(Reply(text="ok"))
        settings = ModelSettings(max_output_tokens=setting)
        limits = TurnLimits(max_output_tokens=limit)
        await run_turn(turn(reg, "mockant:claude-mock", settings=settings, limits=limits))
    finally:
        await reg.aclose()
    assert last_body(mock)["max_tokens"] == cap
