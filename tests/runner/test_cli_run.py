"""`agentrunner run|chat|threads|runs` end to end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentrunner.interfaces.cli import console, main
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_run_streams_and_ends_with_a_usage_line(
    agent: Agent, mock: MockProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("helper", "capabilities: [notes]")
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "T", "body": "B"})]), Reply(text="All noted.")
    )
    code, out, err = cli(capsys, "run", "helper", "note this")
    assert code == 0, err
    assert "All noted." in out
    assert "→ note_create" in err and "← t" in err
    assert "tokens · $" in err and "end_turn" in err


def test_run_json_and_session_threads(agent: Agent, capsys: pytest.CaptureFixture[str]) -> None:
    agent("echo")
    code, out, err = cli(capsys, "run", "echo", "one", "--json")
    assert code == 0, err
    first = json.loads(out)
    assert first["text"] == "Echo: one" and first["stop_reason"] == "end_turn"
    assert set(first) >= {"run_id", "thread_id", "usage", "cost_usd", "model"}
    second = json.loads(cli(capsys, "run", "echo", "two", "--json")[1])
    assert second["thread_id"] == first["thread_id"]  # the session continues
    third = json.loads(cli(capsys, "run", "echo", "three", "--json", "--new")[1])
    assert third["thread_id"] != first["thread_id"]
    fourth = json.loads(
        cli(capsys, "run", "echo", "four", "--json", "--thread", first["thread_id"])[1]
    )
    assert fourth["thread_id"] == first["thread_id"]
    code, out, _ = cli(capsys, "threads", "show", first["thread_id"])
    assert code == 0 and "Echo: four" in out and "one" in out
    code, out, _ = cli(capsys, "threads", "list", "--agent", "echo")
    assert code == 0 and first["thread_id"] in out and third["thread_id"] in out


def test_runs_list_and_show_tell_the_story(
    agent: Agent,
    mock: MockProvider,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent("helper", "capabilities: [notes]")
    mock.queue(
        Reply(
            tool_calls=[("note_create", {"title": "Plan", "body": "Go"})],
            input_tokens=40,
            output_tokens=10,
        ),
        Reply(text="Done."),
    )
    run_id = json.loads(cli(capsys, "run", "helper", "plan", "--json")[1])["run_id"]
    monkeypatch.setattr(console.out, "width", 80)  # a small terminal
    code, out, _ = cli(capsys, "runs", "list")
    assert code == 0
    assert any(run_id in line and "completed" in line for line in out.splitlines())
    code, out, _ = cli(capsys, "runs", "show", run_id)
    assert code == 0
    for fragment in (
        "completed",
        "end_turn",
        "mockai:gpt-mock",
        "Steps",
        "→ note_create",
        "← note_create",
        "assistant: Done.",
        "user: plan",
        "$0.0001",
    ):
        assert fragment in out, fragment


def test_a_run_whose_provider_reports_no_usage_shows_an_estimate(
    agent: Agent, mock: MockProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("helper")
    mock.queue(Reply(text="Sunny.", usage=False), Reply(text="Sunny. " * 30, usage=False))
    tokens = []
    for prompt in ("weather?", "What is the weather like in Paris this week? " * 8):
        code, _out, err = cli(capsys, "run", "helper", prompt)
        assert code == 0, err
        assert "tokens (estimated) · $" in err and "end_turn" in err  # not "0 tokens"
        _code, listing, _ = cli(capsys, "runs", "list", "--agent", "helper", "--json")
        run = json.loads(listing)[0]
        usage = run["usage"]
        assert run["status"] == "completed" and usage["estimated"] and run["cost_usd"] > 0
        tokens.append((usage["input_tokens"], usage["output_tokens"]))
        _code, shown, _ = cli(capsys, "runs", "show", run["id"])
        assert f"out {usage['output_tokens']:,} (estimated)" in shown
    # what was sent and what came back make the estimate: the second run sent and got more
    (in_1, out_1), (in_2, out_2) = tokens
    assert in_2 > in_1 > 0 and out_2 > out_1 > 0


@pytest.mark.parametrize("answer", ["Two lines:\nsecond " + "word " * 40, "one " * 60])
def test_run_show_keeps_a_long_or_multiline_message_under_its_label(
    agent: Agent,
    mock: MockProvider,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    answer: str,
) -> None:
    agent("helper")
    mock.queue(Reply(text=answer))
    run_id = json.loads(cli(capsys, "run", "helper", "say it", "--json")[1])["run_id"]
    monkeypatch.setattr(console.out, "width", 80)
    code, out, _ = cli(capsys, "runs", "show", run_id)
    assert code == 0
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("  assistant: "))
    said = [lines[first]]
    for line in lines[first + 1 :]:
        if not line.startswith(" " * len("  assistant: ")):
            break
        said.append(line)
    # every line of the answer, wrapped or its own, is indented under the label: it all reads
    # as the assistant's, and nothing of it is lost
    assert len(said) >= 3 and all(len(line) <= 80 for line in said)
    joined = " ".join(line[len("  assistant: ") :].strip() for line in said)
    assert joined.split() == answer.split()


def test_listings_as_json(
    agent: Agent,
    mock: MockProvider,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent("helper", "capabilities: [notes]")
    body = "word " * 80  # longer than the terminal: JSON must not be folded
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "Plan", "body": body})]),
        Reply(text="Done."),
    )
    result = json.loads(cli(capsys, "run", "helper", "plan", "--json")[1])
    monkeypatch.setattr(console.out, "width", 60)

    code, out, _ = cli(capsys, "runs", "list", "--json")
    assert code == 0
    [listed] = json.loads(out)
    assert listed["id"] == result["run_id"] and listed["status"] == "completed"

    code, out, _ = cli(capsys, "runs", "show", result["run_id"], "--json")
    assert code == 0
    shown = json.loads(out)
    assert shown["run"] == listed
    assert [s["step"] for s in shown["steps"]] == [1, 2]
    assert all(s["status"] == "completed" and s["attempts"] for s in shown["steps"])
    assert [m["type"] for m in shown["messages"]] == [
        "system_message",
        "user_message",
        "tool_call_message",
        "tool_return_message",
        "assistant_message",
    ]
    call = shown["messages"][2]
    assert call["tool_name"] == "note_create" and call["tool_input"]["body"] == body
    assert shown["messages"][4]["content"] == "Done."

    code, out, _ = cli(capsys, "threads", "list", "--json")
    assert code == 0
    [thread] = json.loads(out)
    assert thread["id"] == result["thread_id"] and thread["message_count"] == 4

    code, out, _ = cli(capsys, "threads", "show", result["thread_id"], "--json")
    assert code == 0
    history = json.loads(out)
    assert history["thread"] == thread
    assert [(m["seq"], m["role"]) for m in history["messages"]] == [
        (1, "user"),
        (2, "assistant"),
        (3, "tool"),
        (4, "assistant"),
    ]
    assert history["messages"][1]["tool_calls"][0]["arguments"]["body"] == body
    assert {m["run_id"] for m in history["messages"]} == {result["run_id"]}

    code, _, err = cli(capsys, "runs", "show", "nope", "--json")
    assert code == 1 and "no run 'nope'" in err


def test_show_takes_the_beginning_of_an_id(
    agent: Agent, mock: MockProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("helper")
    mock.queue(Reply(text="One."), Reply(text="Two."))
    first = json.loads(cli(capsys, "run", "helper", "one", "--new", "--json")[1])
    second = json.loads(cli(capsys, "run", "helper", "two", "--new", "--json")[1])

    for kind, key in (("runs", "run_id"), ("threads", "thread_id")):
        a, b = first[key], second[key]
        common = a[: next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)]
        assert common  # the same kind of id, made a moment apart
        code, out, err = cli(capsys, kind, "show", a[: len(common) + 1], "--json")
        assert code == 0, err
        shown = json.loads(out)
        assert (shown["run"]["id"] if kind == "runs" else shown["thread"]["id"]) == a

        code, _, err = cli(capsys, kind, "show", common)
        assert code == 1 and "more than one" in err
        assert a in err and b in err and "Give more of the id" in err

    assert "no run 'run_zzz'" in cli(capsys, "runs", "show", "run_zzz")[2]
    assert "no thread ''" in cli(capsys, "threads", "show", "")[2]


def test_unknown_run_and_thread(agent: Agent, capsys: pytest.CaptureFixture[str]) -> None:
    agent("x")
    assert "no run 'nope'" in cli(capsys, "runs", "show", "nope")[2]
    assert "no thread 'nope'" in cli(capsys, "threads", "show", "nope")[2]


def test_run_error_is_one_line(agent: Agent, capsys: pytest.CaptureFixture[str]) -> None:
    agent("templ", body="For {{input.company}}.")
    code, _, err = cli(capsys, "run", "templ", "hi")
    assert code == 1
    assert "missing_mandatory_placeholder" in err and "Traceback" not in err


def test_offline_with_the_test_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli(capsys, "init", ".", "-t", "basic", "--model", "test")[0] == 0
    code, out, err = cli(capsys, "run", "assistant", "hello", "--model", "test")
    assert code == 0, err
    assert "[test model]" in out


def test_chat_session(agent: Agent, project: Path) -> None:
    agent("echo")
    done = subprocess.run(
        [sys.executable, "-m", "agentrunner", "chat", "echo"],
        input="first\nsecond\n/exit\n",
        capture_output=True,
        text=True,
        cwd=project,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Echo: first" in done.stdout and "Echo: second" in done.stdout


def test_ctrl_c_cancels_and_is_recorded(
    agent: Agent, mock: MockProvider, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("talker")
    mock.queue(Reply(text="word " * 400, chunk_delay_s=0.02))
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentrunner", "run", "talker", "tell me everything"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not [r for r in mock.requests if r.body.get("stream")]:
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "cancelled" in err and "Traceback" not in err
    assert "word word" in out
    assert "tokens (estimated)" in err  # what was streamed was paid for: shown, estimated
    _code, listing, _ = cli(capsys, "runs", "list", "--agent", "talker", "--json")
    [run] = json.loads(listing)
    assert run["status"] == "cancelled" and run["usage"]["estimated"]
    assert run["usage"]["output_tokens"] > 0 and run["cost_usd"] > 0
    _code, shown, _ = cli(capsys, "runs", "show", run["id"])
    assert "(estimated)" in shown
    assert "model mockai:gpt-mock" in shown and "assistant: word word" in shown  # what it said
    _code, thread, _ = cli(capsys, "threads", "show", run["thread_id"])
    assert "(interrupted)" in thread and "word word" in thread
    assert f"run {run['id']} cancelled: Ctrl-C" in thread  # said once, with its reason


def test_thread_must_be_one_of_the_agents_own(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("ceo")
    agent("cfo")
    ceo_thread = json.loads(cli(capsys, "run", "ceo", "plan", "--json")[1])["thread_id"]
    code, out, err = cli(capsys, "run", "cfo", "numbers?", "--thread", "nonexistent")
    assert code == 1 and "thread_not_found: no thread 'nonexistent' of agent 'cfo'" in err
    assert "has no threads yet" in err and out == ""
    cfo_thread = json.loads(cli(capsys, "run", "cfo", "first", "--json")[1])["thread_id"]
    code, _, err = cli(capsys, "run", "cfo", "numbers?", "--thread", "nonexistent")
    assert code == 1 and cfo_thread in err  # the agent's recent threads, as a hint
    code, _, err = cli(capsys, "run", "cfo", "numbers?", "--thread", ceo_thread)
    assert code == 1 and f"thread '{ceo_thread}' belongs to agent 'ceo', not 'cfo'" in err
    code, out, _ = cli(capsys, "run", "cfo", "again", "--json", "--thread", cfo_thread[:-3])
    assert code == 0 and json.loads(out)["thread_id"] == cfo_thread  # a unique beginning


async def test_run_agent_refuses_another_agents_thread(agent: Agent, open_runner: Any) -> None:
    from agentrunner.errors import AgentRunnerError

    agent("ceo")
    agent("cfo")
    runner = await open_runner()
    await runner.run_agent("ceo", "board", "hello")
    with pytest.raises(AgentRunnerError) as caught:
        await runner.run_agent("cfo", "board", "hello")
    assert (
        caught.value.code == "thread_not_found" and "belongs to agent 'ceo'" in caught.value.message
    )
    runs = await runner.store.runs.list(thread_id="board")
    assert [r.agent_id for r in runs] == ["ceo"]  # nothing written for the refused run


def test_run_shows_what_tools_produce_for_the_person(
    agent: Agent, mock: MockProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("pinger", "capabilities: [notify]")
    mock.queue(
        Reply(tool_calls=[("notify_user", {"message": "Deploy finished"})]), Reply(text="ok")
    )
    code, out, err = cli(capsys, "run", "pinger", "tell me when done")
    assert code == 0, err
    assert "🔔 Deploy finished" in err and "ok" in out


def test_chat_survives_errors_takes_input_and_quits_on_ctrl_c(
    agent: Agent, mock: MockProvider, project: Path
) -> None:
    from agentrunner.testing import Fault

    agent("greeter", body="You greet {{input.company}}'s visitors.")
    no_input = subprocess.run(
        [sys.executable, "-m", "agentrunner", "chat", "greeter"],
        input="hi\n",
        capture_output=True,
        text=True,
        cwd=project,
        timeout=60,
        check=False,
    )
    assert no_input.returncode == 1 and "missing_mandatory_placeholder" in no_input.stderr
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentrunner", "chat", "greeter", "--input", '{"company": "Acme"}'],
        cwd=project,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    assert proc.stdin is not None and proc.stdout is not None
    mock.queue(Reply(text="Welcome!"), Reply(fault=Fault.http(401)), Reply(text="Back again."))

    def say(line: str) -> None:
        proc.stdin.write(line + "\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    def wait_for(text: str) -> None:
        seen = ""
        deadline = time.monotonic() + 30
        while text not in seen and time.monotonic() < deadline:
            seen += proc.stdout.read(1)  # type: ignore[union-attr]
        assert text in seen, seen

    say("hello")
    wait_for("Welcome!")
    say("break please")  # the provider rejects the key: printed, and the session goes on
    say("still there?")
    wait_for("Back again.")
    assert "You greet Acme's visitors." in mock.requests[0].body["messages"][0]["content"]
    wait_for("you › ")  # idle at the prompt
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "error: provider_auth:" in err and "Traceback" not in err
    assert err.endswith("\n") and "cancelled" not in err


def test_a_message_from_stdin_or_a_file(
    agent: Agent, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("echo")
    big = "word " * 220_000  # ~1 MB: more than one command-line argument may hold
    done = subprocess.run(
        [sys.executable, "-m", "agentrunner", "run", "echo", "-", "--json"],
        input=big + "\n",
        capture_output=True,
        text=True,
        cwd=project,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["text"] == f"Echo: {big}"  # its last newline dropped
    (project / "question.md").write_text("# Question\nWhat is our runway?\n")
    code, out, _ = cli(capsys, "run", "echo", "@question.md", "--json")
    # a file's (or stdin's) last newline ends the file, not the message
    assert code == 0 and json.loads(out)["text"] == "Echo: # Question\nWhat is our runway?"
    (project / "other.md").write_text("Hire a CFO?\r\n\n")
    code, out, _ = cli(capsys, "run", "echo", "@other.md", "--json")
    assert code == 0 and json.loads(out)["text"] == "Echo: Hire a CFO?"
    code, out, err = cli(capsys, "run", "echo", "@")  # a file name forgotten, not a message
    assert code == 1 and out == "" and "validation: @ names no file" in err and "@@" in err
    code, out, _ = cli(capsys, "run", "echo", "@@cfo", "--json")
    assert code == 0 and json.loads(out)["text"] == "Echo: @cfo"
    code, out, err = cli(capsys, "run", "echo", "@missing.md")
    assert code == 1 and "runner_io: cannot read the message file missing.md" in err


def test_contradictory_or_incomplete_options_are_refused(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("echo")
    code, out, _ = cli(capsys, "run", "echo", "one", "--json")
    thread = json.loads(out)["thread_id"]
    code, out, err = cli(capsys, "run", "echo", "two", "--new", "--thread", thread)
    assert code == 1 and "--new and --thread" in err and out == ""
    code, _, err = cli(capsys, "run", "echo", "two", "--fallback", "test")
    assert code == 1 and "validation:" in err and "fallback" in err
    code, _, err = cli(capsys, "exec", "echo", "--fallback", "test")
    assert code == 1 and "validation:" in err and "fallback" in err
    # nothing ran: the thread still holds one turn
    code, out, _ = cli(capsys, "runs", "list", "--json")
    assert len(json.loads(out)) == 1


def test_chat_checks_its_model_before_the_first_turn(
    agent: Agent, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("echo")
    code, _, err = cli(capsys, "chat", "echo", "--model", "gpt-4o")
    assert code == 1 and "model_not_found" in err
    assert "openai:gpt-4o" in err and "anthropic:gpt-4o" not in err  # a sensible guess
    code, _, err = cli(capsys, "chat", "echo", "--model", "claude-sonnet-4")
    assert "anthropic:claude-sonnet-4" in err and "openai:claude" not in err


def test_a_bad_agent_file_fails_a_run_as_validate_reports_it(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("typo", "tools: [raed_file]")
    agent("wrongmodel", "model: mockia:gpt-mock")
    agent("tmpl", "prompt_template: 'About {{input.company}}'")
    code, _, ran = cli(capsys, "run", "typo", "hi")
    validated = "".join(cli(capsys, "agents", "validate")[1:])
    line = "agents/typo.md:2: invalid_specification: unknown tool 'raed_file'"
    assert code == 1 and ran.startswith(f"error: {line}") and line in validated
    code, _, ran = cli(capsys, "run", "wrongmodel", "hi")
    assert code == 1 and ran.startswith("error: agents/wrongmodel.md:2: model_not_found")
    assert "Did you mean 'mockai' or 'mockant'" in ran
    code, _, ran = cli(capsys, "exec", "tmpl", "--input", "{}")
    assert code == 1
    assert ran.startswith("error: agents/tmpl.md:2: missing_mandatory_placeholder"), ran


def test_only_a_failure_that_is_tried_again_says_so(
    agent: Agent, mock: MockProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentrunner.testing import Fault

    agent("helper")
    for status, expected in ((400, "validation"), (401, "provider_auth")):
        mock.queue(Reply(fault=Fault.http(status)))
        code, _, err = cli(capsys, "run", "helper", "hi")
        assert code == 1, err
        assert "retrying" not in err and "failing over" not in err, err
        assert f"! mockai:gpt-mock: {expected} (HTTP {status})" in err  # the attempt is shown
    mock.queue(Reply(fault=Fault.http(503)), Reply(text="Back."))
    code, out, err = cli(capsys, "run", "helper", "hi")
    assert code == 0 and "Back." in out
    assert "provider_unavailable" in err and "retrying or failing over" in err


def test_run_shows_what_a_delegated_run_does(
    agent: Agent, mock: MockProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("boss", "capabilities: [agents, notify]")  # a child gets no more than its caller
    agent("worker", "capabilities: [notify]")
    mock.queue(
        Reply(tool_calls=[("ask_agent", {"agent": "worker", "message": "ping them"})]),
        Reply(tool_calls=[("notify_user", {"message": "Pinged"})]),
        Reply(text="done pinging"),
        Reply(text="All done."),
    )
    code, out, err = cli(capsys, "run", "boss", "delegate")
    assert code == 0, err
    assert "All done." in out and "done pinging" not in out  # its tool use, not its tokens
    lines = err.splitlines()
    assert any(line.startswith("→ ask_agent") for line in lines), err
    assert "  worker › notify_user" in lines, err  # indented by its depth
    assert "worker › 🔔 Pinged" in lines, err  # what it produced for the person: always shown
    assert "  worker › answered" in lines, err
    assert not any("boss ›" in line for line in lines), err


def test_channels_create_says_who_joined_as_a_person_and_the_agent_meant(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    """A member that is no agent joins as a person (that is how people join); one spelt like an
    agent is most likely a typo, and is said so (a newcomer's `-m writr` went unnoticed)."""
    agent("writer")
    code, out, err = cli(capsys, "channels", "create", "team", "-m", "writr", "-m", "ada")
    assert code == 0, err
    assert "writr (person)" in out and "ada (person)" in out
    assert "'writr' is no agent, so it joined as a person (did you mean 'writer'?)" in err
    assert "'ada'" not in err  # a person's name like no agent's: nothing to say
    code, out, err = cli(capsys, "channels", "create", "team2", "-m", "writer")
    assert code == 0 and "with writer" in out and "(person)" not in out and err == ""


@pytest.mark.parametrize(
    ("variable", "secret"),
    [("MOCK_KEY", "sk-mock-key"), ("AGENTRUNNER_API_TOKEN", "tok-Zq8Xw3Lm9Tt4Vb")],
)
def test_run_never_prints_a_secret_a_model_said(
    agent: Agent,
    mock: MockProvider,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    secret: str,
) -> None:
    """Issue 39: a reply holding a key was printed as it came, streamed or as JSON."""
    monkeypatch.setenv(variable, secret)
    agent("talker")
    mock.queue(Reply(text=f"Yours: {secret}, keep it."), Reply(text=f"Again {secret}"))
    code, out, err = cli(capsys, "run", "talker", "hi")
    assert code == 0, err
    assert "Yours: [redacted], keep it." in out and secret not in out + err
    code, out, err = cli(capsys, "run", "talker", "hi", "--json")
    assert code == 0, err
    assert json.loads(out)["text"] == "Again [redacted]" and secret not in out + err
