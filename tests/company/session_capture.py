"""The terminal session in docs/company.md: the company walk-through run in a fresh
``init --template company`` project on the offline ``test`` model, and captured as a person's
terminal shows it (each command's output and errors, in order).

``python tests/company/session_capture.py`` writes it into the doc; the docs test runs it again
and compares, with what differs from run to run (ids, times, ages, process ids) masked.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "company.md"
BEGIN = "<!-- docs-test: cli-output: company-session -->\n```text\n"
END = "```\n"

COMMANDS = [
    "init acme --template company",
    "start",
    'brief "Ask the CTO for a plan to ship the beta"',
    'brief --background "Ask the CMO to draft the launch post"',
    "logs {job} --follow",
    "jobs",
    "journal --limit 1",
    "cost",
    "status",
    "stop",
]


def capture(workdir: Path) -> str:
    """Run the walk-through in ``workdir``; the terminal's text, each command after ``$``."""
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}
    env.pop("AGENTRUNNER_DATABASE_URL", None)  # the project's own SQLite file, as a user has
    lines: list[str] = []
    cwd, job = workdir, ""
    for command in COMMANDS:
        command = command.replace("{job}", job)
        lines.append(f"$ agentrunner {command}")
        done = subprocess.run(
            [sys.executable, "-m", "agentrunner", *_words(command)],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # one stream, in the order a terminal shows them
            text=True,
            timeout=120,
            check=True,
        )
        lines += done.stdout.rstrip("\n").splitlines()
        if command.startswith("init"):
            cwd = workdir / "acme"
            lines.append("$ cd acme")
        if "--background" in command:
            job = re.search(r"^job (run_\w+)$", done.stdout, re.M).group(1)  # type: ignore[union-attr]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _words(command: str) -> list[str]:
    import shlex

    return shlex.split(command)


_MASKS = [
    (re.compile(r"\b(run|ses)_[0-9a-z]+"), r"\1_…"),
    (re.compile(r"\b(ceo|cto|cmo|cfo|engineer|analyst)-[0-9a-f]{20,}(\.[a-z.]+)?"), r"\1-…"),
    (re.compile(r"\d{4}-\d\d-\d\d( \d\d:\d\d)?"), "DATE"),
    (re.compile(r"pid \d+"), "pid N"),
    (re.compile(r"\b\d+s\b"), "Ns"),
    (re.compile(r"[ ─]+$", re.M), ""),  # columns sized to what they hold
    (re.compile(r" {2,}"), " "),
    (re.compile(r"─+"), "─"),
]


def masked(text: str) -> str:
    """What must not change from one capture to the next."""
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    return text


def write_doc() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        session = capture(Path(scratch))
    text = DOC.read_text()
    start = text.index(BEGIN) + len(BEGIN)
    end = text.index(END, start)
    DOC.write_text(text[:start] + session + text[end:])


if __name__ == "__main__":
    write_doc()
