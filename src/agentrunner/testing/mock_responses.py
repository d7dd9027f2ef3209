"""How the mock provider renders a scripted ``Reply`` as OpenAI or Anthropic JSON and SSE."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrunner.testing.mock_provider import Reply

__all__ = [
    "anthropic_json",
    "anthropic_stream",
    "openai_json",
    "openai_stream",
    "output_tokens",
]

Events = list[tuple[str | None, dict[str, Any] | str]]


def _calls(reply: Reply, rid: int) -> list[tuple[str, str, str]]:
    """(id, name, arguments JSON text) for each scripted tool call."""
    out = []
    for n, (name, args) in enumerate(reply.tool_calls):
        text = args if isinstance(args, str) else json.dumps(args)
        out.append((f"call_{rid}_{n}", name, text))
    return out


def output_tokens(reply: Reply) -> int:
    if reply.output_tokens is not None:
        return reply.output_tokens
    return max(1, len(reply.text) // 4 + 8 * len(reply.tool_calls))


def _openai_finish(reply: Reply) -> str:
    return reply.finish or ("tool_calls" if reply.tool_calls else "stop")


def _openai_usage(reply: Reply) -> dict[str, Any]:
    out = output_tokens(reply)
    return {
        "prompt_tokens": reply.input_tokens or 0,
        "completion_tokens": out,
        "total_tokens": (reply.input_tokens or 0) + out,
        "prompt_tokens_details": {"cached_tokens": reply.cache_read_tokens},
    }


def openai_json(reply: Reply, model: str, rid: int) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.text or None,
        "refusal": reply.refusal,
    }
    calls = _calls(reply, rid)
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ]
    if reply.thinking:
        message["reasoning_content"] = reply.thinking
    return {
        "id": f"chatcmpl-mock-{rid}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _openai_finish(reply)}],
        "usage": _openai_usage(reply),
    }


def openai_stream(
    reply: Reply, model: str, rid: int, body: dict[str, Any]
) -> list[tuple[str | None, dict[str, Any] | str]]:
    base = {"id": f"chatcmpl-mock-{rid}", "object": "chat.completion.chunk", "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events: list[tuple[str | None, dict[str, Any] | str]] = [
        (None, chunk({"role": "assistant", "content": ""}))
    ]
    if reply.thinking:
        events.append((None, chunk({"reasoning_content": reply.thinking})))
    for piece in _pieces(reply.text):
        events.append((None, chunk({"content": piece})))
    for piece in _pieces(reply.refusal or ""):
        events.append((None, chunk({"content": None, "refusal": piece})))
    for index, (call_id, name, args) in enumerate(_calls(reply, rid)):
        events.append(
            (
                None,
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call_id,
                                "type": "function",
                                "function": {"name": name, "arguments": ""},
                            }
                        ]
                    }
                ),
            )
        )
        half = len(args) // 2
        for part in (args[:half], args[half:]):
            events.append(
                (None, chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]}))
            )
    events.append((None, chunk({}, _openai_finish(reply))))
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append((None, {**base, "choices": [], "usage": _openai_usage(reply)}))
    events.append((None, "[DONE]"))
    return events


_ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal"}


def _anthropic_stop(reply: Reply) -> str:
    if reply.refusal is not None:
        return "refusal"
    if reply.finish:
        return _ANTHROPIC_STOP.get(reply.finish, reply.finish)
    return "tool_use" if reply.tool_calls else "end_turn"


def _anthropic_usage(reply: Reply) -> dict[str, Any]:
    return {
        "input_tokens": reply.input_tokens or 0,
        "output_tokens": output_tokens(reply),
        "cache_read_input_tokens": reply.cache_read_tokens,
        "cache_creation_input_tokens": reply.cache_write_tokens,
    }


def _anthropic_blocks(reply: Reply, rid: int) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.thinking:
        blocks.append(
            {"type": "thinking", "thinking": reply.thinking, "signature": f"sig-mock-{rid}"}
        )
    text = reply.text + (reply.refusal or "")
    if text:
        blocks.append({"type": "text", "text": text})
    for call_id, name, args in _calls(reply, rid):
        try:
            parsed: Any = json.loads(args)
        except json.JSONDecodeError:
            parsed = args
        blocks.append(
            {
                "type": "tool_use",
                "id": call_id.replace("call", "toolu"),
                "name": name,
                "input": parsed,
            }
        )
    return blocks


def anthropic_json(reply: Reply, model: str, rid: int) -> dict[str, Any]:
    return {
        "id": f"msg_mock_{rid}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _anthropic_blocks(reply, rid),
        "stop_reason": _anthropic_stop(reply),
        "stop_sequence": None,
        "usage": _anthropic_usage(reply),
    }


def anthropic_stream(
    reply: Reply, model: str, rid: int
) -> list[tuple[str | None, dict[str, Any] | str]]:
    usage = _anthropic_usage(reply)
    start_usage = {**usage, "output_tokens": 1}
    events: list[tuple[str | None, dict[str, Any] | str]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_mock_{rid}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "usage": start_usage,
                },
            },
        )
    ]
    for index, block in enumerate(_anthropic_blocks(reply, rid)):
        kind = block["type"]
        if kind == "thinking":
            start: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            raw = block["input"] if isinstance(block["input"], str) else json.dumps(block["input"])
            half = len(raw) // 2
            deltas = [
                {"type": "input_json_delta", "partial_json": p}
                for p in ("", raw[:half], raw[half:])
            ]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": _anthropic_stop(reply), "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _pieces(text: str) -> list[str]:
    """Text as streamed: word by word for long texts, in about three parts for short ones."""
    if not text:
        return []
    if len(text) > 60:
        words = text.split(" ")
        return [w + " " for w in words[:-1]] + ([words[-1]] if words[-1] else [])
    step = max(1, len(text) // 3)
    return [text[i : i + step] for i in range(0, len(text), step)]
