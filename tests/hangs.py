"""A CLI subprocess that outlives its timeout is made to print every thread's stack
(faulthandler, on SIGABRT) before the test fails, so that a hang seen once on a loaded CI
machine says where it waited."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

__all__ = ["run_or_dump"]


def run_or_dump(
    command: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    timeout: float,
) -> subprocess.CompletedProcess[str]:
    """``command`` run to its end, or failed with its stacks once ``timeout`` has passed."""
    with subprocess.Popen(
        list(command),
        cwd=cwd,
        env={**(os.environ if env is None else env), "PYTHONFAULTHANDLER": "1"},
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            stdout, stderr = process.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)
            stdout, stderr = process.communicate()
            lines = len(stdout.splitlines())
            pytest.fail(
                f"{' '.join(command[2:])} hung past {timeout:g} s ({lines} lines written); "
                f"its stacks:\n{stderr}"
            )
    return subprocess.CompletedProcess(list(command), process.returncode, stdout, stderr)
