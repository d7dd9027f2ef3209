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
  (c)  agentrunner as shipped ([compaction] history_tokens at its default, 32,000 tokens), with
       variants: (c 4k) … (c 16k) with history_tokens set (--history-tokens), and (c window)
       with history_tokens = "window", the whole thread while it fits the model's context
       window. A thread that outgrows its history budget is compacted into a summary, and grows
       from it again.

Everything a conversation costs in input is billed: each request of each run, the agent's and
its compactions' (every cost.updated a run recorded, so its cost rows), each priced on its own;
and the summaries' output, which no other assembly has (the agent's own output is the same in
every assembly and left out). The summaries are written by a cheaper model of the same provider
([compaction] model: anthropic:claude-haiku-4-5, openai:gpt-5-mini), scripted with replies of
--summary-tokens (1,000) tokens, which the mock stops at the compaction's output cap (an eighth
of the history budget, at most 2,048). Columns: the agent's requests + the summarizer's, the
compactions, input tokens sent, read from and written to the cache (all requests), what the
input would cost at full price, what was billed, of which the compactions' (input and output),
billed per million input tokens sent, and billed against (a).

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
whatever the length of history sent. history_tokens is counted by agentrunner's estimate (3
bytes a token, which errs high), the mock's tokens are 4 bytes: 16k of history_tokens is some
12k tokens billed.

Target (issue 27): (c) bills at most 0.5x of (a) on both providers.

    python bench/tokens.py [--turns 50] [--anthropic-model M] [--openai-model M]
                           [--history-tokens 4000,8000,16000] [--summary-tokens 1000]
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
SUMMARIZERS = {"anthropic": "claude-haiku-4-5", "openai": "gpt-5-mini"}  # [compaction] model
SEED = {
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

[compaction]
model = "{summarizer}"
{history}
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


def assemblies(history_tokens: list[int]) -> dict[str, tuple[str, int | str | None]]:
    """Each assembly's key: its label and the history_tokens it sets (None: the default)."""
    from agentrunner.config import DEFAULT_HISTORY_TOKENS

    out: dict[str, tuple[str, int | str | None]] = {}
    for key, label in SEED.items():
        shipped = f" (history_tokens = {DEFAULT_HISTORY_TOKENS})" if key == "c" else ""
        out[key] = (label + shipped, None)
    for tokens in history_tokens:
        out[f"c {tokens // 1000}k"] = (f"(c {tokens // 1000}k) history_tokens = {tokens}", tokens)
    out["c window"] = ('(c window) history_tokens = "window"', "window")
    return out


def summary_text(tokens: int) -> str:
    """A summary of about ``tokens`` tokens (4 bytes each, as the mock counts them)."""
    rng = random.Random(tokens)
    return text(rng, tokens * 4 // 7)  # words of 6 bytes and a space


async def converse(
    mock: Any,
    urls: dict[str, str],
    provider: str,
    assembly: str,
    history_tokens: int | str | None,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One conversation of ``args.turns`` turns; what its requests were billed for input (and
    its summaries for output)."""
    from agentrunner import RunAgentOverrides, open_runner
    from agentrunner.engine import Usage
    from agentrunner.testing import PromptCacheModel, Reply

    model, summarizer = MODELS[provider], SUMMARIZERS[provider]
    talk = conversation(args.turns)
    mock.reset()  # nothing queued or cached by an earlier assembly
    mock.record = False
    mock.prompt_cache = PromptCacheModel()
    # the summarizer's replies queued for it alone: it never answers for the agent
    summary = Reply(text=summary_text(args.summary_tokens), input_tokens=None)
    mock.queue(*[summary] * args.turns, model=summarizer)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "agents").mkdir()
        hints = "prompt_cache = false" if assembly in ("a'", "b") else ""
        history = "" if history_tokens is None else f"history_tokens = {history_tokens!r}"
        (root / "agentrunner.toml").write_text(
            CONFIG.format(
                hints=hints, history=history, summarizer=f"{provider}:{summarizer}", **urls
            )
        )
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
        billed = plain = requests = summaries = compactions = compacting = 0
        tokens = read = written = 0
        try:
            for question, query, _, answer in talk:
                if assembly in ("a", "a'"):
                    last, _ = await runner.store.messages.tail("t-bench", 4 * WINDOW)
                    recent["text"] = transcript(last, args.seed_chat_only)
                mock.queue(
                    Reply(tool_calls=[("search_docs", {"query": query})], output_tokens=20),
                    Reply(text=answer, output_tokens=150),
                    model=model,
                )
                result = await runner.run_agent("atlas", "t-bench", question, overrides=overrides)
                # every request the run made and paid for, its compaction's included
                for event in await runner.store.events.list(result.run_id):
                    compactions += event.type == "thread.compacted"
                    if event.type != "cost.updated":
                        continue
                    cost = event.payload
                    by, name = cost["model"].split(":", 1)
                    ins = Usage(
                        input_tokens=cost["input_tokens"],
                        cache_read_tokens=cost["cache_read_tokens"],
                        cache_write_tokens=cost["cache_write_tokens"],
                    )
                    paid = prices.cost_micros(by, name, ins)
                    full = prices.cost_micros(by, name, Usage(cost["input_tokens"]))
                    assert paid is not None and full is not None, f"no price for {name}"
                    if name == summarizer:  # its output is what compaction adds to a conversation
                        said = prices.cost_micros(
                            by, name, Usage(output_tokens=cost["output_tokens"])
                        )
                        assert said is not None
                        paid, full = paid + said, full + said
                        summaries += 1
                        compacting += paid
                    else:
                        requests += 1
                    billed, plain = billed + paid, plain + full
                    tokens += ins.input_tokens
                    read += ins.cache_read_tokens
                    written += ins.cache_write_tokens
        finally:
            await runner.close()
    return {
        "provider": provider,
        "model": f"{provider}:{model}",
        "assembly": assembly,
        "history_tokens": history_tokens,
        "requests": requests,
        "summary_requests": summaries,
        "compactions": compactions,
        "input_tokens": tokens,
        "cache_read_tokens": read,
        "cache_write_tokens": written,
        "billed_micros": billed,
        "compaction_micros": compacting,
        "full_price_micros": plain,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument(
        "--seed-chat-only",
        action="store_true",
        help="(a)'s 20 messages without tool calls and results, as a seed-003 channel holds",
    )
    parser.add_argument(
        "--history-tokens",
        default="4000,8000,16000",
        help="the history_tokens of the (c) variants, comma-separated",
    )
    parser.add_argument(
        "--summary-tokens", type=int, default=1000, help="the scripted summaries' length"
    )
    for provider, model in MODELS.items():
        parser.add_argument(f"--{provider}-model", default=model, help=f"default {model}")
    args = parser.parse_args()
    MODELS.update(anthropic=args.anthropic_model, openai=args.openai_model)
    variants = assemblies([int(n) for n in args.history_tokens.split(",") if n.strip()])

    from agentrunner.testing import MockProvider, MockProviderServer

    mock = MockProvider()
    server = MockProviderServer(mock).start()
    urls = {"anthropic": server.anthropic_url, "openai": server.openai_url}
    results: list[dict[str, Any]] = []
    try:
        for provider in MODELS:
            for assembly, (_, history_tokens) in variants.items():
                results.append(await converse(mock, urls, provider, assembly, history_tokens, args))
    finally:
        server.stop()

    rows, verdicts = [], {}
    for provider in MODELS:
        mine = {r["assembly"]: r for r in results if r["provider"] == provider}
        seed = min(mine["a"]["billed_micros"], mine["a'"]["billed_micros"])
        for assembly, (label, _) in variants.items():
            r = mine[assembly]
            r["vs_a"] = r["billed_micros"] / seed
            rows.append(
                [
                    r["model"],
                    label,
                    f"{r['requests']} + {r['summary_requests']}",
                    r["compactions"],
                    f"{r['input_tokens']:,}",
                    f"{r['cache_read_tokens']:,}",
                    f"{r['cache_write_tokens']:,}",
                    f"${r['full_price_micros'] / 1e6:.4f}",
                    f"${r['billed_micros'] / 1e6:.4f}",
                    f"${r['compaction_micros'] / 1e6:.4f}",
                    f"${r['billed_micros'] / r['input_tokens']:.2f}",
                    f"{r['vs_a']:.2f}x",
                ]
            )
        verdicts[provider] = mine["c"]["vs_a"]
    print_table(
        f"Billed input of a {args.turns}-turn conversation, a tool call each turn, compactions "
        "and their summaries included (vs (a): against the cheaper of (a) and (a'))",
        [
            "model",
            "assembly",
            "requests + summary",
            "compactions",
            "input tokens",
            "cache read",
            "cache written",
            "at full price",
            "billed",
            "compactions'",
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
            "summary_tokens": args.summary_tokens,
            "models": MODELS,
            "summarizers": SUMMARIZERS,
            "results": results,
            "c_vs_a": verdicts,
            "target_met": met,
        },
    )


if __name__ == "__main__":
    asyncio.run(main())
