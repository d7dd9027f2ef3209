"""Terminal output shared by the commands: one stdout console, one stderr console; streamed
text and the lines after it; a model's words printed as written; log records as lines."""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from agentrunner.errors import AgentRunnerError

__all__ = [
    "Column",
    "end_line",
    "err",
    "finish",
    "listing",
    "markup",
    "out",
    "print_error",
    "print_internal",
    "print_logs",
    "print_traceback",
    "state",
    "stream",
    "verbatim",
]


# -- streamed text and the lines after it ------------------------------------------------------
#
# A model's answer is streamed to stdout as it comes, and need not end in a newline (a real
# model's often does not). Whatever is printed next — on stdout or stderr, by a console, a log
# record or a prompt — starts on a line of its own: this module knows whether stdout was left
# mid-line, and ends that line before anything else is written.

_lock = threading.RLock()  # a log record may come from another thread
_mid_line = False  # stdout's last streamed text did not end in a newline


def stream(text: str) -> None:
    """Write ``text`` (a streamed token) to stdout as it is, at once."""
    global _mid_line
    if not text:
        return
    with _lock:
        sys.stdout.write(text)
        sys.stdout.flush()
        _mid_line = not text.endswith("\n")


def end_line() -> None:
    """End the line streamed text left stdout on, if it did: before anything else is printed
    (a text that ended in a newline gets no second one)."""
    global _mid_line
    with _lock:
        if _mid_line:
            _mid_line = False
            sys.stdout.write("\n")
            sys.stdout.flush()


class _Console(Console):
    """A console whose lines of text are never wrapped by Rich: a command, an id or a path in
    them stays whole for a copy, and in a pipe (where Rich would assume 80 columns) a line is
    the line that was said; a terminal wraps it for the eye. Layouts (tables, panels, trees)
    still fit the width. What it prints starts on a line of its own (`end_line`)."""

    def print(self, *objects: Any, soft_wrap: bool | None = None, **options: Any) -> None:
        if soft_wrap is None:
            soft_wrap = all(isinstance(o, str | Text) for o in objects)
        with _lock:
            end_line()
            super().print(*objects, soft_wrap=soft_wrap, **options)


# No emoji codes: a model named "provider:x" would print as "provider❌".
out = _Console(highlight=False, emoji=False)
err = _Console(stderr=True, highlight=False, emoji=False)


def verbatim(text: str, style: str = "") -> Text:
    """A model's (a tool's, a person's) words, to print exactly as written: as a Text they are
    never read as markup (``[bold]``, ``[/]``), emoji codes (``:smile:``) or escapes — where
    ``escape()`` inside a markup string doubles a last backslash that no tag follows, and drops
    one of two that a tag does."""
    return Text(text, style=style)


def markup(text: str) -> Text:
    """This program's own markup (any words in it ``escape()``d) as a Text, to join with
    `verbatim` words: ``Text.assemble(markup("[bold]you[/] "), verbatim(said))``."""
    return Text.from_markup(text, emoji=False)


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


# -- log records -------------------------------------------------------------------------------


class _LogLines(logging.Handler):
    """A log record as the CLI says a warning of its own: ``warning: …`` (``error: …``) on the
    stderr console, the message as it was said (never markup), an exception as its one line —
    a traceback only with ``--debug``."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            said = record.getMessage()
            exc = record.exc_info[1] if record.exc_info else None
            if exc is not None:
                said += f" ({type(exc).__name__}: {exc})"
            error = record.levelno >= logging.ERROR  # the handler takes WARNING and up
            word = ("error:", "bold red") if error else ("warning:", "yellow")
            err.print(Text.assemble(word, " ", said))
            if exc is not None and state.debug and record.exc_info:
                err.print(verbatim(logging.Formatter().formatException(record.exc_info)))
        except Exception:
            self.handleError(record)


class _Stderr:
    """stderr for a log handler of ``--log-format json`` or ``--debug``: its lines as they
    are, after `end_line`."""

    def write(self, text: str) -> int:
        with _lock:
            end_line()
            return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


_PYTHONS_LAST_RESORT = logging.lastResort
_LAST_RESORT = _LogLines(logging.WARNING)


def print_logs(fmt: str, *, debug: bool) -> None:
    """How this command prints log records, each on a line of its own: a warning or error no
    handler takes (agentrunner's in the default ``text`` format, and any library's) as
    `_LogLines` says it, in place of Python's bare last-resort line; with ``--log-format json``
    or ``--debug``, agentrunner's records in that format (``core.log_format``)."""
    from agentrunner.core.log_format import use_format

    logging.lastResort = _LAST_RESORT
    if fmt == "json" or debug:
        use_format("json" if fmt == "json" else "text", _Stderr(), debug=debug)


def finish() -> None:
    """The command is done printing: a streamed line is ended (the shell's prompt does not
    run into it), and a record logged after it goes to Python's last resort again."""
    logging.lastResort = _PYTHONS_LAST_RESORT
    with contextlib.suppress(OSError, ValueError):  # stdout closed, or its reader gone
        end_line()


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


def _cell(cell: str | Text) -> Text:
    return cell if isinstance(cell, Text) else markup(cell)


def listing(title: str, columns: Sequence[Column], rows: Sequence[Sequence[str | Text]]) -> None:
    """Print ``rows`` (cells in Rich markup, or `verbatim` words) as a borderless table that
    fits the terminal: whole ids, wrapped text, and the least useful columns left out, with a
    note, when they would not fit (an 80-column terminal folded every cell of ``runs list``).
    What must stay is never cut: past the droppable columns the table is wider than the
    terminal."""
    from rich import box
    from rich.table import Table

    widths = [
        max([len(column.header), *(_cell(row[i]).cell_len for row in rows)])
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
