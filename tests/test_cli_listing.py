"""Listings fit the terminal: ids stay whole, the least useful columns go first, with a note."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from agentrunner.interfaces.cli import console
from agentrunner.interfaces.cli.console import Column, listing

RUN_ID = "run_01a20350012e0000eb3bb2"
THREAD_ID = "assistant-01a2034effdb0000542515"
COLUMNS = [
    Column("id", whole=True),
    Column("thread", whole=True, drop=2),
    Column("status", whole=True),
    Column("tokens", number=True, drop=1),
    Column("title", drop=3),
]
ROW = [RUN_ID, THREAD_ID, "[green]completed[/]", "1,234", "a title long enough to wrap " * 3]


def render(monkeypatch: pytest.MonkeyPatch, width: int) -> list[str]:
    screen = io.StringIO()
    monkeypatch.setattr(console, "out", Console(file=screen, width=width, highlight=False))
    listing("Runs", COLUMNS, [ROW, ROW])
    return screen.getvalue().splitlines()


def test_a_wide_terminal_shows_every_column_and_no_note(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = render(monkeypatch, 200)
    assert lines[0].strip() == "Runs"
    assert lines[1].split() == ["id", "thread", "status", "tokens", "title"]
    assert sum(RUN_ID in line and THREAD_ID in line for line in lines) == 2
    assert not any("not shown" in line for line in lines)


def test_a_narrow_terminal_drops_columns_in_order_and_keeps_ids_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = render(monkeypatch, 80)
    assert lines[1].split() == ["id", "thread", "status", "tokens"]
    assert all(len(line) <= 80 for line in lines)
    rows = [line for line in lines if RUN_ID in line]
    assert len(rows) == 2 and all(THREAD_ID in row and "completed" in row for row in rows)
    assert rows[0].rstrip().endswith("1,234")  # numbers are right-aligned under their header
    assert lines[1].rstrip().endswith("tokens")
    assert lines[-1] == "not shown, to fit 80 columns: title"

    lines = render(monkeypatch, 50)
    assert lines[1].split() == ["id", "status", "tokens"]
    lines = render(monkeypatch, 40)
    assert lines[1].split() == ["id", "status"]
    assert sum(RUN_ID in line for line in lines) == 2
    assert "not shown, to fit 40 columns: thread, tokens, title" in " ".join(
        " ".join(lines).split()
    )


def test_a_text_column_wraps_instead_of_being_dropped_when_it_fits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = render(monkeypatch, 110)
    assert lines[1].split() == ["id", "thread", "status", "tokens", "title"]
    assert len([line for line in lines if RUN_ID in line]) == 2
    assert len(lines) > 2 + 2 + 1  # the titles took more than one line each
    assert all(len(line) <= 110 for line in lines)


@pytest.mark.parametrize("width", [60, 45])
def test_columns_that_cannot_be_left_out_are_never_cut_silently(
    monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    """When the columns that must stay do not fit, the table is printed wider than the terminal
    (which wraps its lines) rather than losing a column or a digit: `jobs` at 60 columns showed
    spend as `$0.0` and no directive, with no note."""
    screen = io.StringIO()
    monkeypatch.setattr(console, "out", Console(file=screen, width=width, highlight=False))
    row = [RUN_ID, "background", "running", "12s", "$0.0123", "Draft the hiring plan"]
    columns = [
        Column("job", whole=True),
        Column("kind", whole=True),
        Column("state", whole=True),
        Column("age", number=True),
        Column("spend", number=True),
        Column("directive"),
    ]
    listing("jobs", columns, [row])
    text = " ".join(screen.getvalue().split())
    for cell in row:
        for word in cell.split():
            assert word in text, (word, screen.getvalue())
    assert "not shown" not in text
