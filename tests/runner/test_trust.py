"""Trust cannot be raised from inside: the runtime's own files are outside every file scope below
``full``, however a path is spelled, and a delegated run never has more trust than its caller.
Through the real runner path, against the mock provider, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentRunner
from agentrunner.agents.spec import AgentSpec, Trust
from agentrunner.agents.templating import Template
from agentrunner.config import Config, find_config_file, load_config
from agentrunner.engine import ToolResult, ToolRetry
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.run.capabilities.scope import FileScope, RuntimeFiles
from agentrunner.run.extensions import load_extensions
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent

SECRET = "RUNTIME-SECRET-7f3a"
MCP_SERVER = Path(__file__).with_name(
    "mcp_server.py"
)  # in every protected file, so a leak is visible wherever it lands


@pytest.fixture
def runtime_files(project: Path) -> Path:
    """The runtime's own files, each holding SECRET, plus a few ways to reach them from inside
    the project: a symlink to the agents directory and hard links to protected files."""
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write(f"# {SECRET}\n")
    state = project / ".agentrunner"
    (state / "cache").mkdir(parents=True)
    (state / "secret.db").write_text(SECRET)
    (state / "cache" / "entry.json").write_text(SECRET)
    (state / "workspaces" / "other").mkdir(parents=True)
    (state / "workspaces" / "other" / "private.txt").write_text(SECRET)
    (project / "personas").mkdir()
    (project / "personas" / "boss.md").write_text(SECRET)
    (project / "notes.txt").write_text("ordinary project notes")
    (project / "lnk").symlink_to(project / "agents")
    (project / "toml-link").symlink_to(project / "agentrunner.toml")
    return project


def _hard_links(project: Path, where: Path) -> None:
    """Hard links to protected files, placed inside an agent's scope (as another process, or a
    ``full`` agent, might): same inode, so no path comparison can catch them."""
    where.mkdir(parents=True, exist_ok=True)
    os.link(project / "agents" / "filer.md", where / "hard-agent.md")
    os.link(project / ".agentrunner" / "secret.db", where / "hard.db")


def _leaked(mock: MockProvider, runner_pages: list[Any]) -> bool:
    bodies = json.dumps([r.body for r in mock.requests])
    return SECRET in bodies or any(SECRET in str(page) for page in runner_pages)


async def _call(
    runner: AgentRunner, mock: MockProvider, tool: str, args: dict[str, Any]
) -> tuple[AgentRunnerError | None, str | None]:
    """Run ``filer`` once making one tool call: the run's error (if it failed) and the tool's
    result as the thread kept it."""
    mock.queue(Reply(tool_calls=[(tool, args)]), Reply(text="done"))
    error = None
    try:
        await runner.run_agent("filer", "t", "go")
    except AgentRunnerError as exc:
        error = exc
    results = [
        m for _, m, _, _ in await runner.store.messages.page("t") if isinstance(m, ToolResult)
    ]
    return error, results[-1].content if results else None


PROTECTED_READS = [
    "agentrunner.toml",
    "./agentrunner.toml",
    "agents/../agentrunner.toml",
    "AgentRunner.TOML",  # case: the same file on a case-insensitive filesystem
    "toml-link",
    "agents/filer.md",
    "./agents//filer.md",
    "Agents/filer.md",
    "lnk/filer.md",
    "notes/../agents/filer.md",
    ".agentrunner/secret.db",
    ".AgentRunner/secret.db",
    "./.agentrunner/cache/entry.json",
    ".agentrunner/workspaces/other/private.txt",
    "personas/boss.md",
    "PERSONAS/boss.md",
    "hard-agent.md",
    "hard.db",
]


@pytest.mark.parametrize("path", PROTECTED_READS)
async def test_a_workspace_agent_cannot_read_the_runtime_files(
    agent: Agent, open_runner: Any, mock: MockProvider, runtime_files: Path, path: str
) -> None:
    agent("filer", "capabilities: [files]\ntrust: workspace")
    _hard_links(runtime_files, runtime_files)
    runner: AgentRunner = await open_runner()
    error, result = await _call(runner, mock, "read_file", {"path": path})
    assert error is not None and error.code is ErrorCode.TOOL_DENIED, (error, result)
    assert "runtime" in error.message and path in error.message
    assert not _leaked(mock, [await runner.store.messages.page("t")])


async def test_a_workspace_agent_still_reads_its_project(
    agent: Agent, open_runner: Any, mock: MockProvider, runtime_files: Path
) -> None:
    agent("filer", "capabilities: [files]\ntrust: workspace")
    runner: AgentRunner = await open_runner()
    for path in ("notes.txt", "./notes.txt", "lnk/../notes.txt"):
        error, result = await _call(runner, mock, "read_file", {"path": path})
        assert error is None and result == "ordinary project notes"
    (runtime_files / ".agentrunner" / "workspaces" / "filer").mkdir(parents=True)
    (runtime_files / ".agentrunner" / "workspaces" / "filer" / "mine.txt").write_text("its own")
    error, result = await _call(
        runner, mock, "read_file", {"path": ".agentrunner/workspaces/filer/mine.txt"}
    )
    assert error is None and result == "its own"  # its own workspace stays its own


@pytest.mark.parametrize(
    ("path", "protected"),
    [
        ("agents/filer.md", "agents/filer.md"),
        ("Agents/filer.md", "agents/filer.md"),
        ("lnk/filer.md", "agents/filer.md"),
        ("hard-agent.md", "agents/filer.md"),
        ("agentrunner.toml", "agentrunner.toml"),
        ("./AGENTRUNNER.toml", "agentrunner.toml"),
        ("toml-link", "agentrunner.toml"),
        ("hard.db", ".agentrunner/secret.db"),
        (".agentrunner/secret.db", ".agentrunner/secret.db"),
        ("agents/new.md", None),
        ("personas/new.md", None),
        (".agentrunner/cache/new.json", None),
    ],
)
async def test_a_workspace_agent_cannot_write_the_runtime_files(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    runtime_files: Path,
    path: str,
    protected: str | None,
) -> None:
    """The attack of issue 23: an agent rewriting its own file with ``trust: full`` (or the
    config's provider ``base_url``) to have more on its next run."""
    agent("filer", "capabilities: [files]\ntrust: workspace")
    _hard_links(runtime_files, runtime_files)
    before = {p: p.read_bytes() for p in runtime_files.rglob("*") if p.is_file()}
    runner: AgentRunner = await open_runner()
    error, _ = await _call(
        runner, mock, "write_file", {"path": path, "content": "---\ntrust: full\n---\nowned"}
    )
    assert error is not None and error.code is ErrorCode.TOOL_DENIED
    after = {p: p.read_bytes() for p in runtime_files.rglob("*") if p.is_file()}
    assert after == before  # nothing written, nothing created
    if protected is not None:
        assert b"owned" not in (runtime_files / protected).read_bytes()
    reloaded: AgentRunner = await open_runner()
    assert reloaded.agents.get("filer").trust == "workspace"


async def test_the_database_is_refused_wherever_it_is(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, store_url: str
) -> None:
    """The SQLite database the project uses (here outside the project, named by
    AGENTRUNNER_DATABASE_URL) is the runtime's own: a hard link to it inside the scope is
    refused, and so is every thread it holds."""
    if not store_url.startswith("sqlite:///"):
        pytest.skip("a PostgreSQL database is no file")
    agent("filer", "capabilities: [files]\ntrust: workspace")
    runner: AgentRunner = await open_runner()
    mock.queue(Reply(text="noted"))
    await runner.run_agent("filer", "private", f"a private thread: {SECRET}")
    os.link(store_url.removeprefix("sqlite:///"), project / "threads.db")
    before = len(mock.requests)
    error, result = await _call(runner, mock, "read_file", {"path": "threads.db"})
    assert error is not None and error.code is ErrorCode.TOOL_DENIED, result
    assert SECRET not in json.dumps([r.body for r in mock.requests[before:]])


@pytest.mark.parametrize("path", ["agents", "./Agents", "lnk", ".agentrunner", "personas"])
async def test_a_workspace_agent_cannot_list_the_runtime_files(
    agent: Agent, open_runner: Any, mock: MockProvider, runtime_files: Path, path: str
) -> None:
    agent("filer", "capabilities: [files]\ntrust: workspace")
    runner: AgentRunner = await open_runner()
    error, result = await _call(runner, mock, "list_files", {"path": path})
    assert error is not None and error.code is ErrorCode.TOOL_DENIED, result
    assert "filer.md" not in json.dumps([r.body for r in mock.requests])


async def test_a_listing_leaves_the_runtime_files_out(
    agent: Agent, open_runner: Any, mock: MockProvider, runtime_files: Path
) -> None:
    agent("filer", "capabilities: [files]\ntrust: workspace")
    _hard_links(runtime_files, runtime_files / "sub")
    (runtime_files / "sub" / "plain.txt").write_text("x")
    runner: AgentRunner = await open_runner()
    error, result = await _call(runner, mock, "list_files", {"path": "."})
    assert error is None and result is not None
    listed = json.loads(result)
    assert "notes.txt" in listed and "sub/" in listed
    for hidden in ("agents/", "agentrunner.toml", ".agentrunner/", "personas/", "lnk/"):
        assert hidden not in listed and hidden.rstrip("/") not in listed
    error, result = await _call(runner, mock, "list_files", {"path": "sub"})
    assert error is None and json.loads(result or "") == ["plain.txt"]
    (runtime_files / "sub" / "envlink").symlink_to("/proc/self/environ")
    (runtime_files / "sub" / "outside").symlink_to(runtime_files.parent)
    error, result = await _call(runner, mock, "list_files", {"path": "sub"})
    assert error is None and json.loads(result or "") == ["plain.txt"]  # links out: not shown


@pytest.mark.parametrize(
    "path",
    [
        "/proc/self/environ",
        "//proc/self/environ",
        "../../../../../../../../../../proc/self/environ",
        "~/../../../../../../../proc/self/environ",
        "~nosuchuser4e1/../../../../../../proc/self/environ",
        "proc/environ",  # a symlink inside the project to /proc/self
        "agents/../../../../../../../../../proc/self/environ",
    ],
)
async def test_no_spelling_reaches_the_environment(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, path: str
) -> None:
    (project / "proc").symlink_to("/proc/self")
    agent("filer", "capabilities: [files]\ntrust: workspace")
    runner: AgentRunner = await open_runner()
    error, result = await _call(runner, mock, "read_file", {"path": path})
    assert error is not None and error.code is ErrorCode.TOOL_DENIED, result
    assert "sk-mock-key" not in json.dumps([r.body for r in mock.requests])


@pytest.mark.parametrize("trust", ["sandboxed", "workspace", "full"])
def test_a_path_with_a_nul_is_an_error_the_model_can_act_on(tmp_path: Path, trust: Trust) -> None:
    """(Not through a run: PostgreSQL cannot store the NUL of such a tool call, issue 23 item
    10's.)"""
    config = Config(root=tmp_path, state_dir=tmp_path / ".agentrunner")
    scope = FileScope("filer", trust, tmp_path, RuntimeFiles.of(config))
    with pytest.raises(ToolRetry, match="not a valid path"):
        scope.resolve("notes\x00.txt")


@pytest.mark.parametrize("trust", ["workspace", "full"])
async def test_a_path_that_cannot_be_resolved_is_an_error_the_model_can_act_on(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, trust: str
) -> None:
    (project / "loop-a").symlink_to("loop-b")
    (project / "loop-b").symlink_to("loop-a")
    agent("filer", f"capabilities: [files]\ntrust: {trust}")
    runner: AgentRunner = await open_runner()
    for path in ("loop-a", "loop-b/x"):
        error, result = await _call(runner, mock, "read_file", {"path": path})
        assert error is None and result is not None and "cannot" in result and path in result
    error, result = await _call(runner, mock, "list_files", {"path": "."})
    assert error is None and result is not None
    shown = {"loop-a", "loop-b"} & set(json.loads(result))
    assert shown == ({"loop-a", "loop-b"} if trust == "full" else set())  # nothing to open


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("notes.txt", True),
        ("./sub/../notes.txt", True),
        ("../../secret.txt", False),
        ("/etc/hostname", False),
        ("link/secret.txt", False),
        ("hard-agent.md", False),  # a hard link to an agent file inside its own workspace
        ("hard.db", False),
        ("../filer/notes.txt", True),  # its own workspace, spelled the long way
        ("../other/private.txt", False),
        ("../../agentrunner.db", False),
    ],
)
async def test_a_sandboxed_agent_stays_in_its_workspace(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    runtime_files: Path,
    path: str,
    allowed: bool,
) -> None:
    (runtime_files.parent / "secret.txt").write_text(SECRET)
    workspace = runtime_files / ".agentrunner" / "workspaces" / "filer"
    (workspace / "sub").mkdir(parents=True)
    (workspace / "notes.txt").write_text("my notes")
    (workspace / "link").symlink_to(runtime_files.parent)
    agent("filer", "capabilities: [files]\ntrust: sandboxed")
    _hard_links(runtime_files, workspace)
    runner: AgentRunner = await open_runner()
    error, result = await _call(runner, mock, "read_file", {"path": path})
    if allowed:
        assert error is None and result == "my notes"
        return
    assert error is not None and error.code is ErrorCode.TOOL_DENIED, result
    assert not _leaked(mock, [await runner.store.messages.page("t")])


async def test_a_full_agent_reaches_everything(
    agent: Agent, open_runner: Any, mock: MockProvider, runtime_files: Path
) -> None:
    agent("filer", "capabilities: [files]\ntrust: full")
    runner: AgentRunner = await open_runner()
    for path in ("agentrunner.toml", str(runtime_files / ".agentrunner" / "secret.db")):
        error, result = await _call(runner, mock, "read_file", {"path": path})
        assert error is None and result is not None and SECRET in result


# -- delegation narrows trust -----------------------------------------------------------------


def test_narrow_trust_is_the_lower_of_the_two() -> None:
    levels: tuple[Trust, ...] = ("sandboxed", "workspace", "full")
    for own in levels:
        spec = AgentSpec(id="a", name="a", system=Template.parse("x"), trust=own)
        assert spec.narrow_trust(None) == own
        for caller in levels:
            expected = levels[min(levels.index(own), levels.index(caller))]
            assert spec.narrow_trust(caller) == expected


@pytest.mark.parametrize(
    ("boss", "worker", "seen"),
    [
        ("sandboxed", "workspace", "SANDBOX PLAN"),  # issue 23: the child had workspace access
        ("workspace", "workspace", "PROJECT PLAN"),
        ("full", "workspace", "PROJECT PLAN"),  # never raised above its own either
        ("workspace", "sandboxed", "SANDBOX PLAN"),
        ("full", "sandboxed", "SANDBOX PLAN"),
    ],
)
async def test_a_delegated_run_has_the_lower_trust(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    project: Path,
    boss: str,
    worker: str,
    seen: str,
) -> None:
    """The same relative path is the project's file at workspace trust and the worker's own
    workspace file when sandboxed: which one the worker's read_file returns shows its trust."""
    (project / "plan.txt").write_text("PROJECT PLAN")
    own = project / ".agentrunner" / "workspaces" / "worker"
    own.mkdir(parents=True)
    (own / "plan.txt").write_text("SANDBOX PLAN")
    agent("boss", f"capabilities: [agents, files]\ntrust: {boss}")
    agent("worker", f"capabilities: [files]\ntrust: {worker}")
    mock.queue(
        Reply(tool_calls=[("ask_agent", {"agent": "worker", "message": "read the plan"})]),
        Reply(tool_calls=[("read_file", {"path": "plan.txt"})]),
        Reply(text="the plan is read"),
        Reply(text="boss done"),
    )
    runner: AgentRunner = await open_runner()
    await runner.run_agent("boss", "t", "delegate")
    child_thread = await runner.store.messages.page("t.worker")
    [read] = [m for _, m, _, _ in child_thread if isinstance(m, ToolResult)]
    assert (read.content, read.is_error) == (seen, False)


async def test_a_narrowed_child_is_refused_what_its_caller_may_not_touch(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path
) -> None:
    (project / "plan.txt").write_text("PROJECT PLAN")
    agent("boss", "capabilities: [agents, files]\ntrust: sandboxed")
    agent("worker", "capabilities: [files]\ntrust: full")
    mock.queue(
        Reply(tool_calls=[("ask_agent", {"agent": "worker", "message": "read it"})]),
        Reply(tool_calls=[("read_file", {"path": str(project / "plan.txt")})]),
        Reply(text="boss done"),
    )
    runner: AgentRunner = await open_runner()
    result = await runner.run_agent("boss", "t", "delegate")
    assert result.text == "boss done"
    runs = {r.agent_id: r for r in await runner.store.runs.list(limit=10)}
    child = runs["worker"]
    assert (child.status, child.error_code) == ("failed", "tool_denied")
    assert "sandboxed trust, its caller's; its own is full" in (child.error_message or "")
    assert "PROJECT PLAN" not in json.dumps([r.body for r in mock.requests])
    # Asked directly, the same agent has its own (full) trust.
    mock.queue(
        Reply(tool_calls=[("read_file", {"path": str(project / "plan.txt")})]), Reply(text="ok")
    )
    await runner.run_agent("worker", "w", "read it")
    [read] = [
        m for _, m, _, _ in await runner.store.messages.page("w") if isinstance(m, ToolResult)
    ]
    assert read.content == "PROJECT PLAN"


async def test_a_lowered_trust_holds_in_a_runner_that_is_already_open(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path
) -> None:
    """A server or worker keeps its runner for hours: the file as it is now decides."""
    agent("keeper", "capabilities: [files]\ntrust: full")
    runner: AgentRunner = await open_runner()
    mock.queue(Reply(tool_calls=[("read_file", {"path": "agentrunner.toml"})]), Reply(text="ok"))
    await runner.run_agent("keeper", "t1", "read the config")
    agent("keeper", "capabilities: [files]\ntrust: workspace")
    mock.queue(Reply(tool_calls=[("read_file", {"path": "agentrunner.toml"})]), Reply(text="ok"))
    with pytest.raises(AgentRunnerError) as denied:
        await runner.run_agent("keeper", "t2", "read the config again")
    assert denied.value.code is ErrorCode.TOOL_DENIED and "workspace" in denied.value.message
    agent("newcomer")  # an agent added while it runs is served too
    assert (await runner.run_agent("newcomer", "t3", "hello")).text


@pytest.mark.parametrize(
    ("path", "denied"),
    [
        (".git/hooks/pre-commit", True),  # run by the person's next commit
        (".GIT/config", True),
        (".venv/lib/python3.11/site-packages/evil.pth", True),  # run at Python's start
        ("tools/server.py", True),  # an MCP server's code, run by the next run
        ("tools/notes.md", False),
        ("src/app.py", False),
    ],
)
async def test_code_the_runtime_or_the_person_runs_is_outside_a_workspace_scope(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, path: str, denied: bool
) -> None:
    """Writing code that runs with the person's rights would be more than workspace trust."""
    (project / ".git" / "hooks").mkdir(parents=True)
    (project / ".venv" / "lib").mkdir(parents=True)
    (project / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (project / "tools").mkdir()
    (project / "tools" / "server.py").write_text(MCP_SERVER.read_text())  # a real one
    (project / "src").mkdir()
    agent(
        "filer",
        "capabilities: [files]\ntrust: workspace\n"
        f"mcp_servers:\n  local: {{command: {sys.executable}, args: [tools/server.py]}}",
    )
    runner: AgentRunner = await open_runner()
    error, _ = await _call(runner, mock, "write_file", {"path": path, "content": "owned"})
    if denied:
        assert error is not None and error.code is ErrorCode.TOOL_DENIED
        assert not (project / path).exists() or b"owned" not in (project / path).read_bytes()
    else:
        assert error is None and (project / path).read_text() == "owned"


# -- code the runtime imports, and configuration it reads from a sub-folder (issue 39) -------

EXTENSION = """
def register(extensions):
    extensions.context_provider("Office facts", lambda ctx: "The office cat is called Miso.")
"""
OWNED = "import pathlib\npathlib.Path(__file__).with_name('owned.txt').write_text('ran')\n"


def _extensions(project: Path) -> tuple[str, str]:
    """A module and a package of the project, listed in ``[extensions] modules``; named anew
    for each test, since a process imports a module of a name once."""
    tag = uuid.uuid4().hex[:8]
    ext, pkg = f"office_ext_{tag}", f"office_pkg_{tag}"
    (project / f"{ext}.py").write_text(EXTENSION)
    (project / pkg).mkdir()
    (project / pkg / "__init__.py").write_text("")
    (project / pkg / "hooks.py").write_text(EXTENSION.replace("Office facts", "Office hours"))
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write(f'\n[extensions]\nmodules = ["{ext}", "{pkg}.hooks:register"]\n')
    return ext, pkg


def _spelled(path: str, ext: str, pkg: str, root: Path) -> str:
    return (
        path.replace("{root}", str(root))
        .replace("{home}", os.path.relpath(root, Path.home()))
        .replace("{ext}", ext)
        .replace("{EXT}", ext.upper())
        .replace("{pkg}", pkg)
        .replace("{PKG}", pkg.upper())
    )


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    "path",
    [
        "{ext}.py",
        "./{ext}.py",
        "agents/../{ext}.py",
        "{EXT}.py",  # case: the same file on a case-insensitive filesystem
        "{ext}.PY",
        "{root}/{ext}.py",  # absolute
        "~/{home}/{ext}.py",  # from the home directory
        "here/{ext}.py",  # a symlink to the project directory
        "hard-ext.py",  # a hard link to the module
        "{ext}" + importlib.machinery.EXTENSION_SUFFIXES[0],  # found before the source
        "{ext}.pyc",
        "__pycache__/{ext}.cpython-311.pyc",  # an unchecked .pyc runs instead of the source
        "{pkg}/__init__.py",
        "{pkg}/hooks.py",
        "{pkg}/new_module.py",  # created inside the package
        "./{PKG}/Hooks.py",
        "here/{pkg}/hooks.py",
        "{pkg}/__pycache__/hooks.cpython-311.pyc",
        "src/__pycache__/app.cpython-311.pyc",  # any bytecode cache: it runs for its source
        "sub/agentrunner.toml",  # a command run from sub/ reads it first
        "./sub/AgentRunner.TOML",
        "sub/../sub/agentrunner.toml",
        "{root}/sub/agentrunner.toml",
        "sublink/agentrunner.toml",  # a symlink to sub/
        "new/deeper/agentrunner.toml",  # created, folders and all
    ],
)
async def test_a_workspace_agent_cannot_write_code_the_runtime_imports_or_config_it_reads(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, path: str
) -> None:
    """The attack of issue 39: a workspace agent wrote the module `[extensions] modules` names
    (or a provider's base_url into a sub-folder's agentrunner.toml), and the next command ran
    its code with the person's rights (or sent the key where it said)."""
    ext, pkg = _extensions(project)
    path = _spelled(path, ext, pkg, project)
    (project / "here").symlink_to(project)
    (project / "sub").mkdir()
    (project / "sublink").symlink_to(project / "sub")
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("print('app')\n")
    os.link(project / f"{ext}.py", project / "hard-ext.py")
    agent("filer", "capabilities: [files]\ntrust: workspace")
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    runner: AgentRunner = await open_runner()
    error, _ = await _call(runner, mock, "write_file", {"path": path, "content": OWNED})
    assert error is not None and error.code is ErrorCode.TOOL_DENIED, path
    after = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    assert after == before  # nothing written, nothing created
    found = await asyncio.to_thread(find_config_file, project / "sub")
    assert found == project / "agentrunner.toml"  # the project's own, and no other


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    "path",
    [
        "notes/{ext}.py",  # the same name elsewhere is not what the runtime imports
        "{ext}.md",
        "helper.py",  # a project module no list names: the runtime never imports it
        "src/app.py",
        "sub/agentrunner.md",
        "sub/settings.toml",
    ],
)
async def test_a_workspace_agent_still_writes_the_rest_of_the_project(
    agent: Agent, open_runner: Any, mock: MockProvider, project: Path, path: str
) -> None:
    ext, pkg = _extensions(project)
    path = _spelled(path, ext, pkg, project)
    agent("filer", "capabilities: [files]\ntrust: workspace")
    runner: AgentRunner = await open_runner()
    error, _ = await _call(runner, mock, "write_file", {"path": path, "content": "# notes\n"})
    assert error is None and (project / path).read_text() == "# notes\n"


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_the_runtime_imports_only_the_listed_modules_from_the_project(project: Path) -> None:
    """The project directory is not put on the import path: a module there that no list names
    (one an agent could write) is never what an import of its name finds."""
    ext, pkg = _extensions(project)
    helper = f"helper_{uuid.uuid4().hex[:8]}"
    (project / f"{helper}.py").write_text(OWNED)
    path_before = list(sys.path)
    loaded = load_extensions(load_config(project), entry_points=False)
    listed = [f"extension module '{ext}'", f"extension module '{pkg}.hooks:register'"]
    assert loaded.loaded == listed
    assert sys.path == path_before
    assert importlib.util.find_spec(helper) is None
    assert not (project / "owned.txt").exists()
    assert Path(sys.modules[ext].__file__ or "") == project / f"{ext}.py"


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_command_from_a_sub_folder_runs_no_code_an_agent_wrote(
    agent: Agent, mock: MockProvider, project: Path
) -> None:
    """The whole attack through the CLI: the agent's write is refused, and the next command
    imports the module as the person wrote it."""
    ext, _ = _extensions(project)
    agent("filer", "capabilities: [files]\ntrust: workspace")
    mock.queue(Reply(tool_calls=[("write_file", {"path": f"{ext}.py", "content": OWNED})]))
    command = [sys.executable, "-P", "-m", "agentrunner", "run", "filer"]
    run = {"capture_output": True, "text": True, "timeout": 120}
    first = subprocess.run([*command, "go"], cwd=project, **run)  # type: ignore[call-overload]
    assert first.returncode != 0 and "tool_denied" in first.stderr
    (project / "sub").mkdir()
    second = subprocess.run([*command, "hi"], cwd=project / "sub", **run)  # type: ignore[call-overload]
    assert second.returncode == 0, second.stderr
    assert not (project / "owned.txt").exists() and not (project / "sub" / "owned.txt").exists()
    system = mock.requests[-1].body["messages"][0]["content"]
    assert "## Office facts\nThe office cat is called Miso." in system


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_background_worker_imports_nothing_from_the_project(project: Path) -> None:
    """``brief --background`` starts ``python -m agentrunner serve-briefs`` in the project
    directory; Python would put that directory first on its import path, so a file an agent
    wrote there (``agentrunner.py`` itself, or any module the worker imports) would run."""
    from agentrunner.workspace.company import jobs

    (project / "agentrunner.py").write_text(OWNED)
    pid = jobs._spawn(load_config(project))
    [process] = [p for p in jobs._spawned if p.pid == pid]
    assert process.wait(timeout=120) == 0
    assert not (project / "owned.txt").exists()
