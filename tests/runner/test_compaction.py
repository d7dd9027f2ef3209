"""History by tokens: a run sends what its model's context window has room for, and a thread
that outgrew it is compacted into a summary — by a model, on the run's account — that is kept
with the thread and sent from then on (docs/engine.md, "History").

Threads are seeded in the store with turns that call a tool (a user message, a tool call, its
result, an answer); the mock provider bills each request's real size (a token per 4 bytes of
its JSON), as a provider does, and plays the agent; the compaction model's replies are scripted,
or echo their request where a test needs a summary made of the thread itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentRunner
from agentrunner.engine.budget import estimate_message_tokens
from agentrunner.engine.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResult,
    UserMessage,
)
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.store.store import Store
from agentrunner.testing import Fault, MockProvider, MockProviderServer, Reply
from tests.runner.conftest import CONFIG, Agent

WINDOW = 8000
SMALL = f"""
[models."mockai:gpt-mock"]
context_window = {WINDOW}

[models."mockai:gpt-summary"]
context_window = {WINDOW}

[prices."mockai:gpt-summary"]
input_per_mtok = 0.5
output_per_mtok = 1.5
"""
SUMMARIZER = '\n[compaction]\nmodel = "mockai:gpt-summary"\n'


def configure(project: Path, mock_server: MockProviderServer, extra: str = SUMMARIZER) -> None:
    (project / "agentrunner.toml").write_text(
        CONFIG.format(
            openai=mock_server.openai_url, anthropic=mock_server.anthropic_url, extra=SMALL + extra
        )
    )


def turns(tag: str, count: int, start: int = 0, details: str = "") -> list[Message]:
    """``count`` turns that each ask, call a tool, get its result and answer: 4 messages."""
    out: list[Message] = []
    for n in range(start, start + count):
        call = ToolCall(f"{tag}-call-{n}", "get_weather", {"city": f"{tag}-city-{n}"})
        result = f"{tag}-city-{n}: sunny, {n % 30} degrees, calm{details}"
        out += [
            UserMessage(f"{tag} question {n}: what is the weather in {tag}-city-{n} today?"),
            AssistantMessage(tool_calls=[call], model="gpt-mock", provider="mockai"),
            ToolResult(call.id, call.name, result),
            AssistantMessage(f"It is sunny in {tag}-city-{n}.", model="gpt-mock"),
        ]
    return out


async def seed(store: Store, thread_id: str, agent_id: str, messages: list[Message]) -> None:
    """Append ``messages`` to the thread (opened for ``agent_id`` if new)."""
    thread = await store.threads.open(thread_id, agent_id)
    first = thread.message_count + 1
    await store.batch(
        [
            *store.messages.append_ops(thread_id, first, messages, None),
            store.threads.manifest_op(
                thread_id, message_count=first + len(messages) - 1, session_run_id=None
            ),
        ]
    )


def billed(body: dict[str, Any]) -> int:
    """A request's input tokens as the mock bills them: a token per 4 bytes of its JSON."""
    return len(json.dumps([body.get("system"), body.get("messages"), body.get("tools")])) // 4 + 1


def cap(body: dict[str, Any]) -> int:
    """The request's output cap: every request to a small window has one."""
    value = body.get("max_tokens")
    assert isinstance(value, int), body.keys()
    return value


def assert_paired(body: dict[str, Any]) -> None:
    """Every tool call is followed by its results before anything else, every result answers a
    call just made, and the history starts with the person (OpenAI's rules)."""
    messages = body["messages"]
    assert messages[0]["role"] == "system" and messages[1]["role"] == "user"
    waiting: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in waiting, message
            waiting.remove(message["tool_call_id"])
            continue
        assert not waiting, f"calls {waiting} unanswered before {message}"
        if message["role"] == "assistant":
            waiting = {call["id"] for call in message.get("tool_calls") or ()}
    assert not waiting


def agent_requests(mock: MockProvider) -> list[dict[str, Any]]:
    return [r.body for r in mock.requests if r.body.get("model") == "gpt-mock"]


def summary_requests(mock: MockProvider) -> list[dict[str, Any]]:
    return [r.body for r in mock.requests if r.body.get("model") == "gpt-summary"]


async def cost_rows(runner: AgentRunner, run_id: str) -> list[dict[str, Any]]:
    rows = await runner.store.driver.fetch_all("SELECT run_id, model, cost_micros FROM costs", {})
    return [row for row in rows if row["run_id"] == run_id]


LARGE = 100_000  # a window far above the history the tests below let a request carry


def configure_large(project: Path, mock_server: MockProviderServer, compaction: str = "") -> None:
    """A window of LARGE tokens for the agent's and the summarizer's model; ``compaction``:
    more of [compaction]."""
    (project / "agentrunner.toml").write_text(
        CONFIG.format(
            openai=mock_server.openai_url,
            anthropic=mock_server.anthropic_url,
            extra=f'[models."mockai:gpt-mock"]\ncontext_window = {LARGE}\n'
            f'[models."mockai:gpt-summary"]\ncontext_window = {LARGE}\n'
            f'[compaction]\nmodel = "mockai:gpt-summary"\n{compaction}',
        )
    )


def history_tokens(body: dict[str, Any], thread: list[Message]) -> int:
    """What an OpenAI request carried of ``thread`` (between its system prompt and its new
    message: a summary, then the thread's newest messages), in tokens by agentrunner's
    estimate, which history_tokens is counted in."""
    sent = body["messages"][1:-1]
    summary = sent[0]["content"] if sent[0]["content"].startswith("[Summary of") else None
    newest = thread[len(thread) - len(sent) + (summary is not None) :]
    assert newest[0] == UserMessage(sent[int(summary is not None)]["content"])  # the same ones
    head = [UserMessage(summary)] if summary else []
    return sum(estimate_message_tokens(m) for m in [*head, *newest])


async def test_a_2000_message_thread_runs_in_an_8k_window(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    """The Done-when of issue 27: the request fits the window, the summary is stored, tool calls
    and results stay paired, and the summary's cost is the run's (sum of cost rows = spend)."""
    configure(project, mock_server)
    agent("helper", "model: mockai:gpt-mock")
    runner: AgentRunner = await open_runner()
    history = turns("alpha", 500)
    assert len(history) == 2000
    await seed(runner.store, "long", "helper", history)
    mock.count_input_tokens = True
    scripted = [f"Summary {n}: alpha asked about the weather of many cities." for n in range(60)]
    mock.queue(*(Reply(text=text, input_tokens=None) for text in scripted), model="gpt-summary")

    result = await runner.run_agent("helper", "long", "And in Paris?")

    summaries = summary_requests(mock)
    assert len(summaries) > 1  # 2,000 messages take several requests of an 8k window
    for body in summaries:  # each of those fits the summarizer's window too
        assert billed(body) + cap(body) <= WINDOW
    asked = agent_requests(mock)
    assert asked
    for body in asked:
        assert billed(body) + cap(body) <= WINDOW
        assert_paired(body)
    first = asked[0]["messages"]
    used = scripted[len(summaries) - 1]  # the last summary, which carried the earlier ones
    assert first[1]["content"].startswith("[Summary of messages 1-")
    assert first[1]["content"].endswith(used)
    assert first[-1] == {"role": "user", "content": "And in Paris?"}
    assert "alpha question 499" in json.dumps(first)  # the newest turns are sent as they were

    thread = await runner.store.threads.get("long")
    stored = await runner.store.threads.summary("long")
    assert thread is not None and stored is not None
    assert stored.summary == used and stored.run_id == result.run_id
    assert thread.summary_through == stored.through_seq
    assert 1000 < stored.through_seq < 2000 and stored.through_seq % 4 == 0  # a turn's end
    assert stored.requests == len(summaries) and stored.model == "mockai:gpt-summary"
    kept = [m["content"] for m in first if m["role"] == "user"]
    assert kept[1] == f"alpha question {stored.through_seq // 4}: " + (
        f"what is the weather in alpha-city-{stored.through_seq // 4} today?"
    )
    assert len(await runner.store.messages.page("long", limit=5000)) == 2000 + 2  # all kept

    rows = await cost_rows(runner, result.run_id)
    [run] = await runner.store.runs.list(thread_id="long")
    assert sum(r["cost_micros"] for r in rows) == run.cost_micros == result.cost_micros
    summary_cost = sum(r["cost_micros"] for r in rows if r["model"] == "mockai:gpt-summary")
    assert summary_cost == stored.cost_micros and summary_cost > 0
    assert len([r for r in rows if r["model"] == "mockai:gpt-summary"]) == len(summaries)
    events = await runner.store.events.list(result.run_id)
    kinds = [e.type for e in events]
    assert kinds.count("thread.compacted") == 1
    assert kinds.index("thread.compacted") < kinds.index("step.started")
    compacted = events[kinds.index("thread.compacted")].payload
    assert compacted["through_seq"] == stored.through_seq
    assert compacted["cost_micros"] == summary_cost


async def test_on_anthropic_the_agents_own_model_compacts_by_default(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    """No [compaction] model: the run's model writes the summary; Anthropic's rules (a tool use
    answered in the next message, roles alternating) hold in what is sent."""
    configure(project, mock_server, f'[models."mockant:claude-mock"]\ncontext_window = {WINDOW}\n')
    agent("helper", "model: mockant:claude-mock")
    runner: AgentRunner = await open_runner()
    await seed(runner.store, "long", "helper", turns("alpha", 60))
    mock.queue(Reply(text="Sixty questions, mostly sunny."), model="claude-mock")

    result = await runner.run_agent("helper", "long", "And now?")

    [summarized, answered] = [r.body for r in mock.requests]
    assert summarized["system"][0]["text"].startswith("You compact the history")
    assert "tools" not in summarized and summarized["max_tokens"] < 1000
    assert billed(answered) + answered["max_tokens"] <= WINDOW
    messages = answered["messages"]
    assert messages[0]["content"][0]["text"].endswith("Sixty questions, mostly sunny.")
    assert [m["role"] for m in messages] == ["user", "assistant"] * (len(messages) // 2) + ["user"]
    stored = await runner.store.threads.summary("long")
    assert stored is not None and stored.model == "mockant:claude-mock"
    assert stored.run_id == result.run_id


async def test_compaction_is_not_repeated_until_the_thread_outgrows_the_window_again(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    configure(project, mock_server)
    agent("helper", "model: mockai:gpt-mock")
    runner: AgentRunner = await open_runner()
    await seed(runner.store, "t", "helper", turns("alpha", 60))
    mock.queue(Reply(text="First summary: alpha and its cities."), model="gpt-summary")
    mock.queue(Reply(text="Second summary: more of alpha."), model="gpt-summary")

    await runner.run_agent("helper", "t", "Next?")
    first = await runner.store.threads.summary("t")
    assert first is not None and len(summary_requests(mock)) == 1
    for _ in range(3):  # the thread grows by a turn each run: still within the window
        await runner.run_agent("helper", "t", "And then?")
    assert len(summary_requests(mock)) == 1
    for body in agent_requests(mock)[-3:]:  # … and each run sends the summary it has
        assert body["messages"][1]["content"].endswith("First summary: alpha and its cities.")

    await seed(runner.store, "t", "helper", turns("alpha", 40, start=60))  # outgrown again
    await runner.run_agent("helper", "t", "Now?")
    [_, again] = summary_requests(mock)
    assert "First summary: alpha and its cities." in again["messages"][-1]["content"]
    second = await runner.store.threads.summary("t")
    assert second is not None and second.summary == "Second summary: more of alpha."
    assert second.through_seq > first.through_seq
    body = agent_requests(mock)[-1]
    assert body["messages"][1]["content"].endswith("Second summary: more of alpha.")
    assert_paired(body)


async def test_two_threads_are_summarized_each_from_its_own_messages(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    """Unscripted, the mock echoes its request: each summary is made of its own thread."""
    configure(project, mock_server)
    agent("helper", "model: mockai:gpt-mock")
    runner: AgentRunner = await open_runner()
    await seed(runner.store, "a", "helper", turns("alpha", 300))
    await seed(runner.store, "b", "helper", turns("beta", 300))

    await runner.run_agent("helper", "a", "Summarize?")
    await runner.run_agent("helper", "b", "Summarize?")

    alpha, beta = await runner.store.threads.summary("a"), await runner.store.threads.summary("b")
    assert alpha is not None and beta is not None
    assert alpha.summary != beta.summary
    assert "alpha-city-" in alpha.summary and "beta" not in alpha.summary
    assert "beta-city-" in beta.summary and "alpha" not in beta.summary
    for body in agent_requests(mock):
        assert_paired(body)


async def test_a_thread_within_the_window_is_sent_whole_and_not_compacted(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    configure(project, mock_server)
    agent("helper", "model: mockai:gpt-mock")
    runner: AgentRunner = await open_runner()
    await seed(runner.store, "short", "helper", turns("alpha", 20))

    await runner.run_agent("helper", "short", "More?")

    assert summary_requests(mock) == []
    [first, *_] = agent_requests(mock)
    assert len(first["messages"]) == 1 + 80 + 1  # the system prompt, all 80, the new message
    assert (await runner.store.threads.get("short")).summary_through == 0  # type: ignore[union-attr]


async def test_history_tokens_bounds_the_history_below_the_window(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    """[compaction] history_tokens, and an agent's limits.history_tokens over it: a thread of
    some 11,600 tokens, far inside a 100,000-token window, is compacted at 8,000 (the config's)
    and at 4,000 (an agent's own), each sending the history that fits its number; with
    "window" it is sent whole."""
    configure_large(project, mock_server, "history_tokens = 8000\n")
    agent("configured", "model: mockai:gpt-mock")
    agent("small", "model: mockai:gpt-mock\nlimits:\n  history_tokens: 4000")
    agent("whole", "model: mockai:gpt-mock\nlimits:\n  history_tokens: window")
    runner: AgentRunner = await open_runner()
    thread = turns("alpha", 100)
    sent: dict[str, dict[str, Any]] = {}
    for agent_id in ("configured", "small", "whole"):
        await seed(runner.store, f"t-{agent_id}", agent_id, thread)
        mock.queue(Reply(text=f"Summary for {agent_id}."), model="gpt-summary")
        before = len(mock.requests)
        await runner.run_agent(agent_id, f"t-{agent_id}", "And now?")
        [sent[agent_id]] = [r.body for r in mock.requests[before:] if r.body["model"] == "gpt-mock"]

    configured, small = sent["configured"], sent["small"]
    assert len(summary_requests(mock)) == 2  # the configured and the small one, not the whole
    for agent_id, limit in (("configured", 8000), ("small", 4000)):
        [run] = await runner.store.runs.list(thread_id=f"t-{agent_id}")
        [event] = [
            e for e in await runner.store.events.list(run.id) if e.type == "thread.compacted"
        ]
        assert (event.payload["bound"], event.payload["bound_tokens"]) == ("history_tokens", limit)
    for agent_id, limit in (("configured", 8000), ("small", 4000)):
        body = sent[agent_id]
        assert body["messages"][1]["content"].endswith(f"Summary for {agent_id}.")
        assert limit // 4 < history_tokens(body, thread) <= limit, agent_id
        assert_paired(body)
        stored = await runner.store.threads.summary(f"t-{agent_id}")
        assert stored is not None and stored.summary == f"Summary for {agent_id}."
    assert len(small["messages"]) < len(configured["messages"])  # 4,000 sends less than 8,000
    assert history_tokens(small, thread) < history_tokens(configured, thread)
    whole = sent["whole"]
    assert len(whole["messages"]) == 1 + 400 + 1  # all of it: the window has room
    assert history_tokens(whole, thread) > 11_000
    assert await runner.store.threads.summary("t-whole") is None


async def test_history_tokens_is_32000_by_default(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    """Unset, history_tokens is 32,000: a thread of some 35,000 tokens is compacted inside a
    100,000-token window, and one of some 11,600 is not."""
    configure_large(project, mock_server)
    agent("helper", "model: mockai:gpt-mock")
    runner: AgentRunner = await open_runner()
    long, short = turns("alpha", 300), turns("beta", 100)
    await seed(runner.store, "long", "helper", long)
    await seed(runner.store, "short", "helper", short)
    mock.queue(Reply(text="The long one, summarized."), model="gpt-summary")

    await runner.run_agent("helper", "long", "And now?")
    await runner.run_agent("helper", "short", "And now?")

    assert len(summary_requests(mock)) == 1
    compacted, whole = agent_requests(mock)
    assert compacted["messages"][1]["content"].endswith("The long one, summarized.")
    assert 8000 < history_tokens(compacted, long) <= 32_000
    assert len(whole["messages"]) == 1 + 400 + 1
    assert await runner.store.threads.summary("short") is None


async def test_without_compaction_the_newest_turns_that_fit_are_sent(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    configure(project, mock_server, "\n[compaction]\nenabled = false\n")
    agent("helper", "model: mockai:gpt-mock")
    runner: AgentRunner = await open_runner()
    # long tool results: the last 100 messages alone would take some 10,000 tokens
    await seed(runner.store, "long", "helper", turns("alpha", 500, details=", windless" * 40))

    await runner.run_agent("helper", "long", "And in Paris?")

    first = agent_requests(mock)[0]
    assert billed(first) + cap(first) <= WINDOW
    assert_paired(first)
    assert first["messages"][1]["content"].startswith("alpha question ")  # a turn's start
    oldest = int(first["messages"][1]["content"].split()[2].rstrip(":"))
    assert 450 < oldest < 490  # the newest turns, whole, as many as fit: fewer than 100 messages
    assert len(first["messages"]) == 1 + (500 - oldest) * 4 + 1
    assert summary_requests(mock) == []
    assert await runner.store.threads.summary("long") is None


async def test_a_failed_compaction_sends_the_newest_turns_and_records_its_cost(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    """A summary that could not be made does not fail the run: it sends what fits, and the
    next run tries again."""
    configure(project, mock_server)
    agent("helper", "model: mockai:gpt-mock")
    runner: AgentRunner = await open_runner()
    await seed(runner.store, "long", "helper", turns("alpha", 60))
    mock.queue(Reply(fault=Fault.http(400)), model="gpt-summary")  # not retried

    result = await runner.run_agent("helper", "long", "Hello?")

    assert result.stop_reason == "end_turn"
    assert len(summary_requests(mock)) == 1
    assert await runner.store.threads.summary("long") is None
    first = agent_requests(mock)[0]
    assert billed(first) + cap(first) <= WINDOW
    assert_paired(first)
    events = [e.type for e in await runner.store.events.list(result.run_id)]
    assert "model.attempt_failed" in events and "thread.compacted" not in events
    rows = await cost_rows(runner, result.run_id)
    assert "mockai:gpt-summary" in [r["model"] for r in rows]  # the failed attempt, counted

    mock.queue(Reply(text="Now it worked."), model="gpt-summary")
    await runner.run_agent("helper", "long", "Again?")
    assert (await runner.store.threads.summary("long")).summary == "Now it worked."  # type: ignore[union-attr]


async def test_an_unknown_compaction_model_fails_the_run(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    """A configuration that would fail every compaction alike is said, not passed over."""
    configure(project, mock_server, '\n[compaction]\nmodel = "nowhere:model"\n')
    agent("helper", "model: mockai:gpt-mock")
    runner: AgentRunner = await open_runner()
    await seed(runner.store, "long", "helper", turns("alpha", 300))
    with pytest.raises(AgentRunnerError) as caught:
        await runner.run_agent("helper", "long", "Hello?")
    assert caught.value.code is ErrorCode.MODEL_NOT_FOUND
    assert caught.value.message.startswith("[compaction] model: Model 'nowhere:model'")
    assert caught.value.file == "agentrunner.toml" and caught.value.line is not None
    assert agent_requests(mock) == []


async def test_a_typo_in_the_compaction_model_refuses_runs_from_the_first_naming_it(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    """A [compaction] model no provider serves is refused on a thread's first run, not when it
    first needs compacting, by its key and line in agentrunner.toml; `threads compact` says it
    alike. With compaction off it is not used, and not refused."""
    configure(project, mock_server, '\n[compaction]\nmodel = "mockia:gpt-mini"\n')
    text = (project / "agentrunner.toml").read_text()
    line = text.splitlines().index('model = "mockia:gpt-mini"') + 1
    assert 'model = "mockai:gpt-mock"' in text  # [defaults]' model = line comes first
    agent("helper", "model: mockai:gpt-mock")
    runner: AgentRunner = await open_runner()
    await seed(runner.store, "short", "helper", turns("alpha", 1))  # far inside the window
    for attempt in (
        lambda: runner.run_agent("helper", "short", "Hello?"),
        lambda: runner.compact_thread("short"),
    ):
        with pytest.raises(AgentRunnerError) as caught:
            await attempt()
        error = caught.value
        assert error.code is ErrorCode.MODEL_NOT_FOUND
        assert error.one_line() == (
            f"agentrunner.toml:{line}: model_not_found: [compaction] model: Model "
            "'mockia:gpt-mini' not found: unknown provider 'mockia'"
        )
        assert "Did you mean 'mockai'" in (error.hint or "")
        assert "Fix [compaction] model in agentrunner.toml" in (error.hint or "")
    assert mock.requests == []
    [refused] = await runner.store.runs.list(thread_id="short")  # compact_thread wrote none
    assert (refused.status, refused.error_code) == ("failed", "model_not_found")
    assert (refused.error_message or "").startswith("[compaction] model: Model 'mockia:gpt-mini'")

    configure(project, mock_server, '\n[compaction]\nenabled = false\nmodel = "mockia:gpt-mini"\n')
    unused: AgentRunner = await open_runner()
    result = await unused.run_agent("helper", "short", "Hello again?")
    assert result.stop_reason == "end_turn" and len(agent_requests(mock)) == 1


async def test_threads_compact_summarizes_every_message_as_a_run(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    configure(project, mock_server)
    agent("helper", "model: mockai:gpt-mock")
    runner: AgentRunner = await open_runner()
    await seed(runner.store, "helper-chat", "helper", turns("alpha", 10))
    mock.queue(Reply(text="Ten questions about the weather."), model="gpt-summary")

    summary = await runner.compact_thread("helper-ch")  # a unique beginning is enough

    assert (summary.thread_id, summary.through_seq) == ("helper-chat", 40)
    assert summary.summary == "Ten questions about the weather."
    [run] = await runner.store.runs.list(thread_id="helper-chat")
    assert (run.id, run.status, run.stop_reason) == (summary.run_id, "completed", "compacted")
    assert run.model == "mockai:gpt-summary"
    rows = await cost_rows(runner, run.id)
    assert [r["cost_micros"] for r in rows] == [run.cost_micros] and run.cost_micros > 0
    assert summary.cost_micros == run.cost_micros
    [asked] = summary_requests(mock)
    assert "#1 user: alpha question 0" in asked["messages"][-1]["content"]
    assert "#40 assistant: It is sunny in alpha-city-9." in asked["messages"][-1]["content"]

    await runner.run_agent("helper", "helper-chat", "What did we talk about?")
    body = agent_requests(mock)[-1]
    assert body["messages"][1]["content"].endswith("Ten questions about the weather.")
    assert [m["role"] for m in body["messages"]] == ["system", "user", "user"]  # nothing else

    mock.queue(Reply(text="Ten questions, then one more."), model="gpt-summary")
    again = await runner.compact_thread("helper-chat")  # the run's turn, with the summary
    assert again.through_seq > 40 and again.summary == "Ten questions, then one more."
    carried = summary_requests(mock)[-1]["messages"][-1]["content"]
    assert carried.startswith("[Summary of messages 1-40]\nTen questions about the weather.")
    assert "What did we talk about?" in carried


async def test_threads_compact_refuses_an_unknown_or_empty_thread_before_writing(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    configure(project, mock_server)
    agent("helper", "model: mockai:gpt-mock")
    runner: AgentRunner = await open_runner()
    await runner.store.threads.open("empty", "helper")
    with pytest.raises(AgentRunnerError) as unknown:
        await runner.compact_thread("nope")
    assert unknown.value.code is ErrorCode.THREAD_NOT_FOUND
    assert unknown.value.message == "no thread 'nope'"
    assert "agentrunner threads list" in (unknown.value.hint or "")
    with pytest.raises(AgentRunnerError) as empty:
        await runner.compact_thread("empty")
    assert empty.value.code is ErrorCode.VALIDATION
    assert empty.value.message == "thread 'empty' has nothing to compact: it has no messages"

    await seed(runner.store, "done", "helper", turns("alpha", 2))
    mock.queue(Reply(text="Two turns."), model="gpt-summary")
    await runner.compact_thread("done")
    with pytest.raises(AgentRunnerError) as again:
        await runner.compact_thread("done")
    assert again.value.code is ErrorCode.VALIDATION
    assert "all its 8 messages are in its summary already" in again.value.message
    assert [r.stop_reason for r in await runner.store.runs.list(limit=10)] == ["compacted"]
    assert len(summary_requests(mock)) == 1


async def activity(runner: AgentRunner, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The run's stored events that say who is working (``agent.working``, ``agent.failed``,
    ``agent.idle``), in order; the first of its events and the last are of them."""
    from agentrunner.events import ACTIVITY

    events = await runner.store.events.list(run_id)
    assert events[0].type == "agent.working" and events[-1].type == "agent.idle"
    return [(e.type, e.payload) for e in events if e.type in ACTIVITY]


async def test_a_compaction_run_says_who_works_and_settles_as_any_run(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, mock_server: Any
) -> None:
    """`threads compact` is a run of the thread's agent: like an agent's run it begins with
    `agent.working` and ends with `agent.idle` (completed, failed after `agent.failed`, or
    cancelled), each naming its own agent, run and thread; the run's record settles alike."""
    from agentrunner.engine.abort import AbortSignal

    configure(project, mock_server)
    agent("helper", "model: mockai:gpt-mock")
    agent("scribe", "model: mockai:gpt-mock")
    runner: AgentRunner = await open_runner()
    await seed(runner.store, "helper-chat", "helper", turns("alpha", 3))
    await seed(runner.store, "scribe-notes", "scribe", turns("beta", 5))
    mock.queue(Reply(text="Alpha weather."), Reply(text="Beta weather."), model="gpt-summary")

    done = {}
    for agent_id, thread_id in (("helper", "helper-chat"), ("scribe", "scribe-notes")):
        summary = await runner.compact_thread(thread_id)
        who = {"agent_id": agent_id, "run_id": summary.run_id, "thread_id": thread_id}
        assert await activity(runner, summary.run_id) == [
            ("agent.working", who),
            ("agent.idle", {**who, "outcome": "completed"}),
        ]
        done[agent_id] = summary
    assert done["helper"].run_id != done["scribe"].run_id
    assert done["helper"].summary == "Alpha weather." and done["scribe"].through_seq == 20

    # an agent's run on the same thread says the same, in the same shape
    answered = await runner.run_agent("helper", "helper-chat", "And today?")
    asked = {"agent_id": "helper", "run_id": answered.run_id, "thread_id": "helper-chat"}
    assert await activity(runner, answered.run_id) == [
        ("agent.working", asked),
        ("agent.idle", {**asked, "outcome": "completed"}),
    ]

    mock.queue(Reply(fault=Fault.http(400)), model="gpt-summary")  # not retried
    with pytest.raises(AgentRunnerError) as failed:
        await runner.compact_thread("helper-chat")
    run_id = failed.value.details["run_id"]
    who = {"agent_id": "helper", "run_id": run_id, "thread_id": "helper-chat"}
    assert await activity(runner, run_id) == [
        ("agent.working", who),
        ("agent.failed", {**who, "error_code": "validation", "message": failed.value.message}),
        ("agent.idle", {**who, "outcome": "failed"}),
    ]
    run = await runner.store.runs.get(run_id)
    assert run is not None
    assert (run.status, run.stop_reason, run.error_code) == ("failed", "error", "validation")

    await seed(runner.store, "scribe-notes", "scribe", turns("gamma", 2))
    abort = AbortSignal()
    abort.abort("stopped by its caller")
    with pytest.raises(AgentRunnerError) as cancelled:
        await runner.compact_thread("scribe-notes", abort)
    assert cancelled.value.code is ErrorCode.CANCELLED
    run_id = cancelled.value.details["run_id"]
    who = {"agent_id": "scribe", "run_id": run_id, "thread_id": "scribe-notes"}
    assert await activity(runner, run_id) == [
        ("agent.working", who),
        ("agent.idle", {**who, "outcome": "cancelled"}),
    ]
    run = await runner.store.runs.get(run_id)
    assert run is not None and (run.status, run.stop_reason) == ("cancelled", "cancelled")


def test_the_cli_compacts_a_thread_and_shows_its_summary(
    agent: Agent, mock: MockProvider, capsys: pytest.CaptureFixture[str], store_url: str
) -> None:
    from tests.runner.test_cli_run import cli

    agent("helper")
    code, out, err = cli(capsys, "run", "helper", "Remember the launch is in May.", "--json")
    assert code == 0, err
    thread_id = json.loads(out)["thread_id"]
    mock.queue(Reply(text="The launch is in May."), model="gpt-mock")

    code, out, err = cli(capsys, "threads", "compact", thread_id[:-2])
    assert code == 0, err
    assert f"{thread_id} compacted" in out and "The launch is in May." in out
    assert "summary of messages 1-2 · mockai:gpt-mock · 1 request · $0.0000" in out
    code, out, err = cli(capsys, "threads", "show", thread_id)
    assert code == 0 and "summary of messages 1-2" in out and "The launch is in May." in out
    shown = json.loads(cli(capsys, "threads", "show", thread_id, "--json")[1])
    assert shown["thread"]["summary_through"] == 2
    assert shown["summary"]["summary"] == "The launch is in May."
    assert shown["summary"]["through_seq"] == 2 and shown["summary"]["requests"] == 1
    runs = json.loads(cli(capsys, "runs", "list", "--thread", thread_id, "--json")[1])
    assert [r["stop_reason"] for r in runs] == ["compacted", "end_turn"]

    code, _, err = cli(capsys, "threads", "compact", thread_id, "--json")
    assert code == 1 and "validation: thread" in err
    assert "has nothing to compact: all its 2 messages are in its summary already" in err
    code, _, err = cli(capsys, "threads", "compact", "nope")
    assert code == 1 and "thread_not_found: no thread 'nope'" in err
    assert "agentrunner threads list" in err

    async def empty() -> None:
        from agentrunner.store import open_store

        store = await open_store(store_url)
        await store.threads.open("helper-empty", "helper")
        await store.close()

    import asyncio

    asyncio.run(empty())
    code, _, err = cli(capsys, "threads", "compact", "helper-empty")
    assert code == 1 and "thread 'helper-empty' has nothing to compact: it has no messages" in err
    assert len([r for r in mock.requests if r.body.get("model") == "gpt-mock"]) == 2


def test_run_says_when_it_compacted_the_thread(
    agent: Agent,
    mock: MockProvider,
    capsys: pytest.CaptureFixture[str],
    project: Path,
    mock_server: Any,
    store_url: str,
) -> None:
    import asyncio

    from agentrunner.store import open_store
    from tests.runner.test_cli_run import cli

    configure(project, mock_server, "")
    agent("helper", "model: mockai:gpt-mock")

    async def long_thread() -> None:
        store = await open_store(store_url)
        await seed(store, "helper-long", "helper", turns("alpha", 60))
        await store.close()

    asyncio.run(long_thread())
    mock.queue(Reply(text="Sixty questions."), Reply(text="Sunny again."), model="gpt-mock")
    code, out, err = cli(capsys, "run", "helper", "And today?", "--thread", "helper-long")
    assert code == 0, err
    assert "Sunny again." in out
    assert "earlier messages summarized by mockai:gpt-mock (1 request)" in err
    assert "the thread outgrew the context window (" in err and "history_tokens" not in err
    code, out, err = cli(capsys, "run", "helper", "And tomorrow?", "--thread", "helper-long")
    assert code == 0 and "summarized" not in err  # not again until it outgrows the window

    # far inside a 100,000-token window, bounded by history_tokens: said so, with its number
    configure_large(project, mock_server, "history_tokens = 8000\n")

    async def within_the_window() -> None:
        store = await open_store(store_url)
        await seed(store, "helper-bounded", "helper", turns("beta", 100))
        await store.close()

    asyncio.run(within_the_window())
    mock.queue(Reply(text="A hundred questions."), model="gpt-summary")
    code, out, err = cli(capsys, "run", "helper", "And now?", "--thread", "helper-bounded")
    assert code == 0, err
    assert (
        "summarized by mockai:gpt-summary (1 request): the thread outgrew history_tokens "
        "(8,000 tokens)" in err
    )
    assert "context window" not in err


def test_ctrl_c_cancels_threads_compact_and_records_it(
    agent: Agent,
    mock: MockProvider,
    capsys: pytest.CaptureFixture[str],
    project: Path,
    mock_server: Any,
    store_url: str,
) -> None:
    """`threads compact` on a model that never answers stops at Ctrl-C as `run` does: a
    `cancelled` line, exit 130, the run recorded cancelled, its request's cost estimated —
    unknown for a model with no price, in dollars for one with a price."""
    import asyncio
    import os
    import signal
    import subprocess
    import sys
    import time

    from agentrunner.store import open_store
    from tests.runner.test_cli_run import cli

    configure(project, mock_server, "")  # no [compaction] model: each agent's own
    agent("priced", "model: mockai:gpt-mock")
    agent("unpriced", "model: mockai:gpt-slow")  # no [prices] entry, unknown to genai-prices

    async def threads() -> None:
        store = await open_store(store_url)
        await seed(store, "priced-chat", "priced", turns("alpha", 5))
        await seed(store, "unpriced-chat", "unpriced", turns("beta", 5))
        await store.close()

    asyncio.run(threads())
    shown = {}
    for agent_id, model in (("priced", "gpt-mock"), ("unpriced", "gpt-slow")):
        mock.queue(Reply(text="Too late.", delay_s=60), model=model)
        before = len(mock.requests)
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentrunner", "threads", "compact", f"{agent_id}-chat"],
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=os.environ.copy(),
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(mock.requests) == before:
            time.sleep(0.05)
        assert len(mock.requests) == before + 1  # the summary request is waiting on its answer
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert "cancelled" in err and "Traceback" not in err and "error" not in err
        assert "compacted" not in out
        [run] = json.loads(cli(capsys, "runs", "list", "--agent", agent_id, "--json")[1])
        assert (run["status"], run["stop_reason"]) == ("cancelled", "cancelled")
        assert run["error"] == {"code": "cancelled", "message": "Ctrl-C"}  # the code not repeated
        assert run["usage"]["estimated"] and run["usage"]["input_tokens"] > 0
        assert f"run {run['id']}" in err
        shown[agent_id] = (run, err)
        thread = json.loads(cli(capsys, "threads", "show", f"{agent_id}-chat", "--json")[1])
        assert thread["thread"]["summary_through"] == 0 and thread["summary"] is None

    priced, unpriced = shown["priced"][0], shown["unpriced"][0]
    assert priced["cost_usd"] > 0 and unpriced["cost_usd"] is None
    assert "cost unknown" in shown["unpriced"][1] and "cost unknown" not in shown["priced"][1]
    listing = cli(capsys, "runs", "list", "--agent", "unpriced")[1]
    assert "unknown" in listing and "$0.0000" not in listing
