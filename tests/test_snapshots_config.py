"""A snapshot that differs fails a plain ``pytest`` run and is left as written, whether the run
has a terminal or not and in CI: only ``--inline-snapshot=fix`` (or ``create``) writes one."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import tomli_w

ROOT = Path(__file__).resolve().parents[1]
WRONG = """\
from inline_snapshot import snapshot


def test_sum():
    assert 1 + 1 == snapshot(3)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with agentrunner's inline-snapshot settings and one wrong snapshot."""
    ours = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["inline-snapshot"]
    (tmp_path / "pyproject.toml").write_text(tomli_w.dumps({"tool": {"inline-snapshot": ours}}))
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_sum.py").write_text(WRONG)
    return tmp_path


def environment(*, ci: bool) -> dict[str, str]:
    ci_names = ("CI", "GITHUB_ACTIONS", "BUILD_ID", "BUILD_NUMBER", "CONTINUOUS_INTEGRATION")
    # PYTEST_XDIST_*: under xdist this test's worker's, which would make the pytest it starts
    # look like a worker to inline-snapshot (which then never writes a snapshot).
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ci_names and not k.startswith("PYTEST_XDIST")
    }
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # inline-snapshot's alone, named on the line
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if ci:
        env["CI"] = "true"
    return env


def pytest_in(project: Path, *options: str, ci: bool = False, terminal: bool = False) -> int:
    plugins = ["-p", "no:cacheprovider", "-p", "inline_snapshot.pytest_plugin"]
    command = [sys.executable, "-m", "pytest", *plugins, *options, "tests"]
    env = environment(ci=ci)
    if not terminal:
        done = subprocess.run(command, cwd=project, env=env, capture_output=True, timeout=300)
        return done.returncode
    # A terminal is where inline-snapshot would otherwise offer to review and fix: give the run
    # one, and read it, so it never waits on a full terminal buffer.
    controller, child = pty.openpty()
    run = subprocess.Popen(command, cwd=project, env=env, stdin=child, stdout=child, stderr=child)
    os.close(child)
    try:
        return _drained(run, controller)
    finally:
        if run.poll() is None:
            run.kill()
        os.close(controller)


def _drained(run: subprocess.Popen[bytes], controller: int) -> int:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if select.select([controller], [], [], 1.0)[0]:
            try:
                if not os.read(controller, 65536):
                    break
            except OSError:  # EIO: the run closed its side of the terminal
                break
        elif run.poll() is not None:
            break
    else:
        pytest.fail("the run in a terminal did not end: it is waiting for an answer there")
    return run.wait()


def test_a_wrong_snapshot_fails_and_stays_as_written(project: Path) -> None:
    test_file = project / "tests" / "test_sum.py"
    assert pytest_in(project) != 0
    assert pytest_in(project, ci=True) != 0
    assert pytest_in(project, terminal=True) != 0
    assert test_file.read_text() == WRONG
    pytest_in(project, "--inline-snapshot=fix")  # the control: asked to, it does rewrite it
    assert "snapshot(2)" in test_file.read_text()
    assert pytest_in(project) == 0
