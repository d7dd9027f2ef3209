"""Browser tests of the dashboard (issue 28): a real headless Chromium, driven by Playwright for
Python, against ``agentrunner serve`` started as a subprocess in a project whose models are the
mock provider (in this process, so each test scripts its replies).

Chromium is Debian's ``chromium`` package (``.ci/run`` installs it; Playwright's own browser
download is not used): AGENTRUNNER_TEST_CHROMIUM names another. Without one these tests are
skipped, except where AGENTRUNNER_REQUIRE_BROWSER=1 (CI) makes that a failure.

Each test may take screenshots with ``shoot``: into a temporary folder, or into
AGENTRUNNER_SCREENSHOTS (``docs/img/dashboard`` to refresh the docs' pictures).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentrunner.testing import MockProviderServer

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "dashboard-test-token-1f6c2a-7d04e9b35c81"  # 32 or more: beyond loopback

# What Chromium needs here: no sandbox as root, and none of the background connections a closed
# network refuses (they fill its log and slow its start).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]

CONFIG = """\
[defaults]
model = "mockai:gpt-mock"
title_model = "test"

[providers.mockai]
kind = "openai"
base_url = "{openai}"
api_key_env = "MOCK_KEY"

[prices."mockai:gpt-mock"]
input_per_mtok = 3.0
output_per_mtok = 15.0

[prices."mockai:gpt-mini"]
input_per_mtok = 0.15
output_per_mtok = 0.6

[budgets]
global_daily_usd = 5.0
per_agent_daily_usd = 1.0

[channels.general]
members = ["ceo"]

[company]
root = "ceo"
"""

AGENTS = {
    "ceo": "name: CEO\ndescription: Runs the company\ntools: [read_file]",
    "cto": "name: CTO\ndescription: Owns technology\nreports_to: ceo\nmodel: mockai:gpt-mini",
    "cfo": "name: CFO\ndescription: Owns the money\nreports_to: ceo\ncapabilities: [notes]",
}


def chromium_executable() -> str | None:
    given = os.environ.get("AGENTRUNNER_TEST_CHROMIUM")
    if given:
        return given
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def spare_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One headless Chromium for a module's tests (each gets a context of its own). Not for the
    session: Playwright's sync API keeps an event loop marked running in this thread while it
    is started, and every asyncio test after it would fail to start its own."""
    executable = chromium_executable()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - playwright is a dev dependency
        executable = None
    if executable is None:
        if os.environ.get("AGENTRUNNER_REQUIRE_BROWSER") == "1":
            pytest.fail("AGENTRUNNER_REQUIRE_BROWSER=1 but no Chromium (apt-get install chromium)")
        pytest.skip("no Chromium: apt-get install chromium, or set AGENTRUNNER_TEST_CHROMIUM")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


@dataclass
class Served:
    """``agentrunner serve`` in a project: its address, the project and the process's log."""

    url: str
    project: Path
    log: Path
    token: str | None

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agentrunner", *args],
            cwd=self.project,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )


def _env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENTRUNNER_"))}
    return {**clean, "PYTHONPATH": str(ROOT / "src"), "MOCK_KEY": "sk-mock-key", **extra}


def write_project(path: Path, mock_server: MockProviderServer) -> Path:
    (path / "agents").mkdir(parents=True)
    (path / "agentrunner.toml").write_text(CONFIG.format(openai=mock_server.openai_url))
    for agent_id, front in AGENTS.items():
        (path / "agents" / f"{agent_id}.md").write_text(f"---\n{front}\n---\nYou work here.\n")
    return path


@pytest.fixture
def serve(tmp_path: Path, mock_server: MockProviderServer) -> Iterator[Callable[..., Served]]:
    """Start ``agentrunner serve`` on a spare port: ``serve()`` on 127.0.0.1 with no token, or
    ``serve(host="0.0.0.0", token=TOKEN)`` beyond loopback, where the dashboard asks for a
    login (the pages are still reached through 127.0.0.1)."""
    started: list[tuple[subprocess.Popen[bytes], Any]] = []
    project = write_project(tmp_path / "project", mock_server)

    def start(*, host: str = "127.0.0.1", token: str | None = None) -> Served:
        port = spare_port()
        log_path = tmp_path / f"serve-{port}.log"
        log = log_path.open("wb")
        extra = {"AGENTRUNNER_API_TOKEN": token} if token else {}
        process = subprocess.Popen(
            [sys.executable, "-m", "agentrunner", "serve", "--host", host, "--port", str(port)],
            cwd=project,
            env=_env(**extra),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        started.append((process, log))
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                pytest.fail(f"serve exited ({process.returncode}):\n{log_path.read_text()}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"serve did not answer {url}/health:\n{log_path.read_text()}")
            time.sleep(0.1)
        return Served(url=url, project=project, log=log_path, token=token)

    yield start
    for process, log in started:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def refusals(tab: Any) -> list[str]:
    """What the pages' Content-Security-Policy refuses in ``tab`` from now on (as Chromium says
    it on the console): each test's pages must need nothing it refuses."""
    said: list[str] = []
    tab.on(
        "console",
        lambda m: said.append(m.text) if "Content Security Policy" in m.text else None,
    )
    return said


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    """A fresh browser context (no cookies) and a page in it, at a laptop's size."""
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(20_000)
    tab = context.new_page()
    refused = refusals(tab)
    yield tab
    context.close()
    assert refused == [], "\n".join(refused)


@pytest.fixture
def phone(chromium: Any) -> Iterator[Any]:
    """A page at a phone's size, touch and all, in dark mode."""
    context = chromium.new_context(
        viewport={"width": 390, "height": 844},
        device_scale_factor=2,
        is_mobile=True,
        has_touch=True,
        color_scheme="dark",
    )
    context.set_default_timeout(20_000)
    tab = context.new_page()
    refused = refusals(tab)
    yield tab
    context.close()
    assert refused == [], "\n".join(refused)


def accessible(tab: Any) -> None:
    """axe-core's checks (WCAG 2 A and AA: labels, contrast, names, landmarks, keyboard
    traps) find nothing on the page as it is now."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(
        tab,
        options={"runOnly": ["wcag2a", "wcag2aa", "best-practice"], "resultTypes": ["violations"]},
    )
    found = [
        f"{v['id']} ({v['impact']}): {v['help']} — "
        + "; ".join(node["target"][0] if node["target"] else "?" for node in v["nodes"][:5])
        for v in results.response["violations"]
    ]
    assert not found, "\n".join(found)


def fits(tab: Any) -> None:
    """Nothing on the page is wider than the window (no sideways scrolling on a phone)."""
    overflow = tab.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page is {overflow}px wider than the window"


@pytest.fixture
def shoot(tmp_path: Path) -> Callable[..., Path]:
    """``shoot(page, "team")`` saves a screenshot of the page as ``team.png``."""
    folder = Path(os.environ.get("AGENTRUNNER_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)

    def take(tab: Any, name: str, *, full_page: bool = False) -> Path:
        path = folder / f"{name}.png"
        tab.screenshot(path=str(path), full_page=full_page, animations="disabled")
        assert path.stat().st_size > 1000
        return path

    return take
