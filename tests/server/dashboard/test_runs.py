"""The run page, ``/ui/runs/{id}``: a run as a timeline, over HTTP against the mock provider."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.runner.conftest import Agent
from tests.server.dashboard.pages_html import Browser


@pytest.fixture
def run_browser(server: Any) -> Iterator[Browser]:
    """A browser on a loopback server (no token: nothing to log in to), serving runs."""
    browser = Browser(server(token=None).url)
    yield browser
    browser.close()


def test_pages_are_rendered_without_reading_template_files_on_the_loop(
    agent: Agent, run_browser: Browser
) -> None:
    """Templates are compiled when the dashboard is imported: a page read from disk, or a
    file's time checked at each page, would be blocking calls on the server's loop (the
    detector of tests/conftest.py watches it: such a call is a 500)."""
    agent("helper")
    for _ in range(2):
        assert run_browser.get("/").by_id("team")
        assert run_browser.get("/ui/no/such/page", status=404).text()
