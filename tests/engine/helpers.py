"""Building engines against the mock provider server, or against a one-reply HTTP server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import ssl
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from agentrunner.agents.spec import RetryPolicy
from agentrunner.config import PriceOverride, ProviderConfig
from agentrunner.engine import (
    ChainEntry,
    Engine,
    FallbackChain,
    ModelRegistry,
    PriceBook,
    Tool,
    Turn,
    TurnLimits,
    UserMessage,
    tool,
)
from agentrunner.testing import MockProviderServer

FAST = RetryPolicy(max=1, backoff="none")


def registry(server: MockProviderServer, *, timeout_s: float = 10.0) -> ModelRegistry:
    providers = {
        "mockai": ProviderConfig(
            "mockai", "openai", server.openai_url, "MOCK_KEY", timeout_s=timeout_s
        ),
        "mockant": ProviderConfig(
            "mockant", "anthropic", server.anthropic_url, "MOCK_KEY", timeout_s=timeout_s
        ),
        "mockresp": ProviderConfig(
            "mockresp", "openai-responses", server.openai_url, "MOCK_KEY", timeout_s=timeout_s
        ),
    }
    prices = PriceBook(
        {
            "mockai:gpt-mock": PriceOverride(input_per_mtok=1.0, output_per_mtok=2.0),
            "mockai:gpt-backup": PriceOverride(input_per_mtok=0.5, output_per_mtok=1.0),
            "mockant:claude-mock": PriceOverride(input_per_mtok=3.0, output_per_mtok=15.0),
            "mockresp:gpt-5-mock": PriceOverride(input_per_mtok=1.25, output_per_mtok=10.0),
        }
    )
    return ModelRegistry(
        providers, {"fast": "mockai:gpt-mock"}, prices=prices, env={"MOCK_KEY": "sk-mock-secret"}
    )


def chain(reg: ModelRegistry, *refs: str, retry: RetryPolicy = FAST) -> FallbackChain:
    entries = []
    for ref in refs:
        model = reg.resolve(ref)
        entries.append(ChainEntry(model, reg.client(model), retry))
    return FallbackChain(entries)


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"Sunny, 22C in {city}"


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        self.events.append((kind, data))

    def kinds(self) -> list[str]:
        return [k for k, _ in self.events]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [d for k, d in self.events if k == kind]


def turn(
    reg: ModelRegistry,
    *refs: str,
    message: str = "What's the weather in Paris?",
    tools: Sequence[Tool] = (get_weather,),
    stream: bool = True,
    limits: TurnLimits | None = None,
    retry: RetryPolicy = FAST,
    **kwargs: Any,
) -> Turn:
    return Turn(
        system="You are helpful.",
        messages=[UserMessage(message)],
        chain=chain(reg, *refs, retry=retry),
        tools=list(tools),
        prices=reg.prices,
        limits=limits or TurnLimits(),
        stream=stream,
        **kwargs,
    )


@contextlib.asynccontextmanager
async def one_reply_server(
    content_type: str,
    body: bytes,
    tls: ssl.SSLContext | None = None,
    headers: Mapping[str, str] | None = None,
) -> AsyncIterator[tuple[str, list[bytes]]]:
    """An HTTP/1.1 server on 127.0.0.1 that answers every request with ``body``, written by
    hand (headers as given, nothing httpx2 would normalise; ``headers`` besides), over TLS
    with ``tls``; yields its base URL and the request lines it has read, one per request."""
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    request_lines: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        request_lines.append(head.split(b"\r\n", 1)[0])
        length = re.search(rb"(?i)content-length: *(\d+)", head)
        await reader.readexactly(int(length.group(1)) if length else 0)
        writer.write(
            f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n{extra}".encode()
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    listener = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=tls)
    scheme = "https" if tls else "http"
    try:
        yield f"{scheme}://127.0.0.1:{listener.sockets[0].getsockname()[1]}", request_lines
    finally:
        listener.close()


def chat_completion(text: str) -> bytes:
    """An OpenAI chat completion answering ``text``, as a provider's server sends it."""
    return json.dumps(
        {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        }
    ).encode()


async def ask_once(base_url: str) -> str:
    """One unstreamed request, no retries, to an OpenAI-compatible provider at ``base_url``
    (an engine of its own, closed after); the answer's text."""
    engine = Engine(ModelRegistry({"p": ProviderConfig("p", "openai", f"{base_url}/v1")}))
    try:
        result = await engine.run(model="p:m", message="hi", stream=False, retry=FAST)
    finally:
        await engine.aclose()
    return result.text
