"""Through AgentRunner, a provider key that an exception echoed is nowhere: not in the error the
caller gets, the run record, the stored events or thread, nor the next request to the provider.
On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from agentrunner import AgentRunner, AgentRunnerCallbacks
from agentrunner.engine import http_client
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.testing import MockProvider
from tests.runner.conftest import Agent

KEY = "sk-proj-Zq8Xw3Lm9Tt4Vb"


class FailsOnce(httpx2.AsyncBaseTransport):
    """The real transport, but its first request raises what h11 says of a header it cannot
    send — the Authorization header, key and all."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner = inner
        self.failed = False

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if not self.failed:
            self.failed = True
            auth = request.headers["authorization"].encode()
            raise httpx2.LocalProtocolError(f"Illegal header value {auth!r}")
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def stored_text(runner: AgentRunner, thread_id: str) -> str:
    """Everything the store holds about a thread's runs, as one string."""
    store = runner.store
    parts: list[Any] = []
    for run in await store.runs.list(thread_id=thread_id):
        parts.append(run)
        parts += await store.events.list(run.id)
        parts += await store.runs.messages(run.id)
    parts += await store.messages.page(thread_id)
    return "\n".join(repr(p) for p in parts)


async def test_a_key_echoed_by_a_transport_error_is_kept_nowhere(
    agent: Agent, open_runner: Any, mock: MockProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MOCK_KEY", KEY)
    real = http_client.provider_transport

    def failing_once(limits: httpx2.Limits) -> FailsOnce:
        return FailsOnce(real(limits) or httpx2.AsyncHTTPTransport(limits=limits))

    monkeypatch.setattr(http_client, "provider_transport", failing_once)
    agent("talker")
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as info:
        await runner.run_agent("talker", "t", "first")
    error = info.value
    assert error.code is ErrorCode.INTERNAL
    assert "Illegal header value" in error.message and "[redacted]" in error.message
    assert KEY not in f"{error} {error!r} {error.hint} {error.to_dict()}"
    [run] = await runner.store.runs.list(thread_id="t")
    assert run.status == "failed" and run.error_message == error.message
    assert mock.requests == []  # the failed request never left
    # The next run on the thread reaches the provider, and carries no trace of the key.
    assert (await runner.run_agent("talker", "t", "second")).text == "Echo: second"
    [sent] = mock.requests
    assert sent.headers["authorization"] == f"Bearer {KEY}"  # where it belongs, and only there
    assert KEY not in json.dumps(sent.body)
    assert KEY not in await stored_text(runner, "t")


@pytest.mark.parametrize(
    ("key", "what"),
    [(f"{KEY[:10]}\n{KEY[10:]}", "a line break"), (f"{KEY[:10]}\x1b{KEY[10:]}", "a control")],
)
async def test_a_key_with_a_control_character_fails_the_run_naming_the_variable(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    monkeypatch: pytest.MonkeyPatch,
    key: str,
    what: str,
) -> None:
    monkeypatch.setenv("MOCK_KEY", key)
    agent("talker")
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as info:
        await runner.run_agent("talker", "t", "hi")
    error = info.value
    assert error.code is ErrorCode.PROVIDER_AUTH
    assert "MOCK_KEY" in error.message and what in error.message
    assert mock.requests == []
    stored = await stored_text(runner, "t")
    assert "MOCK_KEY" in stored  # the run record says which variable is wrong …
    for part in (KEY[:10], KEY[10:]):  # … and nothing of its value
        assert part not in stored and part not in f"{error} {error.hint}"


@pytest.mark.parametrize("spelling", ["plain", "json"])
async def test_a_key_a_tool_read_is_kept_nowhere(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    monkeypatch: pytest.MonkeyPatch,
    project: Any,
    spelling: str,
) -> None:
    """A full-trust agent may read the environment (or a file holding a key): the key is cut
    from the tool's result before it is stored or sent to a model."""
    from agentrunner.testing import Reply

    monkeypatch.setenv("MOCK_KEY", KEY)
    written = f"MOCK_KEY={KEY}\n" if spelling == "plain" else json.dumps({"k": KEY + '"'})
    (project / "dotenv.txt").write_text(written)
    agent("reader", "capabilities: [files]\ntrust: full")
    mock.queue(Reply(tool_calls=[("read_file", {"path": "dotenv.txt"})]), Reply(text="read"))
    runner: AgentRunner = await open_runner()
    await runner.run_agent("reader", "t", "what is in it?")
    assert KEY not in json.dumps([r.body for r in mock.requests])
    stored = await stored_text(runner, "t")
    assert KEY not in stored and "[redacted]" in stored  # the rest of the result is kept
    assert "MOCK_KEY=" in stored or '"k"' in stored


async def test_a_key_in_a_crashing_tools_error_is_kept_nowhere(
    agent: Agent, open_runner: Any, mock: MockProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool that fails quoting a key it read (an exception, not a result): the run fails
    with tool_failed, and the key is cut from the error the caller, the record and the
    events get."""
    from agentrunner import RunAgentOverrides, Tool, ToolContext
    from agentrunner.testing import Reply

    monkeypatch.setenv("MOCK_KEY", KEY)

    async def leaky(args: dict[str, Any], ctx: ToolContext) -> str:
        raise RuntimeError(f"the vault refused {KEY}")

    vault = Tool("vault", "Opens the vault.", {"type": "object", "properties": {}}, leaky)
    agent("opener")
    mock.queue(Reply(tool_calls=[("vault", {})]))
    runner: AgentRunner = await open_runner()
    errors: list[str] = []
    with pytest.raises(AgentRunnerError) as failed:
        await runner.run_agent(
            "opener",
            "t",
            "open it",
            AgentRunnerCallbacks(on_error=lambda a, t, e: errors.append(e)),
            RunAgentOverrides(tools=(vault,)),
        )
    assert failed.value.code is ErrorCode.TOOL_FAILED
    assert failed.value.message == "tool 'vault' failed: RuntimeError: the vault refused [redacted]"
    assert errors == [failed.value.message]
    stored = await stored_text(runner, "t")
    assert KEY not in stored and "the vault refused [redacted]" in stored
