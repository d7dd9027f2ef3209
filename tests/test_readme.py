"""Every Python example in the README runs, offline, in a fresh project."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentrunner.scaffold import create_project

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_python_block_runs(code: str, tmp_path: Path) -> None:
    create_project(tmp_path, "company")
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr


def test_engine_example_shows_the_tool_turn(tmp_path: Path) -> None:
    [code] = [b for b in BLOCKS if "Engine()" in b]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert "agent.tool_call {'call_id'" in out.stdout
    assert "[test model] I called get_weather." in out.stdout
    assert "end_turn" in out.stdout
