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


# -- every secret the runtime holds, one list (issue 39) --------------------------------------

# variable → (its value, the secrets it holds, as text may spell them)
HELD = {
    "AGENTRUNNER_API_TOKEN": ("tok-Zq8Xw3Lm9Tt4Vb", ["tok-Zq8Xw3Lm9Tt4Vb"]),
    "OTEL_EXPORTER_OTLP_HEADERS": (
        "authorization=Bearer%20ot-Zq8Xw3Lm9,x-tenant=tn-Lm9Tt4Vb",
        ["Bearer%20ot-Zq8Xw3Lm9", "ot-Zq8Xw3Lm9", "tn-Lm9Tt4Vb"],
    ),
    "AGENTRUNNER_DATABASE_URL": (
        "postgresql://agent:pg-Zq8%40Xw3Lm9@db.internal/prod",
        ["pg-Zq8@Xw3Lm9", "pg-Zq8%40Xw3Lm9"],
    ),
    "VAULT_TOKEN": ("hvs-Zq8Xw3Lm9Tt4", ["hvs-Zq8Xw3Lm9Tt4"]),  # named in [security] secret_env
}
NOT_NAMED = "nn-Zq8Xw3Lm9Tt4"  # a variable nobody named: an ordinary value, kept


def name_secret_env(project: Any, *names: str) -> None:
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write(f"\n[security]\nsecret_env = {json.dumps(list(names))}\n")


async def open_with(project: Any, store_url: str) -> AgentRunner:
    """The project's runner on the test's store, whatever AGENTRUNNER_DATABASE_URL says."""
    from agentrunner.runtime.compose import open_runner

    return await open_runner(project, database_url=store_url)


@pytest.mark.parametrize("variable", list(HELD))
async def test_every_secret_the_runtime_holds_is_cut_from_what_a_tool_read(
    agent: Agent,
    mock: MockProvider,
    monkeypatch: pytest.MonkeyPatch,
    project: Any,
    store_url: str,
    variable: str,
) -> None:
    """A full-trust agent that reads the environment (here a dump of it) sends none of the
    runtime's secrets to the model, and none is stored."""
    from agentrunner.testing import Reply

    value, secrets = HELD[variable]
    monkeypatch.setenv(variable, value)
    monkeypatch.setenv("NOT_NAMED", NOT_NAMED)
    name_secret_env(project, "VAULT_TOKEN")
    dump = f"{variable}={value}\nNOT_NAMED={NOT_NAMED}\n" + "".join(f"{s}\n" for s in secrets)
    (project / "environ.txt").write_text(dump)
    agent("reader", "capabilities: [files]\ntrust: full")
    mock.queue(Reply(tool_calls=[("read_file", {"path": "environ.txt"})]), Reply(text="read"))
    runner = await open_with(project, store_url)
    try:
        await runner.run_agent("reader", "t", "what is in it?")
        stored = await stored_text(runner, "t")
    finally:
        await runner.close()
    sent = json.dumps([r.body for r in mock.requests])
    for secret in secrets:
        assert secret not in sent and secret not in stored
    assert f"{variable}=" in stored and "[redacted]" in stored  # the rest of what it read kept
    assert NOT_NAMED in sent and NOT_NAMED in stored  # the list is what it says, not every value


@pytest.mark.parametrize(
    ("variable", "secret"),
    [("MOCK_KEY", "sk-mock-key"), ("VAULT_TOKEN", "hvs-Zq8Xw3Lm9Tt4")],
)
async def test_a_secret_a_model_says_is_cut_before_anyone_sees_it(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    monkeypatch: pytest.MonkeyPatch,
    project: Any,
    variable: str,
    secret: str,
) -> None:
    """Its reply streamed in pieces that split the secret, and a tool call's arguments: the
    events, the result, the stored thread and the next request carry ``[redacted]``."""
    from agentrunner.testing import Reply

    monkeypatch.setenv(variable, secret)
    name_secret_env(project, "VAULT_TOKEN")
    agent("talker", "capabilities: [notify]")
    said = f"The key is {secret}."
    mock.queue(Reply(tool_calls=[("notify_user", {"message": f"key {secret}"})]), Reply(text=said))
    runner: AgentRunner = await open_runner()
    events: list[tuple[str, Any]] = []
    result = await runner.run_agent(
        "talker", "t", "hi", AgentRunnerCallbacks(on_event=lambda k, d: events.append((k, d)))
    )
    tokens = [d["token"] for k, d in events if k == "agent.token"]
    assert len(tokens) > 1 and result.text == "".join(tokens) == "The key is [redacted]."
    [notify] = [d for k, d in events if k == "agent.notify"]
    assert notify["message"] == "key [redacted]"
    assert secret not in repr(events) and secret not in await stored_text(runner, "t")
    await runner.run_agent("talker", "t", "again")
    assert secret not in json.dumps(mock.requests[-1].body)


async def test_a_secret_in_any_error_of_a_run_is_cut(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    monkeypatch: pytest.MonkeyPatch,
    project: Any,
) -> None:
    """An MCP server that fails quoting the token it was given (its last words are part of the
    error): the error the caller gets, the run's record and its events have it cut."""
    import sys

    token = HELD["AGENTRUNNER_API_TOKEN"][0]
    monkeypatch.setenv("AGENTRUNNER_API_TOKEN", token)
    (project / "vault.py").write_text(
        "import os, sys\nprint('refused', os.environ['VAULT'], file=sys.stderr)\nsys.exit(3)\n"
    )
    agent(
        "opener",
        "mcp_servers:\n"
        f"  vault: {{command: {sys.executable}, args: [vault.py], "
        "env: {VAULT: '${AGENTRUNNER_API_TOKEN}'}}",
    )
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as failed:
        await runner.run_agent("opener", "t", "open")
    assert failed.value.code is ErrorCode.TOOL_FAILED
    assert failed.value.message.endswith("it said: refused [redacted]"), failed.value.message
    stored = await stored_text(runner, "t")
    assert token not in stored and "it said: refused [redacted]" in stored
    assert mock.requests == []
