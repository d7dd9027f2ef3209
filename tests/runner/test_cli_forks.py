"""`agentrunner threads fork|rewind` from the command line (docs/threads.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrunner.testing import MockProvider, Reply
from tests.interrupt import ctrl_c
from tests.runner.conftest import Agent
from tests.runner.test_cli_run import cli


def _thread(capsys: pytest.CaptureFixture[str]) -> tuple[str, list[str]]:
    """An echo agent's thread of three turns (messages 1-6), and its runs."""
    runs = []
    for said in ("one", "two", "three"):
        code, out, err = cli(capsys, "run", "echo", said, "--json")
        assert code == 0, err
        runs.append(json.loads(out))
    assert len({r["thread_id"] for r in runs}) == 1
    return runs[0]["thread_id"], [r["run_id"] for r in runs]


def _shown(capsys: pytest.CaptureFixture[str], thread_id: str) -> str:
    code, out, err = cli(capsys, "threads", "show", thread_id)
    assert code == 0, err
    return out


def test_a_fork_goes_on_from_its_point_and_the_thread_is_left_as_it_was(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("echo")
    thread_id, _ = _thread(capsys)
    code, out, err = cli(capsys, "threads", "fork", thread_id[:-3], "--at", "2")
    assert code == 0, err
    assert f"forked {thread_id} at message 2: " in out and "(2 messages)" in out
    fork_id = out.split(": ")[1].split(" ")[0]
    assert f'agentrunner run echo "…" --thread {fork_id}' in err
    code, out, err = cli(capsys, "run", "echo", "other", "--thread", fork_id, "--json")
    assert code == 0, err
    assert json.loads(out)["text"] == "Echo: other"
    shown = _shown(capsys, fork_id)
    assert "one" in shown and "other" in shown and "two" not in shown
    assert "three" in _shown(capsys, thread_id)  # the parent is unchanged
    # another point, another fork
    code, out, err = cli(capsys, "threads", "fork", thread_id, "--at", "4", "--json")
    assert code == 0, err
    forked = json.loads(out)
    assert (forked["at"], forked["left_out"], forked["thread"]["forked_from"]) == (4, 2, thread_id)
    assert forked["thread"]["message_count"] == 4 and forked["thread"]["id"] != fork_id


def test_a_rewind_asks_for_yes_then_cuts_and_the_run_keeps_what_was_cut(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("echo")
    thread_id, runs = _thread(capsys)
    code, _, err = cli(capsys, "threads", "rewind", thread_id, "--at", "4")
    assert code == 1 and "nothing was cut" in err and "removes messages 5-6" in err
    assert f"threads rewind {thread_id} --at 4 --yes" in err and "threads fork" in err
    assert "three" in _shown(capsys, thread_id)
    code, out, err = cli(capsys, "threads", "rewind", thread_id, "--at", "4", "--yes")
    assert code == 0, err
    assert f"rewound {thread_id} to message 4: 2 messages cut" in out
    assert "three" not in _shown(capsys, thread_id)
    code, out, err = cli(capsys, "threads", "rewind", thread_id, "--at", "4")  # nothing to lose
    assert code == 0, err
    assert "0 messages cut" in out
    code, out, err = cli(capsys, "runs", "show", runs[2])
    assert code == 0, err
    assert "three" in out  # the run that wrote it keeps it
    code, out, err = cli(capsys, "run", "echo", "again", "--json")  # the session goes on
    assert code == 0, err
    assert json.loads(out)["thread_id"] == thread_id
    assert [line for line in _shown(capsys, thread_id).splitlines() if "again" in line]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["fork", "{t}", "--at", "9"], "has messages 1-6; there is no message 9"),
        (["fork", "{t}", "--at", "-1"], "there is no message -1"),
        (["fork", "nope", "--at", "1"], "no thread 'nope'"),
        (["rewind", "{t}", "--at", "7", "--yes"], "there is no message 7"),
        (["rewind", "{t}", "--at", "8"], "there is no message 8"),  # said before --yes
        (["fork", "{t}"], "Missing option '--at'"),
    ],
    ids=[
        "past-the-end",
        "negative",
        "unknown-thread",
        "rewind-past-the-end",
        "rewind-past-the-end-without-yes",
        "no-point",
    ],
)
def test_a_wrong_point_or_thread_is_one_clear_line_and_nothing_is_written(
    agent: Agent, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    agent("echo")
    thread_id, _ = _thread(capsys)
    code, out, err = cli(capsys, "threads", *(a.format(t=thread_id) for a in args))
    assert code != 0 and said in err, err
    assert "Traceback" not in err
    code, out, _ = cli(capsys, "threads", "list", "--json")
    assert [t["id"] for t in json.loads(out)] == [thread_id]
    assert "three" in _shown(capsys, thread_id)


def test_a_replay_prints_the_run_and_its_replay_side_by_side(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("echo")
    thread_id, runs = _thread(capsys)
    code, out, err = cli(capsys, "runs", "replay", runs[1])
    assert code == 0, err
    assert f"replayed {runs[1]} as run_" in err and "messages 1-2)" in err
    assert "the run and its replay" in out
    rows = {line.split("  ")[0]: line.split() for line in out.splitlines()}
    for row in ("model", "status", "stop reason", "tokens", "cost", "seconds"):
        assert row in rows, out
    assert rows["status"][1:] == ["completed", "completed"]
    assert rows["stop reason"][2:] == ["end_turn", "end_turn"]
    assert out.rstrip().endswith("Echo: two")  # the replay's answer, to the second message
    code, out, err = cli(capsys, "runs", "replay", runs[0][-8:], "--json")
    assert code == 0, err
    done = json.loads(out)
    assert done["original"]["id"] == runs[0] and done["replay"]["id"] != runs[0]
    assert done["answer"] == "Echo: one" and done["thread_id"] != thread_id
    assert done["replay"]["model"] == done["original"]["model"]
    assert "three" in _shown(capsys, thread_id)  # the thread is as it was


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run_nope"], "no run 'run_nope'"),
        (["{r}", "--model", "nope:nothing"], "Model 'nope:nothing' not found"),
    ],
    ids=["unknown-run", "unknown-model"],
)
def test_a_replay_of_what_is_not_there_is_one_clear_line(
    agent: Agent, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    agent("echo")
    thread_id, runs = _thread(capsys)
    code, _, err = cli(capsys, "runs", "replay", *(a.format(r=runs[0]) for a in args))
    assert code != 0 and said in err, err
    assert "Traceback" not in err
    code, out, _ = cli(capsys, "threads", "list", "--json")
    assert [t["id"] for t in json.loads(out)] == [thread_id]  # no fork made


def test_ctrl_c_cancels_a_replay_which_is_kept_cancelled(
    agent: Agent, mock: MockProvider, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("talker")
    mock.queue(Reply(text="Short."), Reply(text="word " * 400, chunk_delay_s=0.02))
    code, out, err = cli(capsys, "run", "talker", "tell me everything", "--json")
    assert code == 0, err
    original = json.loads(out)["run_id"]
    code, _, err = ctrl_c(project, mock, "runs", "replay", original, requests=2)
    assert code == 130, err
    assert "cancelled" in err and "runs list" in err and "Traceback" not in err
    _code, listing, _ = cli(capsys, "runs", "list", "--agent", "talker", "--json")
    statuses = {r["id"]: r["status"] for r in json.loads(listing)}
    assert statuses.pop(original) == "completed"  # the original, as it was
    assert list(statuses.values()) == ["cancelled"]


def test_a_waiting_run_is_cancelled_as_the_refusal_says_and_the_thread_is_rewound(
    agent: Agent, mock: MockProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    agent(
        "clerk", "model: mockai:gpt-mock\ncapabilities: [notes]\napproval:\n  tools: [note_create]"
    )
    mock.queue(
        Reply(text="Hello."), Reply(tool_calls=[("note_create", {"title": "x", "body": "y"})])
    )
    code, out, err = cli(capsys, "run", "clerk", "hi", "--json")
    assert code == 0, err
    thread_id = json.loads(out)["thread_id"]
    code, out, err = cli(capsys, "run", "clerk", "note it", "--json")
    waiting = json.loads(out)["run_id"]
    code, _, err = cli(capsys, "threads", "rewind", thread_id, "--at", "2", "--yes")
    assert code == 1 and f"agentrunner runs cancel {waiting}" in err
    code, out, err = cli(capsys, "runs", "cancel", waiting[-6:])
    assert code == 0, err
    assert out.strip() == f"cancelled run {waiting}"
    code, out, err = cli(capsys, "threads", "rewind", thread_id, "--at", "2", "--yes")
    assert code == 0, err
    code, out, _ = cli(capsys, "runs", "cancel", waiting, "--json")
    assert json.loads(out) == {"run_id": waiting, "cancel": "not_cancellable"}
    code, _, err = cli(capsys, "runs", "cancel", "run_nope")
    assert code == 1 and "no run 'run_nope'" in err


def test_a_short_end_of_an_id_names_no_run_to_replay(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    agent("echo")
    thread_id, runs = _thread(capsys)
    code, _, err = cli(capsys, "runs", "replay", runs[1][-1])  # one character: a typo
    assert code == 1 and "no run" in err
    code, out, err = cli(capsys, "runs", "replay", runs[1][-6:], "--json")  # as pages show it
    assert code == 0, err
    replayed = json.loads(out)
    assert replayed["original"]["id"] == runs[1]
    shown = _shown(capsys, replayed["thread_id"])
    assert f"forked from {thread_id} at message 2" in shown.splitlines()[0]
