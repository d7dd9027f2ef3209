"""Extensions (seed 002's hooks) loaded by every entry point: context providers, message
handlers and tables, from `[extensions] modules` and the `agentrunner.extensions` entry points."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from agentrunner.errors import AgentRunnerError
from agentrunner.runtime.compose import open_runner
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent

EXTENSION = """
from pathlib import Path

LOG = Path(__file__).with_name("events.log")


def facts(ctx):
    return f"The office cat is called Miso ({ctx.agent.id} asked)."


def record(event):
    with LOG.open("a") as out:
        out.write(f"{event.kind} {event.run_id} {event.agent_id} {event.thread_id}\\n")


def register(extensions):
    extensions.context_provider("Office facts", facts)
    extensions.message_handler("recorder", record)
    extensions.table(
        "XTBL",
        "CREATE TABLE XTBL (id {serial}, run_id TEXT NOT NULL, body {json})",
        indexes=["CREATE INDEX XTBL_run ON XTBL (run_id)"],
    )
"""


def configure(project: Path, modules: list[str]) -> None:
    toml = project / "agentrunner.toml"
    listed = ", ".join(f'"{m}"' for m in modules)
    toml.write_text(toml.read_text() + f"\n[extensions]\nmodules = [{listed}]\n")


def cli(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrunner", *args],
        cwd=project,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def table_exists(url: str, name: str) -> bool:
    if url.startswith("sqlite:///"):
        import sqlite3

        with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
            found = conn.execute("SELECT name FROM sqlite_master WHERE name = ?", (name,))
            return found.fetchone() is not None
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
        return bool(row and row[0])


def test_a_listed_module_provides_context_taps_events_and_creates_its_table(
    project: Path, agent: Agent, mock: MockProvider, store_url: str
) -> None:
    agent("ceo")
    table = f"ext_audit_{uuid.uuid4().hex[:8]}"
    # a module beside agentrunner.toml: the project directory is where listed modules are found
    (project / "office_ext.py").write_text(EXTENSION.replace("XTBL", table))
    configure(project, ["office_ext"])
    assert not table_exists(store_url, table)
    mock.queue(Reply(tool_calls=[("do_something", {})]), Reply(text="Hello from the CEO."))
    done = cli(project, "run", "ceo", "hi", "--json")
    assert done.returncode == 0, done.stderr
    system = mock.requests[0].body["messages"][0]
    assert system["role"] == "system"
    assert "## Office facts\nThe office cat is called Miso (ceo asked)." in system["content"]
    assert table_exists(store_url, table)
    lines = (project / "events.log").read_text().splitlines()
    kinds = [line.split()[0] for line in lines]
    assert kinds[:2] == ["agent.working", "step.started"]
    assert kinds[-2:] == ["agent.message", "agent.idle"]
    assert {"agent.tool_call", "agent.tool_result", "cost.updated"} <= set(kinds)
    run_id = lines[0].split()[1]
    assert all(line.split()[1:3] == [run_id, "ceo"] for line in lines)
    assert run_id in done.stdout
    # a second run finds the table there (created once, not again)
    mock.queue(Reply(text="Again."))
    again = cli(project, "run", "ceo", "hi again")
    assert again.returncode == 0, again.stderr
    assert "Again." in again.stdout


def test_a_failing_handler_is_logged_and_the_run_goes_on(
    project: Path, agent: Agent, mock: MockProvider
) -> None:
    agent("ceo")
    (project / "flaky_ext.py").write_text(
        textwrap.dedent(
            """
            from pathlib import Path

            seen = Path(__file__).with_name("seen.log")

            def boom(event):
                raise RuntimeError("handler bug")

            def register(extensions):
                extensions.message_handler("boom", boom)
                extensions.message_handler("after", lambda e: seen.open("a").write(e.kind + "\\n"))
            """
        )
    )
    configure(project, ["flaky_ext"])
    mock.queue(Reply(text="Still answered."))
    done = cli(project, "run", "ceo", "hi")
    assert done.returncode == 0, done.stderr
    assert "Still answered." in done.stdout
    assert done.stderr.count("message handler 'boom' failed") == 1  # once per run, not per event
    assert "RuntimeError: handler bug" in done.stderr
    assert "agent.message" in (project / "seen.log").read_text().split()  # the others still see


def test_an_entry_point_extension_is_loaded(
    project: Path,
    agent: Agent,
    mock: MockProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent("ceo")
    site = tmp_path / "site"
    dist = site / "tiny_ext-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-ext\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[agentrunner.extensions]\ntiny = tiny_ext:setup\n")
    (site / "tiny_ext.py").write_text(
        "def setup(extensions):\n"
        "    extensions.context_provider('Tiny', lambda ctx: 'Installed, not listed.')\n"
    )
    mock.queue(Reply(text="ok"))
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    done = cli(project, "run", "ceo", "hi", PYTHONPATH=path)
    assert done.returncode == 0, done.stderr
    assert "## Tiny\nInstalled, not listed." in mock.requests[0].body["messages"][0]["content"]
    # and without the distribution installed, nothing of it
    mock.queue(Reply(text="ok"))
    assert cli(project, "run", "ceo", "hi").returncode == 0
    assert "## Tiny" not in mock.requests[1].body["messages"][0]["content"]


DUPLICATE = "def register(extensions):\n    extensions.context_provider('facts', lambda ctx: 'x')\n"


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
async def test_clashes_and_reserved_keys_raise_naming_the_module(
    project: Path, agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent("ceo")
    monkeypatch.syspath_prepend(str(project))
    (project / "ext_a.py").write_text(DUPLICATE)
    (project / "ext_b.py").write_text(DUPLICATE)
    (project / "ext_c.py").write_text(
        "def register(extensions):\n    extensions.config_section('persona', {'x': 1})\n"
    )
    (project / "ext_d.py").write_text(
        "def register(extensions):\n"
        "    extensions.table('threads', 'CREATE TABLE threads (x TEXT)')\n"
    )
    for module in ("ext_e", "ext_f"):  # a message handler's name, twice
        (project / f"{module}.py").write_text(
            "def register(extensions):\n"
            "    extensions.message_handler('audit', lambda event: None)\n"
        )
    for module in ("ext_g", "ext_h"):  # a table's name, twice
        (project / f"{module}.py").write_text(
            "def register(extensions):\n"
            "    extensions.table('ext_audit', 'CREATE TABLE ext_audit (x TEXT)')\n"
        )
    toml = project / "agentrunner.toml"
    base = toml.read_text()
    cases = [
        (
            ["ext_e", "ext_f"],
            "extension module 'ext_f': message handler 'audit' is already registered "
            "(by extension module 'ext_e' too)",
        ),
        (
            ["ext_g", "ext_h"],
            "extension module 'ext_h': table 'ext_audit' is already registered "
            "(by extension module 'ext_g' too)",
        ),
        (
            ["ext_a", "ext_b"],
            "extension module 'ext_b': context provider 'facts' is already "
            "registered (by extension module 'ext_a' too)",
        ),
        (["ext_c"], "extension module 'ext_c': config key 'persona' is reserved by agentrunner"),
        (
            ["ext_d"],
            "extension module 'ext_d': table 'threads': the name is one of "
            "agentrunner's own tables",
        ),
        (
            ["no_such_ext"],
            "extension module 'no_such_ext': cannot be imported: ModuleNotFoundError",
        ),
    ]
    for modules, message in cases:
        toml.write_text(base)
        configure(project, modules)
        with pytest.raises(AgentRunnerError) as info:
            await open_runner(project)  # raises before anything is opened
        assert info.value.code == "invalid_specification"
        assert info.value.message.startswith(message), info.value.message
    # the CLI says the same, as one line with its code
    toml.write_text(base)
    configure(project, ["ext_a", "ext_b"])
    done = cli(project, "run", "ceo", "hi")
    assert done.returncode != 0
    assert "invalid_specification: extension module 'ext_b': context provider 'facts'" in (
        done.stderr
    )
    validate = cli(project, "agents", "validate")
    assert validate.returncode == 1
    assert "extension module 'ext_b': context provider 'facts' is already registered" in (
        validate.stderr
    )


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
async def test_an_extension_owns_a_config_section(
    project: Path, agent: Agent, mock: MockProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent("ceo")
    monkeypatch.syspath_prepend(str(project))
    (project / "greeter_ext.py").write_text(
        textwrap.dedent(
            """
            def register(extensions):
                section = extensions.config_section("greeter", {"name": "world", "loud": False})
                text = f"Greet {section['name']}" + ("!" if section["loud"] else ".")
                extensions.context_provider("Greeting", lambda ctx: text)
            """
        )
    )
    configure(project, ["greeter_ext"])
    toml = project / "agentrunner.toml"
    toml.write_text(toml.read_text() + '\n[greeter]\nname = "Acme"\n')
    mock.queue(Reply(text="ok"))
    runner = await open_runner(project)
    try:
        await runner.run_agent("ceo", "t1", "hi")
        assert dict(runner.config.extensions["greeter"]) == {"name": "Acme", "loud": False}
        assert "greeter" not in runner.config.unknown
    finally:
        await runner.close()
    assert "## Greeting\nGreet Acme." in mock.requests[-1].body["messages"][0]["content"]


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_channel_runs_served_by_a_worker_and_stdio_have_them_too(
    project: Path, agent: Agent, mock: MockProvider
) -> None:
    agent("ceo")
    (project / "office_ext.py").write_text(EXTENSION.replace("XTBL", "office_audit"))
    configure(project, ["office_ext"])
    toml = project / "agentrunner.toml"
    toml.write_text(toml.read_text() + '\n[channels.general]\nmembers = ["ceo", "you"]\n')
    # a post is served by a worker (in this process, as none is running)
    mock.queue(Reply(text="Posted reply."))
    done = cli(project, "post", "general", "hello team")
    assert done.returncode == 0, done.stderr
    assert "## Office facts\nThe office cat" in mock.requests[0].body["messages"][0]["content"]
    assert "agent.message" in (project / "events.log").read_text()
    # and over stdio
    (project / "events.log").unlink()
    mock.queue(Reply(text="Over stdio."))
    request = {"id": 1, "method": "run_agent", "params": {"agent": "ceo", "message": "hi"}}
    stdio = subprocess.run(
        [sys.executable, "-m", "agentrunner", "stdio"],
        cwd=project,
        env=os.environ.copy(),
        input=json.dumps(request) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert stdio.returncode == 0, stdio.stderr
    answer = [json.loads(line) for line in stdio.stdout.splitlines()][-1]
    assert answer["result"]["text"] == "Over stdio.", stdio.stdout
    assert "## Office facts" in mock.requests[-1].body["messages"][0]["content"]
    assert "agent.message" in (project / "events.log").read_text()
