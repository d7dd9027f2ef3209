"""The provider client over real HTTP, on a hand-written server: what httpx2 alone would get
wrong."""

from __future__ import annotations

import json

from agentrunner.config import ProviderConfig
from agentrunner.engine import Engine, ModelRegistry
from tests.engine.helpers import one_reply_server


async def test_an_event_stream_is_utf8_whatever_its_content_type_says() -> None:
    """SSE is UTF-8 by definition; a server that labels its stream latin-1 still gets its
    text read as UTF-8 (read as labelled, "Grüße" would arrive as "GrÃ¼ÃŸe")."""

    def event(delta: dict[str, str], finish: str | None) -> bytes:
        chunk = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode()

    stream = (
        event({"role": "assistant", "content": "Grüße, "}, None)
        + event({"content": "naïve café"}, None)
        + event({}, "stop")
        + b"data: [DONE]\n\n"
    )

    async with one_reply_server("text/event-stream; charset=iso-8859-1", stream) as (url, _):
        engine = Engine(ModelRegistry({"p": ProviderConfig("p", "openai", f"{url}/v1")}))
        tokens: list[str] = []
        try:
            result = await engine.run(
                model="p:m",
                message="hi",
                emit=lambda kind, data: (
                    tokens.append(data["token"]) if kind == "agent.token" else None
                ),
            )
        finally:
            await engine.aclose()
    assert result.text == "Grüße, naïve café"
    assert "".join(tokens) == "Grüße, naïve café"
