"""Traces of runs (issue 26): with ``[telemetry] enabled``, a run is an ``invoke_agent`` span
holding a ``chat`` span per model request attempt and an ``execute_tool`` span per tool call,
in the OpenTelemetry GenAI conventions, read here from the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dirty_equals
import httpx2
import orjson
import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from agentrunner import AgentRunner, AgentRunnerCallbacks, RunAgentOverrides, Tool, ToolContext
from agentrunner.engine.abort import AbortSignal
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.run.idempotency import IdempotencyKey
from agentrunner.runtime.compose import open_task_runner, open_workspace
from agentrunner.telemetry import NO_TRACING
from agentrunner.testing import Fault, MockProvider, Reply
from tests.runner.conftest import Agent
from tests.runner.test_cli_run import cli
from tests.runner.test_delegation import org
from tests.server.conftest import ServerThread
from tests.server.test_http import AUTH
from tests.test_telemetry_setup import Receiver
from tests.workspace.test_workers import start_worker, stop


@pytest.fixture
def spans(
    exporter: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> Iterator[InMemorySpanExporter]:
    """The spans of a test (the process's providers set up: tests/runner/conftest.py)."""
    exporter.clear()
    yield exporter
    exporter.clear()


def telemetry(project: Path, *lines: str) -> None:
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write("\n[telemetry]\n" + "".join(line + "\n" for line in lines))


@dataclass(frozen=True)
class Node:
    """A span as the outline needs it, from this process's exporter or another's OTLP."""

    name: str
    span_id: int
    parent_id: int | None
    trace_id: int
    start: int

    @classmethod
    def of(cls, span: ReadableSpan | Span) -> Node:
        if isinstance(span, Span):  # OTLP's protobuf
            parent = int.from_bytes(span.parent_span_id) if span.parent_span_id else None
            return cls(
                span.name,
                int.from_bytes(span.span_id),
                parent,
                int.from_bytes(span.trace_id),
                span.start_time_unix_nano,
            )
        return cls(
            span.name,
            span.context.span_id,
            span.parent.span_id if span.parent else None,
            span.context.trace_id,
            span.start_time or 0,
        )


def tree(spans: Sequence[ReadableSpan | Span]) -> str:
    """The spans as an indented outline, children in the order they started; a span whose
    parent is not among them (none, or a remote caller's) is a root."""
    nodes = [Node.of(span) for span in spans]
    ids = {node.span_id for node in nodes}
    children: dict[int | None, list[Node]] = defaultdict(list)
    for node in sorted(nodes, key=lambda n: n.start):
        children[node.parent_id if node.parent_id in ids else None].append(node)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for node in children[parent]:
            lines.append("  " * depth + node.name)
            walk(node.span_id, depth + 1)

    walk(None, 0)
    return "\n".join(lines)


def named(spans: Sequence[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    """The spans whose name starts with ``prefix``, the title's request left out."""
    return sorted(
        (s for s in spans if s.name.startswith(prefix) and s.name != "chat test"),
        key=lambda s: s.start_time or 0,
    )


async def finished(runner: AgentRunner, spans: InMemorySpanExporter) -> Sequence[ReadableSpan]:
    """Every span, once the runs' post-run effects (the thread's title) are done."""
    await runner.effects.drain()
    return spans.get_finished_spans()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_run_with_a_tool_and_a_fallback_is_one_span_tree(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, spans: InMemorySpanExporter
) -> None:
    telemetry(project, "enabled = true")
    agent(
        "clerk",
        "name: Clerk\ndescription: Files things\nmodel: mockai:gpt-down\n"
        "fallback: [mockant:claude-mock]\nretry: {max: 1}\ncapabilities: [notify]",
    )
    # The primary is down (a retryable 503), the fallback answers; at the second step the
    # fallback is asked first (the primary failed).
    mock.queue(Reply(fault=Fault.http(503)), model="gpt-down")
    mock.queue(
        Reply(tool_calls=[("notify_user", {"message": "filed"})], input_tokens=30, output_tokens=7),
        Reply(text="Filed.", input_tokens=45, output_tokens=3),
        model="claude-mock",
    )
    runner: AgentRunner = await open_runner()
    result = await runner.run_agent("clerk", "desk", "File the report")
    assert result.text == "Filed."

    got = await finished(runner, spans)
    assert tree(got) == (
        "invoke_agent clerk\n"
        "  thread_lock\n"
        "  resolve_agent\n"
        "  build_prompt\n"
        "  chat gpt-down\n"
        "  chat claude-mock\n"
        "  execute_tool notify_user\n"
        "  chat claude-mock\n"
        "  post_run title\n"
        "    chat test"
    )
    assert len({s.context.trace_id for s in got}) == 1
    (run,) = named(got, "invoke_agent")
    assert attrs(run) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.id": "clerk",
        "gen_ai.agent.name": "Clerk",
        "gen_ai.agent.description": "Files things",
        "gen_ai.conversation.id": "desk",
        "agentrunner.run.id": result.run_id,
        "agentrunner.thread.id": "desk",
        "agentrunner.depth": 0,
        "agentrunner.stop_reason": "end_turn",
        "agentrunner.model": "mockant:claude-mock",
        "gen_ai.usage.input_tokens": 75,
        "gen_ai.usage.output_tokens": 10,
        "agentrunner.cost_usd": pytest.approx(result.cost_usd),
    }
    assert run.status.status_code is StatusCode.UNSET

    down, up, up_again = named(got, "chat")
    assert attrs(down) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "mockai",
        "gen_ai.request.model": "gpt-down",
        "agentrunner.model": "mockai:gpt-down",
        "agentrunner.attempt": 1,
        "agentrunner.step": 1,  # seed 003's run > step > tool, as an attribute
        "agentrunner.fallback": False,
        "http.response.status_code": 503,
        "error.type": "provider_unavailable",
    }
    assert down.status.status_code is StatusCode.ERROR
    assert attrs(up) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "mockant",
        "gen_ai.request.model": "claude-mock",
        "agentrunner.model": "mockant:claude-mock",
        "agentrunner.attempt": 2,
        "agentrunner.step": 1,
        "agentrunner.fallback": True,
        "agentrunner.retry.reason": "provider_unavailable",
        "gen_ai.response.model": "claude-mock",
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 7,
    }
    assert up.status.status_code is StatusCode.UNSET
    # The chain is the run's: its attempts are numbered across steps.
    assert attrs(up_again)["agentrunner.attempt"] == 3
    assert attrs(up_again)["agentrunner.step"] == 2
    assert attrs(up_again)["agentrunner.fallback"] is True
    assert "agentrunner.retry.reason" not in attrs(up_again)  # nothing failed at that step
    assert attrs(up_again)["gen_ai.response.finish_reasons"] == ("stop",)
    assert attrs(up_again)["gen_ai.usage.input_tokens"] == 45
    (tool,) = named(got, "execute_tool")
    call_id = mock.requests[-1].body["messages"][-1]["content"][0]["tool_use_id"]
    assert attrs(tool) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "notify_user",
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
        "agentrunner.step": 1,  # the step whose reply asked for it
    }
    # the title's request is its own turn's, the first step of it
    assert attrs(next(s for s in got if s.name == "chat test"))["agentrunner.step"] == 1
    # Without capture_content, no prompt, reply or tool data on any span.
    assert not [
        k for s in got for k in attrs(s) if "messages" in k or "call.a" in k or ".value" in k
    ]


@pytest.mark.parametrize(
    ("reply", "code", "status"),
    [
        (Reply(fault=Fault.http(401)), ErrorCode.PROVIDER_AUTH, 401),
        (Reply(fault=Fault.http(400)), ErrorCode.VALIDATION, 400),
    ],
)
async def test_a_failed_run_names_its_error_code(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    project: Path,
    spans: InMemorySpanExporter,
    reply: Reply,
    code: ErrorCode,
    status: int,
) -> None:
    telemetry(project, "enabled = true")
    agent("clerk")
    mock.queue(reply)
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as failed:
        await runner.run_agent("clerk", "desk", "hi")
    assert failed.value.code is code

    got = await finished(runner, spans)
    assert tree(got) == (  # a failed run gets no title
        "invoke_agent clerk\n  thread_lock\n  resolve_agent\n  build_prompt\n  chat gpt-mock"
    )
    run, chat = named(got, "invoke_agent")[0], named(got, "chat")[0]
    for span in (run, chat):
        assert attrs(span)["error.type"] == str(code)
        assert span.status.status_code is StatusCode.ERROR
        assert (span.status.description or "").startswith(f"{code}: ")
    assert attrs(chat)["http.response.status_code"] == status
    assert "agentrunner.stop_reason" not in attrs(run)  # it raised: no result to describe


async def test_a_tool_that_fails_is_a_failed_tool_span_in_a_run_that_goes_on(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, spans: InMemorySpanExporter
) -> None:
    telemetry(project, "enabled = true")
    agent("clerk", "capabilities: [notes]")
    mock.queue(
        Reply(tool_calls=[("note_read", {"slug": "nothing-here"})]), Reply(text="No such note.")
    )
    runner: AgentRunner = await open_runner()
    await runner.run_agent("clerk", "desk", "read my note")
    got = await finished(runner, spans)
    (tool,) = named(got, "execute_tool")
    assert attrs(tool)["gen_ai.tool.name"] == "note_read"
    assert attrs(tool)["error.type"] == "tool_failed"
    assert tool.status.status_code is StatusCode.ERROR
    (run,) = named(got, "invoke_agent")
    assert "error.type" not in attrs(run)  # the model was told, and answered


async def test_different_runs_give_different_attributes(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, spans: InMemorySpanExporter
) -> None:
    telemetry(project, "enabled = true")
    agent("clerk", "model: mockai:gpt-mock")
    agent("scribe", "model: mockant:claude-mock")
    mock.queue(Reply(text="one", input_tokens=11, output_tokens=2))
    mock.queue(Reply(text="two", input_tokens=13, output_tokens=5))
    runner: AgentRunner = await open_runner()
    first = await runner.run_agent("clerk", "t1", "hi")
    second = await runner.run_agent("scribe", "t2", "hello")

    got = await finished(runner, spans)
    runs, chats = named(got, "invoke_agent"), named(got, "chat")
    assert [attrs(s)["agentrunner.run.id"] for s in runs] == [first.run_id, second.run_id]
    assert [attrs(s)["gen_ai.agent.id"] for s in runs] == ["clerk", "scribe"]
    assert [attrs(s)["gen_ai.conversation.id"] for s in runs] == ["t1", "t2"]
    assert [attrs(s)["gen_ai.provider.name"] for s in chats] == ["mockai", "mockant"]
    assert [attrs(s)["gen_ai.request.model"] for s in chats] == ["gpt-mock", "claude-mock"]
    assert [attrs(s)["gen_ai.usage.input_tokens"] for s in chats] == [11, 13]
    assert [attrs(s)["gen_ai.usage.output_tokens"] for s in chats] == [2, 5]
    assert runs[0].context.trace_id != runs[1].context.trace_id  # two runs, two traces
    for run, span in ((first, runs[0]), (second, runs[1])):
        stored = await runner.store.runs.get(run.run_id)
        assert stored is not None and stored.trace_id == format(span.context.trace_id, "032x")


async def test_contents_are_recorded_only_when_asked_and_never_a_key(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, spans: InMemorySpanExporter
) -> None:
    telemetry(project, "enabled = true", "capture_content = true")
    agent("clerk", "capabilities: [notify]", body="You file reports.")
    mock.queue(
        Reply(tool_calls=[("notify_user", {"message": "key sk-mock-key"})]),
        Reply(text="Done, the key is sk-mock-key."),
    )
    runner: AgentRunner = await open_runner()
    await runner.run_agent("clerk", "desk", "File it; my key is sk-mock-key")

    got = await finished(runner, spans)
    assert "sk-mock-key" not in repr([attrs(s) for s in got])  # MOCK_KEY's value
    (run,) = named(got, "invoke_agent")
    assert orjson.loads(attrs(run)["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "File it; my key is [redacted]"}]}
    ]
    assert orjson.loads(attrs(run)["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Done, the key is [redacted]."}],
            "finish_reason": "end_turn",
        }
    ]
    first, second = named(got, "chat")
    (system,) = orjson.loads(attrs(first)["gen_ai.system_instructions"])
    assert "You file reports." in system["content"]
    assert orjson.loads(attrs(first)["gen_ai.input.messages"])[-1]["parts"][0]["content"] == (
        "File it; my key is [redacted]"
    )
    (said,) = orjson.loads(attrs(first)["gen_ai.output.messages"])
    assert said["parts"][0]["type"] == "tool_call"
    assert said["parts"][0]["arguments"] == {"message": "key [redacted]"}
    # the second request carries the tool's result
    roles = [m["role"] for m in orjson.loads(attrs(second)["gen_ai.input.messages"])]
    assert roles[-2:] == ["assistant", "tool"]
    (tool,) = named(got, "execute_tool")
    assert orjson.loads(attrs(tool)["gen_ai.tool.call.arguments"]) == {"message": "key [redacted]"}
    assert "gen_ai.tool.call.result" in attrs(tool)


@pytest.mark.parametrize(("message", "answer"), [("File it", "Filed."), ("Send memo", "Sent.")])
async def test_contents_are_also_openinference_input_and_output_values(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    project: Path,
    spans: InMemorySpanExporter,
    message: str,
    answer: str,
) -> None:
    """Issue 39 item 23: Phoenix fills its input and output columns from ``input.value`` and
    ``output.value`` (OpenInference), not from the GenAI conventions' messages."""
    telemetry(project, "enabled = true", "capture_content = true")
    agent("clerk", "capabilities: [notify]")
    mock.queue(Reply(tool_calls=[("notify_user", {"message": message})]), Reply(text=answer))
    runner: AgentRunner = await open_runner()
    await runner.run_agent("clerk", "desk", message)

    got = await finished(runner, spans)
    (run,) = named(got, "invoke_agent")
    assert {k: v for k, v in attrs(run).items() if k.startswith(("input.", "output."))} == {
        "input.value": message,
        "input.mime_type": "text/plain",
        "output.value": answer,
        "output.mime_type": "text/plain",
    }
    for chat in named(got, "chat"):
        said = attrs(chat)
        assert said["input.value"] == said["gen_ai.input.messages"]
        assert said["output.value"] == said["gen_ai.output.messages"]
        assert said["input.mime_type"] == said["output.mime_type"] == "application/json"
    first, second = named(got, "chat")
    assert orjson.loads(attrs(first)["input.value"])[-1]["parts"][0]["content"] == message
    assert orjson.loads(attrs(second)["output.value"])[0]["parts"][0]["content"] == answer
    (tool,) = named(got, "execute_tool")
    assert orjson.loads(attrs(tool)["input.value"]) == {"message": message}
    assert attrs(tool)["input.mime_type"] == "application/json"
    assert attrs(tool)["output.value"] == attrs(tool)["gen_ai.tool.call.result"]
    assert attrs(tool)["output.mime_type"] == "text/plain"


async def test_no_secret_the_runtime_holds_reaches_a_trace(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    project: Path,
    spans: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 39: a full-trust agent read the server's token and a secret the operator named,
    and with capture_content the trace export carried them; its reply quoting one too."""
    token, vault = "tok-Zq8Xw3Lm9Tt4Vb", "hvs-Zq8Xw3Lm9Tt4"
    monkeypatch.setenv("AGENTRUNNER_API_TOKEN", token)
    monkeypatch.setenv("VAULT_TOKEN", vault)
    telemetry(project, "enabled = true", "capture_content = true")
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write('\n[security]\nsecret_env = ["VAULT_TOKEN"]\n')
    (project / "environ.txt").write_text(f"AGENTRUNNER_API_TOKEN={token}\nVAULT_TOKEN={vault}\n")
    agent("reader", "capabilities: [files]\ntrust: full")
    mock.queue(
        Reply(tool_calls=[("read_file", {"path": "environ.txt"})]),
        Reply(text=f"The token is {token}."),
    )
    runner: AgentRunner = await open_runner()
    await runner.run_agent("reader", "desk", f"read it, and {vault}")

    got = await finished(runner, spans)
    shown = repr([(attrs(s), s.status.description, s.events) for s in got])
    assert token not in shown and vault not in shown
    (tool,) = named(got, "execute_tool")
    assert attrs(tool)["gen_ai.tool.call.result"] == (
        "AGENTRUNNER_API_TOKEN=[redacted]\nVAULT_TOKEN=[redacted]\n"
    )


async def test_telemetry_off_makes_no_spans(
    agent: Agent, open_runner: Any, mock: MockProvider, spans: InMemorySpanExporter
) -> None:
    agent("clerk", "capabilities: [notify]")
    mock.queue(Reply(tool_calls=[("notify_user", {"message": "x"})]), Reply(text="ok"))
    runner: AgentRunner = await open_runner()
    assert runner.engine.tracing is NO_TRACING
    result = await runner.run_agent("clerk", "desk", "hi")
    assert await finished(runner, spans) == ()
    stored = await runner.store.runs.get(result.run_id)
    assert stored is not None and stored.trace_id is None


async def test_a_delegation_two_levels_deep_nests_under_the_calling_tool(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, spans: InMemorySpanExporter
) -> None:
    telemetry(project, "enabled = true")
    org(agent)
    mock.queue(
        Reply(tool_calls=[("delegate", {"agent": "cto", "task": "Pick a database"})]),
        Reply(tool_calls=[("delegate", {"agent": "engineer", "task": "Benchmark two"})]),
        Reply(text="Postgres is 2x faster here."),
        Reply(text="We use Postgres."),
        Reply(text="Decision: Postgres."),
    )
    runner: AgentRunner = await open_runner()
    result = await runner.run_agent("ceo", "board", "Choose our stack")

    got = await finished(runner, spans)
    assert tree(got) == (
        "invoke_agent ceo\n"
        "  thread_lock\n"
        "  resolve_agent\n"
        "  build_prompt\n"
        "  chat gpt-mock\n"
        "  execute_tool delegate\n"
        "    invoke_agent cto\n"
        "      thread_lock\n"
        "      resolve_agent\n"
        "      build_prompt\n"
        "      chat gpt-mock\n"
        "      execute_tool delegate\n"
        "        invoke_agent engineer\n"
        "          thread_lock\n"
        "          resolve_agent\n"
        "          build_prompt\n"
        "          chat gpt-mock\n"
        "          post_run title\n"
        "            chat test\n"
        "      chat gpt-mock\n"
        "      post_run title\n"
        "        chat test\n"
        "  chat gpt-mock\n"
        "  post_run title\n"
        "    chat test"
    )
    runs = {attrs(s)["gen_ai.agent.id"]: attrs(s) for s in named(got, "invoke_agent")}
    assert runs["ceo"]["agentrunner.run.id"] == result.run_id
    assert runs["cto"]["agentrunner.parent_run.id"] == result.run_id
    assert runs["engineer"]["agentrunner.parent_run.id"] == runs["cto"]["agentrunner.run.id"]
    assert [runs[a]["agentrunner.depth"] for a in ("ceo", "cto", "engineer")] == [0, 1, 2]
    # a run's cost counts its children's, as its budget does
    cost = [runs[a]["agentrunner.cost_usd"] for a in ("ceo", "cto", "engineer")]
    assert cost[0] == pytest.approx(result.cost_usd) and cost[0] > cost[1] > cost[2] > 0
    assert runs["engineer"]["gen_ai.conversation.id"] == "board.cto.engineer"
    # each stored run keeps its trace: one, the whole tree's
    (trace_id,) = {format(s.context.trace_id, "032x") for s in got}
    stored = [await runner.store.runs.get(runs[a]["agentrunner.run.id"]) for a in runs]
    assert [r.trace_id for r in stored if r] == [trace_id] * 3


@pytest.mark.parametrize("how", ["abort", "cancel"])
async def test_a_run_stopped_mid_reply_is_cancelled_on_both_spans(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    project: Path,
    spans: InMemorySpanExporter,
    how: str,
) -> None:
    telemetry(project, "enabled = true")
    agent("talker")
    mock.queue(Reply(text="word " * 200, chunk_delay_s=0.01))
    runner: AgentRunner = await open_runner()
    abort = AbortSignal()
    tasks: list[asyncio.Task[Any]] = []

    def on_event(kind: str, data: Any) -> None:  # stopped at the first streamed token
        if kind == "agent.token":
            abort.abort() if how == "abort" else tasks[0].cancel()

    callbacks = AgentRunnerCallbacks(on_event=on_event)
    tasks.append(
        asyncio.ensure_future(runner.run_agent("talker", "t", "a story", callbacks, abort=abort))
    )
    if how == "abort":
        assert (await tasks[0]).stop_reason == "cancelled"
    else:
        with pytest.raises(asyncio.CancelledError):
            await tasks[0]

    got = await finished(runner, spans)
    assert (
        tree(got)
        == "invoke_agent talker\n  thread_lock\n  resolve_agent\n  build_prompt\n  chat gpt-mock"
    )
    for span in named(got, "invoke_agent") + named(got, "chat"):
        assert attrs(span)["error.type"] == "cancelled"
        assert span.status.status_code is StatusCode.ERROR


async def test_a_queued_run_keeps_the_trace_its_worker_made(
    agent: Agent, project: Path, spans: InMemorySpanExporter
) -> None:
    telemetry(project, "enabled = true")
    agent("clerk")
    workspace = await open_workspace(project)
    try:
        await workspace.runner.store.threads.open("desk", "clerk")
        queued = await workspace.runs.queue("clerk", "desk", "hi")
        before = await workspace.runner.store.runs.get(queued.run_id)
        assert before is not None and before.trace_id is None  # not run yet: no trace
        assert await workspace.worker().run(until_idle=True) == 1
        got = await finished(workspace.runner, spans)
        stored = await workspace.runner.store.runs.get(queued.run_id)
    finally:
        await workspace.close()
    (run,) = named(got, "invoke_agent")
    assert attrs(run)["agentrunner.run.id"] == queued.run_id
    assert stored is not None and stored.status == "completed"
    assert stored.trace_id == format(run.context.trace_id, "032x")


def test_runs_show_prints_the_trace_id(
    agent: Agent,
    mock: MockProvider,
    project: Path,
    capsys: pytest.CaptureFixture[str],
    spans: InMemorySpanExporter,
) -> None:
    telemetry(project, "enabled = true")
    agent("clerk")
    mock.queue(Reply(text="one"), Reply(text="two"))
    ids = [json.loads(cli(capsys, "run", "clerk", text, "--json")[1])["run_id"] for text in "ab"]
    traces = {
        attrs(s)["agentrunner.run.id"]: format(s.context.trace_id, "032x")
        for s in named(spans.get_finished_spans(), "invoke_agent")
    }
    assert set(traces) == set(ids) and len(set(traces.values())) == 2
    for run_id in ids:
        code, out, _ = cli(capsys, "runs", "show", run_id)
        assert code == 0 and f"trace {traces[run_id]}" in out
        other = next(t for r, t in traces.items() if r != run_id)
        assert other not in out
        code, out, _ = cli(capsys, "runs", "show", run_id, "--json")
        assert json.loads(out)["run"]["trace_id"] == traces[run_id]


async def test_tool_calls_run_together_are_sibling_spans(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, spans: InMemorySpanExporter
) -> None:
    telemetry(project, "enabled = true")
    agent("clerk", "capabilities: [notify, notes]")
    mock.queue(
        Reply(
            tool_calls=[
                ("notify_user", {"message": "one"}),
                ("note_create", {"title": "Plan", "body": "two"}),
            ]
        ),
        Reply(text="Both done."),
    )
    runner: AgentRunner = await open_runner()
    await runner.run_agent("clerk", "desk", "do both")
    got = await finished(runner, spans)
    (run,) = named(got, "invoke_agent")
    tools = named(got, "execute_tool")
    assert sorted(attrs(s)["gen_ai.tool.name"] for s in tools) == ["note_create", "notify_user"]
    assert len({attrs(s)["gen_ai.tool.call.id"] for s in tools}) == 2
    assert all(s.parent and s.parent.span_id == run.context.span_id for s in tools)
    assert all(s.status.status_code is StatusCode.UNSET for s in tools)


async def test_a_tool_that_crashes_fails_its_span_and_the_run_with_no_key_in_them(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, spans: InMemorySpanExporter
) -> None:
    telemetry(project, "enabled = true")
    agent("clerk")

    async def leaky(args: dict[str, Any], ctx: ToolContext) -> str:
        raise RuntimeError(f"cannot reach the vault with {os.environ['MOCK_KEY']}")

    tool = Tool("vault", "Opens the vault.", {"type": "object", "properties": {}}, leaky)
    mock.queue(Reply(tool_calls=[("vault", {})]))
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as failed:
        await runner.run_agent(
            "clerk", "desk", "open it", overrides=RunAgentOverrides(tools=(tool,))
        )
    assert failed.value.code is ErrorCode.TOOL_FAILED

    got = await finished(runner, spans)
    assert tree(got) == (
        "invoke_agent clerk\n  thread_lock\n  resolve_agent\n  build_prompt\n  chat gpt-mock\n"
        "  execute_tool vault"
    )
    (run,), (crashed,) = named(got, "invoke_agent"), named(got, "execute_tool")
    for span in (run, crashed):
        assert attrs(span)["error.type"] == "tool_failed"
        assert span.status.description == (
            "tool_failed: tool 'vault' failed: RuntimeError: cannot reach the vault with [redacted]"
        )


async def test_the_wait_for_a_busy_thread_is_its_own_span(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, spans: InMemorySpanExporter
) -> None:
    telemetry(project, "enabled = true")
    agent("clerk")
    mock.queue(Reply(text="first", delay_s=0.5), Reply(text="second"))
    runner: AgentRunner = await open_runner()
    first = asyncio.ensure_future(runner.run_agent("clerk", "desk", "one"))
    while not mock.requests:  # the first run holds the thread, its request in flight
        await asyncio.sleep(0.01)
    second = await runner.run_agent("clerk", "desk", "two")
    await first

    got = await finished(runner, spans)
    runs = {attrs(s)["agentrunner.run.id"]: s for s in named(got, "invoke_agent")}
    (waited,) = (
        s
        for s in got
        if s.name == "thread_lock"
        and s.parent
        and s.parent.span_id == runs[second.run_id].context.span_id
    )
    (held,) = (
        s
        for s in named(got, "chat")
        if s.parent and s.parent.span_id == runs[first.result().run_id].context.span_id
    )
    assert attrs(waited) == {"agentrunner.thread.id": "desk"}
    # it began while the first run's request was in flight, and ended after that request
    assert (waited.start_time or 0) < (held.end_time or 0) <= (waited.end_time or 0)


async def test_a_task_is_a_span_with_its_cache_lookup_and_its_run(
    agent: Agent, mock: MockProvider, project: Path, spans: InMemorySpanExporter
) -> None:
    telemetry(project, "enabled = true")
    agent("cfo", "cache: true", body="You are {{ input.company? }}'s CFO.")
    mock.queue(Reply(text="Hire."), Reply(text="Fire."), Reply(fault=Fault.http(401)))
    outcomes = []
    for company in ("Acme", "Acme", "Globex", "Initech"):
        async with await open_task_runner(project) as tasks:
            outcomes.append(await tasks.execute("cfo", {"company": company}))
    assert [(o.status, o.cached) for o in outcomes] == [
        ("completed", False),
        ("completed", True),  # the same request: answered by the cache, no run
        ("completed", False),
        ("failed", False),
    ]
    got = spans.get_finished_spans()
    task = "execute_task cfo\n  cache_lookup\n"
    run = "  invoke_agent cfo\n    resolve_agent\n    build_prompt\n    chat gpt-mock\n"
    assert tree(got) == (task + run + task + task + run + task + run).rstrip("\n")
    lookups = [attrs(s)["agentrunner.cache.hit"] for s in got if s.name == "cache_lookup"]
    assert lookups == [False, True, False, False]
    tasks_ = named(got, "execute_task")
    hits = [attrs(s).get("agentrunner.cache.hit") for s in tasks_]
    assert hits == [False, True, False, None]  # the last one raised: no answer to describe
    assert [attrs(s).get("error.type") for s in tasks_] == [None, None, None, "provider_auth"]
    assert tasks_[-1].status.status_code is StatusCode.ERROR
    assert attrs(tasks_[0]) == {
        "gen_ai.agent.id": "cfo",
        "agentrunner.model": "mockai:gpt-mock",
        "agentrunner.cache.hit": False,
    }


def channel(project: Path, name: str, *members: str) -> None:
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write(f"\n[channels.{name}]\nmembers = {list(members)!r}\n".replace("'", '"'))


def test_a_post_its_wait_and_the_runs_it_queued_are_one_trace(
    agent: Agent,
    mock: MockProvider,
    project: Path,
    capsys: pytest.CaptureFixture[str],
    spans: InMemorySpanExporter,
) -> None:
    """``post`` with no worker alive serves the replies itself: the post is an ``enqueue``
    span holding the command's wait, the claim of each run it queued (with the time the run
    was queued) and the run; the agent's reply, posted for it, is a post of its own. Two
    posts, two traces."""
    telemetry(project, "enabled = true")
    channel(project, "ops", "clerk", "ada")
    agent("clerk")
    mock.queue(Reply(text="On it."), Reply(text="Done already."))
    for text in ("Ship the release", "And the notes?"):
        code, _, err = cli(capsys, "post", "ops", text, "--as", "ada")
        assert code == 0, err
    got = spans.get_finished_spans()

    one = (
        "enqueue #ops\n"
        "  wait #ops\n"
        "  claim clerk\n"
        "  invoke_agent clerk\n"
        "    thread_lock\n"
        "    resolve_agent\n"
        "    build_prompt\n"
        "    chat gpt-mock\n"
        "    post_run title\n"
        "      chat test\n"
        "  enqueue #ops"  # the reply, posted for it: heard by nobody but ada
    )
    assert tree(got) == one + "\n" + one.replace("    post_run title\n      chat test\n", "")
    posts = [s for s in named(got, "enqueue") if s.parent is None]
    assert len({s.context.trace_id for s in posts}) == 2  # two posts, two traces
    for post in posts:
        mine = [s for s in got if s.context.trace_id == post.context.trace_id]
        (claim,) = named(mine, "claim")
        (run,) = named(mine, "invoke_agent")
        (wait,) = named(mine, "wait")
        reply = next(s for s in named(mine, "enqueue") if s is not post)
        for child in (claim, run, wait, reply):
            assert child.parent is not None and child.parent.span_id == post.context.span_id
        run_id = attrs(run)["agentrunner.run.id"]
        assert post.kind is SpanKind.PRODUCER and claim.kind is SpanKind.CONSUMER
        assert attrs(post) == {
            "agentrunner.queue.destination": "#ops",
            "agentrunner.queue.agents": ("clerk",),
            "agentrunner.queue.run_ids": (run_id,),
            "gen_ai.agent.id": "clerk",
        }
        assert attrs(reply)["agentrunner.queue.run_ids"] == ()  # ada is a person: no runs
        waited = attrs(claim).pop("agentrunner.queue.wait_s")
        assert waited >= 0
        assert attrs(claim) | {"agentrunner.queue.wait_s": waited} == {
            "gen_ai.agent.id": "clerk",
            "agentrunner.run.id": run_id,
            "agentrunner.attempt": 1,
            "agentrunner.worker.id": dirty_equals.IsStr(regex=rf".+:{os.getpid()}"),
            "agentrunner.queue.wait_s": waited,
        }
        assert attrs(wait) == {
            "agentrunner.queue.destination": "#ops",
            "agentrunner.queue.run_ids": (run_id,),
        }
        assert (wait.start_time or 0) <= (run.start_time or 0)
        assert (run.end_time or 0) <= (wait.end_time or 0)  # it waited for the reply
        code, out, _ = cli(capsys, "runs", "show", run_id)  # the run keeps the post's trace
        assert code == 0 and f"trace {format(post.context.trace_id, '032x')}" in out


async def test_an_enqueue_refused_or_repeated_says_so(
    agent: Agent, project: Path, spans: InMemorySpanExporter
) -> None:
    """Past an agent's bound the ``enqueue`` fails with ``queue_full`` and nothing is queued;
    a repeat of an idempotent request queued nothing either, and says so."""
    telemetry(project, "enabled = true")
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write("\n[workers]\nmax_queue = 1\n")
    channel(project, "ops", "clerk", "ada")
    agent("clerk")
    workspace = await open_workspace(project)
    try:
        key = IdempotencyKey.of("POST /threads/desk/runs", "k1", {"message": "hi"})
        await workspace.runner.store.threads.open("desk", "clerk")
        first = await workspace.runs.queue("clerk", "desk", "hi", idempotency=key)
        again = await workspace.runs.queue("clerk", "desk", "hi", idempotency=key)
        ops = await workspace.channels.channel("ops")
        with pytest.raises(AgentRunnerError) as full:
            await workspace.channels.post(ops, "ada", "one more")
        assert full.value.code is ErrorCode.QUEUE_FULL
        assert await workspace.runner.store.mailbox.queued("clerk", 10) == 1
    finally:
        await workspace.close()
    assert again.repeated and again.run_id == first.run_id
    queued, repeated, refused = named(spans.get_finished_spans(), "enqueue")
    assert attrs(queued) == {
        "agentrunner.queue.destination": "clerk",
        "agentrunner.queue.agents": ("clerk",),
        "agentrunner.queue.run_ids": (first.run_id,),
        "gen_ai.agent.id": "clerk",
    }
    assert attrs(repeated) == {
        "agentrunner.queue.destination": "clerk",
        "agentrunner.queue.agents": ("clerk",),
        "agentrunner.queue.run_ids": (first.run_id,),  # the first request's
        "gen_ai.agent.id": "clerk",
        "agentrunner.queue.repeated": True,
    }
    assert attrs(refused) == {
        "agentrunner.queue.destination": "#ops",
        "error.type": "queue_full",
    }
    assert refused.status.status_code is StatusCode.ERROR
    assert queued.status.status_code is StatusCode.UNSET
    assert len({s.context.trace_id for s in (queued, repeated, refused)}) == 3


def test_telemetry_off_a_post_and_the_runs_it_queued_make_no_spans(
    agent: Agent,
    mock: MockProvider,
    project: Path,
    capsys: pytest.CaptureFixture[str],
    spans: InMemorySpanExporter,
) -> None:
    channel(project, "ops", "clerk", "ada")
    agent("clerk")
    mock.queue(Reply(text="On it."))
    code, out, err = cli(capsys, "post", "ops", "Ship the release", "--as", "ada")
    assert code == 0, err
    assert "On it." in out  # queued, claimed, run and answered here
    assert spans.get_finished_spans() == ()


CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
THREAD_CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"


async def _open_thread(thread_id: str, agent_id: str) -> None:
    """Open a thread in the project's store, making no span."""
    from agentrunner.store import open_store

    store = await open_store(os.environ["AGENTRUNNER_DATABASE_URL"])
    try:
        await store.threads.open(thread_id, agent_id)
    finally:
        await store.close()


def test_a_post_served_by_a_worker_in_another_process_is_one_trace(
    agent: Agent, mock: MockProvider, project: Path, spans: InMemorySpanExporter
) -> None:
    """The HTTP API here, a worker in a process of its own (exporting over OTLP/HTTP): the
    worker continues the trace each run was queued in, the runs it delegates to nested in it;
    a request's ``traceparent`` is continued, a malformed one ignored (a new trace)."""
    from agentrunner.interfaces.server import create_app

    with Receiver() as receiver:
        telemetry(project, "enabled = true", f'endpoint = "{receiver.url}"')
        channel(project, "board", "ceo", "ada")
        org(agent)
        mock.queue(
            Reply(tool_calls=[("delegate", {"agent": "cto", "task": "Pick a database"})]),
            Reply(text="Postgres."),  # the cto, for the ceo
            Reply(text="We use Postgres."),
            Reply(text="Any office will do."),
            Reply(text="Soup."),
            Reply(text="Filed."),  # the run on a thread
        )
        asyncio.run(_open_thread("desk", "ceo"))  # the run on a thread needs its thread
        api = ServerThread(create_app(project, token="secret-token", worker=False))
        worker = start_worker(project)
        try:
            requests = [
                (
                    "Choose our stack",
                    {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01", "tracestate": "k=v"},
                ),
                ("And the office?", {}),
                ("Lunch?", {"traceparent": "00-not-a-trace-at-all-01"}),
            ]
            run_ids = []
            for text, headers in requests:
                posted = httpx2.post(
                    f"{api.url}/channels/board/messages",
                    headers={**AUTH, **headers},
                    json={"text": text, "sender": "ada"},
                )
                assert posted.status_code == 201, posted.text  # a bad traceparent is no error
                run_ids += posted.json()["run_ids"]
            queued = httpx2.post(
                f"{api.url}/threads/desk/runs",
                headers={**AUTH, "traceparent": f"00-{THREAD_CALLER_TRACE}-{CALLER_SPAN}-01"},
                json={"agent_id": "ceo", "message": "File it"},
            )
            assert queued.status_code == 202, queued.text
            run_ids.append(queued.json()["run_id"])
            stored = until_settled(api.url, run_ids)
        finally:
            assert stop(worker) == 0  # and its spans are sent as it exits
            api.stop()
        served = spans.get_finished_spans()
        here = [s for s in served if s.instrumentation_scope.name == "agentrunner"]
        there = receiver.spans()

    assert [run["status"] for run in stored] == ["completed"] * 4
    posts = [s for s in named(here, "enqueue") if s.name == "enqueue #board"]
    assert len(posts) == 3 and not named(here, "invoke_agent")  # the runs ran elsewhere
    first, second, third = posts
    # the caller's trace, continued (by FastAPI's request span); without one, or with a
    # malformed one, a trace each
    assert format(first.context.trace_id, "032x") == CALLER_TRACE
    assert format(caller(first, served), "016x") == CALLER_SPAN
    (request,) = (s for s in served if s.kind is SpanKind.SERVER and same_trace(s, first))
    assert request.name == "POST /channels/{name}/messages"  # FastAPI's: the post is in it
    assert caller(second, served) is None and caller(third, served) is None
    assert len({s.context.trace_id for s in posts} | {int(CALLER_TRACE, 16)}) == 3
    (thread_run,) = named(here, "enqueue ceo")
    assert format(thread_run.context.trace_id, "032x") == THREAD_CALLER_TRACE
    assert format(caller(thread_run, served), "016x") == CALLER_SPAN
    # each stored run keeps the trace it was queued in
    traces = [format(s.context.trace_id, "032x") for s in [*posts, thread_run]]
    assert [run["trace_id"] for run in stored] == traces

    # the worker's spans: each under the span its run was queued in, in the other process
    assert {s.trace_id.hex() for s in there} == set(traces)
    delegating = (
        "  claim ceo\n"
        "  invoke_agent ceo\n"
        "    thread_lock\n"
        "    resolve_agent\n"
        "    build_prompt\n"
        "    chat gpt-mock\n"
        "    execute_tool delegate\n"
        "      invoke_agent cto\n"
        "        thread_lock\n"
        "        resolve_agent\n"
        "        build_prompt\n"
        "        chat gpt-mock\n"
        "        post_run title\n"
        "          chat test\n"
        "    chat gpt-mock\n"
        "    post_run title\n"
        "      chat test\n"
        "  enqueue #board"  # its reply, posted for it
    )
    answering = (
        "  claim ceo\n"
        "  invoke_agent ceo\n"
        "    thread_lock\n"
        "    resolve_agent\n"
        "    build_prompt\n"
        "    chat gpt-mock\n"
        "  enqueue #board"
    )
    both = [*here, *there]
    for post, below in ((first, delegating), (second, answering), (third, answering)):
        mine = [s for s in both if Node.of(s).trace_id == post.context.trace_id]
        assert tree(mine) == "enqueue #board\n" + below
        claims = [s for s in there if s.name == "claim ceo" and s in mine]
        runs = [s for s in there if s.name == "invoke_agent ceo" and s in mine]
        for span in claims + runs:
            assert int.from_bytes(span.parent_span_id) == post.context.span_id
    mine = [s for s in both if Node.of(s).trace_id == thread_run.context.trace_id]
    assert tree(mine) == (
        "enqueue ceo\n"
        "  claim ceo\n"
        "  invoke_agent ceo\n"
        "    thread_lock\n"
        "    resolve_agent\n"
        "    build_prompt\n"
        "    chat gpt-mock\n"
        "    post_run title\n"
        "      chat test"
    )


def same_trace(one: ReadableSpan, other: ReadableSpan) -> bool:
    return one.context.trace_id == other.context.trace_id


def caller(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> int | None:
    """The span id of the remote caller ``span`` descends from (up through this process's
    spans: the HTTP request's, made by FastAPI), if any."""
    by_id = {s.context.span_id: s for s in spans}
    while span.parent is not None:
        if span.parent.is_remote:
            return span.parent.span_id
        span = by_id[span.parent.span_id]
    return None


def until_settled(url: str, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The runs, once each has ended (a hang, not a timing, if they do not: a minute)."""
    for _ in range(600):
        runs = [httpx2.get(f"{url}/runs/{run_id}", headers=AUTH).json() for run_id in run_ids]
        if all(run["status"] in ("completed", "failed", "cancelled") for run in runs):
            return runs
        time.sleep(0.1)
    raise AssertionError(f"the runs did not end: {runs}")


async def test_json_log_lines_carry_each_runs_id_and_the_trace(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, spans: InMemorySpanExporter
) -> None:
    """A decision logged inside a delegated run names that run, and the trace all share."""
    import io

    from agentrunner.core.log_format import use_format

    telemetry(project, "enabled = true")
    org(agent)
    mock.queue(
        Reply(tool_calls=[("delegate", {"agent": "cto", "task": "Pick a database"})]),
        Reply(tool_calls=[("delegate", {"agent": "engineer", "task": "Benchmark two"})]),
        Reply(text="Postgres is 2x faster here."),
        Reply(text="We use Postgres."),
        Reply(text="Decision: Postgres."),
    )
    runner: AgentRunner = await open_runner()
    lines = io.StringIO()
    use_format("json", lines)
    try:
        result = await runner.run_agent("ceo", "board", "Choose our stack")
    finally:
        use_format("text")
    logged = [json.loads(line) for line in lines.getvalue().splitlines()]
    chose = [(line["agent"], line["run_id"], line["trace_id"]) for line in logged]
    (trace_id,) = {format(s.context.trace_id, "032x") for s in await finished(runner, spans)}
    cto = next(r for r in await runner.store.runs.list(limit=10) if r.agent_id == "cto")
    assert chose == [("ceo", result.run_id, trace_id), ("cto", cto.id, trace_id)]
    assert [line["tools"] for line in logged] == [["delegate"], ["delegate"]]
