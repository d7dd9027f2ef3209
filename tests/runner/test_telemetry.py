"""Traces of runs (issue 26): with ``[telemetry] enabled``, a run is an ``invoke_agent`` span
holding a ``chat`` span per model request attempt and an ``execute_tool`` span per tool call,
in the OpenTelemetry GenAI conventions, read here from the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import json
import os
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agentrunner import AgentRunner, AgentRunnerCallbacks, RunAgentOverrides, Tool, ToolContext
from agentrunner.compose import open_task_runner, open_workspace
from agentrunner.engine.abort import AbortSignal
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.testing import Fault, MockProvider, Reply
from tests.runner.conftest import Agent
from tests.runner.test_cli_run import cli
from tests.runner.test_delegation import org


@pytest.fixture(scope="session")
def exporter() -> InMemorySpanExporter:
    """The process's tracer provider, set once (OpenTelemetry allows no second): agentrunner
    finds it set up and sends its spans there, as it would to an application's own."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(provider)
    assert trace.get_tracer_provider() is provider, "a tracer provider was set before"
    return memory


@pytest.fixture
def spans(exporter: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    exporter.clear()
    yield exporter
    exporter.clear()


def telemetry(project: Path, *lines: str) -> None:
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write("\n[telemetry]\n" + "".join(line + "\n" for line in lines))


def tree(spans: Sequence[ReadableSpan]) -> str:
    """The spans as an indented outline, children in the order they started."""
    children: dict[int | None, list[ReadableSpan]] = defaultdict(list)
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        children[span.parent.span_id if span.parent else None].append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in children[parent]:
            lines.append("  " * depth + span.name)
            walk(span.context.span_id, depth + 1)

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
    # Each step: the primary is down (a retryable 503), the fallback answers.
    mock.queue(Reply(fault=Fault.http(503)), Reply(fault=Fault.http(503)), model="gpt-down")
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
        "  build_prompt\n"
        "  chat gpt-down\n"
        "  chat claude-mock\n"
        "  execute_tool notify_user\n"
        "  chat gpt-down\n"
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

    down, up, down_again, up_again = named(got, "chat")
    assert attrs(down) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "mockai",
        "gen_ai.request.model": "gpt-down",
        "agentrunner.model": "mockai:gpt-down",
        "agentrunner.attempt": 1,
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
        "agentrunner.fallback": True,
        "agentrunner.retry.reason": "provider_unavailable",
        "gen_ai.response.model": "claude-mock",
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 7,
    }
    assert up.status.status_code is StatusCode.UNSET
    # The chain is the run's: its attempts are numbered across steps.
    assert [attrs(s)["agentrunner.attempt"] for s in (down_again, up_again)] == [3, 4]
    assert attrs(up_again)["gen_ai.response.finish_reasons"] == ("stop",)
    assert attrs(up_again)["gen_ai.usage.input_tokens"] == 45
    (tool,) = named(got, "execute_tool")
    call_id = mock.requests[-1].body["messages"][-1]["content"][0]["tool_use_id"]
    assert attrs(tool) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "notify_user",
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
    }
    # Without capture_content, no prompt, reply or tool data on any span.
    assert not [k for s in got for k in attrs(s) if "messages" in k or "call.a" in k]


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
        "invoke_agent clerk\n  thread_lock\n  build_prompt\n  chat gpt-mock"
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


async def test_telemetry_off_makes_no_spans(
    agent: Agent, open_runner: Any, mock: MockProvider, spans: InMemorySpanExporter
) -> None:
    agent("clerk", "capabilities: [notify]")
    mock.queue(Reply(tool_calls=[("notify_user", {"message": "x"})]), Reply(text="ok"))
    runner: AgentRunner = await open_runner()
    assert runner.engine.tracing is None
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
        "  build_prompt\n"
        "  chat gpt-mock\n"
        "  execute_tool delegate\n"
        "    invoke_agent cto\n"
        "      thread_lock\n"
        "      build_prompt\n"
        "      chat gpt-mock\n"
        "      execute_tool delegate\n"
        "        invoke_agent engineer\n"
        "          thread_lock\n"
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
    assert tree(got) == "invoke_agent talker\n  thread_lock\n  build_prompt\n  chat gpt-mock"
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
        "invoke_agent clerk\n  thread_lock\n  build_prompt\n  chat gpt-mock\n  execute_tool vault"
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
    run = "  invoke_agent cfo\n    build_prompt\n    chat gpt-mock\n"
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


async def test_json_log_lines_carry_each_runs_id_and_the_trace(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, spans: InMemorySpanExporter
) -> None:
    """A decision logged inside a delegated run names that run, and the trace all share."""
    import io

    from agentrunner.log_format import use_format

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
