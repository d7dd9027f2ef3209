"""The prompt builder's sections and registry, and post-run effects that never raise."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from agentrunner.agents import parse_agent_text
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.run.prompt import ContextProviders, PromptBuilder, PromptContext

AGENT = parse_agent_text(
    "---\nmodel: test\ncapabilities: [memory, agents]\npersona: concise\n---\n"
    "You serve {{input.company}}.\n",
    agent_id="a",
    file="agents/a.md",
)


async def test_sections_in_order() -> None:
    providers = ContextProviders()
    providers.register("Open tasks", lambda ctx: "- ship it")
    text = await PromptBuilder(providers=providers).build(
        PromptContext(
            AGENT, "t", {"company": "Acme"}, background=True, channel_mode=True, task="Q3 plan"
        ),
        memory={"human": "likes tea", "persona": "calm"},
    )
    order = [
        "You serve Acme.",
        "## Tone",
        "## Core memory",
        "### human\nlikes tea",
        "## Tools",
        "ask_agent",
        "## Speaking",
        "do_nothing",
        "## Background run",
        "## Open tasks\n- ship it",
    ]
    positions = [text.index(fragment) for fragment in order]
    assert positions == sorted(positions)
    assert "Q3 plan" not in text  # a thread's task is what its agent set: untrusted, not here


async def test_default_persona_and_no_empty_sections() -> None:
    plain = parse_agent_text("---\nmodel: test\n---\nHi.\n", agent_id="p", file="p.md")
    text = await PromptBuilder(default_persona="friendly").build(PromptContext(plain), memory={})
    assert text.startswith("Hi.\n\n## Tone\nTone: warm")
    assert "## Core memory" not in text and "## Tools" not in text and "## Speaking" not in text


async def test_missing_input_is_a_placeholder_error() -> None:
    with pytest.raises(AgentRunnerError) as info:
        await PromptBuilder().build(PromptContext(AGENT), memory={})
    assert info.value.code is ErrorCode.MISSING_MANDATORY_PLACEHOLDER


def test_duplicate_context_provider_is_rejected() -> None:
    providers = ContextProviders()
    providers.register("x", lambda ctx: "a")
    with pytest.raises(AgentRunnerError, match="already registered"):
        providers.register("x", lambda ctx: "b")


async def test_failing_provider_is_logged_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    providers = ContextProviders()

    def boom(ctx: PromptContext) -> str:
        raise RuntimeError("provider down")

    async def later(ctx: PromptContext) -> str:
        await asyncio.sleep(0)
        return "async section"

    providers.register("Broken", boom)
    providers.register("Async", later)
    with caplog.at_level(logging.WARNING, "agentrunner.prompt"):
        text = await PromptBuilder(providers=providers).build(
            PromptContext(AGENT, input={"company": "A"}), memory={}
        )
    assert "## Broken" not in text and "## Async\nasync section" in text
    assert any("'Broken' failed" in r.getMessage() for r in caplog.records)


async def test_title_failure_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture, tmp_path: Any
) -> None:
    from agentrunner.engine import Engine
    from agentrunner.run.effects import PostRunEffects
    from agentrunner.store import open_store

    store = await open_store(f"sqlite:///{tmp_path / 's.db'}")
    await store.threads.open("t", "a")
    effects = PostRunEffects(Engine(), store, title_model="nosuch:model")
    with caplog.at_level(logging.WARNING, "agentrunner.effects"):
        effects.dispatch_title("t", "test", "hello", agent_id="a", run_id="r1")
        await effects.drain()
    assert (await store.threads.get("t")).title is None  # type: ignore[union-attr]
    failed = [r for r in caplog.records if "title generation" in r.getMessage()]
    assert failed and "model_not_found" in failed[0].getMessage()  # why, in the line itself
    assert all(r.exc_info is None for r in failed)  # no traceback for people (--debug has one)
    effects.title_model = None  # the agent's own model: the offline test model
    effects.dispatch_title("t", "test", "Plan the launch", agent_id="a", run_id="r2")
    await effects.drain()
    title = (await store.threads.get("t")).title  # type: ignore[union-attr]
    assert title is not None and "Plan the launch" in title
    await store.close()


async def test_shutdown_cancels_effects_past_the_grace(
    caplog: pytest.LogCaptureFixture, tmp_path: Any
) -> None:
    from agentrunner.engine import Engine
    from agentrunner.run.effects import PostRunEffects
    from agentrunner.store import open_store

    store = await open_store(f"sqlite:///{tmp_path / 's.db'}")
    effects = PostRunEffects(Engine(), store)
    stalled = asyncio.Event()

    async def stall() -> None:
        await stalled.wait()  # a provider that never answers

    effects._spawn(stall())
    [task] = effects._tasks
    with caplog.at_level(logging.WARNING, "agentrunner.effects"):
        await effects.drain(timeout_s=0.05)
    assert task.cancelled() and not effects._tasks  # without the grace, drain never returns
    assert any("cancelled 1 post-run effect" in r.getMessage() for r in caplog.records)
    await store.close()
