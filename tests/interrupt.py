"""Ctrl-C, as a person presses it: ``agentrunner ARGS`` started in a project, interrupted once
the mock provider has been asked ``requests`` times (and half a second more, so what it streams
is under way)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from agentrunner.testing import MockProvider

__all__ = ["ctrl_c"]


def ctrl_c(project: Path, mock: MockProvider, *args: str, requests: int) -> tuple[int, str, str]:
    """The exit status, stdout and stderr of ``agentrunner ARGS`` sent SIGINT mid-run."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentrunner", *args],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(mock.requests) < requests:
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    return proc.returncode, out, err
