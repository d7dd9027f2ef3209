"""Guards (issue 41, item 6): tool policies from extensions that allow, deny or ask, combined
with approval rules (deny over ask over allow); input and output guards that block a message
before anything is sent, or an answer before it is delivered; the built-in policies
(``[guards] write_paths``, ``approval: {above_usd}``)."""

from __future__ import annotations

import sys
import textwrap
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agentrunner import AgentRunner
from agentrunner.engine.messages import AssistantMessage, UserMessage
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.run.callbacks import AgentRunnerCallbacks
from agentrunner.runtime.compose import open_runner, open_workspace
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent

NOTES = "model: mockai:gpt-mock\ncapabilities: [notes]"


def extension(project: Path, source: str) -> str:
    """A module beside agentrunner.toml, listed in [extensions] modules (a name of its own, as
    a module is imported once a process)."""
    name = f"guards_{uuid.uuid4().hex[:10]}"
    (project / f"{name}.py").write_text(textwrap.dedent(source))
    toml = project / "agentrunner.toml"
    toml.write_text(toml.read_text() + f'\n[extensions]\nmodules = ["{name}"]\n')
    return name


def module(name: str) -> ModuleType:
    return sys.modules[name]


def tool_results(mock: MockProvider) -> list[dict[str, Any]]:
    """The tool results of the last request the mock provider was sent."""
    return [m for m in mock.requests[-1].body["messages"] if m.get("role") == "tool"]


async def notes(runner: AgentRunner, agent_id: str) -> list[str]:
    return [n.title for n in await runner.store.notes.list(agent_id)]


POLICY = """
SEEN = []


def read_only_notes(check):
    SEEN.append((check.name, check.agent.id, check.trust, check.spent_micros, check.thread_id))
    if check.name == "note_create":
        return check.deny("notes are read-only on this thread")
    return None


def register(extensions):
    extensions.tool_policy("read-only-notes", read_only_notes)
"""


async def test_a_policy_denies_a_call_the_model_is_told_why_and_the_run_goes_on(
    project: Path, agent: Agent, mock: MockProvider
) -> None:
    name = extension(project, POLICY)
    agent("clerk", NOTES + "\ntrust: workspace")
    mock.queue(
        Reply(
            tool_calls=[("note_create", {"title": "plan", "body": "x"}), ("note_list", {})],
            input_tokens=1000,
        ),
        Reply(text="understood"),
    )
    runner = await open_runner(project)
    try:
        result = await runner.run_agent("clerk", "t1", "write the plan down")
        assert result.status == "completed" and result.text == "understood"
        denied, listed = tool_results(mock)
        assert denied["content"] == (
            "denied by policy read-only-notes: notes are read-only on this thread"
        )
        assert "denied" not in str(listed["content"])  # the other call ran
        assert await notes(runner, "clerk") == []
        # what the policy saw: the call, the agent, the run's trust and what it had spent
        seen = module(name).SEEN
        assert [s[0] for s in seen] == ["note_create", "note_list"]
        assert all(s[1:3] == ("clerk", "workspace") and s[4] == "t1" for s in seen)
        assert 0 < seen[0][3] < result.cost_micros  # the first request's, not the second's
        events = await runner.store.events.list(result.run_id)
        results = [e.payload for e in events if e.type == "agent.tool_result"]
        assert [(r["name"], r["is_error"]) for r in results] == [
            ("note_create", True),
            ("note_list", False),
        ]
    finally:
        await runner.close()


async def test_denials_are_not_the_model_s_mistakes_to_correct(
    project: Path, agent: Agent, mock: MockProvider
) -> None:
    """limits.max_corrections (3) counts the model's invalid calls, not calls a policy denied:
    five denied calls in a step, and one more after, leave the run going on."""
    extension(project, POLICY)
    agent("clerk", NOTES)
    create = ("note_create", {"title": "plan", "body": "x"})
    mock.queue(Reply(tool_calls=[create] * 5), Reply(tool_calls=[create]), Reply(text="fine"))
    runner = await open_runner(project)
    try:
        result = await runner.run_agent("clerk", "t1", "write it")
        assert result.status == "completed" and result.text == "fine"
        assert len(tool_results(mock)) == 6
    finally:
        await runner.close()


BOTH = """
def policy(check):
    if check.name == "note_create":
        return check.deny("no new notes")
    if check.name == "note_list":
        return check.allow()
    if check.name == "note_read":
        return check.ask("reading costs money")
    return None


def register(extensions):
    extensions.tool_policy("house", policy)
"""


async def test_deny_beats_ask_and_ask_beats_allow(
    project: Path, agent: Agent, mock: MockProvider
) -> None:
    extension(project, BOTH)
    agent("clerk", NOTES + "\napproval:\n  tools: [note_create, note_list]")
    mock.queue(
        Reply(
            tool_calls=[
                ("note_create", {"title": "plan", "body": "x"}),  # asked by the rules, denied
                ("note_list", {}),  # asked by the rules, allowed by the policy: asked
                ("note_read", {"slug": "plan"}),  # asked by the policy alone
            ]
        ),
        Reply(text="done"),
    )
    ws = await open_workspace(project)
    try:
        result = await ws.runner.run_agent("clerk", "t1", "go")
        assert result.status == "waiting"
        asked = {a["tool"]: a["rule"] for a in result.approvals}
        assert asked == {
            "note_list": "approval.tools: note_list",
            "note_read": "policy house: reading costs money",
        }
        for request in result.approvals:
            await ws.runner.waits.decide(request["approval_id"], approve=True, by="ana")
        await ws.worker(concurrency=1).run(until_idle=True)
        run = await ws.runner.store.runs.get(result.run_id)
        assert run is not None and run.status == "completed"
        created, listed, read = tool_results(mock)  # in the order of the calls
        assert created["content"] == "denied by policy house: no new notes"
        assert "denied" not in str(listed["content"]) + str(read["content"])
        assert await notes(ws.runner, "clerk") == []
    finally:
        await ws.close()


async def test_a_grant_lets_an_ask_through_never_a_deny(
    project: Path, agent: Agent, mock: MockProvider
) -> None:
    extension(project, BOTH)
    agent("clerk", NOTES)
    mock.queue(Reply(tool_calls=[("note_read", {"slug": "a"})]), Reply(text="one"))
    ws = await open_workspace(project)
    try:
        first = await ws.runner.run_agent("clerk", "t1", "search")
        [asked] = first.approvals
        await ws.runner.waits.decide(asked["approval_id"], approve=True, by="ana", always="thread")
        await ws.worker(concurrency=1).run(until_idle=True)
        mock.queue(
            Reply(
                tool_calls=[
                    ("note_read", {"slug": "b"}),
                    ("note_create", {"title": "t", "body": "b"}),
                ]
            ),
            Reply(text="two"),
        )
        second = await ws.runner.run_agent("clerk", "t1", "again")
        assert second.status == "completed" and second.text == "two"  # the read: granted
        read, created = tool_results(mock)[-2:]  # this run's (the thread's first run's before)
        assert "denied" not in str(read["content"])
        assert created["content"] == "denied by policy house: no new notes"
    finally:
        await ws.close()


async def test_a_task_is_denied_what_would_ask(
    project: Path, agent: Agent, mock: MockProvider
) -> None:
    """A task keeps no thread to go on from, so it cannot wait: what would ask is denied, the
    rule named, and the task goes on (a delegation waits instead: test_approvals)."""
    agent("cto", NOTES + "\nname: CTO\napproval:\n  tools: [note_create]")
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "plan", "body": "x"})]),
        Reply(text="I could not"),
    )
    runner = await open_runner(project)
    try:
        result = await runner.run_task("cto", "write it down")
        assert result.status == "completed" and result.text == "I could not"
        [denied] = [m for m in mock.requests[1].body["messages"] if m.get("role") == "tool"]
        assert denied["content"] == (
            "denied by policy approval: it needs a person's yes (approval.tools: note_create), "
            "which a task (a run on no thread) cannot wait for"
        )
        assert await notes(runner, "cto") == []
    finally:
        await runner.close()


GUARDS = """
import asyncio

SEEN = []


async def no_passwords(said):
    await asyncio.sleep(0)
    SEEN.append(("input", said.agent.id, said.thread_id, said.run_id, said.text))
    return "it holds a password" if "password" in said.text else None


def no_secrets(said):
    SEEN.append(("output", said.agent.id, said.thread_id, said.run_id, said.text))
    if "secret" in said.text:
        return "the answer gives a secret away"


def register(extensions):
    extensions.input_guard("no-passwords", no_passwords)
    extensions.output_guard("no-secrets", no_secrets)
"""


async def test_an_input_guard_blocks_the_message_before_anything_is_sent(
    project: Path, agent: Agent, mock: MockProvider
) -> None:
    name = extension(project, GUARDS)
    agent("clerk", "model: mockai:gpt-mock")
    runner = await open_runner(project)
    try:
        errors: list[str] = []
        callbacks = AgentRunnerCallbacks(on_error=lambda a, t, message: errors.append(message))
        with pytest.raises(AgentRunnerError) as blocked:
            await runner.run_agent("clerk", "t1", "my password is hunter2", callbacks)
        error = blocked.value
        assert error.code is ErrorCode.GUARD_BLOCKED
        assert (
            error.message == "input guard 'no-passwords' blocked the message: it holds a password"
        )
        assert error.details["guard"] == "no-passwords" and error.details["stage"] == "input"
        assert mock.requests == []  # nothing reached a model
        assert errors == [error.message]
        [run] = await runner.store.runs.list(thread_id="t1")
        assert run.status == "failed" and run.error_code == "guard_blocked"
        assert "no-passwords" in (run.error_message or "") and run.cost_micros == 0
        [said, kept] = (await runner.store.messages.tail("t1", 10))[0]
        assert isinstance(said, UserMessage) and said.unsent  # never sent to a model later
        assert isinstance(kept, AssistantMessage) and kept.interrupted

        # another message goes through, and the blocked one is not sent with it
        mock.queue(Reply(text="hello"))
        assert (await runner.run_agent("clerk", "t1", "hello there")).text == "hello"
        [request] = mock.requests
        assert "hunter2" not in str(request.body["messages"])
        seen = module(name).SEEN
        assert [(s[0], s[1], s[2], s[4]) for s in seen] == [
            ("input", "clerk", "t1", "my password is hunter2"),
            ("input", "clerk", "t1", "hello there"),
            ("output", "clerk", "t1", "hello"),
        ]
    finally:
        await runner.close()


async def test_an_output_guard_blocks_the_answer_and_its_cost_is_recorded(
    project: Path, agent: Agent, mock: MockProvider
) -> None:
    extension(project, GUARDS)
    agent("clerk", "model: mockai:gpt-mock")
    runner = await open_runner(project)
    try:
        responses: list[str] = []
        tokens: list[str] = []

        def on_event(kind: str, data: Any) -> None:
            if kind == "agent.token":
                tokens.append(data["token"])

        callbacks = AgentRunnerCallbacks(
            on_response=lambda a, t, text: responses.append(text), on_event=on_event
        )
        mock.queue(Reply(text="the secret is ultramarine", input_tokens=1000, output_tokens=10))
        with pytest.raises(AgentRunnerError) as blocked:
            await runner.run_agent("clerk", "t1", "tell me", callbacks)
        assert blocked.value.code is ErrorCode.GUARD_BLOCKED
        assert "'no-secrets'" in blocked.value.message and "gives a secret" in blocked.value.message
        assert responses == [] and tokens == []  # not delivered, not even streamed
        [run] = await runner.store.runs.list(thread_id="t1")
        assert run.status == "failed" and run.error_code == "guard_blocked"
        assert run.cost_micros == 1000 * 1 + 10 * 2  # $1/Mtok in, $2/Mtok out: recorded
        thread = (await runner.store.messages.tail("t1", 10))[0]
        assert "secret" not in str([getattr(m, "text", "") for m in thread])
        events = await runner.store.events.list(run.id)
        assert "agent.message" not in [e.type for e in events]
        # what the answer said (a word no id holds: "42" was found in a random run id)
        assert "ultramarine" not in str([e.payload for e in events])

        # an answer the guard lets through is delivered, once
        mock.queue(Reply(text="all is well"))
        result = await runner.run_agent("clerk", "t1", "and now?", callbacks)
        assert result.text == "all is well" and responses == ["all is well"]
        assert tokens == ["all is well"]
        sent = mock.requests[-1].body
        assert sent["stream"] is False  # answers are checked whole, so not streamed
        assert "secret" not in str(sent["messages"])  # the blocked answer is not resent
    finally:
        await runner.close()


async def test_policies_and_guards_that_fail_deny_and_block(
    project: Path, agent: Agent, mock: MockProvider
) -> None:
    extension(
        project,
        """
        def broken(check):
            raise RuntimeError("oops")


        async def not_plain(check):
            return None


        def crashing(said):
            raise ValueError("bad guard")


        def register(extensions):
            extensions.tool_policy("broken", broken)
            extensions.tool_policy("async", not_plain)
            extensions.input_guard("crashing", crashing)
        """,
    )
    agent("clerk", NOTES)
    runner = await open_runner(project)
    try:
        with pytest.raises(AgentRunnerError) as blocked:
            await runner.run_agent("clerk", "t1", "hi")
        assert blocked.value.code is ErrorCode.GUARD_BLOCKED
        assert "the guard failed (ValueError: bad guard)" in blocked.value.message
        assert mock.requests == []
        runner.guards.inputs.clear()
        mock.queue(Reply(tool_calls=[("note_list", {})]), Reply(text="ok"))
        assert (await runner.run_agent("clerk", "t2", "hi")).text == "ok"
        [denied] = tool_results(mock)
        assert denied["content"].startswith("denied by policy broken: the policy failed")
    finally:
        await runner.close()


async def test_write_paths_lets_write_file_write_only_where_it_says(
    project: Path, agent: Agent, mock: MockProvider
) -> None:
    toml = project / "agentrunner.toml"
    toml.write_text(toml.read_text() + '\n[guards]\nwrite_paths = ["notes/", "out/*.md"]\n')
    agent("writer", "model: mockai:gpt-mock\ncapabilities: [files]\ntrust: workspace")
    paths = ["notes/a.txt", "plan.txt", "out/r.md", "out/deep/r.md", "notes/../escape.txt"]
    mock.queue(
        Reply(tool_calls=[("write_file", {"path": p, "content": "x"}) for p in paths]),
        Reply(text="done"),
    )
    runner = await open_runner(project)
    try:
        result = await runner.run_agent("writer", "t1", "write them")
        assert result.status == "completed"
        written = {p: (project / p).exists() for p in paths}
        assert written == {
            "notes/a.txt": True,
            "plan.txt": False,
            "out/r.md": True,
            "out/deep/r.md": False,
            "notes/../escape.txt": False,
        }
        told = {p: r["content"] for p, r in zip(paths, tool_results(mock), strict=True)}
        assert told["plan.txt"] == (
            "denied by policy write_paths: 'plan.txt' is outside the paths write_file may "
            "write to ([guards] write_paths: notes/, out/*.md)"
        )
        assert told["notes/a.txt"].startswith("wrote")
    finally:
        await runner.close()


SPEND = NOTES + "\napproval:\n  above_usd: 0.50"


async def test_above_usd_asks_for_every_call_once_the_run_has_spent_more(
    project: Path, agent: Agent, mock: MockProvider
) -> None:
    agent("clerk", SPEND)
    call = ("note_create", {"title": "plan", "body": "x"})
    mock.queue(
        Reply(tool_calls=[call], input_tokens=100_000),  # $0.10: under
        Reply(text="cheap"),
        Reply(tool_calls=[call], input_tokens=600_000),  # $0.60: over
    )
    ws = await open_workspace(project)
    try:
        cheap = await ws.runner.run_agent("clerk", "t1", "note it")
        assert cheap.status == "completed" and cheap.text == "cheap"
        assert await notes(ws.runner, "clerk") == ["plan"]
        dear = await ws.runner.run_agent("clerk", "t2", "note it")
        assert dear.status == "waiting"
        [asked] = dear.approvals
        assert asked["tool"] == "note_create"
        assert asked["rule"].startswith("approval.above_usd: 0.5 (the run has spent $0.6")
        assert await notes(ws.runner, "clerk") == ["plan"]  # not run before a person says
    finally:
        await ws.close()


def test_write_paths_matching() -> None:
    from agentrunner.run.guards import WritePaths

    paths = WritePaths(["notes/", "out/*.md", "README.md", "/srv/drop/"], "/proj")
    allowed = [
        "notes/a.txt",
        "./notes/deep/b.txt",
        "notes//c.txt",
        "out/r.md",
        "README.md",
        "/proj/notes/a.txt",  # absolute under the project: as the relative path
        "/srv/drop/x",
    ]
    refused = [
        "notes",  # the folder itself
        "notes/../x.txt",
        "../proj/notes/a.txt",
        "out/deep/r.md",
        "out/r.txt",
        "readme.md",  # compared as written
        "/etc/passwd",
        "/proj/agents/x.md",
        "~/notes/a.txt",
        "",
    ]
    assert [p for p in allowed if not paths.allows(p)] == []
    assert [p for p in refused if paths.allows(p)] == []
    assert not WritePaths([], "/proj").allows("notes/a.txt")  # an empty list: nowhere
    assert WritePaths(["./"], "/proj").allows("anything/at/all.txt")


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        ('[guards]\nwrite_paths = "notes/"\n', "must be a list of paths"),
        ('[guards]\nwrite_paths = ["notes/", 3]\n', "holds 3, which is not a path"),
        ('[guards]\nwrite_paths = ["../up/"]\n', "leads up a folder"),
        ("[guards]\nwrite_path = []\n", "write_path"),
        ("[approval]\nabove_usd = -1\n", "must be an amount of dollars"),
    ],
)
def test_wrong_guard_settings_are_refused_at_their_line(
    tmp_path: Path, toml: str, said: str
) -> None:
    from agentrunner.config import load_config

    (tmp_path / "agentrunner.toml").write_text(toml)
    with pytest.raises(AgentRunnerError) as refused:
        load_config(tmp_path)
    assert refused.value.code is ErrorCode.INVALID_SPECIFICATION
    assert said in refused.value.message and refused.value.line is not None


def test_above_usd_merges_key_by_key() -> None:
    from agentrunner.agents.approval import ApprovalRules
    from agentrunner.config.approval import Approval

    project = Approval(above_usd=0.5)
    own, _ = Approval.parse({"tools": ["note_create"]})
    rules = ApprovalRules.merge(project, own)
    assert rules is not None and rules.above_usd == 0.5
    assert rules.over_spend(500_000) is None  # not more than
    assert rules.over_spend(500_001) == "[approval] above_usd: 0.5 (the run has spent $0.50)"
    mine, _ = Approval.parse({"above_usd": 2})
    rules = ApprovalRules.merge(project, mine)
    assert rules is not None and rules.over_spend(1_000_000) is None
    assert rules.over_spend(2_500_000) == "approval.above_usd: 2 (the run has spent $2.50)"
    off, _ = Approval.parse(False)
    assert ApprovalRules.merge(project, off) is None  # approval: false: nothing asks
    _, problems = Approval.parse({"above_usd": "lots"})
    assert problems and problems[0][0] == "approval.above_usd"


def test_extensions_may_not_take_a_built_in_policy_s_name_or_one_twice() -> None:
    from agentrunner.run.extensions import Extensions

    extensions = Extensions()

    def register(ext: Extensions) -> None:
        ext.tool_policy("write_paths", lambda check: None)

    with pytest.raises(AgentRunnerError) as taken:
        extensions.run("extension module 'a'", register)
    assert "built-in policy" in taken.value.message

    def twice(ext: Extensions) -> None:
        ext.output_guard("g", lambda said: None)
        ext.output_guard("g", lambda said: None)

    with pytest.raises(AgentRunnerError) as clash:
        extensions.run("extension module 'b'", twice)
    assert "output guard 'g' is already registered" in clash.value.message
