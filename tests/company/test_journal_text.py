"""The "Recent session history" a new session starts with: which entries, in which order."""

from __future__ import annotations

from agentrunner.store.company import JournalEntry
from agentrunner.workspace.company.journal import HISTORY_INTRO, history_text


def entries(count: int, size: int) -> list[JournalEntry]:
    """Newest first, as the store returns them."""
    return [
        JournalEntry(
            id=f"jrn_{n:02d}",
            session_id="ses_1",
            run_id=f"run_{n:02d}",
            directive=f"directive {n}",
            summary=f"summary {n} " + "x" * size,
            model="m",
            cost_micros=0,
            created_at=1_700_000_000.0 + n * 60,
        )
        for n in reversed(range(count))
    ]


def test_the_ten_newest_oldest_first_marked_as_a_record() -> None:
    text = history_text(entries(12, 10))
    assert text is not None and text.startswith(HISTORY_INTRO)
    assert "## Recent session history" in text
    assert "directive 1\n" not in text and "directive 2\n" in text and "directive 11\n" in text
    assert text.index("directive 2\n") < text.index("directive 11\n")  # a story, oldest first
    assert "2023-11-14 22:15 UTC — directive 2" in text


def test_trimmed_to_five_past_six_thousand_characters() -> None:
    long = history_text(entries(10, 700))
    assert long is not None
    assert [n for n in range(10) if f"directive {n}\n" in long] == [5, 6, 7, 8, 9]
    short = history_text(entries(10, 400))
    assert short is not None
    assert [n for n in range(10) if f"directive {n}\n" in short] == list(range(10))


def test_no_entries_no_history() -> None:
    assert history_text([]) is None
