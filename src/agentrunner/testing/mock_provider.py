"""A mock OpenAI (Chat Completions and the Responses API) + Anthropic Messages server, for tests
and benchmarks.

Real HTTP on 127.0.0.1, so agentrunner's real client code runs. Scriptable per test with a
queue of ``Reply`` objects (text, tool calls, thinking, usage), optionally per model, and able to
inject faults: an HTTP error with any status and ``retry-after``, a stalled response, a
connection dropped mid-stream, malformed tool-call JSON, and an error event mid-stream
(Anthropic ``overloaded_error``). Like the real APIs it rejects (400) a history holding a tool
call without a result, and stops a reply at the request's output cap (``max_tokens`` /
``max_completion_tokens`` / ``max_output_tokens``: the text cut, ``length`` as the finish
reason, ``incomplete`` on the Responses API). On ``/v1/responses`` it also refuses what that API
refuses in the input: a ``function_call_output`` whose ``call_id`` no ``function_call`` before
it has; a reasoning item without its encrypted content when ``store`` is false (404, as the
API: it keeps nothing to look the item up by), with encrypted content it did not write, or not
followed by the item it came with (a message or function call, by its id). A ``Reply`` with
``thinking`` comes back as a reasoning item, with encrypted content when the request asks for
it (``include``). It checks the images and PDFs of a request as each API does and refuses
what that API refuses, in its words (``mock_attachments``). With an empty queue it plays a
simple agent: it calls the first offered tool once, then answers with text, the echo of the
last user message and what files it saw from there on (`` [saw 1 image, 1 pdf]``). With
``count_input_tokens`` (or a reply's ``input_tokens=None``) it bills the request's real size,
images by their pixels and PDFs by their pages, not their base64;
with ``prompt_cache`` (a ``PromptCacheModel``, off by default) it bills every request as the
provider's prompt cache would, reads and writes included. Like Anthropic's API it refuses
(400) a request with more than four ``cache_control`` breakpoints.

    server = MockProviderServer().start()
    server.mock.queue(Reply(tool_calls=[("get_weather", {"city": "Paris"})]), Reply(text="Sunny"))
    ... base_url=server.openai_url (…/v1) or server.anthropic_url ...
    server.stop()

Run standalone (for benchmarks): ``python -m agentrunner.testing --port 8999``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, replace
from typing import Any

from agentrunner.testing.mock_attachments import refused as refused_files
from agentrunner.testing.mock_attachments import saw, weighed
from agentrunner.testing.mock_embeddings import embeddings_answer
from agentrunner.testing.mock_responses import (
    anthropic_json,
    anthropic_stream,
    openai_json,
    openai_stream,
    output_tokens,
    readable_reasoning,
    responses_json,
    responses_stream,
)
from agentrunner.testing.prompt_cache import PromptCacheModel, too_many_breakpoints
from agentrunner.testing.replies import Fault, Reply

__all__ = ["MockProvider", "MockProviderServer", "RecordedRequest"]


Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class MockProvider:
    """The ASGI app. Thread-safe to script from a test while the server runs."""

    def __init__(
        self, *, count_input_tokens: bool = False, prompt_cache: PromptCacheModel | None = None
    ) -> None:
        self.count_input_tokens = count_input_tokens
        self.prompt_cache = prompt_cache
        self._lock = threading.Lock()
        self._queue: deque[Reply] = deque()
        self._by_model: dict[str, deque[Reply]] = {}
        self.requests: list[RecordedRequest] = []
        self.record = True
        self.delay_s = 0.0  # before every answer that is not scripted: a model's thinking time
        self._ids = itertools.count(1)

    def queue(self, *replies: Reply, model: str | None = None) -> None:
        with self._lock:
            target = self._queue if model is None else self._by_model.setdefault(model, deque())
            target.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self.count_input_tokens = False
            self.prompt_cache = None
            self._queue.clear()
            self._by_model.clear()
            self.requests.clear()
            self.delay_s = 0.0

    def _next(self, model: str, body: dict[str, Any], flavor: str) -> Reply:
        with self._lock:
            specific = self._by_model.get(model)
            if specific:
                return _billed(specific.popleft(), body, False)
            if self._queue:
                return _billed(self._queue.popleft(), body, False)
        return _billed(_auto_reply(body, flavor), body, self.count_input_tokens)

    def _cached(self, reply: Reply, body: dict[str, Any], flavor: str) -> Reply:
        """``reply`` billed by the prompt-cache model: OpenAI counts cached tokens in its
        input, Anthropic's input is what was neither read nor written."""
        openai = flavor != "anthropic"
        with self._lock:
            cache = self.prompt_cache
            if cache is None:
                return reply
            bill = cache.bill("openai" if openai else "anthropic", body)
        fresh = bill.tokens if openai else bill.tokens - bill.read - bill.written
        return replace(
            reply,
            input_tokens=fresh,
            cache_read_tokens=bill.read,
            cache_write_tokens=bill.written,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                pass
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        path = scope["path"]
        try:
            body = json.loads(b"".join(chunks) or b"{}")
        except json.JSONDecodeError:
            await _send_json(
                send,
                400,
                {"error": {"type": "invalid_request_error", "message": "body is not JSON"}},
            )
            return
        flavor = _flavor(path)
        if self.record:
            headers = {k.decode(): v.decode() for k, v in scope["headers"]}
            with self._lock:
                self.requests.append(RecordedRequest(path, headers, body))
        if flavor is None and path.endswith("/embeddings"):
            await self._embeddings(send, body)
            return
        if flavor is None:
            await _send_json(
                send, 404, {"error": {"type": "not_found_error", "message": f"no route {path}"}}
            )
            return
        files = refused_files(body, flavor)
        if files is not None:
            problem, param = files
            await _send_json(
                send, 400, _error_body(flavor, "invalid_request_error", problem, param)
            )
            return
        if flavor == "responses":
            refused = _refused_input(body)
            if refused is not None:
                status, problem = refused
                await _send_json(
                    send, status, _error_body(flavor, "invalid_request_error", problem, "input")
                )
                return
        dangling = _dangling_tool_call(body, flavor) or (
            too_many_breakpoints(body) if flavor == "anthropic" else None
        )
        if dangling:
            await _send_json(send, 400, _error_body(flavor, "invalid_request_error", dangling))
            return
        model = str(body.get("model", ""))
        reply = self._next(model, body, flavor)
        if reply.delay_s or self.delay_s:
            await asyncio.sleep(reply.delay_s or self.delay_s)
        fault = reply.fault
        if fault is not None and fault.kind == "stall":
            await asyncio.sleep(fault.seconds)
        if fault is not None and fault.kind == "status":
            await _send_fault(send, fault, flavor)
            return
        if self.prompt_cache is not None:
            reply = self._cached(reply, body, flavor)
        rid = next(self._ids)
        if body.get("stream"):
            if flavor == "openai":
                events = openai_stream(reply, model, rid, body)
            elif flavor == "responses":
                events = responses_stream(reply, model, rid, body)
            else:
                events = anthropic_stream(reply, model, rid)
            await _send_stream(send, events, fault, reply.chunk_delay_s, flavor)
        else:
            if flavor == "openai":
                payload = openai_json(reply, model, rid)
            elif flavor == "responses":
                payload = responses_json(reply, model, rid, body)
            else:
                payload = anthropic_json(reply, model, rid)
            await _send_json(send, 200, payload)

    async def _embeddings(self, send: Send, body: dict[str, Any]) -> None:
        """OpenAI's ``POST /embeddings`` (``mock_embeddings``); a reply queued for the model
        with a status fault answers with that fault instead."""
        with self._lock:
            queued = self._by_model.get(str(body.get("model", "")))
            reply = queued.popleft() if queued else None
        if reply is not None and reply.fault is not None and reply.fault.kind == "status":
            await _send_fault(send, reply.fault, "openai")
            return
        await _send_json(send, *embeddings_answer(body))


# -- behaviour -------------------------------------------------------------------------------

_ROUTES = {"/chat/completions": "openai", "/responses": "responses", "/messages": "anthropic"}


def _flavor(path: str) -> str | None:
    """Which API a path is: ``openai`` (Chat Completions), ``responses`` or ``anthropic``."""
    for end, flavor in _ROUTES.items():
        if path.endswith(end):
            return flavor
    return None


def _billed(reply: Reply, body: dict[str, Any], count_input: bool) -> Reply:
    """``reply`` as the provider would bill and cut it: input tokens counted from the request
    when asked, output stopped at the request's cap."""
    if reply.input_tokens is None or count_input:
        prompt = [body.get("system"), weighed(body.get("messages")), body.get("tools")]
        if "input" in body:  # the Responses API's
            prompt = [body.get("instructions"), weighed(body.get("input")), body.get("tools")]
        reply = replace(reply, input_tokens=len(json.dumps(prompt)) // 4 + 1)
    cap = (
        body.get("max_completion_tokens") or body.get("max_tokens") or body.get("max_output_tokens")
    )
    if isinstance(cap, int) and output_tokens(reply) > cap:
        reply = replace(reply, text=reply.text[: cap * 4], output_tokens=cap, finish="length")
    return reply


def _auto_reply(body: dict[str, Any], flavor: str) -> Reply:
    """No script: call the first offered tool once (schema-valid arguments), then answer by
    echoing the last user message, and the images and PDFs from it on (`` [saw 1 image]``).
    On Chat Completions a user message of files right after the tool messages is their files
    (a tool message takes none): a result too."""
    messages = body.get("messages") or _input_items(body)
    tools = body.get("tools") or []
    last = messages[-1] if messages else {}
    last_is_result = (
        last.get("role") == "tool"
        or (len(messages) > 1 and messages[-2].get("role") == "tool" and saw([last]) != "")
        or last.get("type") == "function_call_output"
        or (
            flavor == "anthropic"
            and isinstance(last.get("content"), list)
            and any(b.get("type") == "tool_result" for b in last["content"])
        )
    )
    if tools and not last_is_result:
        from agentrunner.engine.doubles import example_from_schema

        tool = tools[0]
        spec = tool["function"] if flavor == "openai" else tool
        schema = spec.get("input_schema") if flavor == "anthropic" else spec.get("parameters")
        return Reply(tool_calls=[(spec["name"], example_from_schema(schema or {}))])
    said, text = _last_user_text(messages)
    return Reply(text=f"Echo: {text}{saw(messages[said:])}")


def _input_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The Responses API's ``input``: a list of items, or a text (one user message)."""
    given = body.get("input") or []
    return [{"role": "user", "content": given}] if isinstance(given, str) else list(given)


def _last_user_text(messages: list[dict[str, Any]]) -> tuple[int, str]:
    """The last user message that says something: where it is, and what it says."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return index, content
        texts = [
            b.get("text", "") for b in content or () if b.get("type") in ("text", "input_text")
        ]
        if texts:
            return index, str(texts[-1])
    return len(messages), ""


def _refused_input(body: dict[str, Any]) -> tuple[int, str] | None:
    """What the Responses API refuses in an input, as (status, its message): an output for a
    call the input does not hold, a call without its output, a reasoning item it cannot read
    or that is not followed by the item it came with."""
    items = _input_items(body)
    calls: list[str] = []
    answered: set[str] = set()
    for index, item in enumerate(items):
        kind = item.get("type")
        if kind == "function_call":
            calls.append(str(item.get("call_id")))
        elif kind == "function_call_output":
            call_id = str(item.get("call_id"))
            if call_id not in calls:
                return 400, f"No tool call found for function call output with call_id {call_id}."
            answered.add(call_id)
        elif kind == "reasoning":
            refused = _unreadable_reasoning(item, items[index + 1 :], body.get("store", True))
            if refused is not None:
                return refused
    for call_id in calls:
        if call_id not in answered:
            return 400, f"No tool output found for function call {call_id}."
    return None


def _unreadable_reasoning(
    item: dict[str, Any], after: list[dict[str, Any]], store: Any
) -> tuple[int, str] | None:
    item_id = str(item.get("id"))
    encrypted = item.get("encrypted_content")
    if not encrypted and store is False:
        return 404, (
            f"Item with id '{item_id}' not found. Items are not persisted when `store` is set "
            "to false. Try again with `store` set to true, or remove this item from your input."
        )
    following = next((i for i in after if i.get("type") != "reasoning"), {})
    if following.get("type") not in ("message", "function_call") or not following.get("id"):
        return 400, (
            f"Item '{item_id}' of type 'reasoning' was provided without its required "
            "following item."
        )
    if encrypted and not readable_reasoning(item_id, str(encrypted)):
        return 400, f"The encrypted content for item {item_id} could not be verified."
    return None


def _dangling_tool_call(body: dict[str, Any], flavor: str) -> str | None:
    if flavor == "responses":
        return None  # _refused_input's
    messages = body.get("messages") or []
    if flavor == "openai":
        pending: list[str] = []
        for message in messages:
            role = message.get("role")
            if role == "tool":
                if message.get("tool_call_id") in pending:
                    pending.remove(message["tool_call_id"])
                continue
            if pending:
                return (
                    "An assistant message with 'tool_calls' must be followed by tool messages "
                    f"responding to each 'tool_call_id'. Missing: {', '.join(pending)}"
                )
            if role == "assistant":
                pending = [c["id"] for c in message.get("tool_calls") or ()]
        return f"tool_call_ids without results: {', '.join(pending)}" if pending else None
    for index, message in enumerate(messages):
        if message.get("role") != "assistant" or not isinstance(message.get("content"), list):
            continue
        ids = [b["id"] for b in message["content"] if b.get("type") == "tool_use"]
        if not ids:
            continue
        following = messages[index + 1] if index + 1 < len(messages) else None
        answered = set()
        if following and isinstance(following.get("content"), list):
            answered = {
                b.get("tool_use_id") for b in following["content"] if b.get("type") == "tool_result"
            }
        missing = [i for i in ids if i not in answered]
        if missing:
            return (
                f"messages.{index + 1}: `tool_use` ids were found without `tool_result` "
                f"blocks immediately after: {', '.join(missing)}"
            )
    return None


# -- HTTP plumbing ---------------------------------------------------------------------------


def _error_body(
    flavor: str, error_type: str, message: str, param: str | None = None
) -> dict[str, Any]:
    if flavor == "anthropic":
        return {"type": "error", "error": {"type": error_type, "message": message}}
    return {"error": {"message": message, "type": error_type, "param": param, "code": None}}


_DEFAULT_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    503: "api_error",
    529: "overloaded_error",
}


async def _send_fault(send: Send, fault: Fault, flavor: str) -> None:
    headers = []
    if fault.retry_after is not None:
        headers.append((b"retry-after", str(fault.retry_after).encode()))
    if fault.text_body is not None:
        await _send(send, fault.status, fault.text_body.encode(), b"text/plain", headers)
        return
    error_type = fault.error_type or _DEFAULT_TYPES.get(fault.status, "api_error")
    body = _error_body(flavor, error_type, f"mock fault: HTTP {fault.status}")
    await _send(send, fault.status, json.dumps(body).encode(), b"application/json", headers)


async def _send_json(send: Send, status: int, payload: Any) -> None:
    await _send(send, status, json.dumps(payload).encode(), b"application/json")


async def _send(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": body})


class _DropConnection(Exception):
    pass


async def _send_stream(
    send: Send,
    events: list[tuple[str | None, dict[str, Any] | str]],
    fault: Fault | None,
    chunk_delay_s: float = 0.0,
    flavor: str = "openai",
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream; charset=utf-8")],
        }
    )
    cut = (
        len(events) // 2
        if fault is not None and fault.kind in ("drop_mid_stream", "error_mid_stream")
        else None
    )
    for n, (name, data) in enumerate(events):
        if n == cut:
            if fault is not None and fault.kind == "drop_mid_stream":
                raise _DropConnection("mock: connection dropped mid-stream")
            error_type = fault.error_type if fault else "api_error"
            error: dict[str, Any] = {
                "type": "error",
                "error": {"type": error_type, "message": "mock fault mid-stream"},
            }
            if flavor == "responses":  # the Responses API's error event: its fields at the top
                error = {
                    "type": "error",
                    "code": error_type,
                    "message": "mock fault mid-stream",
                    "param": None,
                    "sequence_number": n,
                }
            frame = f"event: error\ndata: {json.dumps(error)}\n\n"
            await send({"type": "http.response.body", "body": frame.encode(), "more_body": False})
            return
        text = data if isinstance(data, str) else json.dumps(data)
        frame = (f"event: {name}\n" if name else "") + f"data: {text}\n\n"
        await send({"type": "http.response.body", "body": frame.encode(), "more_body": True})
        if chunk_delay_s:
            await asyncio.sleep(chunk_delay_s)
    await send({"type": "http.response.body", "body": b"", "more_body": False})


class MockProviderServer:
    """Runs a ``MockProvider`` under uvicorn in a background thread on 127.0.0.1."""

    def __init__(self, mock: MockProvider | None = None, port: int = 0) -> None:
        self.mock = mock or MockProvider()
        self._port = port
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_url(self) -> str:
        return self.url

    def start(self) -> MockProviderServer:
        import socket

        import uvicorn

        sock = socket.socket()
        sock.bind(("127.0.0.1", self._port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.mock,
            log_level="critical",
            lifespan="off",
            timeout_graceful_shutdown=1,
            access_log=False,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("mock provider server did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
