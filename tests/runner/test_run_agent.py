"""AgentRunner.run_agent against the mock provider, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentRunner, AgentRunnerCallbacks, RunAgentOverrides
from agentrunner.engine import AbortSignal, AssistantMessage, ToolResult, UserMessage
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.testing import Fault, MockProvider, Reply
from tests.conftest import cut_off
from tests.runner.conftest import Agent


async def test_a_tool_run_tells_the_whole_story(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("helper", "capabilities: [notes]")
    mock.queue(
        Reply(
            tool_calls=[("note_create", {"title": "Launch plan", "body": "Ship in Q3"})],
            input_tokens=100,
            output_tokens=10,
        ),
        Reply(text="Noted the plan.", input_tokens=150, output_tokens=5),
    )
    runner: AgentRunner = await open_runner()
    result = await runner.run_agent("helper", "t1", "Write down the launch plan")
    await runner.effects.drain()
    store = runner.store
    assert result.text == "Noted the plan." and result.stop_reason == "end_turn"
    assert result.cost_micros == 100 + 20 + 150 + 10
    thread = await store.threads.get("t1")
    assert (
        thread is not None and thread.message_count == 4 and thread.session_run_id == result.run_id
    )
    assert thread.title  # the post-run effect named the thread
    roles = [m.role for _, m, _, _ in await store.messages.page("t1")]
    assert roles == ["user", "assistant", "tool", "assistant"]
    run = await store.runs.get(result.run_id)
    assert run is not None and (run.status, run.stop_reason, run.model) == (
        "completed",
        "end_turn",
        "mockai:gpt-mock",
    )
    assert run.token_usage == {
        "input_tokens": 250,
        "output_tokens": 15,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "requests": 2,
    }
    steps = await store.runs.steps(result.run_id)
    assert [(s.step_number, s.status, s.model_id) for s in steps] == [
        (1, "completed", "mockai:gpt-mock"),
        (2, "completed", "mockai:gpt-mock"),
    ]
    kinds = [m.message_type for m in await store.runs.messages(result.run_id)]
    assert kinds == [
        "system_message",
        "user_message",
        "tool_call_message",
        "tool_return_message",
        "assistant_message",
    ]
    events = [e.type for e in await store.events.list(result.run_id)]
    assert events[:2] == ["agent.working", "step.started"]
    assert events[-2:] == ["agent.message", "agent.idle"]
    assert events.count("cost.updated") == 2 and "agent.tool_call" in events
    note = await store.notes.get("helper", "launch-plan")
    assert note is not None and note.body == "Ship in Q3"
    assert (await store.agent_states.get("helper")).status == "idle"  # type: ignore[union-attr]


async def test_fifty_concurrent_runs_on_one_thread_in_arrival_order(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("echo")
    runner: AgentRunner = await open_runner()
    results = await asyncio.gather(
        *(runner.run_agent("echo", "shared", f"message {n}") for n in range(50))
    )
    assert [r.text for r in results] == [f"Echo: message {n}" for n in range(50)]
    page = await runner.store.messages.page("shared", limit=500)
    texts = [m.content if isinstance(m, UserMessage) else m.text for _, m, _, _ in page]  # type: ignore[union-attr]
    expected = [t for n in range(50) for t in (f"message {n}", f"Echo: message {n}")]
    assert texts == expected
    runs = sorted(
        await runner.store.runs.list(thread_id="shared", limit=100), key=lambda r: r.started_at or 0
    )
    assert len(runs) == 50
    for before, after in itertools.pairwise(runs):
        assert before.completed_at is not None and after.started_at is not None
        assert before.completed_at <= after.started_at  # one at a time


async def test_abort_follows_seed_000(agent: Agent, open_runner: Any, mock: MockProvider) -> None:
    agent("talker")
    runner: AgentRunner = await open_runner()
    first = await runner.run_agent("talker", "t", "hello")
    before = await runner.store.threads.get("t")
    mock.queue(Reply(text="word " * 200, chunk_delay_s=0.01))
    abort = AbortSignal()
    errors: list[str] = []
    responses: list[str] = []
    speaking = asyncio.Event()
    callbacks = AgentRunnerCallbacks(
        on_event=lambda kind, data: speaking.set() if kind == "agent.token" else None,
        on_error=lambda a, t, e: errors.append(e),
        on_response=lambda a, t, x: responses.append(x),
    )
    task = asyncio.ensure_future(
        runner.run_agent("talker", "t", "tell me a long story", callbacks, abort=abort)
    )
    await asyncio.wait_for(speaking.wait(), timeout=30)  # cut off mid-answer, however slow
    await asyncio.sleep(0.1)
    abort.abort()
    result = await task
    assert result.text == "" and result.stop_reason == "cancelled"
    assert errors == [] and responses == []
    page = await runner.store.messages.page("t")
    last = page[-1][1]
    # What was streamed and paid for is kept, marked as cut off; no "(stopped by user)" text.
    assert isinstance(last, AssistantMessage) and last.interrupted
    assert last.text.startswith("word word ") and "stopped" not in last.text
    after = await runner.store.threads.get("t")
    assert after is not None and before is not None
    assert after.session_run_id == first.run_id  # the session did not advance
    assert after.updated_at > before.updated_at
    run = await runner.store.runs.get(result.run_id)
    assert run is not None and (run.status, run.stop_reason) == ("cancelled", "cancelled")
    usage = run.token_usage or {}
    assert usage["estimated"] and usage["output_tokens"] >= len(last.text) // 4 > 0
    assert run.cost_micros > 0 and result.cost_micros == run.cost_micros
    assert (await runner.run_agent("talker", "t", "again")).text == "Echo: again"
    sent = mock.requests[-1].body["messages"]
    assert sent[-3] == {"role": "user", "content": "tell me a long story"}
    assert sent[-2]["content"].startswith("word word ")
    assert sent[-2]["content"].endswith("[This turn was interrupted before it finished.]")
    assert sent[-1] == {"role": "user", "content": "again"}


async def test_engine_error_follows_seed_000(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("talker")
    runner: AgentRunner = await open_runner()
    good = await runner.run_agent("talker", "t", "hello")
    mock.queue(Reply(fault=Fault.http(400)))
    errors: list[tuple[str, str, str]] = []
    with pytest.raises(AgentRunnerError) as info:
        await runner.run_agent(
            "talker", "t", "break", AgentRunnerCallbacks(on_error=lambda *a: errors.append(a))
        )
    assert info.value.code is ErrorCode.VALIDATION
    assert errors == [("talker", "t", info.value.message)]
    last = (await runner.store.messages.page("t"))[-1][1]
    assert isinstance(last, AssistantMessage) and last.interrupted and last.text == ""
    thread = await runner.store.threads.get("t")
    assert thread is not None and thread.session_run_id == good.run_id
    [failed] = [r for r in await runner.store.runs.list(thread_id="t") if r.status == "failed"]
    assert (failed.error_code, failed.stop_reason) == ("validation", "error")
    assert failed.error_message == info.value.message  # the error is in the run record
    assert (await runner.store.agent_states.get("talker")).status == "error"  # type: ignore[union-attr]


async def test_failed_turns_are_not_fed_back_to_the_model(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path
) -> None:
    (project / "agentrunner.toml").write_text(
        (project / "agentrunner.toml").read_text()
        + '\n[providers.keyless]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'api_key_env = "NOT_SET_ANYWHERE"\n'
    )
    agent("broken", "model: keyless:gpt-x")
    runner: AgentRunner = await open_runner()
    for n in range(5):  # five failures on the same thread: the key is missing
        with pytest.raises(AgentRunnerError) as info:
            await runner.run_agent("broken", "t", f"try {n}")
        assert info.value.code is ErrorCode.PROVIDER_AUTH
    agent("broken", "model: mockai:gpt-mock")  # the key problem is fixed
    runner = await open_runner()
    assert (await runner.run_agent("broken", "t", "now")).text == "Echo: now"
    sent = mock.requests[-1].body["messages"]
    # No request was ever sent for the five: their messages stay in the thread for people,
    # and no model is sent them (DESIGN decision 11), nor the errors that stopped them.
    assert [(m["role"], m["content"]) for m in sent[1:]] == [("user", "now")]
    assert not any("NOT_SET_ANYWHERE" in str(m) or "error" in str(m) for m in sent)
    kept = [m for _, m, _, _ in await runner.store.messages.page("t") if isinstance(m, UserMessage)]
    assert [(m.content, m.unsent) for m in kept] == [
        *((f"try {n}", True) for n in range(5)),
        ("now", False),
    ]


async def test_bad_input_is_recorded_not_half_written(agent: Agent, open_runner: Any) -> None:
    agent("templ", body="You work for {{input.company}}.")
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as info:
        await runner.run_agent("templ", "t", "hi")
    assert info.value.code is ErrorCode.MISSING_MANDATORY_PLACEHOLDER
    [run] = await runner.store.runs.list(thread_id="t")
    assert run.status == "failed" and run.error_code == "missing_mandatory_placeholder"
    ok = await runner.run_agent("templ", "t", "hi", input={"company": "Acme"})
    assert ok.text == "Echo: hi"


async def test_unknown_agent_writes_nothing(open_runner: Any, agent: Agent) -> None:
    agent("real")
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as info:
        await runner.run_agent("ghost", "t", "hi")
    assert info.value.code is ErrorCode.AGENT_NOT_FOUND
    assert await runner.store.threads.get("t") is None


async def test_budget_exceeded_stops_the_run(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("spender", "capabilities: [notes]\nlimits: {max_budget_usd: 0.15}")
    mock.queue(
        *(
            Reply(tool_calls=[("note_list", {})], input_tokens=100_000, output_tokens=0)
            for _ in range(4)
        )
    )
    runner: AgentRunner = await open_runner()
    with pytest.raises(AgentRunnerError) as info:
        await runner.run_agent("spender", "t", "spend")
    assert info.value.code is ErrorCode.BUDGET_EXCEEDED
    assert "max_budget_usd of agent 'spender' of $0.1500 has $0.0500 left" in info.value.message
    [run] = await runner.store.runs.list(thread_id="t")
    assert (run.status, run.stop_reason, run.cost_micros) == ("failed", "budget_exceeded", 100_000)


async def test_one_failing_run_does_not_take_others_down(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("bad", "model: mockai:gpt-broken")
    agent("good")
    mock.queue(Reply(fault=Fault.http(401)), model="gpt-broken")
    runner: AgentRunner = await open_runner()
    outcomes = await asyncio.gather(
        runner.run_agent("bad", "t1", "first"),
        runner.run_agent("good", "t2", "second"),
        return_exceptions=True,
    )
    assert isinstance(outcomes[0], AgentRunnerError) and outcomes[0].code is ErrorCode.PROVIDER_AUTH
    assert outcomes[1].text == "Echo: second"  # type: ignore[union-attr]


async def test_capability_callbacks_are_enriched(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("pinger", "capabilities: [notify, memory, notes]\nmemory: {human: 'unknown'}")
    mock.queue(
        Reply(
            tool_calls=[
                ("notify_user", {"message": "done!"}),
                ("memory_append", {"label": "human", "text": "likes tea"}),
                ("note_create", {"title": "T", "body": "B"}),
            ]
        ),
        Reply(tool_calls=[("note_share", {"slug": "t", "message": "see this"})]),
        Reply(text="ok"),
    )
    seen: list[tuple[Any, ...]] = []
    callbacks = AgentRunnerCallbacks(
        on_notify_user=lambda *a: seen.append(("notify", *a)),
        on_pin_change=lambda *a: seen.append(("pin", *a)),
        on_share_note=lambda *a: seen.append(("share", *a)),
        on_tool_use=lambda name, args, summary: seen.append(("tool", name)),
    )
    runner: AgentRunner = await open_runner()
    await runner.run_agent("pinger", "t", "go", callbacks)
    assert ("notify", "pinger", "t", "done!") in seen
    assert ("pin", "pinger") in seen
    assert ("share", "pinger", "t", "T", "t", "see this") in seen
    assert await runner.store.memory.blocks("pinger") == {"human": "unknown\nlikes tea"}
    system = mock.requests[0].body["messages"][0]["content"]
    assert "### human\nunknown" in system


async def test_ask_agent_stops_at_the_depth_limit(agent: Agent, open_runner: Any) -> None:
    for name in ("x1", "x2"):
        agent(name, "model: test\ncapabilities: [agents]")
    runner: AgentRunner = await open_runner()
    result = await runner.run_agent("x1", "t", "go")
    runs = await runner.store.runs.list(limit=20)
    assert max(r.depth for r in runs) == 3
    refused = [
        m
        for r in runs
        for m in await runner.store.runs.messages(r.id)
        if m.message_type == "tool_return_message" and m.is_error and "depth limit (3)" in m.content
    ]
    assert len(refused) == 1 and result.stop_reason == "end_turn"
    child_costs = sum(r.cost_micros for r in runs if r.depth == 1)
    assert result.cost_micros >= child_costs


async def test_child_grant_is_the_intersection(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("boss", "capabilities: [agents, memory]")
    agent("worker", "capabilities: [memory, notes]")
    mock.queue(
        Reply(tool_calls=[("ask_agent", {"agent": "worker", "message": "hi"})]),
        Reply(text="worker says hi"),
        Reply(text="boss done"),
    )
    runner: AgentRunner = await open_runner()
    await runner.run_agent("boss", "t", "delegate")
    child_request = mock.requests[1].body
    assert {t["function"]["name"] for t in child_request["tools"]} == {
        "memory_append",
        "memory_replace",
        "set_task",
    }


@pytest.mark.parametrize(
    ("trust", "path", "allowed"),
    [
        ("sandboxed", "notes.txt", True),
        ("sandboxed", "../../secret.txt", False),
        ("sandboxed", "/etc/hostname", False),
        ("sandboxed", "link/secret.txt", False),
        ("workspace", "agentrunner.toml", False),  # the runtime's own (tests/runner/test_trust)
        ("workspace", "notes.md", True),
        ("workspace", "../secret.txt", False),
        ("full", "SECRET_ABS", True),
    ],
)
async def test_files_stay_in_scope(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    project: Path,
    trust: str,
    path: str,
    allowed: bool,
) -> None:
    secret = project.parent / "secret.txt"
    secret.write_text("top secret")
    (project / "notes.md").write_text("project notes")
    workspace = project / ".agentrunner" / "workspaces" / "filer"
    workspace.mkdir(parents=True)
    (workspace / "notes.txt").write_text("my notes")
    (workspace / "link").symlink_to(project.parent)
    agent("filer", f"capabilities: [files]\ntrust: {trust}")
    mock.queue(
        Reply(tool_calls=[("read_file", {"path": str(secret) if path == "SECRET_ABS" else path})]),
        Reply(text="read it"),
    )
    runner: AgentRunner = await open_runner()
    if allowed:
        await runner.run_agent("filer", "t", "read")
        result_msg = next(
            m for _, m, _, _ in await runner.store.messages.page("t") if isinstance(m, ToolResult)
        )
        assert not result_msg.is_error
        return
    with pytest.raises(AgentRunnerError) as info:
        await runner.run_agent("filer", "t", "read")
    assert info.value.code is ErrorCode.TOOL_DENIED
    assert "top secret" not in str(await runner.store.messages.page("t"))


async def test_overrides_model_and_max_steps(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    agent("o", "capabilities: [notes]")
    runner: AgentRunner = await open_runner()
    mock.queue(Reply(text="from claude"))
    result = await runner.run_agent(
        "o", "t", "hi", overrides=RunAgentOverrides(model="mockant:claude-mock")
    )
    assert result.model == "mockant:claude-mock" and result.text == "from claude"
    mock.queue(*(Reply(tool_calls=[("note_list", {})]) for _ in range(3)))
    with pytest.raises(AgentRunnerError) as info:
        await runner.run_agent("o", "t", "loop", overrides=RunAgentOverrides(max_steps=2))
    assert info.value.code is ErrorCode.TURN_LIMIT


async def test_session_thread(agent: Agent, open_runner: Any) -> None:
    agent("s")
    runner: AgentRunner = await open_runner()
    first = await runner.session_thread("s")
    assert await runner.session_thread("s") == first
    fresh = await runner.session_thread("s", new=True)
    assert fresh != first and await runner.session_thread("s") == fresh


async def test_a_run_waiting_for_the_thread_is_not_taken_for_dead(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    """Only a run that wrote to the thread and died is marked failed by the next one; a run
    claimed from a mailbox and still waiting for the thread's lock is alive."""
    agent("helper")
    runner: AgentRunner = await open_runner()
    store = runner.store
    await runner.run_agent("helper", "t1", "first")
    waiting = store.runs.insert_op(
        run_id="run_waiting", agent_id="helper", thread_id="t1", status="running"
    )
    await store.batch([waiting])
    await runner.run_agent("helper", "t1", "second")
    assert (await store.runs.get("run_waiting")).status == "running"  # type: ignore[union-attr]


@pytest.mark.parametrize("deadline", ["wait_for", "timeout"])
async def test_cancelling_the_task_settles_the_run(
    agent: Agent, open_runner: Any, mock: MockProvider, deadline: str
) -> None:
    # The caller's deadline sees its own TimeoutError: the run, settled as cancelled, ends in
    # CancelledError itself (asyncio.timeout checks its type before Python 3.13).
    agent("talker")
    runner: AgentRunner = await open_runner()
    mock.queue(Reply(text="word " * 3000, chunk_delay_s=0.01))
    speaking = asyncio.Event()

    def on_event(kind: str, data: Any) -> None:
        if kind == "agent.token":
            speaking.set()

    running = asyncio.ensure_future(
        runner.run_agent(
            "talker", "t", "a long story", callbacks=AgentRunnerCallbacks(on_event=on_event)
        )
    )
    await asyncio.wait_for(speaking.wait(), timeout=30)  # cut off mid-answer, however slow
    with pytest.raises(TimeoutError):
        await cut_off(running, deadline, 0.05)
    assert running.cancelled()
    [run] = await runner.store.runs.list(thread_id="t")
    assert (run.status, run.stop_reason, run.error_code) == ("cancelled", "cancelled", "cancelled")
    assert (run.token_usage or {}).get("estimated") and run.cost_micros > 0
    last = (await runner.store.messages.page("t"))[-1][1]
    assert isinstance(last, AssistantMessage) and last.interrupted and last.text.startswith("word")
    state = await runner.store.agent_states.get("talker")
    assert (state.status, state.last_run_id) == ("idle", run.id)  # not left working
    # The thread lock was released: the next run on the thread goes ahead at once.
    done = await asyncio.wait_for(runner.run_agent("talker", "t", "next"), timeout=5)
    assert done.text == "Echo: next"


@pytest.mark.parametrize("words", ["word", "other"])
async def test_a_cancelled_run_records_what_it_said_and_on_which_model(
    agent: Agent, open_runner: Any, mock: MockProvider, words: str
) -> None:
    agent("talker")
    runner: AgentRunner = await open_runner()
    mock.queue(Reply(text=f"{words} " * 300, chunk_delay_s=0.01))
    abort = AbortSignal()
    speaking = asyncio.Event()

    def on_event(kind: str, data: Any) -> None:
        if kind == "agent.token":
            speaking.set()

    running = asyncio.ensure_future(
        runner.run_agent(
            "talker",
            "t",
            "a long story",
            abort=abort,
            callbacks=AgentRunnerCallbacks(on_event=on_event),
        )
    )
    await asyncio.wait_for(speaking.wait(), timeout=30)  # cancelled mid-answer, however slow
    await asyncio.sleep(0.1)
    abort.abort("Ctrl-C")
    result = await running
    [run] = await runner.store.runs.list(thread_id="t")
    assert run.status == "cancelled" and run.model == result.model == "mockai:gpt-mock"
    said = [
        m for m in await runner.store.runs.messages(run.id) if m.message_type == "assistant_message"
    ]
    assert len(said) == 1 and said[0].content.startswith(f"{words} {words}")
    thread = (await runner.store.messages.page("t"))[-1][1]
    assert isinstance(thread, AssistantMessage) and thread.text == said[0].content


async def test_the_file_tools_leave_the_loop_free(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    """Each file tool resolves, reads and writes on a worker thread (the detector of
    tests/conftest.py fails a test whose loop touches the disk); what a tool tells people
    (``agent.file``) still reaches the run between its call and its result."""
    agent("clerk", "capabilities: [files]\ntrust: workspace")
    mock.queue(
        Reply(
            tool_calls=[
                ("write_file", {"path": "out/a.txt", "content": "alpha"}),
                ("write_file", {"path": "out/b.txt", "content": "beta"}),
            ]
        ),
        Reply(
            tool_calls=[
                ("read_file", {"path": "out/a.txt"}),
                ("read_file", {"path": "out/b.txt"}),
                ("list_files", {"path": "out"}),
                ("send_file", {"path": "out/b.txt", "caption": "the second"}),
            ]
        ),
        Reply(text="Done."),
    )
    runner: AgentRunner = await open_runner()
    result = await runner.run_agent("clerk", "t", "go")
    answers = [
        m.content
        for _, m, _, _ in await runner.store.messages.page("t")
        if isinstance(m, ToolResult)
    ]
    assert answers[2:] == ["alpha", "beta", '["a.txt","b.txt"]', "sent out/b.txt"]
    events = [(e.type, e.payload) for e in await runner.store.events.list(result.run_id)]
    [sent] = [i for i, (kind, _) in enumerate(events) if kind == "agent.file"]
    assert events[sent][1]["path"].endswith("b.txt") and events[sent][1]["caption"] == "the second"
    called, answered = (
        next(
            i for i, (kind, data) in enumerate(events) if kind == k and data["name"] == "send_file"
        )
        for k in ("agent.tool_call", "agent.tool_result")
    )
    assert called < sent < answered


async def test_a_tool_raising_cancelled_error_settles_the_run(
    agent: Agent, open_runner: Any, mock: MockProvider
) -> None:
    from agentrunner.engine import tool

    @tool
    async def give_up() -> str:
        """Gives up."""
        raise asyncio.CancelledError

    agent("quitter")
    runner: AgentRunner = await open_runner()
    mock.queue(Reply(tool_calls=[("give_up", {})]), Reply(text="unreached"))
    with pytest.raises(asyncio.CancelledError):
        await runner.run_agent("quitter", "t", "go", overrides=RunAgentOverrides(tools=(give_up,)))
    [run] = await runner.store.runs.list(thread_id="t")
    assert (run.status, run.stop_reason) == ("cancelled", "cancelled")
    page = [m for _, m, _, _ in await runner.store.messages.page("t")]
    assert isinstance(page[-2], ToolResult) and page[-2].is_error  # the call is answered
    assert isinstance(page[-1], AssistantMessage) and page[-1].interrupted
    assert (await runner.run_agent("quitter", "t", "again")).stop_reason == "end_turn"


async def test_a_model_override_replaces_the_whole_chain(
    agent: Agent, open_runner: Any, mock: MockProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The README's Researcher: an OpenAI model with an Anthropic fallback, neither key set.
    agent("researcher", "model: openai:gpt-4.1-mini\nfallback: [anthropic:claude-haiku-4-5]")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    runner: AgentRunner = await open_runner()
    done = await runner.run_agent(
        "researcher", "t", "hi", overrides=RunAgentOverrides(model="test")
    )
    assert done.model == "test:test" and done.text.startswith("[test model]")
    other = await runner.run_agent(
        "researcher", "t2", "hi", overrides=RunAgentOverrides(model="mockai:gpt-mock")
    )
    assert other.model == "mockai:gpt-mock" and mock.requests[-1].body["model"] == "gpt-mock"
    # A fallback is used only when asked for with the override.
    mock.queue(Reply(fault=Fault.http(503)), Reply(fault=Fault.http(503)), model="gpt-down")
    with pytest.raises(AgentRunnerError) as down:
        await runner.run_agent(
            "researcher", "t3", "hi", overrides=RunAgentOverrides(model="mockai:gpt-down")
        )
    assert down.value.code is ErrorCode.PROVIDER_UNAVAILABLE
    mock.queue(Reply(fault=Fault.http(503)), Reply(fault=Fault.http(503)), model="gpt-down")
    saved = await runner.run_agent(
        "researcher",
        "t4",
        "hi",
        overrides=RunAgentOverrides(model="mockai:gpt-down", fallback=("mockant:claude-mock",)),
    )
    assert saved.model == "mockant:claude-mock"


async def test_capability_outputs_are_events_stored_with_the_run(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path
) -> None:
    agent("clerk", "capabilities: [notify, notes, files]\ntrust: workspace")
    (project / "report.txt").write_text("Q3 numbers")
    mock.queue(
        Reply(
            tool_calls=[
                ("notify_user", {"message": "The report is ready"}),
                ("note_create", {"title": "Plan", "body": "Ship it"}),
                ("send_file", {"path": "report.txt", "caption": "for you"}),
            ]
        ),
        Reply(tool_calls=[("note_share", {"slug": "plan", "message": "read this"})]),
        Reply(text="Done."),
    )
    runner: AgentRunner = await open_runner()  # no callbacks at all: a worker, a server
    result = await runner.run_agent("clerk", "t", "go")
    told = {
        e.type: e.payload
        for e in await runner.store.events.list(result.run_id)
        if e.type in ("agent.notify", "agent.file", "agent.note_shared")
    }
    assert told["agent.notify"] == {"message": "The report is ready"}
    assert told["agent.file"]["path"].endswith("report.txt")
    assert told["agent.file"]["caption"] == "for you" and told["agent.file"]["kind"] == "text"
    assert told["agent.note_shared"] == {
        "slug": "plan",
        "title": "Plan",
        "body": "Ship it",
        "message": "read this",
    }
