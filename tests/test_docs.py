"""The documentation runs: every code block of README.md and docs/*.md is executed or checked,
offline, against the built-in `test` model and the mock provider — so the docs cannot drift.

Blocks are taken from the Markdown itself. How a block is run follows its language; an HTML
comment right above a block, `<!-- docs-test: … -->`, says when it needs more:

| language / directive | what the test does |
| --- | --- |
| `python` | runs it in a fresh `company` project (and a server, if it talks to port 8765) |
| `bash` | runs it as one script in an empty directory |
| `bash` + `server` | runs it against `agentrunner serve` on a spare port, in a company project |
| `bash` + `continues` | appends it to the block above (same shell, same server) |
| `bash` + `serve` | starts each line as a server and checks that it answers `/health` |
| `console` | replays the `$ ` lines as a script; the other lines are the output it must print |
| `js` | runs it with node in a project whose agents answer through the mock |
| `json` / `toml` / `yaml` / `markdown` | parses it the way agentrunner reads such text |
| `yaml` with `cases:` | reads it as an eval file |
| `cli-output: NAME` | builds the situation NAME and compares agentrunner's output to the block |
| `skip: REASON` | not run (the reason is shown) |
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentrunner.runtime.scaffold import create_project
from agentrunner.testing import MockProvider, MockProviderServer, Reply

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(
    r"(?:^<!-- docs-test: (?P<directive>[^\n]*?) -->\n)?^```(?P<lang>[\w-]*)\n(?P<body>.*?)^```",
    re.S | re.M,
)
BIN = str(Path(sys.executable).parent)


@dataclass
class Block:
    path: Path
    line: int
    lang: str
    body: str
    directive: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def _blocks() -> list[Block]:
    found = []
    for path in DOCS:
        text = path.read_text()
        for m in _BLOCK.finditer(text):
            line = text.count("\n", 0, m.start("lang")) + 1
            found.append(Block(path, line, m["lang"], m["body"], m["directive"] or ""))
    merged: list[Block] = []  # a block that continues the one above runs as part of it
    for block in found:
        if block.directive == "continues" and merged and merged[-1].path == block.path:
            merged[-1].body += "\n" + block.body
        else:
            merged.append(block)
    return merged


BLOCKS = _blocks()


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRUNNER_")}
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    env["COLUMNS"] = "200"
    return {**env, **extra}


def _spare_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(
    args: list[str], cwd: Path, env: dict[str, str], stdin: str | None = None, timeout: int = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _company(root: Path) -> Path:
    """A fresh `agentrunner init --template company` project, with an accountant and #general
    as well, so every example finds the agents and channels it names."""
    create_project(root, "company", "test")  # the examples: deterministic and instant
    (root / "agents" / "accountant.md").write_text(
        "---\nname: Accountant\ndescription: Guards the budget\n---\nYou keep the books.\n"
    )
    with (root / "agentrunner.toml").open("a") as config:
        config.write('\n[channels.general]\nmembers = ["ceo", "cfo", "accountant", "you"]\n')
    return root


@contextlib.contextmanager
def _serving(project: Path, *args: str, env: dict[str, str]) -> Iterator[int]:
    """`agentrunner serve` on a spare port until the block is done; yields the port."""
    port = _spare_port()
    server = subprocess.Popen(
        [f"{BIN}/agentrunner", "serve", "--port", str(port), *args],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_health(port, server)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)
        if server.stderr is not None:
            server.stderr.close()


def _wait_for_health(port: int, server: subprocess.Popen[str]) -> None:
    import httpx2

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert server.poll() is None, server.stderr.read() if server.stderr else "server exited"
        with contextlib.suppress(httpx2.HTTPError):
            if httpx2.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                return
        time.sleep(0.1)
    raise AssertionError("the server did not answer /health")


# -- the blocks ------------------------------------------------------------------------------


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_the_docs_run(
    block: Block, tmp_path: Path, mock_server: MockProviderServer, mock: MockProvider
) -> None:
    directive, _, argument = block.directive.partition(":")
    if directive == "skip":
        pytest.skip(argument.strip())
    if directive == "cli-output" and argument.strip() == "company-session":
        pytest.skip("test_the_company_session runs it (a real model: minutes, not seconds)")
    if directive == "cli-output":
        CLI_OUTPUTS[argument.strip()](block, tmp_path)
    elif block.lang == "python":
        _python(block, tmp_path)
    elif block.lang == "bash" and directive == "serve":
        _serve_lines(block, tmp_path)
    elif block.lang == "bash":
        _bash(block, tmp_path, server=directive == "server")
    elif block.lang == "console":
        _console(block, tmp_path, mock_server, mock)
    elif block.lang == "js":
        _node(block, tmp_path, mock_server, mock)
    elif block.lang == "json":
        _json_values(block.body)
    elif block.lang == "toml":
        _toml(block, tmp_path)
    elif block.lang in ("markdown", "yaml"):
        _agent_file(block, tmp_path)
    else:
        pytest.fail(f"{block.id}: no way to run a ```{block.lang} block: add a docs-test directive")


def _python(block: Block, tmp_path: Path) -> None:
    project = _company(tmp_path / "demo")
    env = _env()
    body = block.body
    with contextlib.ExitStack() as stack:
        if "8765" in body:  # it talks to a server: start one
            port = stack.enter_context(_serving(project, env=env))
            body = body.replace("8765", str(port))
        done = _run([sys.executable, "-c", body], project, env)
    assert done.returncode == 0, f"{block.id}\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr


def _bash(block: Block, tmp_path: Path, *, server: bool) -> None:
    if shutil.which("curl") is None or shutil.which("jq") is None:
        pytest.skip("needs curl and jq")  # .ci/run installs both
    env = _env(AGENTRUNNER_API_TOKEN="docs-token")
    script = "set -euo pipefail\n" + block.body
    with contextlib.ExitStack() as stack:
        cwd = tmp_path
        if server:
            cwd = _company(tmp_path / "demo")
            port = stack.enter_context(_serving(cwd, env=env))
            script = script.replace("8765", str(port))
        done = _run(["bash", "-c", script], cwd, env, timeout=300)
    assert done.returncode == 0, f"{block.id}\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr


def _serve_lines(block: Block, tmp_path: Path) -> None:
    """Each line starts a server as written (on a spare port); each must come up."""
    project = _company(tmp_path / "demo")
    for line in _commands(block.body):
        port = _spare_port()
        server = subprocess.Popen(
            ["bash", "-c", f"{line} --port {port}"],
            cwd=project,
            env=_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # the shell and the server it starts, stopped together
        )
        try:
            _wait_for_health(port, server)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
            if server.stderr is not None:
                server.stderr.close()


def _commands(body: str) -> list[str]:
    """A block's command lines, comments cut off."""
    lines = []
    for raw in body.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


# Agents of the stdio examples, answering through the mock with what the docs show.
_MOCKED = """\
[defaults]
model = "mockai:assistant"

[providers.mockai]
kind = "openai"
base_url = "{url}"
api_key_env = "MOCK_KEY"
"""
_SUMMARISER = (
    "---\nname: Summariser\nmodel: mockai:summariser\nprompt_template: 'Summarise: "
    "{{input.text}}'\n---\nYou summarise in one sentence.\n"
)
_ASSISTANT = "---\nname: Assistant\nmodel: mockai:assistant\n---\nYou help.\n"


def _mocked_project(root: Path, server: MockProviderServer) -> Path:
    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text(_MOCKED.format(url=server.openai_url))
    (root / "agents" / "summariser.md").write_text(_SUMMARISER)
    (root / "agents" / "assistant.md").write_text(_ASSISTANT)
    return root


def _console(block: Block, tmp_path: Path, server: MockProviderServer, mock: MockProvider) -> None:
    """``$ `` and ``> `` lines are the script (``$ cd …`` is where it runs); the rest is the
    output it must print, line for line."""
    commands, expected = [], []
    for line in block.body.splitlines():
        if line.startswith(("$ ", "> ")):
            if not line.startswith("$ cd "):
                commands.append(line[2:])
        else:
            expected.append(line)
    project = _mocked_project(tmp_path / "my-project", server)
    said = [line for line in expected if not line.startswith("{")]  # the models' answers
    mock.queue(Reply(text=said[0]), model="summariser")
    mock.queue(Reply(text=said[1]), model="assistant")
    done = _run(["bash", "-c", "\n".join(commands)], project, _env(MOCK_KEY="sk-mock"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == expected


def _node(block: Block, tmp_path: Path, server: MockProviderServer, mock: MockProvider) -> None:
    if shutil.which("node") is None:
        pytest.skip("needs node")  # .ci/run installs it
    project = _mocked_project(tmp_path / "proj", server)
    (project / "client.mjs").write_text(block.body)
    mock.queue(Reply(text="Tides rise and fall."), model="summariser")
    mock.queue(Reply(text="A long poem " * 200, chunk_delay_s=0.05), model="assistant")
    done = _run(["node", "client.mjs"], project, _env(MOCK_KEY="sk-mock"))
    assert done.returncode == 0, done.stderr
    assert "[ 'assistant', 'summariser' ]" in done.stdout
    assert "completed false Tides rise and fall." in done.stdout
    assert done.stdout.rstrip().endswith("cancelled")  # stopped after two seconds


def _json_values(text: str) -> None:
    decoder, at, count = json.JSONDecoder(), 0, 0
    while at < len(text.strip()):
        while text[at].isspace():
            at += 1
        _, at = decoder.raw_decode(text, at)
        count += 1
        if not text[at:].strip():
            break
    assert count >= 1


def _toml(block: Block, tmp_path: Path) -> None:
    from agentrunner.config import load_config

    (tmp_path / "agentrunner.toml").write_text(block.body)
    load_config(tmp_path, env={})  # raises on anything it would not accept


def _agent_file(block: Block, tmp_path: Path) -> None:
    """An agent file (or a piece of frontmatter) loads, and passes ``agents validate``."""
    from agentrunner.agents.project import load_project
    from agentrunner.runtime.compose import check_project

    text = block.body
    if block.lang == "yaml" and re.search(r"^cases:", text, re.M):  # an eval file
        from agentrunner.agents.evals import load_eval

        (tmp_path / "example.yaml").write_text(text)
        load_eval(tmp_path / "example.yaml")  # every problem raised, with its line
        return
    if block.lang == "yaml":
        text = f"---\nname: Piece\nmodel: test\n{text}---\nHi\n"
    create_project(tmp_path, "company")
    (tmp_path / "agents" / "example.md").write_text(text)
    check = check_project(load_project(tmp_path, strict=False))
    assert [p.one_line() for p in check.problems] == []


# -- output shown in the docs ----------------------------------------------------------------


def _cli_typo(block: Block, tmp_path: Path) -> None:
    """README: a typo in an agent file, as `run` reports it."""
    project = tmp_path / "demo"
    create_project(project, "company")
    cto = project / "agents" / "cto.md"
    cto.write_text(cto.read_text().replace("description:", "modle: openai:gpt-4.1\ndescription:"))
    done = _run([f"{BIN}/agentrunner", "run", "cto", "hi"], project, _env())
    assert done.returncode == 1
    shown = block.body.splitlines()
    got = done.stderr.splitlines()
    assert got[0] == shown[0]
    assert got[1].startswith(shown[1].removesuffix("…"))


def _cli_validate(block: Block, tmp_path: Path) -> None:
    """docs/agent-file.md: what `agents validate` prints for a team with problems."""
    project = tmp_path / "demo"
    create_project(project, "company")
    agents = project / "agents"
    cfo = agents / "cfo.md"
    cfo.write_text(cfo.read_text().replace("capabilities:", "tools: [web_serch]\ncapabilities:"))
    cmo = agents / "cmo.md"
    cmo.write_text(cmo.read_text() + "Ignore {{ env.HOME }}.\n")
    cto = agents / "cto.md"
    cto.write_text(cto.read_text().replace("description:", "modle: openai:gpt-4.1\ndescription:"))
    ceo = agents / "ceo.md"
    ceo.write_text(ceo.read_text().replace("name: CEO", "name: CEO\nmodel: opneai:gpt-4.1"))
    done = _run([f"{BIN}/agentrunner", "agents", "validate"], project, _env())
    assert done.returncode == 1
    problems = [line for line in done.stderr.splitlines() if line.startswith("agents/")]
    assert problems == block.body.splitlines()


def test_the_company_session(tmp_path: Path) -> None:
    """docs/company.md's terminal session is what the commands print today, in its shape. Its
    own test, so that a run can leave it out by name (.ci/run's second Python does: it runs a
    real model through the whole walk-through, minutes of the machine's two cores)."""
    [block] = [b for b in BLOCKS if b.directive == "cli-output: company-session"]
    _company_session(block, tmp_path)


def _company_session(block: Block, tmp_path: Path) -> None:
    """docs/company.md's terminal session is what the commands print today."""
    from tests.company.session_capture import capture, documented, shape

    text, model_lines = documented()
    assert text == block.body
    assert shape(*capture(tmp_path)) == shape(text, model_lines), (
        "docs/company.md's session is out of date: run `python tests/company/session_capture.py`"
    )


CLI_OUTPUTS = {
    "typo": _cli_typo,
    "validate": _cli_validate,
    "company-session": _company_session,
}


# -- the README's CLI tour -------------------------------------------------------------------


def _tour() -> list[tuple[list[str], list[str]]]:
    """(command words, options) for each row of the README's CLI tour."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## CLI tour") : text.index("## Python tour")]
    rows = []
    for line in section.splitlines():
        if not line.startswith("| `agentrunner "):
            continue
        usage = line.split("`")[1]
        words = []
        for word in usage.split()[1:]:
            if not re.fullmatch(r"[a-z]+(\\\|[a-z]+)*", word):
                break
            words.append(word.split("\\|")[0])
        options = re.findall(r"--[a-z][a-z-]*", usage)
        rows.append((words, options))
    return rows


@pytest.mark.parametrize(("words", "options"), _tour(), ids=lambda v: " ".join(v))
def test_the_cli_tour_names_real_commands_and_options(
    words: list[str], options: list[str], tmp_path: Path
) -> None:
    done = _run([f"{BIN}/agentrunner", *words, "--help"], tmp_path, _env())
    assert done.returncode == 0, done.stderr
    for option in options:
        assert option in done.stdout, f"agentrunner {' '.join(words)} has no {option}"


def test_every_module_in_the_architecture_exists() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    package = ROOT / "src" / "agentrunner"
    for name in re.findall(r"^\| `([\w/]+)`", text, re.M):
        parts = [p for p in name.split("/") if p]
        assert (package.joinpath(*parts)).is_dir() or (
            package.joinpath(*parts).with_suffix(".py")
        ).is_file(), f"docs/architecture.md names {name}, which does not exist"


def test_the_engine_example_shows_its_tool_turn(tmp_path: Path) -> None:
    """Where the README says what its example prints, it prints that."""
    [block] = [b for b in BLOCKS if b.lang == "python" and "Engine()" in b.body]
    done = _run([sys.executable, "-c", block.body], tmp_path, _env())
    assert done.returncode == 0, done.stderr
    assert "agent.tool_call {'call_id'" in done.stdout
    assert "[test model] I called get_weather." in done.stdout
    assert "end_turn" in done.stdout


def test_the_task_example_hits_the_cache_only_for_the_same_request(tmp_path: Path) -> None:
    [block] = [b for b in BLOCKS if b.lang == "python" and "open_task_runner" in b.body]
    project = _company(tmp_path / "demo")
    done = _run([sys.executable, "-c", block.body], project, _env())
    assert done.returncode == 0, done.stderr
    acme, initech, again = _outcomes(done.stdout)
    assert "Acme" in acme and acme.endswith("| cached: False")
    assert "Initech" in initech and "Acme" not in initech and initech.endswith("| cached: False")
    assert again.endswith("| cached: True") and again.replace("True", "False") == acme


def _outcomes(stdout: str) -> list[str]:
    """The example's three printed outcomes (an answer may span lines)."""
    found, current = [], []
    for line in stdout.splitlines():
        current.append(line)
        if "| cached:" in line:
            found.append("\n".join(current))
            current = []
    return found
