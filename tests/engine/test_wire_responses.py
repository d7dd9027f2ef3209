"""The Responses API wire adapter against every recorded real exchange in
tests/fixtures/openai-responses/, as test_wire_fixtures.py tests the other two: the conversation
in each recorded request rebuilt in agentrunner's types and built again (the request we build is
a snapshot, and its items match the recorded ones: roles and texts, calls and their outputs
paired by ``call_id``, reasoning items as they were); the follow-up requests of the recorded
tool loops built from what the adapter made of the first answer (the reasoning item sent back
unchanged); every recorded answer folded streamed and not, alike; every recorded error
classified alike streamed or not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot

from agentrunner.engine.failures import ProviderError
from agentrunner.engine.fold import ResponseFold
from agentrunner.engine.history import CUT_NOTE, window
from agentrunner.engine.messages import (
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    Thinking,
    ToolCall,
    ToolDefinition,
    ToolResult,
    Usage,
    UserMessage,
    message_from_dict,
)
from agentrunner.engine.wire_anthropic import AnthropicWire
from agentrunner.engine.wire_openai import OpenAIWire
from agentrunner.engine.wire_responses import ResponsesWire
from agentrunner.errors import ErrorCode
from tests.engine.wire_replay import as_body, as_stream, replay, responses_events

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openai-responses"
FILES = sorted(FIXTURES.glob("*.json"))
WIRE = "openai-responses"


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def name(path: Path) -> str:
    return path.stem


ANSWERED = [p for p in FILES if load(p)["response"]["status"] < 400]
FAILED = [p for p in FILES if load(p)["response"]["status"] >= 400]


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or ())


def input_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    given = body["input"]
    return [{"role": "user", "content": given}] if isinstance(given, str) else given


# -- recorded request → our conversation ----------------------------------------------------


def conversation(body: dict[str, Any]) -> ModelRequest:
    """A recorded request's conversation in agentrunner's types: what the model said (its
    reasoning, text and calls, with the ids of their items) one assistant message per turn."""
    system = [body["instructions"]] if body.get("instructions") else []
    messages: list[Message] = []
    said: AssistantMessage | None = None

    def saying() -> AssistantMessage:
        nonlocal said
        if said is None:
            said = AssistantMessage(provider="openai")
            messages.append(said)
        return said

    for item in input_items(body):
        kind = item.get("type", "message")
        if kind == "message" and item["role"] in ("system", "developer"):
            system.append(text_of(item["content"]))
        elif kind == "message" and item["role"] == "user":
            said = None
            messages.append(UserMessage(text_of(item["content"])))
        elif kind == "message":
            saying().text += text_of(item["content"])
            saying().text_id = item.get("id")
        elif kind == "reasoning":
            parts = [p["text"] for p in item["summary"]] or [""]
            encrypted = item.get("encrypted_content")
            saying().thinking += [
                Thinking(text, "openai", encrypted if n == 0 else None, id=item["id"])
                for n, text in enumerate(parts)
            ]
        elif kind == "function_call":
            call = ToolCall(
                item["call_id"], item["name"], json.loads(item["arguments"]), item_id=item.get("id")
            )
            saying().tool_calls.append(call)
        elif kind == "function_call_output":
            said = None
            messages.append(ToolResult(item["call_id"], "", item["output"]))
    fmt = (body.get("text") or {}).get("format") or {}
    return ModelRequest(
        model=body["model"],
        system="\n".join(system),
        messages=messages,
        tools=[
            ToolDefinition(t["name"], t.get("description") or "", t.get("parameters") or {})
            for t in body.get("tools") or ()
            if t["type"] == "function"
        ],
        max_output_tokens=body.get("max_output_tokens"),
        output_schema=fmt.get("schema"),
        output_schema_name=fmt.get("name", "output"),
        stream=bool(body.get("stream")),
    )


def structure(body: dict[str, Any]) -> dict[str, Any]:
    """What a request says, whatever its spelling: the system prompt (instructions or a
    developer message), each item (roles and texts, calls with their ``call_id``, outputs with
    theirs, reasoning items whole), the function tools."""
    system = [body["instructions"]] if body.get("instructions") else []
    items: list[tuple[Any, ...]] = []
    for item in input_items(body):
        kind = item.get("type", "message")
        if kind == "message" and item["role"] in ("system", "developer"):
            system.append(text_of(item["content"]))
        elif kind == "message":
            items.append((item["role"], text_of(item["content"])))
        elif kind == "function_call":
            arguments = json.loads(item["arguments"])
            items.append(("function_call", item["call_id"], item["name"], arguments))
        elif kind == "function_call_output":
            items.append(("function_call_output", item["call_id"], item["output"]))
        elif kind == "reasoning":
            enc = item.get("encrypted_content")
            items.append(("reasoning", item["id"], item["summary"], enc))
    tools = [
        (t["name"], t["parameters"]) for t in body.get("tools") or () if t["type"] == "function"
    ]
    return {"system": "\n".join(system), "items": items, "tools": tools}


# The one recorded request the API refused for what it held: a reasoning item followed by a
# message that is not the one it came with. The adapter does not send such a reasoning item.
REFUSED = "error_400_reasoning_item_without_following_item"


@pytest.mark.parametrize("path", FILES, ids=name)
def test_the_request_built_from_a_recorded_conversation_says_the_same(path: Path) -> None:
    recorded = load(path)["request"]["body"]
    built = ResponsesWire("openai").build(conversation(recorded))
    expected = structure(recorded)
    if path.stem == REFUSED:
        expected["items"] = [i for i in expected["items"] if i[0] != "reasoning"]
    assert structure(built) == expected
    assert built["store"] is False
    assert ("include" in built) == built["model"].startswith("gpt-5")  # the reasoning model


@pytest.mark.parametrize("path", FILES, ids=name)
def test_the_request_built_from_a_recorded_conversation(path: Path) -> None:
    built = ResponsesWire("openai").build(conversation(load(path)["request"]["body"]))
    for item in built["input"]:  # compared below as recorded, not copied here
        if item.get("encrypted_content"):
            item["encrypted_content"] = f"<{len(item['encrypted_content'])} characters>"
        for part in item.get("summary") or ():
            part["text"] = part["text"][:40] + "…"
    assert (
        built
        == snapshot(
            {
                "error_400_invalid_value_stream_request": {
                    "model": "gpt-4o",
                    "input": [{"role": "user", "content": "What is the capital of France?"}],
                    "store": False,
                    "stream": True,
                },
                "error_400_model_not_found": {
                    "model": "this-model-does-not-exist-12345",
                    "input": [{"role": "user", "content": "This should fail with NotFoundError"}],
                    "store": False,
                    "stream": False,
                },
                "error_400_reasoning_item_without_following_item": {
                    "model": "gpt-5",
                    "input": [
                        {"role": "user", "content": "What is the meaning of life?"},
                        {"role": "assistant", "content": "The meaning of life is 42"},
                        {"role": "user", "content": "Anything to add?"},
                    ],
                    "store": False,
                    "include": ["reasoning.encrypted_content"],
                    "stream": False,
                },
                "error_401_invalid_api_key": {
                    "model": "gpt-4o",
                    "input": [
                        {"role": "user", "content": "This should fail with AuthenticationError"}
                    ],
                    "store": False,
                    "stream": False,
                },
                "incomplete_max_output_tokens": {
                    "model": "gpt-4o",
                    "input": [{"role": "user", "content": "List all U.S. states."}],
                    "max_output_tokens": 50,
                    "store": False,
                    "stream": False,
                },
                "parallel_tool_calls": {
                    "model": "gpt-4o",
                    "instructions": "Use parallel tool calling.",
                    "input": [
                        {
                            "role": "user",
                            "content": "Please retrieve the secrets associated with each of these passwords: mellon,radiance",
                        }
                    ],
                    "tools": [
                        {
                            "type": "function",
                            "name": "secret_retrieval_tool",
                            "description": "A tool that requires a password to retrieve a secret.",
                            "parameters": {
                                "properties": {"password": {"title": "Password", "type": "string"}},
                                "required": ["password"],
                                "additionalProperties": False,
                                "type": "object",
                            },
                            "strict": True,
                        }
                    ],
                    "store": False,
                    "stream": False,
                },
                "parallel_tool_results_followup": {
                    "model": "gpt-4o",
                    "instructions": "Use parallel tool calling.",
                    "input": [
                        {
                            "role": "user",
                            "content": "Please retrieve the secrets associated with each of these passwords: mellon,radiance",
                        },
                        {
                            "type": "function_call",
                            "call_id": "call_bzXaB1HDWsWy7n6bMrxJzNNa",
                            "name": "secret_retrieval_tool",
                            "arguments": '{"password":"mellon"}',
                            "id": "fc_05020a9191cad7ac0068f966b1446c8190b34b78d6f788eeec",
                        },
                        {
                            "type": "function_call",
                            "call_id": "call_Dd4wvykCr6NttXKxRK0BFH96",
                            "name": "secret_retrieval_tool",
                            "arguments": '{"password":"radiance"}',
                            "id": "fc_05020a9191cad7ac0068f966b16f80819088f6dab6c16c4653",
                        },
                        {
                            "type": "function_call_output",
                            "call_id": "call_bzXaB1HDWsWy7n6bMrxJzNNa",
                            "output": "Welcome to Moria!",
                        },
                        {
                            "type": "function_call_output",
                            "call_id": "call_Dd4wvykCr6NttXKxRK0BFH96",
                            "output": "Life before Death",
                        },
                    ],
                    "tools": [
                        {
                            "type": "function",
                            "name": "secret_retrieval_tool",
                            "description": "A tool that requires a password to retrieve a secret.",
                            "parameters": {
                                "properties": {"password": {"title": "Password", "type": "string"}},
                                "required": ["password"],
                                "additionalProperties": False,
                                "type": "object",
                            },
                            "strict": True,
                        }
                    ],
                    "store": False,
                    "stream": False,
                },
                "parallel_tool_results_followup_stream": {
                    "model": "gpt-4o",
                    "instructions": "Use parallel tool calling.",
                    "input": [
                        {
                            "role": "user",
                            "content": "Please retrieve the secrets associated with each of these passwords: mellon,radiance",
                        },
                        {
                            "type": "function_call",
                            "call_id": "call_X6173PYkiubC8YJRPzr8osHX",
                            "name": "secret_retrieval_tool",
                            "arguments": '{"password":"mellon"}',
                            "id": "fc_087fd66e6fa25afd0069689b33ab908193943bbfb9aea1ff4c",
                        },
                        {
                            "type": "function_call",
                            "call_id": "call_OiUVT2dz7nh3PHrEPGnvLPyi",
                            "name": "secret_retrieval_tool",
                            "arguments": '{"password":"radiance"}',
                            "id": "fc_087fd66e6fa25afd0069689b33c1288193970a49066a9cda57",
                        },
                        {
                            "type": "function_call_output",
                            "call_id": "call_X6173PYkiubC8YJRPzr8osHX",
                            "output": "Welcome to Moria!",
                        },
                        {
                            "type": "function_call_output",
                            "call_id": "call_OiUVT2dz7nh3PHrEPGnvLPyi",
                            "output": "Life before Death",
                        },
                    ],
                    "tools": [
                        {
                            "type": "function",
                            "name": "secret_retrieval_tool",
                            "description": "A tool that requires a password to retrieve a secret.",
                            "parameters": {
                                "properties": {"password": {"title": "Password", "type": "string"}},
                                "required": ["password"],
                                "additionalProperties": False,
                                "type": "object",
                            },
                            "strict": True,
                        }
                    ],
                    "store": False,
                    "stream": True,
                },
                "previous_response_id_tool_result": {
                    "model": "gpt-4.1",
                    "input": [
                        {
                            "type": "function_call_output",
                            "call_id": "call_N2BikjqNxghwNIwHl2XKfb0F",
                            "output": "Sunny, 72F",
                        }
                    ],
                    "tools": [
                        {
                            "type": "function",
                            "name": "get_weather",
                            "description": "",
                            "parameters": {
                                "additionalProperties": False,
                                "properties": {"city": {"type": "string"}},
                                "required": ["city"],
                                "type": "object",
                            },
                            "strict": True,
                        }
                    ],
                    "store": False,
                    "stream": False,
                },
                "reasoning_summary_stream": {
                    "model": "gpt-5",
                    "input": [
                        {
                            "role": "user",
                            "content": "How many primes below 400 contain 79 as a substring? Answer ONLY with the number, not sharing which primes they are.",
                        }
                    ],
                    "store": False,
                    "include": ["reasoning.encrypted_content"],
                    "stream": True,
                },
                "reasoning_summary_tool_call": {
                    "model": "gpt-5",
                    "instructions": "You are a helpful assistant that uses planning. You MUST use the update_plan tool and continually update it as you make progress against the user's prompt",
                    "input": [
                        {
                            "role": "user",
                            "content": 'Compose a 12-line poem where the first letters of the odd-numbered lines form the name "SAMIRA" and the first letters of the even-numbered lines spell out "DAWOOD." Additionally, the first letter of each word in every line should create the capital of a country',
                        }
                    ],
                    "tools": [
                        {
                            "type": "function",
                            "name": "update_plan",
                            "description": "",
                            "parameters": {
                                "additionalProperties": False,
                                "properties": {"plan": {"type": "string"}},
                                "required": ["plan"],
                                "type": "object",
                            },
                            "strict": True,
                        }
                    ],
                    "store": False,
                    "include": ["reasoning.encrypted_content"],
                    "stream": False,
                },
                "reasoning_tool_result_followup_cached": {
                    "model": "gpt-5",
                    "instructions": "You are a helpful assistant that uses planning. You MUST use the update_plan tool and continually update it as you make progress against the user's prompt",
                    "input": [
                        {
                            "role": "user",
                            "content": 'Compose a 12-line poem where the first letters of the odd-numbered lines form the name "SAMIRA" and the first letters of the even-numbered lines spell out "DAWOOD." Additionally, the first letter of each word in every line should create the capital of a country',
                        },
                        {
                            "type": "reasoning",
                            "id": "rs_68c42d29124881968e24c1ca8c1fc7860e8bc41441c948f6",
                            "summary": [
                                {
                                    "type": "summary_text",
                                    "text": """\
**Creating a structured poem**

I need t…\
""",
                                },
                                {
                                    "type": "summary_text",
                                    "text": """\
**Formulating meaningful lines**

I want…\
""",
                                },
                                {
                                    "type": "summary_text",
                                    "text": """\
**Continuing with capital inspiration**
…\
""",
                                },
                                {
                                    "type": "summary_text",
                                    "text": """\
**Adding to the poem structure**

For li…\
""",
                                },
                                {
                                    "type": "summary_text",
                                    "text": "**Finalizing the poem and updating the p…",
                                },
                            ],
                            "encrypted_content": "<9572 characters>",
                        },
                        {
                            "type": "function_call",
                            "call_id": "call_gL7JE6GDeGGsFubqO2XGytyO",
                            "name": "update_plan",
                            "arguments": '{"plan":"Plan:\\n1) Determine required first-letter acrostics for lines: odd lines -> SAMIRA; even lines -> DAWOOD (12 total lines).\\n2) For each line, select a world capital whose name begins with the required first letter.\\n3) Compose each line so that the first letter of every word spells that chosen capital (word-initial acrostic), while keeping imagery poetic and coherent.\\n4) Double-check all acrostics (line-initial and word-initial) for accuracy.\\n5) Deliver the 12-line poem."}',
                            "id": "fc_68c42d3e9e4881968b15fbb8253f58540e8bc41441c948f6",
                        },
                        {
                            "type": "function_call_output",
                            "call_id": "call_gL7JE6GDeGGsFubqO2XGytyO",
                            "output": "plan updated",
                        },
                    ],
                    "tools": [
                        {
                            "type": "function",
                            "name": "update_plan",
                            "description": "",
                            "parameters": {
                                "additionalProperties": False,
                                "properties": {"plan": {"type": "string"}},
                                "required": ["plan"],
                                "type": "object",
                            },
                            "strict": True,
                        }
                    ],
                    "store": False,
                    "include": ["reasoning.encrypted_content"],
                    "stream": False,
                },
                "structured_output_json_schema": {
                    "model": "gpt-4o",
                    "input": [
                        {
                            "role": "user",
                            "content": "Please recommend the most popular book by Patrick Rothfuss",
                        }
                    ],
                    "text": {
                        "format": {
                            "type": "json_schema",
                            "name": "Book",
                            "schema": {
                                "$defs": {
                                    "Author": {
                                        "description": "The author of a book.",
                                        "properties": {
                                            "first_name": {"title": "First Name", "type": "string"},
                                            "last_name": {"title": "Last Name", "type": "string"},
                                        },
                                        "required": ["first_name", "last_name"],
                                        "title": "Author",
                                        "type": "object",
                                        "additionalProperties": False,
                                    }
                                },
                                "description": "A book with a rating. The title should be in all caps!",
                                "properties": {
                                    "title": {"title": "Title", "type": "string"},
                                    "author": {"$ref": "#/$defs/Author"},
                                    "rating": {
                                        "description": "For testing purposes, the rating should be 7",
                                        "title": "Rating",
                                        "type": "integer",
                                    },
                                },
                                "required": ["title", "author", "rating"],
                                "title": "Book",
                                "type": "object",
                                "additionalProperties": False,
                            },
                            "strict": True,
                        }
                    },
                    "store": False,
                    "stream": False,
                },
                "text_basic": {
                    "model": "gpt-4o",
                    "input": [{"role": "user", "content": "What is 4200 + 42?"}],
                    "store": False,
                    "stream": False,
                },
                "text_stream": {
                    "model": "gpt-4o",
                    "input": [{"role": "user", "content": "What is 4200 + 42?"}],
                    "store": False,
                    "stream": True,
                },
                "tool_call_single": {
                    "model": "gpt-4o",
                    "input": [{"role": "user", "content": "What is the capital of PotatoLand?"}],
                    "tools": [
                        {
                            "type": "function",
                            "name": "get_capital",
                            "description": "",
                            "parameters": {
                                "additionalProperties": False,
                                "properties": {"country": {"type": "string"}},
                                "required": ["country"],
                                "type": "object",
                            },
                            "strict": True,
                        }
                    ],
                    "store": False,
                    "stream": False,
                },
                "tool_call_stream": {
                    "model": "gpt-4.1",
                    "input": [
                        {"role": "user", "content": "What is the weather like in Boston today?"}
                    ],
                    "tools": [
                        {
                            "type": "function",
                            "name": "get_current_weather",
                            "description": "Get the current weather in a given location",
                            "parameters": {
                                "type": "object",
                                "properties": {
                                    "location": {
                                        "type": "string",
                                        "description": "The city and state, e.g. San Francisco, CA",
                                    },
                                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                                },
                                "required": ["location", "unit"],
                            },
                            "strict": False,
                        }
                    ],
                    "store": False,
                    "stream": True,
                },
                "tool_result_followup": {
                    "model": "gpt-4o",
                    "input": [
                        {"role": "user", "content": "What is the capital of PotatoLand?"},
                        {
                            "type": "function_call",
                            "call_id": "call_YfwRsW8sUxDKipwyhWTzOXCA",
                            "name": "get_capital",
                            "arguments": '{"country":"PotatoLand"}',
                        },
                        {
                            "type": "function_call_output",
                            "call_id": "call_YfwRsW8sUxDKipwyhWTzOXCA",
                            "output": "Potato City",
                        },
                    ],
                    "tools": [
                        {
                            "type": "function",
                            "name": "get_capital",
                            "description": "",
                            "parameters": {
                                "additionalProperties": False,
                                "properties": {"country": {"type": "string"}},
                                "required": ["country"],
                                "type": "object",
                            },
                            "strict": True,
                        }
                    ],
                    "store": False,
                    "stream": False,
                },
                "web_search": {
                    "model": "gpt-4o",
                    "input": [
                        {
                            "role": "user",
                            "content": "Jan 1, 2026 is a date in the past. Use the web search tool to lookup the price of bitcoin on that date.",
                        }
                    ],
                    "store": False,
                    "stream": False,
                },
            }
        )[name(path)]
    )


# -- the recorded tool loops: the follow-up built from what the adapter made of the answer ---

PAIRS = [
    ("tool_call_single", "tool_result_followup"),
    ("parallel_tool_calls", "parallel_tool_results_followup"),
    ("reasoning_summary_tool_call", "reasoning_tool_result_followup_cached"),
]


@pytest.mark.parametrize(("first", "then"), PAIRS, ids=[t for _, t in PAIRS])
async def test_a_recorded_follow_up_is_built_from_the_answer_before_it(
    first: str, then: str
) -> None:
    asked, answered = load(FIXTURES / f"{first}.json"), load(FIXTURES / f"{then}.json")
    replayed = await replay(WIRE, stream=False, body=asked["response"]["body_json"])
    recorded = answered["request"]["body"]
    before = conversation(asked["request"]["body"])
    outputs = [
        ToolResult(item["call_id"], "", item["output"])
        for item in recorded["input"]
        if item.get("type") == "function_call_output"
    ]
    follow_up = ModelRequest(
        model=before.model,
        system=before.system,
        messages=[*before.messages, replayed.response.message, *outputs],
        tools=before.tools,
        stream=before.stream,
    )
    built = ResponsesWire("openai").build(follow_up)
    assert structure(built) == structure(recorded)
    said = asked["response"]["body_json"]["output"]
    sent_back = [i for i in built["input"] if i.get("type") in ("reasoning", "function_call")]
    # The reasoning item exactly as it came; each call with the id of the item it came in.
    assert [i for i in sent_back if i["type"] == "reasoning"] == [
        {k: i[k] for k in ("type", "id", "summary", "encrypted_content")}
        for i in said
        if i["type"] == "reasoning"
    ]
    assert [i["id"] for i in sent_back if i["type"] == "function_call"] == [
        i["id"] for i in said if i["type"] == "function_call"
    ]


# -- recorded answer → what we make of it, streamed and not ---------------------------------


def shown(response: ModelResponse, recorded: dict[str, Any]) -> ModelResponse:
    """``response`` with each reasoning item's encrypted content (checked against the recorded
    output first) named rather than spelled out."""
    encrypted = {
        i["id"]: i["encrypted_content"]
        for i in recorded.get("output") or ()
        if i["type"] == "reasoning" and i.get("encrypted_content")
    }
    for thought in response.message.thinking:
        if thought.signature is not None:
            assert thought.id is not None and thought.signature == encrypted[thought.id]
            thought.signature = f"<the encrypted_content of {thought.id}>"
    return response


@pytest.mark.parametrize("path", ANSWERED, ids=name)
async def test_a_recorded_answer_folds_alike_streamed_or_not(path: Path) -> None:
    recorded = load(path)["response"]
    if "body_sse" in recorded:
        streamed = await replay(WIRE, stream=True, body=recorded["body_sse"])
        whole = as_body(WIRE, streamed.response)
        unstreamed = await replay(WIRE, stream=False, body=whole)
        final = recorded["body_sse"].rsplit("data: ", 1)[1]
        body = json.loads(final)["response"]
    else:
        body = recorded["body_json"]
        unstreamed = await replay(WIRE, stream=False, body=body)
        streamed = await replay(WIRE, stream=True, body=as_stream(WIRE, body))
    assert streamed.response == unstreamed.response
    for replayed in (streamed, unstreamed):  # what went to the sink is what was said
        said = replayed.response.message
        assert "".join(replayed.text) == said.text
        assert "".join(replayed.thinking) == "".join(t.text for t in said.thinking)
    assert (
        shown(unstreamed.response, body)
        == snapshot(
            {
                "incomplete_max_output_tokens": ModelResponse(
                    message=AssistantMessage(
                        text="""\
Sure! Here is a list of all 50 U.S. states:

1. Alabama
2. Alaska
3. Arizona
4. Arkansas
5. California
6. Colorado
7. Connecticut
8. Delaware
9. Florida\
""",
                        model="gpt-4o-2024-08-06",
                        provider="openai",
                        text_id="msg_043a58ea47ac058e0068f966c13978819797bd165a2ecefb31",
                    ),
                    usage=Usage(input_tokens=14, output_tokens=50, requests=1),
                    finish_reason="length",
                    model="gpt-4o-2024-08-06",
                ),
                "parallel_tool_calls": ModelResponse(
                    message=AssistantMessage(
                        tool_calls=[
                            ToolCall(
                                id="call_bzXaB1HDWsWy7n6bMrxJzNNa",
                                name="secret_retrieval_tool",
                                arguments={"password": "mellon"},
                                item_id="fc_05020a9191cad7ac0068f966b1446c8190b34b78d6f788eeec",
                            ),
                            ToolCall(
                                id="call_Dd4wvykCr6NttXKxRK0BFH96",
                                name="secret_retrieval_tool",
                                arguments={"password": "radiance"},
                                item_id="fc_05020a9191cad7ac0068f966b16f80819088f6dab6c16c4653",
                            ),
                        ],
                        model="gpt-4o-2024-08-06",
                        provider="openai",
                    ),
                    usage=Usage(input_tokens=36, output_tokens=54, requests=1),
                    finish_reason="tool_calls",
                    model="gpt-4o-2024-08-06",
                ),
                "parallel_tool_results_followup": ModelResponse(
                    message=AssistantMessage(
                        text="""\
Here are the secrets:

- For password "mellon": Welcome to Moria!
- For password "radiance": Life before Death\
""",
                        model="gpt-4o-2024-08-06",
                        provider="openai",
                        text_id="msg_05020a9191cad7ac0068f966b29f2c8190b17e1e76b16eb31c",
                    ),
                    usage=Usage(input_tokens=136, output_tokens=30, requests=1),
                    finish_reason="stop",
                    model="gpt-4o-2024-08-06",
                ),
                "parallel_tool_results_followup_stream": ModelResponse(
                    message=AssistantMessage(
                        text="""\
Here are the secrets associated with the passwords:

- **mellon:** Welcome to Moria!
- **radiance:** Life before Death\
""",
                        model="gpt-4o-2024-08-06",
                        provider="openai",
                        text_id="msg_087fd66e6fa25afd0069689b346fb8819394caa5e641b11cc3",
                    ),
                    usage=Usage(input_tokens=136, output_tokens=30, requests=1),
                    finish_reason="stop",
                    model="gpt-4o-2024-08-06",
                ),
                "previous_response_id_tool_result": ModelResponse(
                    message=AssistantMessage(
                        text="The weather in New York is sunny and 72°F.",
                        model="gpt-4.1-2025-04-14",
                        provider="openai",
                        text_id="msg_0435eb6c2aa8e9eb0069e16003516081958ff28fb508f53045",
                    ),
                    usage=Usage(input_tokens=139, output_tokens=14, requests=1),
                    finish_reason="stop",
                    model="gpt-4.1-2025-04-14",
                ),
                "reasoning_summary_stream": ModelResponse(
                    message=AssistantMessage(
                        text="3",
                        thinking=[
                            Thinking(
                                text="""\
**Exploring prime numbers**

I need to find prime numbers less than 400 that contain the substring "79" in their decimal representation. First, 79 itself is a candidate. Then there's 179, 279, and 379 — all of which are under 400. However, no three-digit numbers with "79" fit since they exceed 400. Now, I need to test the primality of these candidates — starting with 79, which is prime, then checking 179 by testing it against small primes.\
""",
                                provider="openai",
                                id="rs_0a1097cbfef27a8c00696afa2459008196a08a4261aba00f56",
                            ),
                            Thinking(
                                text="""\
**Testing prime candidates**

I’m checking the primality of my candidates. For 179, I see it’s odd, not divisible by 3, 5, 7, 11, and 13, so it's prime! Next, 279 is definitely not prime since it's divisible by 3. Now, for 379, after testing against several primes, I conclude that it’s also prime. I’m also confirming there aren’t any other numbers with "79" under 400 — only 79 itself works, and 97 has the digits reversed, which doesn't count. So, 179 and 379 are my primes!\
""",
                                provider="openai",
                                id="rs_0a1097cbfef27a8c00696afa2459008196a08a4261aba00f56",
                            ),
                            Thinking(
                                text="""\
**Final count of primes**

I’ve confirmed the primes with the substring "79." The candidates are 79, 179, 279, and 379. I’ve established that 79, 179, and 379 are prime, which gives us a total of three primes. I rechecked 379 against small primes and verified its primality, so that’s settled. I also ruled out numbers like 3979 since they’re over 400. Lastly, I considered whether leading zeros affect the substring, but I believe they don’t, so I’m finalizing my answer as "3."\
""",
                                provider="openai",
                                id="rs_0a1097cbfef27a8c00696afa2459008196a08a4261aba00f56",
                            ),
                        ],
                        model="gpt-5-2025-08-07",
                        provider="openai",
                        text_id="msg_0a1097cbfef27a8c00696afa33407081969902b1b1da52f678",
                    ),
                    usage=Usage(
                        input_tokens=32, output_tokens=839, requests=1, reasoning_tokens=832
                    ),
                    finish_reason="stop",
                    model="gpt-5-2025-08-07",
                ),
                "reasoning_summary_tool_call": ModelResponse(
                    message=AssistantMessage(
                        tool_calls=[
                            ToolCall(
                                id="call_gL7JE6GDeGGsFubqO2XGytyO",
                                name="update_plan",
                                arguments={
                                    "plan": """\
Plan:
1) Determine required first-letter acrostics for lines: odd lines -> SAMIRA; even lines -> DAWOOD (12 total lines).
2) For each line, select a world capital whose name begins with the required first letter.
3) Compose each line so that the first letter of every word spells that chosen capital (word-initial acrostic), while keeping imagery poetic and coherent.
4) Double-check all acrostics (line-initial and word-initial) for accuracy.
5) Deliver the 12-line poem.\
"""
                                },
                                item_id="fc_68c42d3e9e4881968b15fbb8253f58540e8bc41441c948f6",
                            )
                        ],
                        thinking=[
                            Thinking(
                                text="""\
**Creating a structured poem**

I need to craft a 12-line poem where the first letters of the odd lines spell "SAMIRA" and the even lines spell "DAWOOD." That means I need to have the odd lines correspond to S, A, M, I, R, A, and the even lines correspond to D, A, W, O, O, D. \n\

Additionally, each line's first word should start with a letter that matches its line number, and all the first letters of the words in each line should spell out a capital city. It's a bit complex, but I’m excited to work through this!\
""",
                                provider="openai",
                                signature="<the encrypted_content of rs_68c42d29124881968e24c1ca8c1fc7860e8bc41441c948f6>",
                                id="rs_68c42d29124881968e24c1ca8c1fc7860e8bc41441c948f6",
                            ),
                            Thinking(
                                text="""\
**Formulating meaningful lines**

I want to create 12 lines where the first letter of each odd line spells out a capital starting with S, A, M, I, R, A, and each even line spells out one starting with D, A, W, O, O, D. Each line's first word must also match its line’s initial letter, which leads to some interesting choices.

For example, for the first line, I could use "Sofia," which gives me the initials S, O, F, I, A. A poetic line could be something like "Softly, old fountains illumine alleys." This approach helps in crafting those lines creatively!\
""",
                                provider="openai",
                                id="rs_68c42d29124881968e24c1ca8c1fc7860e8bc41441c948f6",
                            ),
                            Thinking(
                                text="""\
**Continuing with capital inspiration**

For line 2, I'm choosing "Doha," which gives me the initials D, O, H, A. A possible line could be: "Dunes over harbor, aglow." Then for line 3, I’m selecting "Athens," which corresponds to A, T, H, E, N, S. I could use a line like, "Ancient temples hum, echoing novas' songs."

Line 4 needs to start with A again to fit the "DAWOOD" sequence, so I picked "Abuja" with initials A, B, U, J, A, creating: "Amber breezes uplift jasmine avenues." Lastly, for line 5, I went with "Madrid," giving me M, A, D, R, I, D, leading to "Moonlight across distant roofs, inviting dreams."\
""",
                                provider="openai",
                                id="rs_68c42d29124881968e24c1ca8c1fc7860e8bc41441c948f6",
                            ),
                            Thinking(
                                text="""\
**Adding to the poem structure**

For line 6, I'm choosing "Warsaw," giving me initials W, A, R, S, A, W. A suitable line could be, "Whispers across river, stars awake, wandering."

Next, for line 7, I picked "Islamabad," which has the initials I, S, L, A, M, A, B, A, D, so I need nine words. I came up with, "Ivory sands lull, as minarets arise, birds ascend, dreaming," which fits perfectly.

For line 8, I went with "Oslo," using O, S, L, O, and a line like, "Orchards shimmer, lanterns over." Lastly, for line 9, I selected "Rabat," leading to "Rustling almonds breathe amber twilight."\
""",
                                provider="openai",
                                id="rs_68c42d29124881968e24c1ca8c1fc7860e8bc41441c948f6",
                            ),
                            Thinking(
                                text="""\
**Finalizing the poem and updating the plan**

For line 10, I went with "Ottawa," creating my line as "Oaks tremble, twin auroras weave, alight," which fits the initials O, T, T, A, W, A. Then, for line 11, I selected "Ankara" with the line "Autumn nights kindle amber river arcs," matching A, N, K, A, R, A.

Lastly, for line 12, I chose "Damascus," resulting in "Dusty alleys murmur, amber spices curl under starlight," which fits D, A, M, A, S, C, U, S.

I also need to make sure I update my plan using the necessary steps, like mapping initials to capitals and crafting coherent lines. I should use the update_plan tool for that!\
""",
                                provider="openai",
                                id="rs_68c42d29124881968e24c1ca8c1fc7860e8bc41441c948f6",
                            ),
                        ],
                        model="gpt-5-2025-08-07",
                        provider="openai",
                    ),
                    usage=Usage(
                        input_tokens=124, output_tokens=1926, requests=1, reasoning_tokens=1792
                    ),
                    finish_reason="tool_calls",
                    model="gpt-5-2025-08-07",
                ),
                "reasoning_tool_result_followup_cached": ModelResponse(
                    message=AssistantMessage(
                        text="""\
Softly old fountains illumine alleys
Dunes over harbor aglow
Ancient temples hum, echoing novas' songs
Amber breezes uplift jasmine avenues
Moonlight across distant roofs, inviting dreams
Whispers across river, stars awake, wandering
Ivory sands lull, as minarets arise, birds ascend, dreaming
Orchards shimmer, lanterns over
Rustling almonds breathe amber twilight
Oaks tremble, twin auroras weave, alight
Autumn nights kindle amber river arcs
Dusty alleys murmur, amber spices curl under starlight\
""",
                        model="gpt-5-2025-08-07",
                        provider="openai",
                        text_id="msg_68c42d408eec8196ae1c5883e07c093e0e8bc41441c948f6",
                    ),
                    usage=Usage(
                        input_tokens=2087, output_tokens=124, cache_read_tokens=2048, requests=1
                    ),
                    finish_reason="stop",
                    model="gpt-5-2025-08-07",
                ),
                "structured_output_json_schema": ModelResponse(
                    message=AssistantMessage(
                        text='{"title":"THE NAME OF THE WIND","author":{"first_name":"Patrick","last_name":"Rothfuss"},"rating":7}',
                        model="gpt-4o-2024-08-06",
                        provider="openai",
                        text_id="msg_005e0ab32c3df1050068f966cedb648190a1769c7ec5dea7e9",
                    ),
                    usage=Usage(input_tokens=166, output_tokens=30, requests=1),
                    finish_reason="stop",
                    model="gpt-4o-2024-08-06",
                ),
                "text_basic": ModelResponse(
                    message=AssistantMessage(
                        text="4200 + 42 equals 4242.",
                        model="gpt-4o-2024-08-06",
                        provider="openai",
                        text_id="msg_0bee99a5de5b12910068f966a1fb3c819587e157227fc327ff",
                    ),
                    usage=Usage(input_tokens=16, output_tokens=11, requests=1),
                    finish_reason="stop",
                    model="gpt-4o-2024-08-06",
                ),
                "text_stream": ModelResponse(
                    message=AssistantMessage(
                        text="4200 + 42 equals 4242.",
                        model="gpt-4o-2024-08-06",
                        provider="openai",
                        text_id="msg_0360bd45725b0a010068f966a601b081958e95c4085b086532",
                    ),
                    usage=Usage(input_tokens=16, output_tokens=11, requests=1),
                    finish_reason="stop",
                    model="gpt-4o-2024-08-06",
                ),
                "tool_call_single": ModelResponse(
                    message=AssistantMessage(
                        tool_calls=[
                            ToolCall(
                                id="call_YfwRsW8sUxDKipwyhWTzOXCA",
                                name="get_capital",
                                arguments={"country": "PotatoLand"},
                                item_id="fc_04907f5d3de791830068fbaa1b310c81958dc9c508e878c632",
                            )
                        ],
                        model="gpt-4o-2024-08-06",
                        provider="openai",
                    ),
                    usage=Usage(input_tokens=40, output_tokens=18, requests=1),
                    finish_reason="tool_calls",
                    model="gpt-4o-2024-08-06",
                ),
                "tool_call_stream": ModelResponse(
                    message=AssistantMessage(
                        tool_calls=[
                            ToolCall(
                                id="call_lGe2JKQEBSP15opZ3KfxtEUC",
                                name="get_current_weather",
                                arguments={"location": "Boston, MA", "unit": "celsius"},
                                item_id="fc_682c94223680819192287a2f84ee1bb20b603284be451166",
                            )
                        ],
                        model="gpt-4.1-2025-04-14",
                        provider="openai",
                    ),
                    usage=Usage(input_tokens=75, output_tokens=23, requests=1),
                    finish_reason="tool_calls",
                    model="gpt-4.1-2025-04-14",
                ),
                "tool_result_followup": ModelResponse(
                    message=AssistantMessage(
                        text="The capital of PotatoLand is Potato City.",
                        model="gpt-4o-2024-08-06",
                        provider="openai",
                        text_id="msg_0e9950da9eac6a780068fbaa1c738c819d8bddf998e57232c3",
                    ),
                    usage=Usage(input_tokens=67, output_tokens=11, requests=1),
                    finish_reason="stop",
                    model="gpt-4o-2024-08-06",
                ),
                "web_search": ModelResponse(
                    message=AssistantMessage(
                        text="""\
Here’s the historical Bitcoin price (BTC) on January\u202f1,\u202f2026:

• According to **StatMuse Money**, the closing price of Bitcoin on January\u202f1,\u202f2026, was **$88,722.07**. This figure is based on hourly data throughout the day, culminating in that closing value. ([statmuse.com](https://www.statmuse.com/money/ask/bitcoin-price-january-1.-2026?utm_source=openai))

• By comparison, **TipRanks** reports that on the same date Bitcoin closed at **$88,836.06**, with an opening price of $88,725.47, a high of $89,019.52, and a low of $88,323.34. ([tipranks.com](https://www.tipranks.com/cryptocurrency/btc-usd/historical-prices?utm_source=openai))

• Additional context from **Economic Times** indicates that on January\u202f1,\u202f2026, Bitcoin was trading in a relatively narrow range between **$87,500 and $88,000**, with a cited value of **$87,440** at a specific point during the day. ([m.economictimes.com](https://m.economictimes.com/markets/cryptocurrency/bitcoin-stays-range-bound-between-87500-and-88000-as-crypto-consolidation-continues/articleshow/126283114.cms?utm_source=openai))

These figures reflect slight variations depending on the data source and timestamp considered:

- **StatMuse**: closing price of **$88,722.07**. ([statmuse.com](https://www.statmuse.com/money/ask/bitcoin-price-january-1.-2026?utm_source=openai))  \n\
- **TipRanks**: closing price of **$88,836.06**, with corresponding open, high, and low values. ([tipranks.com](https://www.tipranks.com/cryptocurrency/btc-usd/historical-prices?utm_source=openai))  \n\
- **Economic Times**: trading around **$87,440** within that day’s range. ([m.economictimes.com](https://m.economictimes.com/markets/cryptocurrency/bitcoin-stays-range-bound-between-87500-and-88000-as-crypto-consolidation-continues/articleshow/126283114.cms?utm_source=openai))  \n\

To reconcile these, sources may use different exchanges for their data (e.g., Binance, Coinbase) or calculate based on different time zones or intervals. However, a reliable median estimate for the closing price lies between **$88.7k and $88.8k**.

Let me know if you'd like additional historical data, price charts, or comparisons across other dates!\
""",
                        model="gpt-4o-2024-08-06",
                        provider="openai",
                        text_id="msg_0a7994baf3e38d320069793af90afc81968ccaeb6921390419",
                    ),
                    usage=Usage(input_tokens=16981, output_tokens=461, requests=1),
                    finish_reason="stop",
                    model="gpt-4o-2024-08-06",
                ),
            }
        )[name(path)]
    )


# -- recorded errors ------------------------------------------------------------------------


@pytest.mark.parametrize("path", FAILED, ids=name)
async def test_a_recorded_error_is_classified_alike_streamed_or_not(path: Path) -> None:
    recorded = load(path)["response"]
    errors = [
        (
            await replay(
                WIRE,
                stream=stream,
                status=recorded["status"],
                body=recorded["body_json"],
                headers=recorded["headers"],
            )
        ).error
        for stream in (True, False)
    ]
    assert errors[0] == errors[1]
    assert (
        errors[0]
        == snapshot(
            {
                "error_400_invalid_value_stream_request": {
                    "kind": "bad_request",
                    "code": "validation",
                    "retryable": False,
                    "failover": False,
                    "status": 400,
                    "retry_after": None,
                    "request_id": None,
                    "message": "openai answered 400 (decimal_below_min_value): Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got -1 instead.",
                },
                "error_400_model_not_found": {
                    "kind": "not_found",
                    "code": "model_not_found",
                    "retryable": False,
                    "failover": False,
                    "status": 400,
                    "retry_after": None,
                    "request_id": "req_4034503e497442ed887b172915a0b39a",
                    "message": "openai answered 400 (model_not_found): The requested model 'this-model-does-not-exist-12345' does not exist.",
                },
                "error_400_reasoning_item_without_following_item": {
                    "kind": "bad_request",
                    "code": "validation",
                    "retryable": False,
                    "failover": False,
                    "status": 400,
                    "retry_after": None,
                    "request_id": None,
                    "message": "openai answered 400 (invalid_request_error): Item 'rs_68c42de022c881948db7ed1cc2529f2e0202c9ad459e0d23' of type 'reasoning' was provided without its required following item.",
                },
                "error_401_invalid_api_key": {
                    "kind": "auth",
                    "code": "provider_auth",
                    "retryable": False,
                    "failover": False,
                    "status": 401,
                    "retry_after": None,
                    "request_id": "req_39477683f0a842109fac21a8bf24c001",
                    "message": "openai answered 401 (invalid_api_key): Incorrect API key provided: invalid-*****2345. You can find your API key at https://platform.openai.com/account/api-keys.",
                },
            }
        )[name(path)]
    )


# -- what the recordings do not show --------------------------------------------------------


def said_with_reasoning(provider: str = "openai", **changes: Any) -> AssistantMessage:
    thinking = [
        Thinking("**Plan**\n\nLook it up.", provider, "gAAAA-encrypted", id="rs_1"),
        Thinking("**Then**\n\nAnswer.", provider, id="rs_1"),
    ]
    call = ToolCall("call_1", "search", {"q": "Paris"}, item_id="fc_1")
    fields: dict[str, Any] = {
        "text": "Let me look.",
        "tool_calls": [call],
        "thinking": thinking,
        "provider": provider,
        "text_id": "msg_1",
        **changes,
    }
    return AssistantMessage(**fields)


def assistant_items(message: AssistantMessage, wire: Any) -> Any:
    request = ModelRequest(
        "gpt-5",
        "",
        [UserMessage("Weather?"), message, ToolResult("call_1", "search", "sunny")],
    )
    body = wire.build(request)
    return body["input"][1:-1] if "input" in body else body["messages"][1:-1]


def test_reasoning_and_item_ids_go_back_only_to_the_provider_that_sent_them() -> None:
    said = said_with_reasoning()
    built = {
        provider: assistant_items(said, wire)
        for provider, wire in (
            ("openai", ResponsesWire("openai")),
            ("openai-eu", ResponsesWire("openai-eu")),
            ("openai chat", OpenAIWire("openai")),
            ("anthropic", AnthropicWire("anthropic")),
        )
    }
    assert built == snapshot(
        {
            "openai": [
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [
                        {
                            "type": "summary_text",
                            "text": """\
**Plan**

Look it up.\
""",
                        },
                        {
                            "type": "summary_text",
                            "text": """\
**Then**

Answer.\
""",
                        },
                    ],
                    "encrypted_content": "gAAAA-encrypted",
                },
                {
                    "type": "message",
                    "role": "assistant",
                    "id": "msg_1",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}],
                },
                {
                    "type": "function_call",
                    "call_id": "call_1",
                    "name": "search",
                    "arguments": '{"q":"Paris"}',
                    "id": "fc_1",
                },
            ],
            "openai-eu": [
                {"role": "assistant", "content": "Let me look."},
                {
                    "type": "function_call",
                    "call_id": "call_1",
                    "name": "search",
                    "arguments": '{"q":"Paris"}',
                },
            ],
            "openai chat": [
                {
                    "role": "assistant",
                    "content": "Let me look.",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "search", "arguments": '{"q":"Paris"}'},
                        }
                    ],
                }
            ],
            "anthropic": [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Let me look."},
                        {
                            "type": "tool_use",
                            "id": "call_1",
                            "name": "search",
                            "input": {"q": "Paris"},
                        },
                    ],
                }
            ],
        }
    )


@pytest.mark.parametrize(
    ("case", "changes"),
    [
        ("a turn cut short", {"interrupted": True}),
        ("text without the id of its item", {"text_id": None}),
        ("no encrypted content", {"thinking": [Thinking("x", "openai", id="rs_1")]}),
    ],
)
def test_reasoning_the_api_could_not_take_is_not_sent(case: str, changes: dict[str, Any]) -> None:
    items = assistant_items(said_with_reasoning(**changes), ResponsesWire("openai"))
    assert [i.get("type", "message") for i in items] == ["message", "function_call"]
    kept = assistant_items(said_with_reasoning(), ResponsesWire("openai"))
    assert [i.get("type") for i in kept] == ["reasoning", "message", "function_call"]


def test_a_turn_cut_short_goes_back_without_its_reasoning_or_ids() -> None:
    """A reply cut off (here at a budget's output cap) is stored marked interrupted and sent
    with a note after its text: no longer what the provider sent, so it is not sent as that
    message (by its id), nor with the reasoning that came before it."""
    cut = said_with_reasoning(tool_calls=[], interrupted=True)
    later = [UserMessage("Weather?"), cut, UserMessage("Go on.")]
    built = ResponsesWire("openai").build(ModelRequest("gpt-5", "", window(later)))
    assert built["input"][1] == {
        "role": "assistant",
        "content": f"Let me look.\n\n{CUT_NOTE}",
    }
    whole = said_with_reasoning(tool_calls=[])
    built = ResponsesWire("openai").build(ModelRequest("gpt-5", "", window([*later[:1], whole])))
    assert [i.get("type") for i in built["input"][1:]] == ["reasoning", "message"]


def test_a_reasoning_item_without_a_summary_goes_back_as_it_came() -> None:
    item = {"id": "rs_2", "type": "reasoning", "summary": [], "encrypted_content": "gAAAA-2"}
    call = {"id": "fc_2", "type": "function_call", "call_id": "call_2", "name": "f"}
    fold = ResponseFold("openai")
    ResponsesWire("openai").fold_body(
        {"model": "gpt-5", "status": "completed", "output": [item, {**call, "arguments": "{}"}]},
        fold,
    )
    said = fold.result().message
    assert said.thinking == [Thinking("", "openai", "gAAAA-2", id="rs_2")]
    sent = assistant_items(said, ResponsesWire("openai"))
    assert sent[0] == item and sent[1]["id"] == "fc_2"


def test_a_failed_response_mid_stream_is_classified_by_its_error_code() -> None:
    wire = ResponsesWire("openai")
    failures = {}
    for code in ("server_error", "rate_limit_exceeded", "invalid_prompt"):
        failed = {
            "type": "response.failed",
            "response": {"status": "failed", "error": {"code": code, "message": "it failed"}},
        }
        with pytest.raises(ProviderError) as info:
            wire.fold_event("response.failed", json.dumps(failed), ResponseFold("openai"))
        failures[code] = (str(info.value.code), info.value.retryable)
    assert failures == {
        "server_error": (ErrorCode.PROVIDER_UNAVAILABLE.value, True),
        "rate_limit_exceeded": (ErrorCode.PROVIDER_RATE_LIMIT.value, True),
        "invalid_prompt": (ErrorCode.VALIDATION.value, False),
    }


def test_each_tool_is_strict_as_its_own_schema_allows_request_after_request() -> None:
    closed = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    closed["additionalProperties"] = False
    loose = {"type": "object", "properties": {"q": {"type": "string"}}}
    wire = ResponsesWire("openai")  # one wire serves every request of a provider
    strict = []
    for schemas in ([closed, loose], [loose], [closed], [dict(loose), dict(closed)]):
        tools = [ToolDefinition(f"t{n}", "", schema) for n, schema in enumerate(schemas)]
        built = wire.build(ModelRequest("gpt-4.1", "", [UserMessage("hi")], tools=tools))
        strict.append([t["strict"] for t in built["tools"]])
    assert strict == [[True, False], [False], [True], [False, True]]


def test_usage_keeps_cached_and_reasoning_tokens() -> None:
    fold = ResponseFold("openai")
    usage = {
        "input_tokens": 2087,
        "input_tokens_details": {"cached_tokens": 2048},
        "output_tokens": 1926,
        "output_tokens_details": {"reasoning_tokens": 1792},
    }
    ResponsesWire("openai").fold_body({"status": "completed", "output": [], "usage": usage}, fold)
    assert fold.result().usage == Usage(
        input_tokens=2087,
        output_tokens=1926,
        cache_read_tokens=2048,
        requests=1,
        reasoning_tokens=1792,
    )


def test_the_recordings_ship_with_the_tests() -> None:
    """A fresh clone tests the adapter against every recording: none may silently go missing."""
    assert len(FILES) == 19
    assert (FIXTURES / "README.md").is_file()


# -- the assistant message's phase (gpt-5.3-codex and later) ---------------------------------
# No recording shows it; built from OpenAI's reference: an output message of a newer reasoning
# model says whether it is commentary (said on the way, with tool calls) or the final answer,
# and that ``phase`` is to be resent on every assistant message of a follow-up.


def phased_answer(phase: str, calls: bool) -> dict[str, Any]:
    output: list[dict[str, Any]] = [
        {
            "id": "rs_55",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "**Look it up**"}],
            "encrypted_content": "gAAAA-55",
        },
        {
            "id": "msg_55",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "phase": phase,
            "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}],
        },
    ]
    if calls:
        output.append(
            {
                "id": "fc_55",
                "type": "function_call",
                "status": "completed",
                "call_id": "call_55",
                "name": "search",
                "arguments": '{"q":"Paris"}',
            }
        )
    return {
        "id": "resp_55",
        "object": "response",
        "model": "gpt-5.5",
        "status": "completed",
        "output": output,
        "usage": {
            "input_tokens": 80,
            "output_tokens": 60,
            "output_tokens_details": {"reasoning_tokens": 40},
        },
    }


def streamed(answer: dict[str, Any], *, phase_added: bool) -> str:
    """``answer`` as the API streams it; without ``phase_added``, the message's phase only in
    its ``response.output_item.done``, not in its ``added``."""
    events = responses_events(answer)
    if not phase_added:
        for name, data in events:
            if name == "response.output_item.added":
                data["item"].pop("phase", None)
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)


@pytest.mark.parametrize("how", ["streamed", "streamed, phase at done", "unstreamed"])
@pytest.mark.parametrize(("phase", "calls"), [("commentary", True), ("final_answer", False)])
async def test_the_phase_of_an_answer_goes_back_with_its_message(
    phase: str, calls: bool, how: str
) -> None:
    answer = phased_answer(phase, calls)
    stream = how != "unstreamed"
    body: Any = streamed(answer, phase_added=how == "streamed") if stream else answer
    said = (await replay(WIRE, stream=stream, body=body)).response.message
    assert (said.text_id, said.phase) == ("msg_55", phase)
    # Kept with the thread: a follow-up built in another process from the stored message.
    stored = message_from_dict(json.loads(json.dumps(said.to_dict())))
    results = [ToolResult("call_55", "search", "sunny")] if calls else [UserMessage("And?")]
    for message in (said, stored):
        request = ModelRequest("gpt-5.5", "", [UserMessage("Weather?"), message, *results])
        items = ResponsesWire("openai").build(request)["input"]
        assert [i.get("type") for i in items[1:3]] == ["reasoning", "message"]
        assert (items[2]["id"], items[2]["phase"]) == ("msg_55", phase)
    # Not to another provider, nor for a turn cut short: their message is plain text.
    cut = AssistantMessage(said.text, provider="openai", text_id="msg_55", phase=phase)
    cut.interrupted = True
    for wire, message in ((ResponsesWire("openai-eu"), said), (ResponsesWire("openai"), cut)):
        built = wire.build(ModelRequest("gpt-5.5", "", [UserMessage("Weather?"), message]))
        assert built["input"][1] == {"role": "assistant", "content": "Let me look."}


def test_a_message_without_a_phase_goes_back_without_one() -> None:
    said = said_with_reasoning()
    assert said.phase is None and "phase" not in said.to_dict()
    items = assistant_items(said, ResponsesWire("openai"))
    assert "phase" not in items[1]
    assert (
        "phase"
        in assistant_items(said_with_reasoning(phase="commentary"), ResponsesWire("openai"))[1]
    )
