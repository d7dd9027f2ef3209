"""Prompt caching that pays: what a thread's turns send, as the mock provider received it over
real HTTP. Each request starts with the whole of the request before it, byte for byte, on every
wire (reasoning sent back as it came included); Anthropic's ``cache_control`` breakpoints move
with the conversation (never more than four) so each request reads what the one before wrote;
OpenAI's ``prompt_cache_key`` is one per thread; a long thread's history starts at the same
message for many turns; and the hints can be turned off per provider."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentRunner
from agentrunner.testing import MockProvider, MockProviderServer, PromptCacheModel, Reply
from tests.runner.conftest import Agent
from tests.runner.test_cli_run import cli

SQLITE_ONLY = pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
WIRES = pytest.mark.parametrize(
    "model", ["mockai:gpt-mock", "mockant:claude-mock", "mockresp:gpt-5-mock"]
)
EPHEMERAL = {"type": "ephemeral"}


RESPONSES = """
[providers.mockresp]
kind = "openai-responses"
base_url = "{url}"
api_key_env = "MOCK_KEY"
"""


def with_model(project: Path, model: str, server: MockProviderServer) -> None:
    """The provider ``model`` needs: the project's own, or the Responses API's on the mock."""
    if model.startswith("mockresp:"):
        path = project / "agentrunner.toml"
        path.write_text(path.read_text() + RESPONSES.format(url=server.openai_url))


def set_provider(project: Path, provider: str, line: str) -> None:
    """Add ``line`` to ``[providers.PROVIDER]`` of the project's agentrunner.toml."""
    path = project / "agentrunner.toml"
    table = f"[providers.{provider}]\n"
    path.write_text(path.read_text().replace(table, table + line + "\n"))


def small_cache() -> PromptCacheModel:
    """The providers' cache with minimums a short test conversation reaches."""
    return PromptCacheModel(openai_min_tokens=64, openai_step=16, anthropic_min_tokens=64)


def dump(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def unmarked(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"}


def prompt(body: dict[str, Any]) -> list[bytes]:
    """A request's prompt as the provider caches it, part by part, in order: tools, system,
    then each message (OpenAI) or input item (its Responses API) or each message's content
    block with its role (Anthropic); Anthropic's markers left out, as they are not part of
    the prompt."""
    tools = [dump(unmarked(t)) for t in body.get("tools") or ()]
    if "input" in body:  # the Responses API: instructions, then the items
        return [*tools, dump(body.get("instructions")), *(dump(i) for i in body["input"])]
    if "system" not in body:  # OpenAI: the system prompt is the first message
        return tools + [dump(m) for m in body["messages"]]
    system = [dump(unmarked(b)) for b in body["system"]]
    blocks = [dump([m["role"], unmarked(b)]) for m in body["messages"] for b in m["content"]]
    return tools + system + blocks


def marked(body: dict[str, Any]) -> list[int]:
    """Where an Anthropic request's breakpoints are: indices into ``prompt(body)``."""
    parts = [*body.get("tools", ()), *body["system"]]
    parts += [b for m in body["messages"] for b in m["content"]]
    return [i for i, part in enumerate(parts) if part.get("cache_control") == EPHEMERAL]


def expected_marks(body: dict[str, Any]) -> list[int]:
    """The last tool, the system prompt, the last block of the last two user turns."""
    tools = len(body.get("tools", ()))
    at, ends = tools + len(body["system"]), []
    for message in body["messages"]:
        at += len(message["content"])
        if message["role"] == "user":
            ends.append(at - 1)
    return [tools - 1, tools, *ends[-2:]]


async def converse(
    runner: AgentRunner, mock: MockProvider, threads: dict[str, list[str]]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[str]]]:
    """Each thread's turns, interleaved (one turn of each in turn): a note written with a tool
    (after some signed thinking, which Anthropic's wire replays), then an answer. The bodies
    each thread's requests sent, and its runs."""
    sent: dict[str, list[dict[str, Any]]] = {thread: [] for thread in threads}
    runs: dict[str, list[str]] = {thread: [] for thread in threads}
    for turn in range(len(next(iter(threads.values())))):
        for thread, questions in threads.items():
            question = questions[turn]
            note = {"title": f"{thread} {turn}", "body": question}
            mock.queue(
                Reply(tool_calls=[("note_create", note)], thinking=f"Noting {question}"),
                Reply(text=f"Noted for {thread}: {question}"),
            )
            before = len(mock.requests)
            result = await runner.run_agent("helper", thread, question)
            sent[thread] += [r.body for r in mock.requests[before:]]
            runs[thread].append(result.run_id)
    return sent, runs


@SQLITE_ONLY
@WIRES
async def test_each_request_of_a_thread_starts_with_the_whole_request_before_it(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    mock_server: MockProviderServer,
    project: Path,
    model: str,
) -> None:
    with_model(project, model, mock_server)
    set_provider(project, model.partition(":")[0], "prompt_cache = true")
    agent("helper", f"model: {model}\ncapabilities: [notes]")
    mock.prompt_cache = small_cache()
    runner: AgentRunner = await open_runner()
    sent, runs = await converse(
        runner,
        mock,
        {
            "t-paris": ["Plan a day in Paris.", "Add a museum.", "And dinner?"],
            "t-rome": ["Three sights in Rome, please.", "Which is oldest?", "Thanks!"],
        },
    )

    for thread, bodies in sent.items():
        assert len(bodies) == 6  # three turns of two requests each
        for before, after in itertools.pairwise(bodies):
            old, new = prompt(before), prompt(after)
            assert new[: len(old)] == old, thread  # byte for byte, up to the newest messages
            assert len(new) > len(old)
        if model.startswith("mockant"):
            for body in bodies:
                assert marked(body) == expected_marks(body)
                assert len(marked(body)) <= 4
            for before, after in itertools.pairwise(bodies):
                # The end of the last request is a breakpoint again: what it wrote is read.
                assert marked(before)[-1] in marked(after)
                assert marked(after)[-1] > marked(before)[-1]  # and the end moved on
            assert all("prompt_cache_key" not in body for body in bodies)
        else:
            assert len({body["prompt_cache_key"] for body in bodies}) == 1
    paris, rome = sent["t-paris"], sent["t-rome"]
    assert prompt(paris[0]) != prompt(rome[0])  # two conversations, two prompts
    if not model.startswith("mockant"):
        assert paris[0]["prompt_cache_key"] != rome[0]["prompt_cache_key"]
        assert paris[0]["prompt_cache_key"].startswith("agentrunner-")
        assert "t-paris" not in paris[0]["prompt_cache_key"]

    # What the provider billed: from its second request on, a thread reads from the cache at
    # least all the request before it sent (up to OpenAI's 16-token step here).
    for thread in sent:
        steps = [s for run in runs[thread] for s in await runner.store.runs.steps(run)]
        usage = [s.token_usage or {} for s in steps]
        assert len(usage) == 6
        for before, after in itertools.pairwise(usage):
            if model.startswith("mockant"):
                written = before["cache_read_tokens"] + before["cache_write_tokens"]
                assert after["cache_read_tokens"] >= written > 0
            else:
                assert after["cache_read_tokens"] >= before["input_tokens"] - 16 > 0
    # The second thread's first request read the tools and system prompt the first wrote.
    [rome_first, *_] = await runner.store.runs.steps(runs["t-rome"][0])
    assert (rome_first.token_usage or {})["cache_read_tokens"] > 0
    if model.startswith("mockant"):  # the thinking was sent back, signed, as it came
        assert any(b["type"] == "thinking" for m in paris[-1]["messages"] for b in m["content"])
    if model.startswith("mockresp"):  # each turn's reasoning, kept in the thread, sent back
        reasoning = [i for i in paris[-1]["input"] if i.get("type") == "reasoning"]
        assert [i["summary"][0]["text"] for i in reasoning] == [
            "Noting Plan a day in Paris.",
            "Noting Add a museum.",
            "Noting And dinner?",
        ]


@SQLITE_ONLY
@WIRES
async def test_a_memory_write_starts_the_history_over_once_after_the_system_prompt(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    mock_server: MockProviderServer,
    project: Path,
    model: str,
) -> None:
    with_model(project, model, mock_server)
    agent("helper", f"model: {model}\ncapabilities: [memory]")
    runner: AgentRunner = await open_runner()
    mock.queue(
        Reply(tool_calls=[("memory_append", {"label": "facts", "text": "Likes tea."})]),
        Reply(text="Noted."),
        Reply(text="Tea it is."),
        Reply(text="Green, then."),
    )
    for question in ("I like tea.", "What do I drink?", "Which tea?"):
        await runner.run_agent("helper", "t-1", question)
    first, second, third, fourth = (prompt(r.body) for r in mock.requests)
    assert second[: len(first)] == first  # within the run: the whole request before
    # The next run sends the agent's notes first: its prompt is the same up to the messages ...
    same = 0
    while third[same] == second[same]:
        same += 1
    assert same == len(mock.requests[0].body["tools"]) + 1  # the tools and the system prompt
    assert b"Likes tea." in third[same] and b"Likes tea." not in b"".join(second[:same])
    # ... and from then on it is stable again: the next turn starts with all of this one.
    assert fourth[: len(third)] == third


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("model", "setting", "hinted"),
    [
        ("mockai:gpt-mock", None, False),  # a server other than OpenAI's: not by default
        ("mockai:gpt-mock", "true", True),
        ("mockai:gpt-mock", "false", False),
        ("mockant:claude-mock", None, True),
        ("mockant:claude-mock", "false", False),
    ],
)
async def test_prompt_cache_hints_follow_the_provider_setting(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    project: Path,
    model: str,
    setting: str | None,
    hinted: bool,
) -> None:
    provider = model.partition(":")[0]
    if setting is not None:
        set_provider(project, provider, f"prompt_cache = {setting}")
    agent("helper", f"model: {model}\ncapabilities: [notes]")
    runner: AgentRunner = await open_runner()
    mock.queue(Reply(tool_calls=[("note_create", {"title": "T", "body": "B"})]), Reply(text="Ok"))
    await runner.run_agent("helper", "t-1", "note it")
    bodies = [r.body for r in mock.requests]
    assert len(bodies) == 2
    for body in bodies:
        if provider == "mockai":
            assert ("prompt_cache_key" in body) is hinted
        else:
            assert marked(body) == (expected_marks(body) if hinted else [])
            assert hinted or b"cache_control" not in dump(body)
    if provider == "mockant" and hinted:  # a first turn has one user turn: three, then four
        assert [len(marked(body)) for body in bodies] == [3, 4]


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("window", "history_tokens"),
    [(4096, ""), (100_000, "history_tokens = 2500\n")],
    ids=["small-window", "history-tokens"],
)
async def test_a_long_threads_history_starts_at_the_same_message_for_many_turns(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    project: Path,
    window: int,
    history_tokens: str,
) -> None:
    """A thread that outgrows what its requests may carry of it — its model's window, or a
    smaller [compaction] history_tokens — is compacted once and then grows from its summary:
    the history sent starts at the same message turn after turn, and moves only when the
    thread is compacted (a window sliding on by a turn each turn would change the start of
    every request and lose the provider's prompt cache each time)."""
    path = project / "agentrunner.toml"
    path.write_text(
        path.read_text()
        + f'\n[models."mockai:gpt-mock"]\ncontext_window = {window}\n'
        + f'[models."mockai:gpt-summary"]\ncontext_window = {window}\n'
        + f'[compaction]\nmodel = "mockai:gpt-summary"\n{history_tokens}'
    )
    agent("helper", "model: mockai:gpt-mock")
    runner: AgentRunner = await open_runner()
    mock.queue(*(Reply(text=f"Summary {n}.") for n in range(40)), model="gpt-summary")
    firsts: list[str] = []
    compacted: list[int] = []
    for turn in range(24):
        before = len(mock.requests)
        await runner.run_agent("helper", "t-long", f"message {turn}: " + "word " * 120)
        *summaries, body = [r.body for r in mock.requests[before:]]
        if summaries:
            compacted.append(turn)
        assert body["messages"][-1]["content"].startswith(f"message {turn}: ")
        firsts.append(body["messages"][1]["content"][:40])  # after the system prompt
    starts = [turn for turn in range(1, 24) if firsts[turn] != firsts[turn - 1]]
    assert compacted and len(compacted) <= 8, compacted  # not every turn
    assert starts == compacted, (starts, compacted)  # the start moves only with a compaction
    assert len(set(firsts)) == len(compacted) + 1


def test_runs_show_and_cost_show_the_prompt_cache_and_what_it_cost(
    agent: Agent, mock: MockProvider, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = project / "agentrunner.toml"
    path.write_text(  # whole micro-dollars: plain input 8, a read 1, a write 10 per token
        path.read_text().replace(
            '[prices."mockant:claude-mock"]\ninput_per_mtok = 1.0\n',
            '[prices."mockant:claude-mock"]\ninput_per_mtok = 8.0\n'
            "cache_read_per_mtok = 1.0\ncache_write_per_mtok = 10.0\n",
        )
    )
    agent("helper", "model: mockant:claude-mock\ncapabilities: [notes]")
    agent("plain", "model: mockai:gpt-mock")
    mock.prompt_cache = small_cache()
    runs = []
    for question in ("Plan a day in Paris.", "Add a museum."):
        mock.queue(Reply(tool_calls=[("note_create", {"title": "T", "body": question})]))
        mock.queue(Reply(text="Noted."))
        code, out, err = cli(capsys, "run", "helper", question, "--json")
        assert code == 0, err
        runs.append(json.loads(out)["run_id"])
    mock.prompt_cache = None
    code, out, err = cli(capsys, "run", "plain", "hello", "--json")
    assert code == 0, err
    plain_run = json.loads(out)["run_id"]

    totals = {"read": 0, "written": 0}
    for run_id in runs:
        code, out, err = cli(capsys, "runs", "show", run_id, "--json")
        assert code == 0, err
        shown = json.loads(out)
        usage = [s["usage"] for s in shown["steps"]]
        read = sum(u["cache_read_tokens"] for u in usage)
        written = sum(u["cache_write_tokens"] for u in usage)
        assert read > 0 and written > 0
        assert shown["cache"] == {
            "read_tokens": read,
            "write_tokens": written,
            "read_micros": read,
            "write_micros": written * 10,
            "saved_micros": (read + written) * 8 - read - written * 10,
            "unpriced_tokens": 0,
        }
        code, out, err = cli(capsys, "runs", "show", run_id)
        assert code == 0, err
        line = (
            f"prompt cache: {read:,} tokens read (${read / 1e6:.4f}) · {written:,} written "
            f"(${written * 10 / 1e6:.4f})"
        )
        assert line in out and "cached" in out, out  # the line, and the steps' column
        totals["read"] += read
        totals["written"] += written
    code, out, _ = cli(capsys, "runs", "show", plain_run)
    assert code == 0 and "prompt cache" not in out and "cached" not in out  # none used, none shown

    code, out, err = cli(capsys, "cost", "--json")
    assert code == 0, err
    report = json.loads(out)
    read, written = totals["read"], totals["written"]
    assert report["cache"] == {
        "read_tokens": read,
        "write_tokens": written,
        "read_micros": read,
        "write_micros": written * 10,
        "saved_micros": (read + written) * 8 - read - written * 10,
        "unpriced_tokens": 0,
    }
    models = {m["model"]: m for m in report["by_model"]}
    assert models["mockant:claude-mock"]["cache_read_tokens"] == read
    assert models["mockant:claude-mock"]["cache_write_tokens"] == written
    assert models["mockai:gpt-mock"]["cache_read_tokens"] == 0
    code, out, _ = cli(capsys, "cost")
    assert f"prompt cache: {read:,} tokens read (${read / 1e6:.4f})" in out, out
    assert "cached" in out
    code, out, _ = cli(capsys, "cost", "--agent", "plain")
    assert code == 0 and "plain" in out
    assert "prompt cache" not in out and "cached" not in out


def test_cost_prices_only_the_cache_of_requests_whose_price_was_known(
    agent: Agent, mock: MockProvider, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cache tokens of requests made while their model had no price are not priced later at
    today's price: the cache's cost can never pass what was spent (a newcomer saw $0.0045 of
    cache reads in a total of $0.0007)."""
    agent("helper", "model: mockant:claude-later\ncapabilities: [notes]")
    mock.prompt_cache = small_cache()
    for question in ("Plan a day in Paris.", "Add a museum."):  # no price yet: unknown cost
        mock.queue(Reply(tool_calls=[("note_create", {"title": "T", "body": question})]))
        mock.queue(Reply(text="Noted."))
        code, _, err = cli(capsys, "run", "helper", question)
        assert code == 0, err
    path = project / "agentrunner.toml"
    path.write_text(
        path.read_text() + '\n[prices."mockant:claude-later"]\ninput_per_mtok = 8.0\n'
        "output_per_mtok = 8.0\ncache_read_per_mtok = 1.0\ncache_write_per_mtok = 10.0\n"
    )
    mock.queue(Reply(tool_calls=[("note_create", {"title": "T", "body": "and lunch"})]))
    mock.queue(Reply(text="Noted."))
    code, out, err = cli(capsys, "run", "helper", "And lunch.", "--json")
    assert code == 0, err
    code, out, err = cli(capsys, "runs", "show", json.loads(out)["run_id"], "--json")
    priced = json.loads(out)["cache"]
    assert priced["read_tokens"] > 0

    code, out, err = cli(capsys, "cost", "--json")
    assert code == 0, err
    report = json.loads(out)
    cache = report["cache"]
    assert cache["read_tokens"] > priced["read_tokens"]  # every token is counted …
    assert cache["read_micros"] == priced["read_micros"]  # … only the priced ones cost
    assert cache["write_micros"] == priced["write_micros"]
    assert cache["read_micros"] + cache["write_micros"] <= report["total"]["cost_micros"]
    code, out, _ = cli(capsys, "cost")
    unpriced = sum(cache[k] - priced[k] for k in ("read_tokens", "write_tokens"))
    assert cache["unpriced_tokens"] == unpriced
    assert f"{unpriced:,} of them in requests of unknown price" in " ".join(out.split()), out
