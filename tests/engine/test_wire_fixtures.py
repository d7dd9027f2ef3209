"""Both wire adapters against every recorded real exchange in tests/fixtures/providers/,
compared as whole values with snapshots (inline-snapshot: ``pytest --inline-snapshot=create``
writes a new one, ``=fix`` a changed one after review; a plain run fails on any difference).

For each exchange: the conversation in the recorded request is rebuilt in agentrunner's types and
sent through our adapter, and the request we build is the snapshot (it was checked against the
recorded one when written: roles, texts, tool calls and results, tool schemas, thinking replay,
structured-output fields; sampling and provider options agentrunner does not model per request —
temperature, stop sequences, thinking budgets, tool_choice, tool ``strict`` flags — are not in
it). The recorded answer is replayed through the HTTP client both ways, streamed and not: as
recorded, and the other way (a recorded body re-sent as the stream the provider would have sent;
a recorded stream's folded content re-sent as a whole body); both fold to the same response,
which is the snapshot — or, for an error, the same classified error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import Is, snapshot

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
)
from agentrunner.engine.wire_anthropic import AnthropicWire
from agentrunner.engine.wire_openai import OpenAIWire
from tests.engine.wire_replay import as_body, as_stream, replay, wire_for

# A copy of the project's shared recordings, kept in the repository so a fresh clone tests the
# adapters against them (the copy's README says where each exchange comes from).
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "providers"
FILES = sorted(FIXTURES.glob("*/*.json"))


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def name(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


# 9 KB the two prompt-caching requests share, compared as recorded rather than copied here.
CACHED_SYSTEM_PROMPT = load(FIXTURES / "anthropic/cache_read_max_tokens.json")["request"]["body"][
    "system"
][0]["text"]
ANSWERED = [p for p in FILES if load(p)["response"]["status"] < 400]
FAILED = [p for p in FILES if load(p)["response"]["status"] >= 400]


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or () if part.get("type") == "text")


# -- recorded request → our conversation ----------------------------------------------------


def openai_request(body: dict[str, Any]) -> ModelRequest:
    system = "\n".join(
        text_of(m["content"]) for m in body["messages"] if m["role"] in ("system", "developer")
    )
    messages: list[Message] = []
    for m in body["messages"]:
        if m["role"] == "user":
            messages.append(UserMessage(text_of(m["content"])))
        elif m["role"] == "assistant":
            calls = [
                ToolCall(
                    c["id"], c["function"]["name"], json.loads(c["function"]["arguments"] or "{}")
                )
                for c in m.get("tool_calls") or ()
            ]
            messages.append(AssistantMessage(text_of(m.get("content")), calls))
        elif m["role"] == "tool":
            messages.append(ToolResult(m["tool_call_id"], "", text_of(m["content"])))
    tools = [
        ToolDefinition(
            t["function"]["name"],
            t["function"].get("description", ""),
            t["function"].get("parameters", {}),
        )
        for t in body.get("tools") or ()
    ]
    schema = (body.get("response_format") or {}).get("json_schema") or {}
    return ModelRequest(
        model=body["model"],
        system=system,
        messages=messages,
        tools=tools,
        output_schema=schema.get("schema"),
        output_schema_name=schema.get("name", "output"),
        stream=bool(body.get("stream")),
    )


def anthropic_request(body: dict[str, Any]) -> ModelRequest:
    messages: list[Message] = []
    for m in body["messages"]:
        blocks = (
            [{"type": "text", "text": m["content"]}]
            if isinstance(m["content"], str)
            else m["content"]
        )
        if m["role"] == "user":
            for b in blocks:
                if b["type"] == "tool_result":
                    messages.append(
                        ToolResult(
                            b["tool_use_id"], "", text_of(b.get("content")), bool(b.get("is_error"))
                        )
                    )
                else:
                    messages.append(UserMessage(b["text"]))
        else:
            message = AssistantMessage()
            for b in blocks:
                if b["type"] == "text":
                    message.text += b["text"]
                elif b["type"] == "tool_use":
                    message.tool_calls.append(ToolCall(b["id"], b["name"], b["input"]))
                elif b["type"] == "thinking":
                    message.thinking.append(Thinking(b["thinking"], "anthropic", b["signature"]))
                elif b["type"] == "redacted_thinking":
                    message.thinking.append(Thinking("", "anthropic", redacted=b["data"]))
            messages.append(message)
    fmt = (body.get("output_config") or {}).get("format") or {}
    return ModelRequest(
        model=body["model"],
        system=text_of(body.get("system")) if body.get("system") else "",
        messages=messages,
        tools=[
            ToolDefinition(t["name"], t.get("description", ""), t["input_schema"])
            for t in body.get("tools") or ()
        ],
        max_output_tokens=body.get("max_tokens"),
        output_schema=fmt.get("schema"),
        stream=bool(body.get("stream")),
    )


# -- recorded request → the request we build ------------------------------------------------


@pytest.mark.parametrize("path", FILES, ids=name)
def test_the_request_built_from_a_recorded_conversation(path: Path) -> None:
    recorded, provider = load(path)["request"]["body"], load(path)["provider"]
    if not all(isinstance(m, dict) for m in recorded["messages"]):
        pytest.skip("the recorded request is malformed on purpose (the provider rejected it)")
    conversation = (openai_request if provider == "openai" else anthropic_request)(recorded)
    assert (
        wire_for(provider).build(conversation)
        == snapshot(
            {
                "anthropic/cache_creation_max_tokens": {
                    "model": "claude-sonnet-4-20250514",
                    "max_tokens": 100,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "text",
                                    "text": "What are the key principles for designing scalable systems?",
                                    "cache_control": {"type": "ephemeral"},
                                }
                            ],
                        }
                    ],
                    "system": [
                        {
                            "type": "text",
                            "text": Is(CACHED_SYSTEM_PROMPT),
                            "cache_control": {"type": "ephemeral"},
                        }
                    ],
                    "stream": False,
                },
                "anthropic/cache_read_max_tokens": {
                    "model": "claude-sonnet-4-20250514",
                    "max_tokens": 100,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "text",
                                    "text": "What is a system",
                                    "cache_control": {"type": "ephemeral"},
                                }
                            ],
                        }
                    ],
                    "system": [
                        {
                            "type": "text",
                            "text": Is(CACHED_SYSTEM_PROMPT),
                            "cache_control": {"type": "ephemeral"},
                        }
                    ],
                    "stream": False,
                },
                "anthropic/error_401_stream_request": {
                    "model": "claude-sonnet-4-0",
                    "max_tokens": 16000,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "text",
                                    "text": "This should fail with AuthenticationError",
                                    "cache_control": {"type": "ephemeral"},
                                }
                            ],
                        }
                    ],
                    "stream": True,
                },
                "anthropic/error_404_not_found": {
                    "model": "this-model-does-not-exist-12345",
                    "max_tokens": 16000,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "text",
                                    "text": "This should fail with NotFoundError",
                                    "cache_control": {"type": "ephemeral"},
                                }
                            ],
                        }
                    ],
                    "stream": False,
                },
                "anthropic/error_429_rate_limit": {
                    "model": "claude-3-opus-20240229",
                    "max_tokens": 500,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "text",
                                    "text": "What is the result of 1,984,135 * 9,343,116?",
                                    "cache_control": {"type": "ephemeral"},
                                }
                            ],
                        },
                        {
                            "role": "assistant",
                            "content": [
                                {
                                    "type": "text",
                                    "text": """\
<thinking>
The calculator tool is relevant for answering this question as it performs basic arithmetic operations.
Required parameters:
- expression: The user directly provided the mathematical expression "1,984,135 * 9,343,116". While it contains commas, I can reasonably infer those are just used as digit separators and the expression is equivalent to "1984135 * 9343116".
All the required parameters are provided, so I can proceed with calling the calculator tool.
</thinking>\
""",
                                },
                                {
                                    "type": "tool_use",
                                    "id": "toolu_01EtZG1zaJKx1Aghi8f9AtiT",
                                    "name": "calculator",
                                    "input": {"expression": "1984135 * 9343116"},
                                },
                            ],
                        },
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "tool_result",
                                    "tool_use_id": "toolu_01EtZG1zaJKx1Aghi8f9AtiT",
                                    "content": "18538003464660",
                                    "cache_control": {"type": "ephemeral"},
                                }
                            ],
                        },
                    ],
                    "tools": [
                        {
                            "name": "calculator",
                            "description": "A simple calculator that performs basic arithmetic operations.",
                            "input_schema": {
                                "type": "object",
                                "properties": {
                                    "expression": {
                                        "type": "string",
                                        "description": "The mathematical expression to evaluate (e.g., '2 + 3 * 4').",
                                    }
                                },
                                "required": ["expression"],
                            },
                            "cache_control": {"type": "ephemeral"},
                        }
                    ],
                    "stream": False,
                },
                "anthropic/parallel_tool_results_followup": {
                    "model": "claude-haiku-4-5",
                    "max_tokens": 4096,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "text",
                                    "text": "Alice, Bob, Charlie and Daisy are a family. Who is the youngest?",
                                    "cache_control": {"type": "ephemeral"},
                                }
                            ],
                        },
                        {
                            "role": "assistant",
                            "content": [
                                {
                                    "type": "text",
                                    "text": "I'll help you find out who is the youngest by retrieving information about each family member. I'll retrieve their entity information to compare their ages.",
                                },
                                {
                                    "type": "tool_use",
                                    "id": "toolu_0167cfEnoQaPviGdVXA95zcu",
                                    "name": "retrieve_entity_info",
                                    "input": {"name": "Alice"},
                                },
                                {
                                    "type": "tool_use",
                                    "id": "toolu_01EEe2V5HD1Ac4rKiUR4HD2T",
                                    "name": "retrieve_entity_info",
                                    "input": {"name": "Bob"},
                                },
                                {
                                    "type": "tool_use",
                                    "id": "toolu_01XFyAjstT3966qvRynZyVPo",
                                    "name": "retrieve_entity_info",
                                    "input": {"name": "Charlie"},
                                },
                                {
                                    "type": "tool_use",
                                    "id": "toolu_013mnQZbgtK2oe3Mo3XKJsx3",
                                    "name": "retrieve_entity_info",
                                    "input": {"name": "Daisy"},
                                },
                            ],
                        },
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "tool_result",
                                    "tool_use_id": "toolu_0167cfEnoQaPviGdVXA95zcu",
                                    "content": "alice is bob's wife",
                                },
                                {
                                    "type": "tool_result",
                                    "tool_use_id": "toolu_01EEe2V5HD1Ac4rKiUR4HD2T",
                                    "content": "bob is alice's husband",
                                },
                                {
                                    "type": "tool_result",
                                    "tool_use_id": "toolu_01XFyAjstT3966qvRynZyVPo",
                                    "content": "charlie is alice's son",
                                },
                                {
                                    "type": "tool_result",
                                    "tool_use_id": "toolu_013mnQZbgtK2oe3Mo3XKJsx3",
                                    "content": "daisy is bob's daughter and charlie's younger sister",
                                    "cache_control": {"type": "ephemeral"},
                                },
                            ],
                        },
                    ],
                    "system": [
                        {
                            "type": "text",
                            "text": """\

    Use the `retrieve_entity_info` tool to get information about a specific person.
    If you need to use `retrieve_entity_info` to get information about multiple people, try
    to call them in parallel as much as possible.
    Think step by step and then provide a single most probable concise answer.
    \
""",
                            "cache_control": {"type": "ephemeral"},
                        }
                    ],
                    "tools": [
                        {
                            "name": "retrieve_entity_info",
                            "description": "Get the knowledge about the given entity.",
                            "input_schema": {
                                "additionalProperties": False,
                                "properties": {"name": {"type": "string"}},
                                "required": ["name"],
                                "type": "object",
                            },
                            "cache_control": {"type": "ephemeral"},
                        }
                    ],
                    "stream": False,
                },
                "anthropic/parallel_tool_use": {
                    "model": "claude-haiku-4-5",
                    "max_tokens": 4096,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "text",
                                    "text": "Alice, Bob, Charlie and Daisy are a family. Who is the youngest?",
                                    "cache_control": {"type": "ephemeral"},
                                }
                            ],
                        }
                    ],
                    "system": [
                        {
                            "type": "text",
                            "text": """\

    Use the `retrieve_entity_info` tool to get information about a specific person.
    If you need to use `retrieve_entity_info` to get information about multiple people, try
    to call them in parallel as much as possible.
    Think step by step and then provide a single most probable concise answer.
    \
""",
                            "cache_control": {"type": "ephemeral"},
                        }
                    ],
                    "tools": [
                        {
                            "name": "retrieve_entity_info",
                            "description": "Get the knowledge about the given entity.",
                            "input_schema": {
                                "additionalProperties": False,
                                "properties": {"name": {"type": "string"}},
                                "required": ["name"],
                                "type": "object",
                            },
                            "cache_control": {"type": "ephemeral"},
                        }
                    ],
                    "stream": False,
                },
                "anthropic/parallel_tool_use_stream": {
                    "model": "claude-sonnet-4-0",
                    "max_tokens": 16000,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "text",
                                    "text": "Please retrieve the secrets associated with each of these passwords: mellon,radiance",
                                    "cache_control": {"type": "ephemeral"},
                                }
                            ],
                        }
                    ],
                    "system": [
                        {
                            "type": "text",
                            "text": "Use parallel tool calling.",
                            "cache_control": {"type": "ephemeral"},
                        }
                    ],
                    "tools": [
                        {
                            "name": "secret_retrieval_tool",
                            "description": "A tool that requires a password to retrieve a secret.",
                            "input_schema": {
                                "properties": {"password": {"title": "Password", "type": "string"}},
                                "required": ["password"],
                                "additionalProperties": False,
                                "type": "object",
                            },
                            "cache_control": {"type": "ephemeral"},
                        }
                    ],
                    "stream": True,
                },
                "anthropic/stop_sequence_prefill_stream": {
                    "model": "claude-haiku-4-5-20251001",
                    "max_tokens": 8192,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "text",
                                    "text": "Very short function describing a pelican",
                                    "cache_control": {"type": "ephemeral"},
                                }
                            ],
                        },
                        {"role": "assistant", "content": [{"type": "text", "text": "```python"}]},
                    ],
                    "stream": True,
                },
                "anthropic/structured_output_json_schema": {
                    "model": "claude-sonnet-4-5",
                    "max_tokens": 4096,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "text",
                                    "text": "Tell me about London",
                                    "cache_control": {"type": "ephemeral"},
                                }
                            ],
                        }
                    ],
                    "output_config": {
                        "format": {
                            "type": "json_schema",
                            "schema": {
                                "additionalProperties": False,
                                "properties": {
                                    "city": {"type": "string"},
                                    "country": {"type": "string"},
                                    "population": {"type": "integer"},
                                },
                                "required": ["city", "country", "population"],
                                "type": "object",
                            },
                        }
                    },
                    "stream": False,
                },
                "anthropic/text_basic": {
                    "model": "claude-sonnet-4-0",
                    "max_tokens": 16000,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "text",
                                    "text": "What is 4200 + 42?",
                                    "cache_control": {"type": "ephemeral"},
                                }
                            ],
                        }
                    ],
                    "stream": False,
                },
                "anthropic/text_stream": {
                    "model": "claude-sonnet-4-0",
                    "max_tokens": 16000,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "text",
                                    "text": "What is 4200 + 42?",
                                    "cache_control": {"type": "ephemeral"},
                                }
                            ],
                        }
                    ],
                    "stream": True,
                },
                "anthropic/thinking": {
                    "model": "claude-sonnet-4-5",
                    "max_tokens": 4096,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "text",
                                    "text": "How do I cross the street?",
                                    "cache_control": {"type": "ephemeral"},
                                }
                            ],
                        }
                    ],
                    "stream": False,
                },
                "anthropic/thinking_stream": {
                    "model": "claude-haiku-4-5-20251001",
                    "max_tokens": 8192,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "text",
                                    "text": "Two names for a pet pelican, be brief",
                                    "cache_control": {"type": "ephemeral"},
                                }
                            ],
                        }
                    ],
                    "stream": True,
                },
                "anthropic/tool_result_followup": {
                    "model": "claude-sonnet-4-5",
                    "max_tokens": 4096,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "text",
                                    "text": "What's the weather in Paris?",
                                    "cache_control": {"type": "ephemeral"},
                                }
                            ],
                        },
                        {
                            "role": "assistant",
                            "content": [
                                {
                                    "type": "tool_use",
                                    "id": "toolu_01WN4AuToBnJyXNQXwQBBebj",
                                    "name": "get_weather",
                                    "input": {"city": "Paris"},
                                }
                            ],
                        },
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "tool_result",
                                    "tool_use_id": "toolu_01WN4AuToBnJyXNQXwQBBebj",
                                    "content": "Sunny, 22C in Paris",
                                    "cache_control": {"type": "ephemeral"},
                                }
                            ],
                        },
                    ],
                    "tools": [
                        {
                            "name": "get_weather",
                            "description": "Get the current weather for a city.",
                            "input_schema": {
                                "additionalProperties": False,
                                "properties": {"city": {"type": "string"}},
                                "required": ["city"],
                                "type": "object",
                            },
                            "cache_control": {"type": "ephemeral"},
                        }
                    ],
                    "stream": False,
                },
                "anthropic/tool_use_single": {
                    "model": "claude-sonnet-4-5",
                    "max_tokens": 4096,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "text",
                                    "text": "What's the weather in Paris?",
                                    "cache_control": {"type": "ephemeral"},
                                }
                            ],
                        }
                    ],
                    "tools": [
                        {
                            "name": "get_weather",
                            "description": "Get the current weather for a city.",
                            "input_schema": {
                                "additionalProperties": False,
                                "properties": {"city": {"type": "string"}},
                                "required": ["city"],
                                "type": "object",
                            },
                            "cache_control": {"type": "ephemeral"},
                        }
                    ],
                    "stream": False,
                },
                "openai/error_400_unsupported_parameter": {
                    "model": "gpt-5-mini",
                    "messages": [{"role": "user", "content": "What is 4200 + 42?"}],
                    "stream": False,
                },
                "openai/error_401_invalid_api_key": {
                    "model": "gpt-4o",
                    "messages": [
                        {"role": "user", "content": "This should fail with AuthenticationError"}
                    ],
                    "stream": False,
                },
                "openai/error_404_model_not_found_stream_request": {
                    "model": "this-model-does-not-exist-12345",
                    "messages": [
                        {"role": "user", "content": "This should fail with NotFoundError"}
                    ],
                    "stream": True,
                    "stream_options": {"include_usage": True},
                },
                "openai/error_429_rate_limit": {
                    "model": "gpt-3.5-turbo",
                    "messages": [{"role": "user", "content": "Tell me a short joke about pigs"}],
                    "stream": False,
                },
                "openai/finish_length": {
                    "model": "gpt-4o",
                    "messages": [{"role": "user", "content": "List all U.S. states."}],
                    "stream": False,
                },
                "openai/parallel_tool_calls": {
                    "model": "gpt-4o",
                    "messages": [
                        {"role": "system", "content": "Use parallel tool calling."},
                        {
                            "role": "user",
                            "content": "Please retrieve the secrets associated with each of these passwords: mellon,radiance",
                        },
                    ],
                    "tools": [
                        {
                            "type": "function",
                            "function": {
                                "name": "secret_retrieval_tool",
                                "description": "A tool that requires a password to retrieve a secret.",
                                "parameters": {
                                    "properties": {
                                        "password": {"title": "Password", "type": "string"}
                                    },
                                    "required": ["password"],
                                    "additionalProperties": False,
                                    "type": "object",
                                },
                            },
                        }
                    ],
                    "stream": False,
                },
                "openai/parallel_tool_results_followup": {
                    "model": "gpt-4o",
                    "messages": [
                        {"role": "system", "content": "Use parallel tool calling."},
                        {
                            "role": "user",
                            "content": "Please retrieve the secrets associated with each of these passwords: mellon,radiance",
                        },
                        {
                            "role": "assistant",
                            "content": "",
                            "tool_calls": [
                                {
                                    "id": "call_v6LacIrChvs6ITVpIZqy5tFc",
                                    "type": "function",
                                    "function": {
                                        "name": "secret_retrieval_tool",
                                        "arguments": '{"password":"mellon"}',
                                    },
                                },
                                {
                                    "id": "call_onyWzk4mLTGKzW9cthmf4Llq",
                                    "type": "function",
                                    "function": {
                                        "name": "secret_retrieval_tool",
                                        "arguments": '{"password":"radiance"}',
                                    },
                                },
                            ],
                        },
                        {
                            "role": "tool",
                            "tool_call_id": "call_v6LacIrChvs6ITVpIZqy5tFc",
                            "content": "Welcome to Moria!",
                        },
                        {
                            "role": "tool",
                            "tool_call_id": "call_onyWzk4mLTGKzW9cthmf4Llq",
                            "content": "Life before Death",
                        },
                    ],
                    "tools": [
                        {
                            "type": "function",
                            "function": {
                                "name": "secret_retrieval_tool",
                                "description": "A tool that requires a password to retrieve a secret.",
                                "parameters": {
                                    "properties": {
                                        "password": {"title": "Password", "type": "string"}
                                    },
                                    "required": ["password"],
                                    "additionalProperties": False,
                                    "type": "object",
                                },
                            },
                        }
                    ],
                    "stream": False,
                },
                "openai/structured_output_json_schema": {
                    "model": "gpt-4o",
                    "messages": [
                        {
                            "role": "user",
                            "content": "Please recommend the most popular book by Patrick Rothfuss",
                        }
                    ],
                    "response_format": {
                        "type": "json_schema",
                        "json_schema": {
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
                        },
                    },
                    "stream": False,
                },
                "openai/text_basic": {
                    "model": "gpt-4o",
                    "messages": [{"role": "user", "content": "What is 4200 + 42?"}],
                    "stream": False,
                },
                "openai/text_stream_include_usage": {
                    "model": "gpt-4o",
                    "messages": [{"role": "user", "content": "What is 4200 + 42?"}],
                    "stream": True,
                    "stream_options": {"include_usage": True},
                },
                "openai/tool_call_single": {
                    "model": "gpt-5-mini",
                    "messages": [{"role": "user", "content": "What's the weather in Paris?"}],
                    "tools": [
                        {
                            "type": "function",
                            "function": {
                                "name": "get_weather",
                                "description": "Get the current weather for a city.",
                                "parameters": {
                                    "additionalProperties": False,
                                    "properties": {"city": {"type": "string"}},
                                    "required": ["city"],
                                    "type": "object",
                                },
                            },
                        }
                    ],
                    "stream": False,
                },
                "openai/tool_call_stream": {
                    "model": "gpt-4o-mini",
                    "messages": [
                        {
                            "role": "user",
                            "content": "What is the capital of the UK? Use the tool, then answer.",
                        }
                    ],
                    "tools": [
                        {
                            "type": "function",
                            "function": {
                                "name": "get_capital",
                                "description": "",
                                "parameters": {
                                    "additionalProperties": False,
                                    "properties": {"country": {"type": "string"}},
                                    "required": ["country"],
                                    "type": "object",
                                },
                            },
                        }
                    ],
                    "stream": True,
                    "stream_options": {"include_usage": True},
                },
                "openai/tool_result_followup": {
                    "model": "gpt-5-mini",
                    "messages": [
                        {"role": "user", "content": "What's the weather in Paris?"},
                        {
                            "role": "assistant",
                            "content": "",
                            "tool_calls": [
                                {
                                    "id": "call_aDdJTteHrpMdhdkEkyxjxEHH",
                                    "type": "function",
                                    "function": {
                                        "name": "get_weather",
                                        "arguments": '{"city":"Paris"}',
                                    },
                                }
                            ],
                        },
                        {
                            "role": "tool",
                            "tool_call_id": "call_aDdJTteHrpMdhdkEkyxjxEHH",
                            "content": "Sunny, 22C in Paris",
                        },
                    ],
                    "tools": [
                        {
                            "type": "function",
                            "function": {
                                "name": "get_weather",
                                "description": "Get the current weather for a city.",
                                "parameters": {
                                    "additionalProperties": False,
                                    "properties": {"city": {"type": "string"}},
                                    "required": ["city"],
                                    "type": "object",
                                },
                            },
                        }
                    ],
                    "stream": False,
                },
            }
        )[name(path)]
    )


# -- recorded answer → what we make of it, streamed and not ---------------------------------


@pytest.mark.parametrize("path", ANSWERED, ids=name)
async def test_a_recorded_answer_folds_alike_streamed_or_not(path: Path) -> None:
    provider, recorded = load(path)["provider"], load(path)["response"]
    if "body_sse" in recorded:
        streamed = await replay(provider, stream=True, body=recorded["body_sse"])
        whole = as_body(provider, streamed.response)
        unstreamed = await replay(provider, stream=False, body=whole)
    else:
        unstreamed = await replay(provider, stream=False, body=recorded["body_json"])
        stream = as_stream(provider, recorded["body_json"])
        streamed = await replay(provider, stream=True, body=stream)
    assert streamed.response == unstreamed.response
    for replayed in (streamed, unstreamed):  # what went to the sink is what was said
        said = replayed.response.message
        assert "".join(replayed.text) == said.text
        assert "".join(replayed.thinking) == "".join(t.text for t in said.thinking)
    assert (
        unstreamed.response
        == snapshot(
            {
                "anthropic/cache_creation_max_tokens": ModelResponse(
                    message=AssistantMessage(
                        text="""\
Here are the key principles for designing scalable systems:

## 1. **Horizontal Scaling (Scale Out)**
- Add more servers rather than upgrading existing ones
- Design stateless services that can run on multiple instances
- Use load balancers to distribute traffic across instances

## 2. **Loose Coupling & Modularity**
- Break systems into independent, loosely coupled components
- Use microservices architecture when appropriate
- Implement clear\
""",
                        model="claude-sonnet-4-20250514",
                        provider="anthropic",
                    ),
                    usage=Usage(
                        input_tokens=2073, output_tokens=100, cache_write_tokens=2055, requests=1
                    ),
                    finish_reason="length",
                    model="claude-sonnet-4-20250514",
                ),
                "anthropic/cache_read_max_tokens": ModelResponse(
                    message=AssistantMessage(
                        text="""\
A **system** is an organized collection of interconnected components that work together to achieve a specific purpose or function. Here are the key characteristics:

## Core Elements of a System:
- **Components/Parts**: Individual elements that make up the system
- **Relationships**: Connections and interactions between components
- **Purpose**: A specific goal or function the system serves
- **Boundaries**: What's included in vs. outside the system
- **Environment**: The external context in\
""",
                        model="claude-sonnet-4-20250514",
                        provider="anthropic",
                    ),
                    usage=Usage(
                        input_tokens=2066, output_tokens=100, cache_read_tokens=2055, requests=1
                    ),
                    finish_reason="length",
                    model="claude-sonnet-4-20250514",
                ),
                "anthropic/parallel_tool_results_followup": ModelResponse(
                    message=AssistantMessage(
                        text="""\
Based on the retrieved information, we can see the family relationships:
- Alice and Bob are married
- Charlie is their son
- Daisy is their daughter and Charlie's younger sister

Therefore, Daisy is the youngest in the family. She is described as Charlie's younger sister, which indicates she is the youngest among the four family members.\
""",
                        model="claude-haiku-4-5-20251001",
                        provider="anthropic",
                    ),
                    usage=Usage(input_tokens=771, output_tokens=77, requests=1),
                    finish_reason="stop",
                    model="claude-haiku-4-5-20251001",
                ),
                "anthropic/parallel_tool_use": ModelResponse(
                    message=AssistantMessage(
                        text="I'll help you find out who is the youngest by retrieving information about each family member. I'll retrieve their entity information to compare their ages.",
                        tool_calls=[
                            ToolCall(
                                id="toolu_0167cfEnoQaPviGdVXA95zcu",
                                name="retrieve_entity_info",
                                arguments={"name": "Alice"},
                            ),
                            ToolCall(
                                id="toolu_01EEe2V5HD1Ac4rKiUR4HD2T",
                                name="retrieve_entity_info",
                                arguments={"name": "Bob"},
                            ),
                            ToolCall(
                                id="toolu_01XFyAjstT3966qvRynZyVPo",
                                name="retrieve_entity_info",
                                arguments={"name": "Charlie"},
                            ),
                            ToolCall(
                                id="toolu_013mnQZbgtK2oe3Mo3XKJsx3",
                                name="retrieve_entity_info",
                                arguments={"name": "Daisy"},
                            ),
                        ],
                        model="claude-haiku-4-5-20251001",
                        provider="anthropic",
                    ),
                    usage=Usage(input_tokens=423, output_tokens=202, requests=1),
                    finish_reason="tool_calls",
                    model="claude-haiku-4-5-20251001",
                ),
                "anthropic/parallel_tool_use_stream": ModelResponse(
                    message=AssistantMessage(
                        text="I'll retrieve the secrets for both passwords you provided.",
                        tool_calls=[
                            ToolCall(
                                id="toolu_015cUijgET79LXjgeYQerN2h",
                                name="secret_retrieval_tool",
                                arguments={"password": "mellon"},
                            ),
                            ToolCall(
                                id="toolu_01XZTimPexA7h3EVKesnKt5T",
                                name="secret_retrieval_tool",
                                arguments={"password": "radiance"},
                            ),
                        ],
                        model="claude-sonnet-4-20250514",
                        provider="anthropic",
                    ),
                    usage=Usage(input_tokens=416, output_tokens=109, requests=1),
                    finish_reason="tool_calls",
                    model="claude-sonnet-4-20250514",
                ),
                "anthropic/stop_sequence_prefill_stream": ModelResponse(
                    message=AssistantMessage(
                        text="""\

def pelican():
    return "A large waterbird with a long bill and a throat pouch for catching fish."
""",
                        model="claude-haiku-4-5-20251001",
                        provider="anthropic",
                    ),
                    usage=Usage(input_tokens=16, output_tokens=28, requests=1),
                    finish_reason="stop_sequence",
                    model="claude-haiku-4-5-20251001",
                ),
                "anthropic/structured_output_json_schema": ModelResponse(
                    message=AssistantMessage(
                        text='{"city":"London","country":"United Kingdom","population":9002488}',
                        model="claude-sonnet-4-5-20250929",
                        provider="anthropic",
                    ),
                    usage=Usage(input_tokens=196, output_tokens=19, requests=1),
                    finish_reason="stop",
                    model="claude-sonnet-4-5-20250929",
                ),
                "anthropic/text_basic": ModelResponse(
                    message=AssistantMessage(
                        text="4200 + 42 = 4242",
                        model="claude-sonnet-4-20250514",
                        provider="anthropic",
                    ),
                    usage=Usage(input_tokens=17, output_tokens=15, requests=1),
                    finish_reason="stop",
                    model="claude-sonnet-4-20250514",
                ),
                "anthropic/text_stream": ModelResponse(
                    message=AssistantMessage(
                        text="4200 + 42 = 4242",
                        model="claude-sonnet-4-20250514",
                        provider="anthropic",
                    ),
                    usage=Usage(input_tokens=17, output_tokens=15, requests=1),
                    finish_reason="stop",
                    model="claude-sonnet-4-20250514",
                ),
                "anthropic/thinking": ModelResponse(
                    message=AssistantMessage(
                        text="""\
Here's how to cross the street safely:

## Basic Steps

1. **Find a safe crossing point**
   - Use crosswalks, intersections, or pedestrian signals when available
   - Avoid crossing between parked cars or on curves

2. **Stop at the curb/edge**
   - Don't step into the street yet

3. **Look all directions**
   - Look left, then right, then left again
   - Keep looking while you cross

4. **Listen for traffic**
   - Remove headphones or lower volume
   - Listen for engines, horns, or sirens

5. **Wait for a safe gap**
   - Make sure cars have stopped or are far enough away
   - Make eye contact with drivers if possible

6. **Cross steadily**
   - Walk, don't run (unless necessary)
   - Stay alert and keep watching for cars
   - Stay in the crosswalk if there is one

## At Traffic Signals
- Press the pedestrian button if there is one
- Wait for the "WALK" signal
- Still look both ways even with a walk signal
- Don't start crossing on a flashing "DON'T WALK"

**Key point**: Always assume drivers may not see you, so stay alert and make safe choices.\
""",
                        thinking=[
                            Thinking(
                                text="This is a straightforward question about pedestrian safety. I should provide clear, practical advice about crossing the street safely.",
                                provider="anthropic",
                                signature="Eq8CCkYICxgCKkDdadQOXMzNBqjrNVAKWsgUfg49NpPg026zBGxIIGwEHVCq0JTW/P9fKHjZdjgO8Dyx03YDw6hN0w1HucifXFggEgzoVS5Gogi9nvJSOA8aDDYuCAX4nGGkeHQLayIw+MWbf/TYU4AqT1X89p4S7fe7LOO+B8o24yCHQ8cFK9QK9p5WMj2Y4oBFBfC9uL8ZKpYBDjoKceyqFJA56ewVH73lNY5szTvm52+CVXMZJCb8x0B1bf9LIOsFUoJD6F4gZBdKfMqJgFCcKFR6iZh09pwa0E8lHvEnUeF1A0AJ6z0j8gQd5NxgipxWrF9908qJbMSkVDdg1dT/3Rr0nbGguAYTYdoV4MrVxyk29dSkkjyAAZBMI3p+HOwiaT6GmYq4qVE3kWnSoiEJGAE=",
                            )
                        ],
                        model="claude-sonnet-4-5-20250929",
                        provider="anthropic",
                    ),
                    usage=Usage(input_tokens=43, output_tokens=321, requests=1),
                    finish_reason="stop",
                    model="claude-sonnet-4-5-20250929",
                ),
                "anthropic/thinking_stream": ModelResponse(
                    message=AssistantMessage(
                        text="""\
1. **Pouch** - references their iconic bill pouch
2. **Pelé** - playful take on "pelican"\
""",
                        thinking=[
                            Thinking(
                                text="""\
The user wants two names for a pet pelican, and they want me to be brief. I'll suggest two names that would suit a pelican well.

Some good options:
- Pelé (play on pelican)
- Pouch (referencing their bill pouch)
- Captain Beak
- Squirt
- Scoop
- Wing

Let me give two brief, catchy names:\
""",
                                provider="anthropic",
                                signature="EuYDCmMIDBgCKkC05Zda4P+Cdk/LQKE+Aol4ZY3EY4wLDrf8XcApz2PiqrxiRjS7uY1kGtZ63vVlaVmtuIpdsHbkdfGHb9AsBYw+MhljbGF1ZGUtaGFpa3UtNC01LTIwMjUxMDAxOAASDAXGiw23anViCe75HBoMATySwgVJ0A405/0FIjDbVX0lAn7rEq/ejcuOZWDihLSbS9KGihD2QsWmXzp2Ly5ZD5vtKOcKvhEDQ0PCeVkqsALmnx7FhoJ7TQQyomwwFY+zA/Sft9n7u3lNE/RzbZMF4jmvo9i1vtNLETK18iSdCAhSy+NJLFRK/vcw6sVaDNrEMGgIadv5iZ0Jmx+iHyR8sXbasYDMbN07/ype7JGpKxHCdQOrNA7plS39Yy5l7hqJz4ueYoCpMxc+IkNY+TCyMpKwGxYqKSUdElyLr0Ko3vXtdLJBTJQuMtU+cz+UPHkpTbGRPntg/hBvNztCjlqqeM6PKoE8rsDJMx0+q1eOrFPC9SYgCZqSGHlSHoOexnfkrN2aTlZjcBcFblXq76bKF1YHINp3uL+jByhp91XFSkhF+b43BC9PDtRUYKw3wT+IZlEI6V3GppKBDSa8L0Sgm8m1Bb2PYvi3oIv+LDpUImrMckjemNZmBeGcEZQ4FjZiGAE=",
                            )
                        ],
                        model="claude-haiku-4-5-20251001",
                        provider="anthropic",
                    ),
                    usage=Usage(input_tokens=46, output_tokens=133, requests=1),
                    finish_reason="stop",
                    model="claude-haiku-4-5-20251001",
                ),
                "anthropic/tool_result_followup": ModelResponse(
                    message=AssistantMessage(
                        text="The weather in Paris is currently sunny with a temperature of 22°C (approximately 72°F). It's a beautiful day!",
                        model="claude-sonnet-4-5-20250929",
                        provider="anthropic",
                    ),
                    usage=Usage(input_tokens=646, output_tokens=31, requests=1),
                    finish_reason="stop",
                    model="claude-sonnet-4-5-20250929",
                ),
                "anthropic/tool_use_single": ModelResponse(
                    message=AssistantMessage(
                        tool_calls=[
                            ToolCall(
                                id="toolu_01WN4AuToBnJyXNQXwQBBebj",
                                name="get_weather",
                                arguments={"city": "Paris"},
                            )
                        ],
                        model="claude-sonnet-4-5-20250929",
                        provider="anthropic",
                    ),
                    usage=Usage(input_tokens=572, output_tokens=53, requests=1),
                    finish_reason="tool_calls",
                    model="claude-sonnet-4-5-20250929",
                ),
                "openai/finish_length": ModelResponse(
                    message=AssistantMessage(
                        text="""\
Certainly! Here is a list of all 50 U.S. states:

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
                    ),
                    usage=Usage(input_tokens=14, output_tokens=50, requests=1),
                    finish_reason="length",
                    model="gpt-4o-2024-08-06",
                ),
                "openai/parallel_tool_calls": ModelResponse(
                    message=AssistantMessage(
                        tool_calls=[
                            ToolCall(
                                id="call_v6LacIrChvs6ITVpIZqy5tFc",
                                name="secret_retrieval_tool",
                                arguments={"password": "mellon"},
                            ),
                            ToolCall(
                                id="call_onyWzk4mLTGKzW9cthmf4Llq",
                                name="secret_retrieval_tool",
                                arguments={"password": "radiance"},
                            ),
                        ],
                        model="gpt-4o-2024-08-06",
                        provider="openai",
                    ),
                    usage=Usage(input_tokens=75, output_tokens=53, requests=1),
                    finish_reason="tool_calls",
                    model="gpt-4o-2024-08-06",
                ),
                "openai/parallel_tool_results_followup": ModelResponse(
                    message=AssistantMessage(
                        text="""\
The secrets associated with the passwords are as follows:
- For "mellon": Welcome to Moria!
- For "radiance": Life before Death\
""",
                        model="gpt-4o-2024-08-06",
                        provider="openai",
                    ),
                    usage=Usage(input_tokens=149, output_tokens=32, requests=1),
                    finish_reason="stop",
                    model="gpt-4o-2024-08-06",
                ),
                "openai/structured_output_json_schema": ModelResponse(
                    message=AssistantMessage(
                        text='{"title":"THE NAME OF THE WIND","author":{"first_name":"Patrick","last_name":"Rothfuss"},"rating":7}',
                        model="gpt-4o-2024-08-06",
                        provider="openai",
                    ),
                    usage=Usage(input_tokens=172, output_tokens=29, requests=1),
                    finish_reason="stop",
                    model="gpt-4o-2024-08-06",
                ),
                "openai/text_basic": ModelResponse(
                    message=AssistantMessage(
                        text="\\(4200 + 42 = 4242\\).", model="gpt-4o-2024-08-06", provider="openai"
                    ),
                    usage=Usage(input_tokens=16, output_tokens=12, requests=1),
                    finish_reason="stop",
                    model="gpt-4o-2024-08-06",
                ),
                "openai/text_stream_include_usage": ModelResponse(
                    message=AssistantMessage(
                        text="4200 + 42 equals 4242.", model="gpt-4o-2024-08-06", provider="openai"
                    ),
                    usage=Usage(input_tokens=16, output_tokens=10, requests=1),
                    finish_reason="stop",
                    model="gpt-4o-2024-08-06",
                ),
                "openai/tool_call_single": ModelResponse(
                    message=AssistantMessage(
                        tool_calls=[
                            ToolCall(
                                id="call_aDdJTteHrpMdhdkEkyxjxEHH",
                                name="get_weather",
                                arguments={"city": "Paris"},
                            )
                        ],
                        model="gpt-5-mini-2025-08-07",
                        provider="openai",
                    ),
                    usage=Usage(input_tokens=132, output_tokens=23, requests=1),
                    finish_reason="tool_calls",
                    model="gpt-5-mini-2025-08-07",
                ),
                "openai/tool_call_stream": ModelResponse(
                    message=AssistantMessage(
                        tool_calls=[
                            ToolCall(
                                id="call_ZR5UUuTt3pf61kjwAJIYdVMj",
                                name="get_capital",
                                arguments={"country": "UK"},
                            )
                        ],
                        model="gpt-4o-mini-2024-07-18",
                        provider="openai",
                    ),
                    usage=Usage(input_tokens=53, output_tokens=15, requests=1),
                    finish_reason="tool_calls",
                    model="gpt-4o-mini-2024-07-18",
                ),
                "openai/tool_result_followup": ModelResponse(
                    message=AssistantMessage(
                        text="It's sunny in Paris right now, about 22°C (≈72°F). Would you like an hourly forecast, the forecast for tomorrow, or weather for another city?",
                        model="gpt-5-mini-2025-08-07",
                        provider="openai",
                    ),
                    usage=Usage(
                        input_tokens=167, output_tokens=171, requests=1, reasoning_tokens=128
                    ),
                    finish_reason="stop",
                    model="gpt-5-mini-2025-08-07",
                ),
            }
        )[name(path)]
    )


@pytest.mark.parametrize("path", FAILED, ids=name)
async def test_a_recorded_error_is_classified_alike_streamed_or_not(path: Path) -> None:
    provider, recorded = load(path)["provider"], load(path)["response"]
    body = recorded.get("body_json", recorded.get("body_text"))
    headers = recorded["headers"]
    errors = [
        (
            await replay(
                provider, stream=stream, status=recorded["status"], body=body, headers=headers
            )
        ).error
        for stream in (True, False)
    ]
    assert errors[0] == errors[1]
    assert (
        errors[0]
        == snapshot(
            {
                "anthropic/error_400_invalid_request": {
                    "kind": "bad_request",
                    "code": "validation",
                    "retryable": False,
                    "failover": False,
                    "status": 400,
                    "retry_after": None,
                    "request_id": "req_01BjwuzUpsYgKjQJguJyvKb3",
                    "message": "anthropic answered 400 (invalid_request_error): messages.0: Input does not match the expected shape.",
                },
                "anthropic/error_401_stream_request": {
                    "kind": "auth",
                    "code": "provider_auth",
                    "retryable": False,
                    "failover": False,
                    "status": 401,
                    "retry_after": None,
                    "request_id": "req_011CWdMFGmmtqDd5uETFt98k",
                    "message": "anthropic answered 401 (authentication_error): invalid x-api-key",
                },
                "anthropic/error_404_not_found": {
                    "kind": "not_found",
                    "code": "model_not_found",
                    "retryable": False,
                    "failover": False,
                    "status": 404,
                    "retry_after": None,
                    "request_id": "req_011CWbzicpaYMyAiiXobLkzi",
                    "message": "anthropic answered 404 (not_found_error): model: this-model-does-not-exist-12345",
                },
                "anthropic/error_429_rate_limit": {
                    "kind": "rate_limit",
                    "code": "provider_rate_limit",
                    "retryable": True,
                    "failover": True,
                    "status": 429,
                    "retry_after": 7.0,
                    "request_id": "req_01VRXnTtDN7bkGVjXbQNgzcL",
                    "message": "anthropic answered 429 (rate_limit_error): Number of requests has exceeded your per-minute rate limit (https://docs.anthropic.com/en/api/rate-limits); see the response headers for current usage. Please try again later or contact sales at https://www.anthropic.com/contact-sales to discuss your options for a rate limit increase.",
                },
                "openai/error_400_unsupported_parameter": {
                    "kind": "bad_request",
                    "code": "validation",
                    "retryable": False,
                    "failover": False,
                    "status": 400,
                    "retry_after": None,
                    "request_id": "req_3855783c722245b6ab7e4e7f7b2d85ce",
                    "message": "openai answered 400 (unsupported_parameter): Unsupported parameter: 'stop' is not supported with this model.",
                },
                "openai/error_401_invalid_api_key": {
                    "kind": "auth",
                    "code": "provider_auth",
                    "retryable": False,
                    "failover": False,
                    "status": 401,
                    "retry_after": None,
                    "request_id": "req_1963efc19b3b4865af98403581d580af",
                    "message": "openai answered 401 (invalid_api_key): Incorrect API key provided: invalid-*****2345. You can find your API key at https://platform.openai.com/account/api-keys.",
                },
                "openai/error_404_model_not_found_stream_request": {
                    "kind": "not_found",
                    "code": "model_not_found",
                    "retryable": False,
                    "failover": False,
                    "status": 404,
                    "retry_after": None,
                    "request_id": "req_254c1c5474fb4a81bd33af25f8780da9",
                    "message": "openai answered 404 (model_not_found): The model `this-model-does-not-exist-12345` does not exist or you do not have access to it.",
                },
                "openai/error_429_rate_limit": {
                    "kind": "rate_limit",
                    "code": "provider_rate_limit",
                    "retryable": True,
                    "failover": True,
                    "status": 429,
                    "retry_after": 20.0,
                    "request_id": "req_967f5451e5d64f96e3e87520ddcae8ed",
                    "message": "openai answered 429 (rate_limit_exceeded): Rate limit reached for gpt-3.5-turbo in organization org-REDACTED on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s. Visit https://platform.openai.com/account/rate-limits to learn more. You can increase your rate limit by adding a payment method to your account at https://platform.openai.com/account/billing.",
                },
            }
        )[name(path)]
    )


# -- what the recordings do not show --------------------------------------------------------


def test_thinking_is_replayed_only_to_the_same_provider() -> None:
    thinking = Thinking("Cross at the bridge.", "anthropic", "EuYDCmMI-signature")
    redacted = Thinking("", "anthropic", redacted="EmwKAhgBEgy-data")
    said = AssistantMessage("Take the bridge.", thinking=[thinking, redacted])
    request = ModelRequest(
        "claude-sonnet-4-5", "", [UserMessage("How do I cross?"), said, UserMessage("Thanks")]
    )
    built = {
        provider: wire.build(request)["messages"][1]
        for provider, wire in (
            ("anthropic", AnthropicWire("anthropic")),
            ("anthropic-eu", AnthropicWire("anthropic-eu")),
            ("openai", OpenAIWire("openai")),
        )
    }
    assert built == snapshot(
        {
            "anthropic": {
                "role": "assistant",
                "content": [
                    {
                        "type": "thinking",
                        "thinking": "Cross at the bridge.",
                        "signature": "EuYDCmMI-signature",
                    },
                    {"type": "redacted_thinking", "data": "EmwKAhgBEgy-data"},
                    {"type": "text", "text": "Take the bridge."},
                ],
            },
            "anthropic-eu": {
                "role": "assistant",
                "content": [{"type": "text", "text": "Take the bridge."}],
            },
            "openai": {"role": "assistant", "content": "Take the bridge."},
        }
    )


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "unstreamed"])
@pytest.mark.parametrize(
    ("recording", "reasoned"), [("tool_result_followup", 128), ("tool_call_single", 0)]
)
async def test_chat_completions_usage_counts_the_reasoning_tokens(
    recording: str, reasoned: int, stream: bool
) -> None:
    """gpt-5-mini's recorded answers over Chat Completions, one that reasoned (128 of its 171
    output tokens, ``completion_tokens_details.reasoning_tokens``) and one that did not."""
    body = load(FIXTURES / "openai" / f"{recording}.json")["response"]["body_json"]
    answer = as_stream("openai", body) if stream else body
    usage = (await replay("openai", stream=stream, body=answer)).response.usage
    assert usage.reasoning_tokens == reasoned
    assert usage.output_tokens == body["usage"]["completion_tokens"]
    assert usage.to_dict().get("reasoning_tokens", 0) == reasoned


def test_the_recordings_ship_with_the_tests() -> None:
    """A fresh clone tests the adapters against every recording: none may silently go missing."""
    counts = {name: len(list((FIXTURES / name).glob("*.json"))) for name in ("openai", "anthropic")}
    assert counts == {"openai": 13, "anthropic": 17}
    assert (FIXTURES / "README.md").is_file()
