"""A company project against the mock provider, driven through the CLI in subprocesses (as a
person would: background jobs outlive the command that queued them)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentrunner.testing import MockProviderServer
from tests.hangs import run_or_dump

CONFIG = """\
[project]
agents_dir = "agents"

[defaults]
model = "mockai:gpt-mock"
title_model = "test"

[providers.mockai]
kind = "openai"
base_url = "{openai}"
api_key_env = "MOCK_KEY"

[prices."mockai:gpt-mock"]
input_per_mtok = 1.0
output_per_mtok = 2.0

[prices."mockai:journal-mock"]
input_per_mtok = 0.1
output_per_mtok = 0.2

[journal]
model = "mockai:journal-mock"
{extra}
"""

AGENTS = {
    "ceo": "name: Chief Executive\ncapabilities: [agents]\n---\nYou are the CEO. You delegate.",
    "cto": "name: Chief Technology Officer\nreports_to: ceo\ncapabilities: [agents]\n---\n"
    "You are the CTO.",
    "cmo": "name: Chief Marketing Officer\nreports_to: ceo\n---\nYou are the CMO.",
    "engineer": "name: Engineer\nreports_to: cto\n---\nYou write code.",
}


@dataclass
class Company:
    root: Path
    database_url: str | None = None  # None: the project's SQLite file

    def run(self, *args: str, stdin: str | None = None, timeout: float = 90) -> Done:
        env = {**os.environ, "MOCK_KEY": "sk-mock-key", "COLUMNS": "200"}
        if self.database_url:
            env["AGENTRUNNER_DATABASE_URL"] = self.database_url
        command = [sys.executable, "-m", "agentrunner", *args]
        done = run_or_dump(command, cwd=self.root, env=env, stdin=stdin, timeout=timeout)
        return Done(done.returncode, done.stdout, done.stderr)

    def ok(self, *args: str, stdin: str | None = None) -> Done:
        done = self.run(*args, stdin=stdin)
        assert done.code == 0, f"{args}: {done.err}\n{done.out}"
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json").out)

    def job(self, job_id: str) -> dict[str, Any]:
        [job] = [j for j in self.json("jobs") if j["id"] == job_id]
        return job

    def wait_for(self, what: str, check: Callable[[], bool], within_s: float = 30) -> None:
        """Poll until ``check`` holds (a bound on waiting, not a timed assertion)."""
        deadline = time.monotonic() + within_s
        while not check():
            if time.monotonic() > deadline:
                pytest.fail(f"still waiting for {what} after {within_s} s")
            time.sleep(0.2)

    def status_of(self, run_id: str) -> str | None:
        """A run's status read from the SQLite file: looking, without healing anything."""
        with contextlib.closing(
            sqlite3.connect(self.root / ".agentrunner" / "agentrunner.db")
        ) as conn:
            row = conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
        return row[0] if row else None

    def worker_pids(self) -> list[int]:
        if self.database_url:
            import psycopg

            with psycopg.connect(self.database_url) as pg:
                return [int(pid) for (pid,) in pg.execute("SELECT pid FROM workers")]
        db = self.root / ".agentrunner" / "agentrunner.db"
        if not db.exists():
            return []
        with contextlib.closing(sqlite3.connect(db)) as conn:
            return [int(pid) for (pid,) in conn.execute("SELECT pid FROM workers")]


@dataclass
class Done:
    code: int
    out: str
    err: str


@pytest.fixture
def company(tmp_path: Path, mock_server: MockProviderServer) -> Iterator[Company]:
    yield from _company(tmp_path, mock_server, None)


@pytest.fixture
def company_on_postgres(
    tmp_path: Path, mock_server: MockProviderServer, pg_database: str
) -> Iterator[Company]:
    """The company with its store on the test PostgreSQL, emptied first."""
    import psycopg

    from tests.conftest import _TABLES

    with psycopg.connect(pg_database, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass('company_sessions') IS NOT NULL").fetchone()
        if exists and exists[0]:
            conn.execute(f"TRUNCATE {_TABLES} RESTART IDENTITY CASCADE")
    yield from _company(tmp_path, mock_server, pg_database)


def _company(
    tmp_path: Path, mock_server: MockProviderServer, database_url: str | None
) -> Iterator[Company]:
    root = tmp_path / "acme"
    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text(CONFIG.format(openai=mock_server.openai_url, extra=""))
    for agent_id, text in AGENTS.items():
        (root / "agents" / f"{agent_id}.md").write_text(f"---\n{text}\n")
    made = Company(root, database_url)
    yield made
    for pid in made.worker_pids():  # a detached worker a test left serving
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
