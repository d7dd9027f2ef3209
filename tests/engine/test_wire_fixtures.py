"""Both wire adapters against every recorded real exchange in tests/fixtures/providers/.

For each exchange: the conversation in the recorded request is rebuilt in agentrunner's types and
sent through our adapter; the request we build must carry what the recorded one carries (roles,
texts, tool calls and results, tool schemas, thinking replay, structured-output fields). The
recorded response (JSON or the raw SSE bytes) must become the right text, tool calls, thinking,
usage and finish reason — or, for an error, the right code, retryable flag and failover.

Not compared, on purpose: sampling and provider options agentrunner does not model per request
(temperature, stop sequences, thinking budgets, tool_choice, tool ``strict`` flags).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentrunner.engine.failures import FailureKind, http_error, parse_retry_after
from agentrunner.engine.fold import ResponseFold
from agentrunner.engine.messages import (
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    Thinking,
    ToolCall,
    ToolDefinition,
    ToolResult,
    UserMessage,
)
from agentrunner.engine.sse import SSEDecoder
from agentrunner.engine.wire_anthropic import AnthropicWire
from agentrunner.engine.wire_openai import OpenAIWire
from agentrunner.errors import ErrorCode

# A copy of the project's shared recordings, kept in the repository so a fresh clone tests the
# adapters against them (the copy's README says where each exchange comes from).
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "providers"
FILES = sorted(FIXTURES.glob("*/*.json"))


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def wire_for(provider: str) -> OpenAIWire | AnthropicWire:
    return OpenAIWire("openai") if provider == "openai" else AnthropicWire("anthropic")


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


def normalize_openai(messages: list[dict[str, Any]]) -> list[Any]:
    out = []
    for m in messages:
        calls = [
            (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
            for c in m.get("tool_calls") or ()
        ]
        out.append((m["role"], text_of(m.get("content")) or "", calls, m.get("tool_call_id")))
    return out


def normalize_anthropic(messages: list[dict[str, Any]]) -> list[Any]:
    out = []
    for m in messages:
        blocks = (
            [{"type": "text", "text": m["content"]}]
            if isinstance(m["content"], str)
            else m["content"]
        )
        norm = []
        for b in blocks:
            if b["type"] == "text":
                norm.append(("text", b["text"]))
            elif b["type"] == "tool_use":
                norm.append(("tool_use", b["id"], b["name"], b["input"]))
            elif b["type"] == "tool_result":
                norm.append(
                    (
                        "tool_result",
                        b["tool_use_id"],
                        text_of(b.get("content")),
                        bool(b.get("is_error")),
                    )
                )
            elif b["type"] == "thinking":
                norm.append(("thinking", b["thinking"], b["signature"]))
            elif b["type"] == "redacted_thinking":
                norm.append(("redacted_thinking", b["data"]))
        out.append((m["role"], norm))
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_request_carries_what_the_recorded_one_carries(path: Path) -> None:
    recorded = load(path)["request"]["body"]
    provider = load(path)["provider"]
    if not all(isinstance(m, dict) for m in recorded["messages"]):
        pytest.skip("the recorded request is malformed on purpose (the provider rejected it)")
    if provider == "openai":
        built = OpenAIWire("openai").build(openai_request(recorded))
        assert normalize_openai(built["messages"]) == normalize_openai(recorded["messages"])
        assert built["model"] == recorded["model"]
        built_tools = [
            (t["function"]["name"], t["function"]["description"], t["function"]["parameters"])
            for t in built.get("tools", [])
        ]
        rec_tools = [
            (
                t["function"]["name"],
                t["function"].get("description", ""),
                t["function"].get("parameters", {}),
            )
            for t in recorded.get("tools", [])
        ]
        assert built_tools == rec_tools
        if "response_format" in recorded:
            ours, theirs = built["response_format"], recorded["response_format"]
            assert ours["type"] == theirs["type"] == "json_schema"
            for key in ("name", "schema", "strict"):
                assert ours["json_schema"][key] == theirs["json_schema"][key], key
        assert built["stream"] == bool(recorded.get("stream"))
        if recorded.get("stream"):
            assert built["stream_options"] == {"include_usage": True}
    else:
        built = AnthropicWire("anthropic").build(anthropic_request(recorded))
        assert normalize_anthropic(built["messages"]) == normalize_anthropic(recorded["messages"])
        assert built["model"] == recorded["model"]
        assert built["max_tokens"] == recorded["max_tokens"]
        assert text_of(built.get("system")) == text_of(recorded.get("system") or "")
        assert [
            (t["name"], t["description"], t["input_schema"]) for t in built.get("tools", [])
        ] == [
            (t["name"], t.get("description", ""), t["input_schema"])
            for t in recorded.get("tools", [])
        ]
        if "output_config" in recorded:
            assert built["output_config"]["format"] == recorded["output_config"]["format"]
        assert built["stream"] == bool(recorded.get("stream"))


# -- recorded response → our result ---------------------------------------------------------


def fold(provider: str, sse: str) -> ModelResponse:
    wire = wire_for(provider)
    folded = ResponseFold(provider)
    decoder = SSEDecoder()
    for line in sse.split("\n"):
        event = decoder.feed(line.rstrip("\r"))
        if event is not None:
            wire.fold_event(*event, folded)
    tail = decoder.flush()
    if tail is not None:
        wire.fold_event(*tail, folded)
    assert folded.complete, "the stream's end marker was not seen"
    return folded.result()


def parse(provider: str, body: dict[str, Any]) -> ModelResponse:
    folded = ResponseFold(provider)
    wire_for(provider).fold_body(body, folded)
    return folded.result()


def reference_openai(response: dict[str, Any], sse: str | None) -> dict[str, Any]:
    """An independent, simple reading of the recorded OpenAI response."""
    if sse is None:
        msg = response["choices"][0]["message"]
        return {
            "text": msg.get("content") or "",
            "calls": [
                (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                for c in msg.get("tool_calls") or ()
            ],
            "finish": response["choices"][0]["finish_reason"],
            "usage": response.get("usage"),
        }
    text, calls, finish, usage = "", {}, None, None
    for line in sse.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or ():
            text += choice["delta"].get("content") or ""
            for tc in choice["delta"].get("tool_calls") or ():
                slot = calls.setdefault(tc["index"], ["", "", ""])
                slot[0] = tc.get("id") or slot[0]
                slot[1] = (tc.get("function") or {}).get("name") or slot[1]
                slot[2] += (tc.get("function") or {}).get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    return {
        "text": text,
        "calls": [(i, n, json.loads(a)) for _, (i, n, a) in sorted(calls.items())],
        "finish": finish,
        "usage": usage,
    }


def reference_anthropic(response: dict[str, Any], sse: str | None) -> dict[str, Any]:
    if sse is None:
        blocks, stop, usage = response["content"], response["stop_reason"], response["usage"]
    else:
        blocks, stop, usage = [], None, {}
        for line in sse.splitlines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            if event["type"] == "message_start":
                usage.update(event["message"]["usage"])
            elif event["type"] == "content_block_start":
                blocks.append(dict(event["content_block"], _json=""))
            elif event["type"] == "content_block_delta":
                block, delta = blocks[event["index"]], event["delta"]
                block["text"] = block.get("text", "") + delta.get("text", "")
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
                block["signature"] = block.get("signature", "") + delta.get("signature", "")
                block["_json"] += delta.get("partial_json", "")
            elif event["type"] == "message_delta":
                stop = event["delta"]["stop_reason"]
                usage.update({k: v for k, v in event.get("usage", {}).items() if v is not None})
        for block in blocks:
            if block["type"] == "tool_use" and block["_json"]:
                block["input"] = json.loads(block["_json"])
    return {
        "text": "".join(b["text"] for b in blocks if b["type"] == "text"),
        "calls": [(b["id"], b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"],
        "thinking": [(b["thinking"], b["signature"]) for b in blocks if b["type"] == "thinking"],
        "finish": stop,
        "usage": usage,
    }


OPENAI_FINISH = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}
ANTHROPIC_FINISH = {
    "end_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "stop_sequence": "stop_sequence",
    "refusal": "content_filter",
}
EXPECTED_ERRORS = {
    400: (ErrorCode.VALIDATION, False, False),
    401: (ErrorCode.PROVIDER_AUTH, False, False),
    403: (ErrorCode.PROVIDER_AUTH, False, False),
    404: (ErrorCode.MODEL_NOT_FOUND, False, False),
    429: (ErrorCode.PROVIDER_RATE_LIMIT, True, True),
    500: (ErrorCode.PROVIDER_UNAVAILABLE, True, True),
    502: (ErrorCode.PROVIDER_UNAVAILABLE, True, True),
    503: (ErrorCode.PROVIDER_UNAVAILABLE, True, True),
    529: (ErrorCode.PROVIDER_UNAVAILABLE, True, True),
}


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_response_becomes_the_right_result(path: Path) -> None:
    data = load(path)
    provider, response = data["provider"], data["response"]
    status = response["status"]
    if status >= 400:
        body = response.get("body_json", response.get("body_text"))
        error = http_error(provider, status, body, parse_retry_after(response["headers"]))
        code, retryable, failover = EXPECTED_ERRORS[status]
        assert (error.code, error.retryable, error.failover) == (code, retryable, failover), error
        if "retry-after" in response["headers"]:
            assert error.retry_after == float(
                response["headers"].get("retry-after-ms", 0)
            ) / 1000 or error.retry_after == float(response["headers"]["retry-after"])
        return
    sse = response.get("body_sse")
    result = fold(provider, sse) if sse is not None else parse(provider, response["body_json"])
    if provider == "openai":
        ref = reference_openai(response.get("body_json") or {}, sse)
        assert result.finish_reason == OPENAI_FINISH[ref["finish"]]
        usage = ref["usage"] or {}
        assert result.usage.input_tokens == usage.get("prompt_tokens", 0)
        assert result.usage.output_tokens == usage.get("completion_tokens", 0)
        assert result.usage.cache_read_tokens == (usage.get("prompt_tokens_details") or {}).get(
            "cached_tokens", 0
        )
    else:
        ref = reference_anthropic(response.get("body_json") or {}, sse)
        assert result.finish_reason == ANTHROPIC_FINISH[ref["finish"]]
        assert [(t.text, t.signature) for t in result.message.thinking] == ref["thinking"]
        usage = ref["usage"]
        cached = usage.get("cache_read_input_tokens") or 0
        written = usage.get("cache_creation_input_tokens") or 0
        assert result.usage.input_tokens == usage["input_tokens"] + cached + written
        assert result.usage.output_tokens == usage["output_tokens"]
        assert (result.usage.cache_read_tokens, result.usage.cache_write_tokens) == (
            cached,
            written,
        )
    assert result.message.text == ref["text"]
    assert [(c.id, c.name, c.arguments) for c in result.message.tool_calls] == ref["calls"]


# -- specific recorded facts (not derived from the reference readers) ------------------------


def result_of(name: str) -> ModelResponse:
    data = load(FIXTURES / name)
    response = data["response"]
    if "body_sse" in response:
        return fold(data["provider"], response["body_sse"])
    return parse(data["provider"], response["body_json"])


def test_openai_streamed_tool_call_arguments_are_joined() -> None:
    result = result_of("openai/tool_call_stream.json")
    assert [(c.name, c.arguments) for c in result.message.tool_calls] == [
        ("get_capital", {"country": "UK"})
    ]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (53, 15)


def test_openai_parallel_calls_and_length_finish() -> None:
    calls = result_of("openai/parallel_tool_calls.json").message.tool_calls
    assert len(calls) == 2 and {c.name for c in calls} == {"secret_retrieval_tool"}
    assert result_of("openai/finish_length.json").finish_reason == "length"


def test_anthropic_streamed_parallel_tool_use() -> None:
    result = result_of("anthropic/parallel_tool_use_stream.json")
    assert result.message.text == "I'll retrieve the secrets for both passwords you provided."
    assert [c.arguments for c in result.message.tool_calls] == [
        {"password": "mellon"},
        {"password": "radiance"},
    ]
    assert result.usage.output_tokens == 109


def test_anthropic_thinking_keeps_its_signature() -> None:
    result = result_of("anthropic/thinking_stream.json")
    [thought] = result.message.thinking
    assert thought.signature and thought.signature.startswith("EuYDCmMI")
    assert thought.text.startswith("The user wants two names")
    assert result.message.text.startswith("1. **Pouch**")


def test_anthropic_cache_tokens() -> None:
    write = result_of("anthropic/cache_creation_max_tokens.json")
    read = result_of("anthropic/cache_read_max_tokens.json")
    assert write.usage.cache_write_tokens == 2055 and write.finish_reason == "length"
    assert read.usage.cache_read_tokens == 2055


def test_thinking_is_replayed_only_to_the_same_provider() -> None:
    thought = result_of("anthropic/thinking.json").message
    request = ModelRequest(
        "claude-sonnet-4-5",
        "",
        [UserMessage("How do I cross?"), thought, UserMessage("Thanks")],
        stream=False,
    )
    same = AnthropicWire("anthropic").build(request)["messages"][1]["content"]
    assert same[0]["type"] == "thinking" and same[0]["signature"] == thought.thinking[0].signature
    other = AnthropicWire("anthropic-eu").build(request)["messages"][1]["content"]
    assert [b["type"] for b in other] == ["text"]
    openai = OpenAIWire("openai").build(request)["messages"][1]
    assert "thinking" not in json.dumps(openai)


def test_rate_limit_retry_after_headers() -> None:
    data = load(FIXTURES / "openai/error_429_rate_limit.json")
    error = http_error(
        "openai",
        429,
        data["response"]["body_json"],
        parse_retry_after(data["response"]["headers"]),
    )
    assert error.kind is FailureKind.RATE_LIMIT and error.retry_after == 20.0
    assert "org-REDACTED" in error.message


def test_the_recordings_ship_with_the_tests() -> None:
    """A fresh clone tests the adapters against every recording: none may silently go missing."""
    counts = {name: len(list((FIXTURES / name).glob("*.json"))) for name in ("openai", "anthropic")}
    assert counts == {"openai": 13, "anthropic": 17}
    assert (FIXTURES / "README.md").is_file()
