"""How the mock provider renders a scripted ``Reply`` as OpenAI (Chat Completions and the
Responses API) or Anthropic JSON and SSE."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from agentrunner.testing.replies import Reply

__all__ = [
    "anthropic_json",
    "anthropic_stream",
    "encrypted_reasoning",
    "openai_json",
    "openai_stream",
    "output_tokens",
    "readable_reasoning",
    "responses_json",
    "responses_stream",
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
        **({"usage": _openai_usage(reply)} if reply.usage else {}),
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
    if reply.usage and (body.get("stream_options") or {}).get("include_usage"):
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
        **({"usage": _anthropic_usage(reply)} if reply.usage else {}),
    }


def anthropic_stream(
    reply: Reply, model: str, rid: int
) -> list[tuple[str | None, dict[str, Any] | str]]:
    usage = _anthropic_usage(reply)
    start_usage = {**usage, "output_tokens": 1} if reply.usage else None
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
                "usage": {"output_tokens": usage["output_tokens"]} if reply.usage else None,
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


# -- OpenAI Responses API (POST /v1/responses) ---------------------------------------------

_ENCRYPTED = "reasoning.encrypted_content"


def encrypted_reasoning(item_id: str) -> str:
    """What the mock sends as a reasoning item's ``encrypted_content``: only it can read it
    back (``readable_reasoning``), as only OpenAI can read its own."""
    return "gAAAAB-mock-" + base64.urlsafe_b64encode(item_id.encode()).decode()


def readable_reasoning(item_id: str, encrypted: str) -> bool:
    return encrypted == encrypted_reasoning(item_id)


def _reasoning_tokens(reply: Reply) -> int:
    return max(1, len(reply.thinking) // 4) if reply.thinking else 0


def _responses_usage(reply: Reply) -> dict[str, Any]:
    reasoning = _reasoning_tokens(reply)
    out = reply.output_tokens if reply.output_tokens is not None else output_tokens(reply)
    out += 0 if reply.output_tokens is not None else reasoning
    return {
        "input_tokens": reply.input_tokens or 0,
        "input_tokens_details": {"cached_tokens": reply.cache_read_tokens},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": min(reasoning, out)},
        "total_tokens": (reply.input_tokens or 0) + out,
    }


def _responses_items(reply: Reply, rid: int, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The output items of a reply, whole: reasoning, the message, the function calls."""
    items: list[dict[str, Any]] = []
    if reply.thinking:
        item_id = f"rs_mock_{rid}"
        reasoning: dict[str, Any] = {
            "id": item_id,
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": reply.thinking}],
        }
        if _ENCRYPTED in (body.get("include") or ()):
            reasoning["encrypted_content"] = encrypted_reasoning(item_id)
        items.append(reasoning)
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append(
            {"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}
        )
    if reply.refusal is not None:
        content.append({"type": "refusal", "refusal": reply.refusal})
    if content:
        status = "incomplete" if reply.finish == "length" else "completed"
        items.append(
            {
                "id": f"msg_mock_{rid}",
                "type": "message",
                "status": status,
                "role": "assistant",
                "content": content,
            }
        )
    for n, (call_id, name, args) in enumerate(_calls(reply, rid)):
        items.append(
            {
                "id": f"fc_mock_{rid}_{n}",
                "type": "function_call",
                "status": "completed",
                "arguments": args,
                "call_id": call_id,
                "name": name,
            }
        )
    return items


def _response(
    reply: Reply, model: str, rid: int, body: dict[str, Any], output: list[dict[str, Any]]
) -> dict[str, Any]:
    """The ``response`` object, echoing the request's settings as the API does."""
    reason = {"length": "max_output_tokens", "content_filter": "content_filter"}.get(
        reply.finish or ""
    )
    return {
        "id": f"resp_mock_{rid}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if reason else "completed",
        "error": None,
        "incomplete_details": {"reason": reason} if reason else None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "prompt_cache_key": body.get("prompt_cache_key"),
        "reasoning": {"effort": None, "summary": None},
        "store": body.get("store", True),
        "temperature": 1.0,
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": body.get("tools") or [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": _responses_usage(reply) if reply.usage else None,
        "metadata": {},
    }


def responses_json(reply: Reply, model: str, rid: int, body: dict[str, Any]) -> dict[str, Any]:
    return _response(reply, model, rid, body, _responses_items(reply, rid, body))


def responses_stream(reply: Reply, model: str, rid: int, body: dict[str, Any]) -> Events:
    """The events the API streams: the response created, each item added, its deltas and done,
    then the response completed (or incomplete), whole."""
    events: Events = []

    def emit(kind: str, **fields: Any) -> None:
        events.append((kind, {"type": kind, "sequence_number": len(events), **fields}))

    output = _responses_items(reply, rid, body)
    final = _response(reply, model, rid, body, output)
    started = {**final, "status": "in_progress", "output": [], "usage": None}
    started["incomplete_details"] = None
    emit("response.created", response=started)
    emit("response.in_progress", response=started)
    for index, item in enumerate(output):
        emit("response.output_item.added", output_index=index, item=_begun(item))
        item_id = item["id"]
        at = {"item_id": item_id, "output_index": index}
        if item["type"] == "reasoning":
            for s, part in enumerate(item["summary"]):
                empty = {"type": "summary_text", "text": ""}
                emit("response.reasoning_summary_part.added", **at, summary_index=s, part=empty)
                for piece in _pieces(part["text"]):
                    emit(
                        "response.reasoning_summary_text.delta", **at, summary_index=s, delta=piece
                    )
                emit(
                    "response.reasoning_summary_text.done", **at, summary_index=s, text=part["text"]
                )
                emit("response.reasoning_summary_part.done", **at, summary_index=s, part=part)
        elif item["type"] == "message":
            for c, part in enumerate(item["content"]):
                kind = part["type"]
                field = "text" if kind == "output_text" else "refusal"
                emit("response.content_part.added", **at, content_index=c, part={**part, field: ""})
                delta = (
                    "response.output_text.delta" if field == "text" else "response.refusal.delta"
                )
                for piece in _pieces(part[field]):
                    emit(delta, **at, content_index=c, delta=piece)
                done = "response.output_text.done" if field == "text" else "response.refusal.done"
                emit(done, **at, content_index=c, **{field: part[field]})
                emit("response.content_part.done", **at, content_index=c, part=part)
        else:
            args = item["arguments"]
            half = len(args) // 2
            for piece in (args[:half], args[half:]):
                emit("response.function_call_arguments.delta", **at, delta=piece)
            emit("response.function_call_arguments.done", **at, arguments=args)
        emit("response.output_item.done", output_index=index, item=item)
    emit(f"response.{final['status']}", response=final)
    return events


def _begun(item: dict[str, Any]) -> dict[str, Any]:
    """An item as ``response.output_item.added`` shows it: before its content."""
    if item["type"] == "reasoning":
        return {"id": item["id"], "type": "reasoning", "summary": []}
    if item["type"] == "message":
        return {**item, "status": "in_progress", "content": []}
    return {**item, "status": "in_progress", "arguments": ""}
