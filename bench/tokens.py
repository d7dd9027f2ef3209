"""What a conversation costs in input tokens: the billed input of a 50-turn conversation with a
tool call each turn (two model requests a turn), on Anthropic's and OpenAI's wires, for three
ways of assembling the prompt:

  (a)  seed 003's layout: the thread's last 20 messages inside the system prompt (a section at
       its end, after persona and tools: where a provider's prefix cache reaches furthest), the
       new message alone after it; sent by agentrunner's wire as shipped (the cache hints on),
       and, as (a'), with them off: the cheaper of the two is the one compared with. The 20
       messages are the thread's, tool calls and results among them; --seed-chat-only takes
       what a seed-003 channel holds instead, the person's messages and the agent's answers;
  (b)  agentrunner without cache hints ([providers.NAME] prompt_cache = false): the history as
       messages, no cache_control, no prompt_cache_key;
  (c)  agentrunner as shipped: the whole thread while it fits the model's context window
       (compacted into a summary once it does not), so everything said is remembered.

Every assembly is a real AgentRunner on SQLite over real HTTP against the mock provider with its
prompt-cache model (agentrunner.testing.PromptCacheModel: OpenAI's automatic prefix caching from
1,024 tokens in 128-token steps; Anthropic's reads and writes at the breakpoints, 5-minute
lifetime; a token per 4 bytes of each part's compact JSON, 10-15 % off a real tokenizer either
way, alike for every assembly). A fresh cache for each assembly. Prices are genai-prices', each
request priced on its own: by default anthropic:claude-sonnet-4-5 (input $3/Mtok, cache writes
1.25x, reads 0.1x) and openai:gpt-5 (input $1.25/Mtok, cached input 0.1x; gpt-4.1's is 0.25x).
On OpenAI, (b) and (c) bill alike here: its cache needs no hint, and prompt_cache_key only routes
a conversation's requests to where its prefix is (the mock is one machine), which raises the
real hit rate. "$/Mtok sent" is what a million input tokens cost as billed: what caching does,
whatever the length of history sent.

Target (issue 27): (c) bills at most 0.5x of (a) on both providers.

    python bench/tokens.py [--turns 50] [--anthropic-model M] [--openai-model M]
                           [--seed-chat-only]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_results

MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-5"}  # --anthropic/openai-model
ASSEMBLIES = {
    "a": "(a) seed 003: last 20 messages in the system prompt",
    "a'": "(a') the same, no cache hints",
    "b": "(b) agentrunner, no cache hints",
    "c": "(c) agentrunner as shipped",
}
WINDOW = 20  # seed 003's "last 20 messages"
CONFIG = """\
[defaults]
title_model = "test"

[providers.anthropic]
kind = "anthropic"
base_url = "{anthropic}"
{hints}

[providers.openai]
kind = "openai"
base_url = "{openai}"
{hints}
"""
PERSONA = (
    "You are Atlas, the support engineer of a company that sells a self-hosted analytics "
    "product. You answer customers' questions about installing, configuring, upgrading and "
    "troubleshooting it. Look things up in the documentation with search_docs before you "
    "answer anything specific: versions, flags, limits and error messages change between "
    "releases, and a confident wrong answer costs the customer hours. Quote the setting or "
    "command that solves the problem, say which version it applies to, and say what to check "
    "if it does not work. Keep answers short: a paragraph, then the steps. If the documents do "
    "not answer the question, say so and suggest what the customer could send us (logs, the "
    "output of the diagnostics command, their configuration with secrets removed). Never ask "
    "for passwords or keys. Be friendly and direct; do not apologise for things that are not "
    "our fault, and do not promise features or dates. When a customer reports a bug, restate "
    "it in one sentence, note the version and the steps to reproduce, and write it down with "
    "note_create so the team sees it. "
) * 2
WORDS = [
    *("cluster", "node", "ingest", "pipeline", "retention", "query", "dashboard", "export"),
    *("schema", "index", "shard", "replica", "token", "upgrade", "config", "flag", "timeout"),
    *("memory", "disk", "backup", "restore", "proxy", "certificate", "cache", "metric"),
    *("event", "batch", "worker", "queue", "latency", "error", "version", "release"),
]


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def conversation(turns: int) -> list[tuple[str, str, str, str]]:
    """(question, search query, search result, answer) for each turn, the same every run."""
    rng = random.Random(27)
    return [
        (
            f"Turn {n}: " + text(rng, 35),  # ~250 bytes
            text(rng, 5),
            " ".join(f"[doc {n}.{k}] " + text(rng, 40) for k in range(4)),  # ~1,200 bytes
            text(rng, 90),  # ~600 bytes
        )
        for n in range(turns)
    ]


def search_tool(results: dict[str, str]) -> Any:
    from agentrunner.engine import Tool, ToolContext

    schema = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to look for."}},
        "required": ["query"],
        "additionalProperties": False,
    }

    async def search(args: dict[str, Any], ctx: ToolContext) -> str:
        return results[args["query"]]

    return Tool(
        "search_docs",
        "Search the product documentation; returns the best matching passages.",
        schema,
        search,
    )


def transcript(messages: list[Any], chat_only: bool) -> str:
    """Seed 003's rendering of the last ``WINDOW`` messages: one line each, tool calls and
    results among them; with ``chat_only``, what a seed-003 channel holds: the person's
    messages and the agent's answers, no tool traffic (so more turns of them)."""
    from agentrunner.engine import AssistantMessage, ToolResult, UserMessage

    if chat_only:
        messages = [
            m
            for m in messages
            if isinstance(m, UserMessage) or (isinstance(m, AssistantMessage) and m.text)
        ]
    lines = []
    for message in messages[-WINDOW:]:
        if isinstance(message, UserMessage):
            lines.append(f"user: {message.content}")
        elif isinstance(message, ToolResult):
            lines.append(f"tool {message.name}: {message.content}")
        elif isinstance(message, AssistantMessage):
            if message.text:
                lines.append(f"assistant: {message.text}")
            for call in message.tool_calls:
                lines.append(f"assistant called {call.name}({call.arguments})")
    return "\n".join(lines)


async def converse(
    mock: Any, urls: dict[str, str], provider: str, assembly: str, turns: int, chat_only: bool
) -> dict[str, Any]:
    """One conversation of ``turns`` turns; what its requests were billed for input."""
    from agentrunner import RunAgentOverrides, open_runner
    from agentrunner.engine import Usage
    from agentrunner.testing import PromptCacheModel, Reply

    model = MODELS[provider]
    talk = conversation(turns)
    mock.prompt_cache = PromptCacheModel()  # nothing left by an earlier assembly
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "agents").mkdir()
        hints = "prompt_cache = false" if assembly in ("a'", "b") else ""
        (root / "agentrunner.toml").write_text(CONFIG.format(hints=hints, **urls))
        (root / "agents" / "atlas.md").write_text(
            f"---\nname: Atlas\nmodel: {provider}:{model}\ncapabilities: [notes]\n"
            f"tools: [search_docs]\nlimits:\n  max_steps: 4\n---\n{PERSONA}\n"
        )
        runner = await open_runner(root)
        results = {query: result for _, query, result, _ in talk}
        runner.capabilities.register("docs", lambda ctx: [search_tool(results)], ["search_docs"])
        overrides = RunAgentOverrides()
        recent: dict[str, str] = {}
        if assembly in ("a", "a'"):
            section: Callable[[Any], str | None] = lambda ctx: recent.get("text")  # noqa: E731
            runner.prompt.providers.register("Recent conversation", section)
            overrides = RunAgentOverrides(history=False)
        prices = runner.engine.models.prices
        billed = plain = requests = tokens = read = written = 0
        try:
            for question, query, _, answer in talk:
                if assembly in ("a", "a'"):
                    last, _ = await runner.store.messages.tail("t-bench", 4 * WINDOW)
                    recent["text"] = transcript(last, chat_only)
                mock.queue(
                    Reply(tool_calls=[("search_docs", {"query": query})], output_tokens=20),
                    Reply(text=answer, output_tokens=150),
                )
                result = await runner.run_agent("atlas", "t-bench", question, overrides=overrides)
                for step in await runner.store.runs.steps(result.run_id):
                    usage = step.token_usage or {}
                    ins = Usage(
                        input_tokens=usage["input_tokens"],
                        cache_read_tokens=usage["cache_read_tokens"],
                        cache_write_tokens=usage["cache_write_tokens"],
                    )
                    cost = prices.cost_micros(provider, model, ins)
                    full = prices.cost_micros(provider, model, Usage(usage["input_tokens"]))
                    assert cost is not None and full is not None, f"no price for {model}"
                    billed, plain = billed + cost, plain + full
                    requests += 1
                    tokens += ins.input_tokens
                    read += ins.cache_read_tokens
                    written += ins.cache_write_tokens
        finally:
            await runner.close()
    return {
        "provider": provider,
        "model": f"{provider}:{model}",
        "assembly": assembly,
        "requests": requests,
        "input_tokens": tokens,
        "cache_read_tokens": read,
        "cache_write_tokens": written,
        "billed_input_micros": billed,
        "uncached_input_micros": plain,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument(
        "--seed-chat-only",
        action="store_true",
        help="(a)'s 20 messages without tool calls and results, as a seed-003 channel holds",
    )
    for provider, model in MODELS.items():
        parser.add_argument(f"--{provider}-model", default=model, help=f"default {model}")
    args = parser.parse_args()
    MODELS.update(anthropic=args.anthropic_model, openai=args.openai_model)

    from agentrunner.testing import MockProvider, MockProviderServer

    mock = MockProvider()
    mock.record = False
    server = MockProviderServer(mock).start()
    urls = {"anthropic": server.anthropic_url, "openai": server.openai_url}
    results: list[dict[str, Any]] = []
    try:
        for provider in MODELS:
            for assembly in ASSEMBLIES:
                results.append(
                    await converse(mock, urls, provider, assembly, args.turns, args.seed_chat_only)
                )
    finally:
        server.stop()

    rows, verdicts = [], {}
    for provider in MODELS:
        mine = {r["assembly"]: r for r in results if r["provider"] == provider}
        seed = min(mine["a"]["billed_input_micros"], mine["a'"]["billed_input_micros"])
        for assembly, label in ASSEMBLIES.items():
            r = mine[assembly]
            r["vs_a"] = r["billed_input_micros"] / seed
            rows.append(
                [
                    r["model"],
                    label,
                    r["requests"],
                    f"{r['input_tokens']:,}",
                    f"{r['cache_read_tokens']:,}",
                    f"{r['cache_write_tokens']:,}",
                    f"${r['uncached_input_micros'] / 1e6:.4f}",
                    f"${r['billed_input_micros'] / 1e6:.4f}",
                    f"${r['billed_input_micros'] / r['input_tokens']:.2f}",
                    f"{r['vs_a']:.2f}x",
                ]
            )
        verdicts[provider] = mine["c"]["vs_a"]
    print_table(
        f"Billed input of a {args.turns}-turn conversation, a tool call each turn "
        "(vs (a): against the cheaper of (a) and (a'))",
        [
            "model",
            "assembly",
            "requests",
            "input tokens",
            "cache read",
            "cache written",
            "at full price",
            "billed",
            "$/Mtok sent",
            "vs (a)",
        ],
        rows,
    )
    met = all(v <= 0.5 for v in verdicts.values())
    print(
        "\ntarget (c) <= 0.5x (a) on both providers: "
        + ", ".join(f"{p} {v:.2f}x" for p, v in verdicts.items())
        + (" — met" if met else " — NOT met")
    )
    write_results(
        "tokens",
        {
            "turns": args.turns,
            "seed_chat_only": args.seed_chat_only,
            "models": MODELS,
            "results": results,
            "c_vs_a": verdicts,
            "target_met": met,
        },
    )


if __name__ == "__main__":
    asyncio.run(main())
