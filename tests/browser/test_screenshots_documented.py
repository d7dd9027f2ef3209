"""docs/dashboard.md shows the screenshots the browser tests take: every picture it names is one
a test takes (and is in the repository), and every one a test takes is shown."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_show_every_screenshot_the_tests_take() -> None:
    taken = set()
    for test in (ROOT / "tests" / "browser").glob("test_*.py"):
        taken |= set(re.findall(r'shoot\(\s*\w+,\s*"([\w-]+)"', test.read_text()))
    shown = set(
        re.findall(r"\(img/dashboard/([\w-]+)\.png\)", (ROOT / "docs/dashboard.md").read_text())
    )
    assert taken, "no shoot(...) found in tests/browser"
    assert shown == taken
    for name in shown:
        assert (ROOT / "docs" / "img" / "dashboard" / f"{name}.png").stat().st_size > 1000
