"""Terminal output shared by the commands: one stdout console, one stderr console."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from agentrunner.errors import AgentRunnerError

__all__ = [
    "Column",
    "err",
    "listing",
    "out",
    "print_error",
    "print_internal",
    "print_traceback",
    "state",
]


class _Console(Console):
    """A console whose lines of text are never wrapped by Rich: a command, an id or a path in
    them stays whole for a copy, and in a pipe (where Rich would assume 80 columns) a line is
    the line that was said; a terminal wraps it for the eye. Layouts (tables, panels, trees)
    still fit the width."""

    def print(self, *objects: Any, soft_wrap: bool | None = None, **options: Any) -> None:
        if soft_wrap is None:
            soft_wrap = all(isinstance(o, str | Text) for o in objects)
        super().print(*objects, soft_wrap=soft_wrap, **options)


# No emoji codes: a model named "provider:x" would print as "provider❌".
out = _Console(highlight=False, emoji=False)
err = _Console(stderr=True, highlight=False, emoji=False)


@dataclass
class _State:
    debug: bool = False


state = _State()


def print_error(exc: AgentRunnerError) -> None:
    """``error: file:line: code: message`` then the hint, on stderr."""
    err.print(f"[bold red]error:[/] {escape(exc.one_line())}")
    if exc.hint:
        err.print(f"  [dim]hint:[/] {escape(exc.hint)}")


def print_internal(exc: BaseException) -> None:
    err.print(
        f"[bold red]error:[/] internal: {escape(type(exc).__name__)}: {escape(str(exc))}",
    )
    err.print("  [dim]hint:[/] re-run with --debug for the traceback, and report it")


def print_traceback() -> None:
    err.print_exception(show_locals=False)


@dataclass(frozen=True, slots=True)
class Column:
    """A column of a listing. ``whole`` cells (ids, names, times) and ``number`` cells (right
    aligned) are never wrapped, so an id can be copied or grepped whole; the others wrap.
    ``drop`` ranks the columns that may be left out when the terminal is too narrow for all
    (the highest goes first; 0: always shown)."""

    header: str
    whole: bool = False
    number: bool = False
    drop: int = 0

    @property
    def wraps(self) -> bool:
        return not (self.whole or self.number)


_GAP = 2  # between cells: one column of padding and the (blank) rule
_TEXT_MIN = 12  # a wrapping column narrower than this reads badly


def listing(title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> None:
    """Print ``rows`` (cells in Rich markup) as a borderless table that fits the terminal:
    whole ids, wrapped text, and the least useful columns left out, with a note, when they
    would not fit (an 80-column terminal folded every cell of ``runs list``). What must stay is
    never cut: past the droppable columns the table is wider than the terminal."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    widths = [
        max([len(column.header), *(Text.from_markup(row[i]).cell_len for row in rows)])
        for i, column in enumerate(columns)
    ]

    def needed(shown: list[int]) -> int:
        return sum(
            min(widths[i], _TEXT_MIN) if columns[i].wraps else widths[i] for i in shown
        ) + _GAP * (len(shown) - 1)

    shown = list(range(len(columns)))
    for i in sorted((i for i, c in enumerate(columns) if c.drop), key=lambda i: -columns[i].drop):
        if needed(shown) <= out.width:
            break
        shown.remove(i)
    hidden = [columns[i].header for i in range(len(columns)) if i not in shown]
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1, 0, 0),
    )
    for i in shown:
        column = columns[i]
        table.add_column(
            column.header,
            justify="right" if column.number else "left",
            no_wrap=not column.wraps,
            min_width=None if column.wraps else widths[i],
            overflow="fold",
        )
    for row in rows:
        table.add_row(*(row[i] for i in shown))
    # Columns that may not be left out and still do not fit: wider than the terminal (which
    # wraps the lines) rather than Rich's cut, which drops cells and digits without a word.
    width, wide = out.width, needed(shown) + 1  # + the last cell's padding
    if wide <= width:
        out.print(table)
    else:
        out.width = wide  # Console.print(width=) only narrows
        try:
            out.print(table)
        finally:
            out.width = width
    if hidden:
        out.print(f"[dim]not shown, to fit {width} columns: {', '.join(hidden)}[/]")
