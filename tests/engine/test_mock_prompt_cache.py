"""The mock provider's prompt-cache model, over real HTTP: OpenAI's automatic prefix cache (from
1,024 tokens, in 128-token steps), Anthropic's reads and writes at the breakpoints (5-minute
lifetime, renewed by a read; more than four breakpoints refused), a token per 4 bytes of each
part's compact JSON, and nothing of it unless asked for."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from agentrunner.testing import MockProvider, MockProviderServer, PromptCacheModel, Reply

EPHEMERAL = {"type": "ephemeral"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def size(*parts: Any) -> int:
    """Bytes of the parts' compact JSON: a token per 4 of them is the model's estimate."""
    dumped = (json.dumps(p, separators=(",", ":"), ensure_ascii=False) for p in parts)
    return sum(len(text.encode()) for text in dumped)


def openai(server: MockProviderServer, messages: list[dict[str, Any]]) -> dict[str, Any]:
    body = {"model": "gpt-mock", "messages": messages, "stream": False}
    response = httpx2.post(f"{server.openai_url}/chat/completions", json=body)
    assert response.status_code == 200, response.text
    usage: dict[str, Any] = response.json()["usage"]
    return usage


def anthropic(
    server: MockProviderServer, system: list[dict[str, Any]], messages: list[dict[str, Any]]
) -> httpx2.Response:
    body = {"model": "claude-mock", "max_tokens": 100, "system": system, "messages": messages}
    return httpx2.post(f"{server.anthropic_url}/v1/messages", json=body)


def user(text: str, *, mark: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if mark:
        block["cache_control"] = EPHEMERAL
    return {"role": "user", "content": [block]}


@pytest.fixture
def clock(mock: MockProvider) -> Clock:
    clock = Clock()
    mock.prompt_cache = PromptCacheModel(clock=clock)
    return clock


def test_openai_reads_the_longest_prefix_seen_in_128_token_steps_from_1024(
    mock: MockProvider, mock_server: MockProviderServer, clock: Clock
) -> None:
    system = {"role": "system", "content": "You are terse. " * 400}  # ~1,500 tokens
    first = openai(mock_server, [system, {"role": "user", "content": "one"}])
    tokens = size(system, {"role": "user", "content": "one"}) // 4
    assert first["prompt_tokens"] == tokens > 1024 + 128
    assert first["prompt_tokens_details"]["cached_tokens"] == 0  # nothing seen before

    second = openai(mock_server, [system, {"role": "user", "content": "two"}])
    shared = (size(system) + len(b'{"role":"user","content":"')) // 4  # the common prefix
    assert second["prompt_tokens_details"]["cached_tokens"] == 1024 + (shared - 1024) // 128 * 128
    assert second["prompt_tokens"] == tokens  # cached tokens are counted in the input

    short = {"role": "system", "content": "Short. " * 100}  # under 1,024 tokens: never cached
    for _ in range(2):
        assert openai(mock_server, [short])["prompt_tokens_details"]["cached_tokens"] == 0

    clock.now += 301  # five minutes unused: gone
    third = openai(mock_server, [system, {"role": "user", "content": "two"}])
    assert third["prompt_tokens_details"]["cached_tokens"] == 0


def test_anthropic_reads_and_writes_at_breakpoints_for_five_minutes(
    mock: MockProvider, mock_server: MockProviderServer, clock: Clock
) -> None:
    text = {"type": "text", "text": "You are terse. " * 400}  # ~1,500 tokens
    system = [{**text, "cache_control": EPHEMERAL}]
    turn = [user("one", mark=True)]
    prefix = size(text) // 4
    whole = (size(text) + size(["user", {"type": "text", "text": "one"}])) // 4

    first = anthropic(mock_server, system, turn).json()["usage"]
    assert first["cache_read_input_tokens"] == 0
    assert first["cache_creation_input_tokens"] == whole  # up to the last breakpoint
    assert first["input_tokens"] == 0  # nothing after it

    longer = [*turn, {"role": "assistant", "content": "ok"}, user("two", mark=True)]
    second = anthropic(mock_server, system, longer).json()["usage"]
    assert second["cache_read_input_tokens"] == whole  # the last request's end, read
    now = size(
        text,
        ["user", {"type": "text", "text": "one"}],
        ["assistant", {"type": "text", "text": "ok"}],
        ["user", {"type": "text", "text": "two"}],
    )
    assert second["cache_creation_input_tokens"] == now // 4 - whole  # the rest, written
    assert second["input_tokens"] == 0

    unmarked = anthropic(mock_server, [text], [user("one")]).json()["usage"]
    assert unmarked["cache_read_input_tokens"] == unmarked["cache_creation_input_tokens"] == 0
    assert unmarked["input_tokens"] == whole  # no breakpoint: no cache, however often seen

    clock.now += 299  # a read renews the entry: still there 299 s after that
    assert (
        anthropic(mock_server, system, [user("x")]).json()["usage"]["cache_read_input_tokens"]
        == prefix
    )
    clock.now += 299
    renewed = anthropic(mock_server, system, [user("y")]).json()["usage"]
    assert renewed["cache_read_input_tokens"] == prefix
    clock.now += 301  # unread for five minutes: written again
    expired = anthropic(mock_server, system, [user("z")]).json()["usage"]
    assert expired["cache_read_input_tokens"] == 0
    assert expired["cache_creation_input_tokens"] == prefix


def test_more_than_four_breakpoints_is_refused_as_by_the_api(
    mock: MockProvider, mock_server: MockProviderServer
) -> None:
    system = [{"type": "text", "text": f"part {n}", "cache_control": EPHEMERAL} for n in range(3)]
    assert anthropic(mock_server, system, [user("one", mark=True)]).status_code == 200
    refused = anthropic(mock_server, system, [user("one", mark=True), user("two", mark=True)])
    assert refused.status_code == 400
    assert "A maximum of 4 blocks with cache_control" in refused.json()["error"]["message"]


def test_off_unless_asked_for_scripted_figures_stand(
    mock: MockProvider, mock_server: MockProviderServer
) -> None:
    assert mock.prompt_cache is None
    system = {"role": "system", "content": "You are terse. " * 400}
    mock.queue(Reply(text="a", input_tokens=7), Reply(text="b", input_tokens=7))
    for _ in range(2):
        usage = openai(mock_server, [system])
        assert usage["prompt_tokens"] == 7 and usage["prompt_tokens_details"]["cached_tokens"] == 0
    mock.prompt_cache = PromptCacheModel()
    mock.reset()  # the next test starts without it
    assert mock.prompt_cache is None


def test_anthropic_looks_back_20_blocks_from_a_breakpoint_and_no_further(
    mock: MockProvider, mock_server: MockProviderServer, clock: Clock
) -> None:
    system = [{"type": "text", "text": "You are terse. " * 400, "cache_control": EPHEMERAL}]
    start = [user("first", mark=True)]
    written = anthropic(mock_server, system, start).json()["usage"]
    end = written["cache_creation_input_tokens"]  # the system prompt and "first"
    # 24 blocks later (a step with 12 tool calls, say), marked at the new end only: too far
    # back to find the last request's end, so only the system prompt is read ...
    calls = [{"type": "tool_use", "id": f"c{n}", "name": "f", "input": {}} for n in range(12)]
    results = [{"type": "tool_result", "tool_use_id": f"c{n}", "content": "ok"} for n in range(12)]
    later = [
        user("first"),
        {"role": "assistant", "content": calls},
        {"role": "user", "content": [*results[:-1], {**results[-1], "cache_control": EPHEMERAL}]},
    ]
    far = anthropic(mock_server, system, later).json()["usage"]
    assert far["cache_read_input_tokens"] < end
    # ... where a breakpoint on the last request's end, kept, finds it.
    later[0] = user("first", mark=True)
    near = anthropic(mock_server, system, later).json()["usage"]
    assert near["cache_read_input_tokens"] > end  # what "far" wrote, found at its end
    # With the last result changed, only the kept breakpoint on "first" finds anything.
    later[2]["content"][-1] = {**results[-1], "content": "changed", "cache_control": EPHEMERAL}
    assert anthropic(mock_server, system, later).json()["usage"]["cache_read_input_tokens"] == end
