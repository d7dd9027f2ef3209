"""A command on a pseudo-terminal, driven as a person types: read until a text appears, type
a line, press Ctrl-C."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

# The child takes the terminal as its controlling one (as a login shell would), so that the
# terminal's Ctrl-C (\x03) reaches it as SIGINT; no Python runs between fork and exec.
_CONTROLLING = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.executable, [sys.executable, '-m', 'agentrunner', *sys.argv[1:]])"
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
DEADLINE_S = 60.0  # a hung child fails the test rather than the suite


class Terminal:
    """``agentrunner ARGS`` on a pseudo-terminal: read until a text appears, type a line."""

    def __init__(self, project: Path, *args: str, env: Mapping[str, str] | None = None) -> None:
        controller, child = pty.openpty()
        env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "LOGNAME": "ana", **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CONTROLLING, *args],
            cwd=project,
            env=env,
            stdin=child,
            stdout=child,
            stderr=child,
            start_new_session=True,
        )
        os.close(child)
        self.fd = controller
        self.text = ""
        self.read_to = 0  # what ``expect`` has matched so far

    def _read(self, wait: float) -> bool:
        if not select.select([self.fd], [], [], wait)[0]:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed its side
            return False
        self.text += _ANSI.sub("", data.decode(errors="replace")).replace("\r\n", "\n")
        return bool(data)

    def expect(self, text: str) -> str:
        """Read until ``text`` appears after what was matched before; what came until it."""
        deadline = time.monotonic() + DEADLINE_S
        while text not in self.text[self.read_to :]:
            if time.monotonic() > deadline or not self._read(0.2):
                pytest.fail(f"{text!r} did not appear; the terminal shows:\n{self.text}")
        end = self.text.index(text, self.read_to) + len(text)
        said, self.read_to = self.text[self.read_to : end], end
        return said

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def end(self) -> tuple[int, str]:
        """The exit status, and everything the terminal showed."""
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and self._read(0.2):
            if self.proc.poll() is not None and not select.select([self.fd], [], [], 0)[0]:
                break
        try:
            return self.proc.wait(timeout=DEADLINE_S), self.text
        finally:
            os.close(self.fd)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
