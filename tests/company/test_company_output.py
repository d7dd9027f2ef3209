"""A brief's streamed answer and its journal entry as the model wrote them (issue 43): markup,
entities, backslashes and emoji codes printed as they are, and the streamed answer ended
before the lines after it."""

from __future__ import annotations

import pytest

from agentrunner.testing import MockProvider, Reply
from tests.company.conftest import Company
from tests.runner.test_cli_output import MARKUP

JOURNAL = "journal-mock"


@pytest.mark.parametrize("text", MARKUP)
def test_a_brief_and_the_journal_print_the_models_text_as_written(
    company: Company, mock: MockProvider, text: str
) -> None:
    mock.queue(
        Reply(tool_calls=[("ask_agent", {"agent": "cto", "message": "Build it"})]),
        Reply(text="Built."),
        Reply(text=text),
    )
    mock.queue(Reply(text=f"Summary: {text}"), model=JOURNAL)
    done = company.ok("brief", "Plan the launch")
    assert done.out == text + "\n"  # streamed, its line ended once
    assert f"journal: Summary: {text}" in done.err.splitlines(), done.err

    journal = company.ok("journal")
    assert f"Summary: {text}" in journal.out.splitlines(), journal.out
    logs = company.ok("logs")  # the brief's lines read back
    assert logs.out == text + "\n"
