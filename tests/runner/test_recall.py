"""Recall (issue 46 item 1, seed 000 step 13): each settled run's messages are embedded after it
(``[embeddings] model``, over the mock's real ``POST /embeddings``), paid for by the run like its
title; the ``recall`` tool finds the agent's own earlier messages by meaning, never another
agent's; a failed embedding is logged once and taken up by the thread's next run."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentrunner.engine.embeddings import cosine, hashed_embedding
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.testing import MockProvider, Reply
from agentrunner.testing.replies import Fault
from tests.runner.conftest import Agent
from tests.runner.test_cli_run import cli

EMBEDDINGS = """
[embeddings]
model = "mockai:emb-mock"

[prices."mockai:emb-mock"]
input_per_mtok = 100.0
output_per_mtok = 0.0
"""

TIDES = "Explain how the moon pulls the ocean tides twice a day."
TAXES = "Help me file my income tax return and claim the deductions."


def _embedding(project: Path, extra: str = "") -> None:
    toml = project / "agentrunner.toml"
    toml.write_text(toml.read_text() + EMBEDDINGS + extra)


def _today() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")


def _recalled(mock: MockProvider) -> list[dict[str, Any]]:
    """What the recall tool answered, as the model was sent it in the last request."""
    messages = mock.requests[-1].body["messages"]
    result = next(m for m in reversed(messages) if m["role"] == "tool")
    return json.loads(result["content"])


def test_hashed_vectors_tell_topics_apart() -> None:
    tides, taxes = hashed_embedding(TIDES), hashed_embedding(TAXES)
    query = hashed_embedding("ocean tides and the moon")
    assert cosine(query, tides) > 0.3 > cosine(query, taxes)
    assert hashed_embedding(TIDES) == tides  # deterministic
    assert cosine(hashed_embedding("the of and"), tides) == 0.0  # stop words say nothing


async def test_recall_finds_the_right_thread_for_two_queries_and_never_another_agents(
    project: Path, agent: Agent, open_runner: Callable[[], Any], mock: MockProvider
) -> None:
    _embedding(project)
    agent("assistant", "name: Assistant\ncapabilities: [recall]")
    agent("other", "name: Other")
    runner = await open_runner()
    mock.queue(Reply(text="Tides follow the moon's pull on the oceans."), model="gpt-mock")
    await runner.run_agent("assistant", "t-tides", TIDES)
    mock.queue(Reply(text="List your income, then each deduction."), model="gpt-mock")
    await runner.run_agent("assistant", "t-taxes", TAXES)
    secret = "The moon and the ocean tides: the other agent's own notes."
    mock.queue(Reply(text=secret), model="gpt-mock")
    await runner.run_agent("other", "t-other", "Tell me about the moon and the ocean tides.")
    await runner.effects.drain()
    embedded = [r for r in mock.requests if r.path.endswith("/embeddings")]
    assert len(embedded) == 3  # a request a run: its person's message and its answer
    assert [len(r.body["input"]) for r in embedded] == [2, 2, 2]

    answers = []
    for query in ("ocean tides and the moon", "income tax deductions"):
        mock.queue(
            Reply(tool_calls=[("recall", {"query": query, "limit": 3})]),
            Reply(text="Found it."),
            model="gpt-mock",
        )
        result = await runner.run_agent("assistant", f"t-ask-{len(answers)}", f"Recall: {query}")
        assert result.text == "Found it."
        answers.append(_recalled(mock))
    tides, taxes = answers
    assert tides[0]["thread_id"] == "t-tides" and tides[0]["text"] == TIDES
    assert taxes[0]["thread_id"] == "t-taxes" and taxes[0]["text"] == TAXES
    assert tides[0]["score"] > tides[-1]["score"]
    everything = [item for found in answers for item in found]
    assert all(item["thread_id"] != "t-other" for item in everything)
    assert all(secret not in item["text"] for item in everything)
    # what was found directly, with another query: still only the agent's own
    found = await runner.effects.recall("other", "run_x", "income tax", 5)
    assert {item.thread_id for item in found} <= {"t-other"}


async def test_embeddings_are_charged_to_their_run_and_sum_to_what_was_billed(
    project: Path, agent: Agent, open_runner: Callable[[], Any], mock: MockProvider
) -> None:
    _embedding(project)
    agent("assistant", "name: Assistant")
    runner = await open_runner()
    messages = [TIDES, TAXES, "What is the capital of France?", "Write a haiku about snow."]
    for n, message in enumerate(messages):
        mock.queue(Reply(text=f"Answer {n}", input_tokens=10, output_tokens=5), model="gpt-mock")
        await runner.run_agent("assistant", f"t-{n}", message)
    await runner.effects.drain()
    billed = 0
    for request in mock.requests:
        if request.path.endswith("/embeddings"):
            billed += sum(len(text.encode()) // 4 + 1 for text in request.body["input"])
    spent = await runner.store.costs.summary(since=_today())
    by_model = {r["model"]: r["cost_micros"] for r in spent if r["agent_id"] == "assistant"}
    assert by_model["mockai:emb-mock"] == billed * 100  # 100 per million tokens: 100 µ$ each
    assert by_model["mockai:gpt-mock"] == len(messages) * (10 * 1 + 5 * 2)


async def test_a_failed_embedding_is_logged_once_and_taken_up_by_the_next_run(
    project: Path,
    agent: Agent,
    open_runner: Callable[[], Any],
    mock: MockProvider,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _embedding(project)
    agent("assistant", "name: Assistant\ncapabilities: [recall]")
    runner = await open_runner()
    failing = Reply(text="", fault=Fault.http(500))
    mock.queue(failing, failing, model="emb-mock")
    with caplog.at_level(logging.WARNING, logger="agentrunner.effects"):
        for n, message in enumerate((TIDES, TAXES)):
            mock.queue(Reply(text=f"Answer {n}"), model="gpt-mock")
            await runner.run_agent("assistant", "t-1", message)
            await runner.effects.drain()
    warned = [r for r in caplog.records if "embedding messages" in r.getMessage()]
    assert len(warned) == 1  # once, though both runs' embeddings failed
    assert await runner.effects.recall("assistant", "run_x", "tides", 5) == []
    mock.queue(Reply(text="Answer 2"), model="gpt-mock")
    await runner.run_agent("assistant", "t-1", "One more thing about the moon.")
    await runner.effects.drain()
    tides = await runner.effects.recall("assistant", "run_x", "ocean tides moon", 10)
    taxes = await runner.effects.recall("assistant", "run_x", "income tax deductions", 10)
    assert tides[0].text == TIDES and taxes[0].text == TAXES  # the earlier runs', taken up
    sizes = [len(r.body["input"]) for r in mock.requests if r.path.endswith("/embeddings")]
    assert 6 in sizes  # all three runs' messages, in one request


async def test_over_many_runs_embeddings_never_take_spend_past_the_daily_limit(
    project: Path, agent: Agent, open_runner: Callable[[], Any], mock: MockProvider
) -> None:
    limit = 20_000  # micro-dollars; an embedding of a run's two messages is about 1,700
    _embedding(project, f"\n[budgets]\nper_agent_daily_usd = {limit / 1e6}\n")
    agent("assistant", "name: Assistant")
    runner = await open_runner()
    refusals: list[ErrorCode] = []
    for n in range(16):
        mock.queue(Reply(text=f"Answer {n}", input_tokens=5, output_tokens=5), model="gpt-mock")
        try:
            await runner.run_agent("assistant", f"t-{n}", TIDES)
        except AgentRunnerError as exc:  # the day's budget spent: the run itself is refused
            refusals.append(exc.code)
        await runner.effects.drain()
        spent = await runner.store.costs.spent_today("assistant")
        assert spent <= limit
    embedded = [r for r in mock.requests if r.path.endswith("/embeddings")]
    assert set(refusals) <= {ErrorCode.BUDGET_EXCEEDED}
    assert 0 < len(embedded) < 16 - len(refusals)  # embeddings past what was left: refused
    rows = await runner.store.costs.summary(since=_today())
    assert sum(r["cost_micros"] for r in rows) == await runner.store.costs.spent_today("assistant")


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("nosuch:emb", "model_not_found: [embeddings] model: Model 'nosuch:emb' not found"),
        ("mockant:claude-mock", "mockant:claude-mock cannot embed texts"),
    ],
)
def test_validate_says_a_model_that_cannot_embed_at_its_line(
    agent: Agent, project: Path, capsys: pytest.CaptureFixture[str], model: str, said: str
) -> None:
    agent("assistant", "name: Assistant\ncapabilities: [recall]")
    toml = project / "agentrunner.toml"
    toml.write_text(toml.read_text() + f'\n[embeddings]\nmodel = "{model}"\n')
    code, _, err = cli(capsys, "agents", "validate")
    at = toml.read_text().splitlines().index(f'model = "{model}"') + 1
    assert code == 1 and f"agentrunner.toml:{at}: " in err and said in err


def test_validate_warns_of_recall_with_nothing_to_embed_with(
    agent: Agent, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("assistant", "name: Assistant\ncapabilities: [recall]")
    agent("plain", "name: Plain")
    code, _, err = cli(capsys, "agents", "validate")
    assert code == 0
    assert "agent 'assistant' may recall, but no [embeddings] model is set" in err
    assert "'plain'" not in err


async def test_recall_with_nothing_to_search_with_tells_the_model_and_the_run_goes_on(
    project: Path, agent: Agent, open_runner: Callable[[], Any], mock: MockProvider
) -> None:
    agent("assistant", "name: Assistant\ncapabilities: [recall]")  # no [embeddings] model
    runner = await open_runner()
    mock.queue(Reply(tool_calls=[("recall", {"query": "tides"})]), Reply(text="Nothing to recall."))
    result = await runner.run_agent("assistant", "t-1", "What did we say of tides?")
    assert result.text == "Nothing to recall." and result.stop_reason == "end_turn"
    told = next(m for m in mock.requests[-1].body["messages"] if m["role"] == "tool")
    assert "recall is not set up in this project" in told["content"]


async def test_an_unpriced_embeddings_model_embeds_where_no_daily_budget_is_set(
    project: Path, agent: Agent, open_runner: Callable[[], Any], mock: MockProvider
) -> None:
    toml = project / "agentrunner.toml"
    toml.write_text(toml.read_text() + '\n[embeddings]\nmodel = "mockai:emb-unpriced"\n')
    agent("assistant", "name: Assistant")
    runner = await open_runner()
    await runner.run_agent("assistant", "t-1", TIDES)
    await runner.effects.drain()
    found = await runner.effects.recall("assistant", "run_x", "ocean tides", 3)
    assert found and found[0].text == TIDES


def test_validate_says_an_unpriced_embeddings_model_under_a_daily_budget_and_a_missing_key(
    agent: Agent,
    project: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent("assistant", "name: Assistant\ncapabilities: [recall]")
    toml = project / "agentrunner.toml"
    toml.write_text(
        toml.read_text()
        + '\n[embeddings]\nmodel = "openai:no-such-embedder"\n'
        + "\n[budgets]\nper_agent_daily_usd = 1.0\n"
    )
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code, _, err = cli(capsys, "agents", "validate")
    at = toml.read_text().splitlines().index('model = "openai:no-such-embedder"') + 1
    assert code == 1
    assert f"agentrunner.toml:{at}: price_unknown" in err
    assert "OPENAI_API_KEY is not set in this environment; embedding with" in err
