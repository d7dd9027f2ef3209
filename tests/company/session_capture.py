"""The terminal session in docs/company.md: the company walk-through run in a fresh
``init --template company`` project on the model ``init`` chooses (the bundled local model
where agentrunner[local] is installed, as in CI), and captured as a person's terminal shows it
(each command's output and errors, in order).

``python tests/company/session_capture.py`` writes it into the doc, with the numbers of the
lines the model wrote (its answers, journal entries and tool arguments, found in the project's
database) in a comment after it. The docs test runs it again and compares its shape: the lines
agentrunner prints, with what differs from run to run (ids, times, ages, process ids, token
counts) masked and each run of the model's lines as one «model» line — never the model's words.
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


def capture(workdir: Path) -> tuple[str, list[int]]:
    """Run the walk-through in ``workdir``: the terminal's text, each command after ``$``, and
    the numbers (from 1) of the lines that hold what the model wrote."""
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}
    env.pop("AGENTRUNNER_DATABASE_URL", None)  # the project's own SQLite file, as a user has
    lines: list[str] = []
    cwd, job = workdir, ""
    for command in COMMANDS:
        command = command.replace("{job}", job)
        if command.startswith("journal"):
            _journaled(workdir / "acme" / ".agentrunner" / "agentrunner.db", job)
        lines.append(f"$ agentrunner {command}")
        done = subprocess.run(
            [sys.executable, "-m", "agentrunner", *_words(command)],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # one stream, in the order a terminal shows them
            text=True,
            timeout=300,  # a real model on a loaded machine: a minute or two at worst
            check=True,
        )
        lines += done.stdout.rstrip("\n").splitlines()
        if command.startswith("init"):
            cwd = workdir / "acme"
            lines.append("$ cd acme")
        if "--background" in command:
            job = re.search(r"^job (run_\w+)$", done.stdout, re.M).group(1)  # type: ignore[union-attr]
    lines = [line.rstrip() for line in lines]
    written = _written(workdir / "acme" / ".agentrunner" / "agentrunner.db")
    ours = [n for n, line in enumerate(lines, 1) if any(piece in line for piece in written)]
    return "\n".join(lines) + "\n", ours


def _journaled(database: Path, job: str) -> None:
    """Wait for the background job's journal entry: its worker writes it after the job ends
    (``logs --follow`` returns then), with a real model a few seconds later."""
    import contextlib
    import sqlite3
    import time

    for _ in range(600):
        with contextlib.closing(sqlite3.connect(database)) as db:
            if db.execute("SELECT 1 FROM journal_entries WHERE run_id = ?", (job,)).fetchone():
                return
        time.sleep(0.2)
    raise AssertionError(f"no journal entry for {job} after 2 minutes")


def _written(database: Path) -> set[str]:
    """Every line of text the model wrote in the project: answers, tool arguments (as JSON
    text, as the CLI shows them) and journal entries; lines too short to tell apart left out."""
    import contextlib
    import json
    import sqlite3

    texts: list[str] = []
    with contextlib.closing(sqlite3.connect(database)) as db:
        for (body,) in db.execute("SELECT body FROM messages WHERE role = 'assistant'"):
            message = json.loads(body)
            texts.append(message.get("content") or "")
            for call in message.get("tool_calls") or ():
                texts.append(json.dumps(call.get("arguments"), ensure_ascii=False)[1:-1])
        texts += [summary for (summary,) in db.execute("SELECT summary FROM journal_entries")]
    return {line.strip() for text in texts for line in text.splitlines() if len(line.strip()) >= 8}


def _words(command: str) -> list[str]:
    import shlex

    return shlex.split(command)


_MASKS = [
    (re.compile(r"\b(run|ses)_[0-9a-z]+"), r"\1_…"),
    (re.compile(r"\b(ceo|cto|cmo|cfo|engineer|analyst)-[0-9a-f]{20,}(\.[a-z.]+)?"), r"\1-…"),
    (re.compile(r"\d{4}-\d\d-\d\d( \d\d:\d\d)?"), "DATE"),
    (re.compile(r"pid \d+"), "pid N"),
    (re.compile(r"\b\d+[smhd]\b"), "Ns"),  # an age: `31s`, or `2m` on a loaded machine
    (re.compile(r"[ ─]+$", re.M), ""),  # columns sized to what they hold
    (re.compile(r" {2,}"), " "),
    (re.compile(r"─+"), "─"),
]


MODEL_LINES = re.compile(r"<!-- the model's lines: ([\d ]*) -->\n")


def masked(text: str) -> str:
    """What must not change from one capture to the next."""
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    return text


def shape(text: str, model_lines: list[int]) -> str:
    """The session without the model's words: each run of its lines one «model» line, numbers
    (token counts, requests) masked, blank lines and a late title's warning (it depends on the
    machine's speed) left out."""
    kept: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line:  # between the model's paragraphs, as many as it wrote
            continue
        if number in model_lines:
            if not kept or kept[-1] != "«model»":
                kept.append("«model»")
        elif "post-run effect" not in line:
            kept.append(line)
    return re.sub(r"\d[\d,.]*", "N", masked("\n".join(kept)))


def documented() -> tuple[str, list[int]]:
    """The session in the doc, and its model's lines."""
    text = DOC.read_text()
    start = text.index(BEGIN) + len(BEGIN)
    end = text.index(END, start)
    found = MODEL_LINES.match(text, end + len(END))
    assert found, "docs/company.md: the session's model lines comment is missing"
    return text[start:end], [int(n) for n in found.group(1).split()]


def write_doc() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        session, model_lines = capture(Path(scratch))
    text = DOC.read_text()
    start = text.index(BEGIN) + len(BEGIN)
    end = text.index(END, start)
    after = end + len(END)
    found = MODEL_LINES.match(text, after)
    rest = text[found.end() :] if found else text[after:]
    numbers = " ".join(str(n) for n in model_lines)
    comment = f"<!-- the model's lines: {numbers} -->\n"
    DOC.write_text(text[:start] + session + END + comment + rest)


if __name__ == "__main__":
    write_doc()
