"""Schedules as a person runs them: a fresh project, `agentrunner worker` firing an every-2-seconds
schedule into #general, `schedules` showing the fires, `pause`, `run-now`, `resume`; and the
mistakes a person makes (a bad cron expression, a misspelt name)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

SCHEDULE = """
[channels.general]
members = ["assistant", "you"]

[schedules.pulse]
agent = "assistant"
every = "2s"
message = "Pulse {{input.fire_time}}: say hello."
channel = "general"
overlap = "queue"
"""


def cli(project: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "agentrunner", *args],
        cwd=project,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
    )
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def shown(project: Path, name: str = "pulse", limit: int = 100) -> dict[str, Any]:
    done = cli(project, "schedules", "show", name, "--limit", str(limit), "--json")
    return json.loads(done.stdout)


def wait_for(predicate: Any, what: str, seconds: float = 60.0) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.25)
    raise AssertionError(f"gave up waiting for {what}")


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("AGENTRUNNER_DATABASE_URL", raising=False)
    cli(tmp_path, "init", "demo", "--model", "test")
    project = tmp_path / "demo"
    with (project / "agentrunner.toml").open("a") as config:
        config.write(SCHEDULE)
    return project


def test_a_worker_fires_a_schedule_at_its_pace_and_pause_and_run_now_work(fresh: Path) -> None:
    assert shown(fresh)["recent"] == []
    worker = subprocess.Popen(
        [sys.executable, "-m", "agentrunner", "worker"],
        cwd=fresh,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(
            lambda: sum(f["outcome"] == "completed" for f in shown(fresh)["recent"]) >= 3,
            "three fires answered",
        )
        fires = shown(fresh)["recent"]
        ticks = sorted(f["tick"] for f in fires)
        # every tick since the first decided once: 2 s apart, none left out, none twice
        assert [b - a for a, b in itertools.pairwise(ticks)] == [2.0] * (len(ticks) - 1)
        listed = cli(fresh, "schedules").stdout
        assert "pulse" in listed and "every 2 s" in listed and "#general" in listed
        assert "completed" in listed
        channel = cli(fresh, "channels", "show", "general", "--limit", "200").stdout
        posts = [line for line in channel.splitlines() if "schedule:pulse:" in line]
        assert len(posts) >= 3
        assert len({line.split("Pulse ")[1] for line in posts}) == len(posts)  # own fire time each

        cli(fresh, "schedules", "pause", "pulse")
        paused_at = time.time()
        assert json.loads(cli(fresh, "schedules", "--json").stdout)["schedules"][0]["state"] == (
            "paused"
        )
        time.sleep(5)  # two ticks or more pass while paused
        after_pause = [f for f in shown(fresh)["recent"] if f["tick"] > paused_at]
        assert after_pause == []

        before = len(shown(fresh)["recent"])
        now = cli(fresh, "schedules", "run-now", "pulse")
        assert "queued run" in now.stdout or "completed" in now.stdout
        fired = shown(fresh)["recent"]
        assert len(fired) == before + 1
        assert fired[0]["reason"] == "run now, by request"
        wait_for(lambda: shown(fresh)["recent"][0]["outcome"] == "completed", "run-now's answer")

        cli(fresh, "schedules", "resume", "pulse")
        resumed_at = time.time()
        wait_for(
            lambda: [f for f in shown(fresh)["recent"] if f["tick"] > resumed_at],
            "a fire after resuming",
        )
        status = json.loads(cli(fresh, "status", "--json").stdout)
        assert [s["name"] for s in status["schedules"]] == ["pulse"]
    finally:
        worker.send_signal(signal.SIGINT)
        _, errors = worker.communicate(timeout=60)
    assert worker.returncode == 0, errors
    assert "Traceback" not in errors


def test_mistakes_are_named_where_they_are(fresh: Path) -> None:
    config = fresh / "agentrunner.toml"
    text = config.read_text()
    config.write_text(text.replace('every = "2s"', 'cron = "0 25 * * *"'))
    bad = cli(fresh, "agents", "validate", check=False)
    line = config.read_text().splitlines().index('cron = "0 25 * * *"') + 1
    assert bad.returncode == 1
    assert f"agentrunner.toml:{line}: invalid_specification" in bad.stderr
    assert "Bad hour" in bad.stderr and "Five fields" in bad.stderr

    config.write_text(text.replace("{{input.fire_time}}", "{{input.fire_tiem}}"))
    bad = cli(fresh, "agents", "validate", check=False)
    assert bad.returncode == 1 and "fire_tiem" in bad.stderr and "fire_time" in bad.stderr

    config.write_text(text)
    assert "1 agent and 1 schedule valid" in cli(fresh, "agents", "validate").stdout
    missing = cli(fresh, "schedules", "show", "plse", check=False)
    assert missing.returncode == 1
    assert "no schedule 'plse' (did you mean 'pulse'?)" in missing.stderr
    assert "Traceback" not in missing.stderr
