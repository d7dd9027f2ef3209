"""Which of a thread's newest turns fit a number of tokens, and the messages as sent keeping the
numbers of the stored ones they were made from (``engine.history``)."""

from __future__ import annotations

from agentrunner.engine.budget import estimate_message_tokens
from agentrunner.engine.history import CUT_NOTE, newest_within, sendable, window
from agentrunner.engine.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResult,
    UserMessage,
)


def conversation() -> list[Message]:
    """Turns of different shapes: plain, one tool call, two calls answered together."""
    one = ToolCall("c1", "search", {"q": "weather in Paris"})
    two = [ToolCall("c2", "search", {"q": "Lyon"}), ToolCall("c3", "search", {"q": "Nice"})]
    return [
        UserMessage("Hello there, who are you?"),
        AssistantMessage("An agent that looks things up."),
        UserMessage("What is the weather in Paris?"),
        AssistantMessage(tool_calls=[one]),
        ToolResult("c1", "search", "Paris: sunny, 24 degrees"),
        AssistantMessage("It is sunny in Paris."),
        UserMessage("And in Lyon and Nice?"),
        AssistantMessage("Let me look both up.", tool_calls=two),
        ToolResult("c2", "search", "Lyon: rain"),
        ToolResult("c3", "search", "Nice: clouds " * 20),
        AssistantMessage("Rain in Lyon, clouds in Nice."),
    ]


def cost(messages: list[Message]) -> int:
    return sum(estimate_message_tokens(m) for m in messages)


def test_the_newest_whole_turns_that_fit_are_kept_and_no_more() -> None:
    history = conversation()
    starts = set()
    for tokens in range(cost(history) + 10):
        start = newest_within(history, tokens)
        starts.add(start)
        kept = history[start:]
        assert cost(kept) <= tokens
        if start < len(history):
            assert isinstance(history[start], UserMessage)  # never a result without its call
        earlier = [i for i, m in enumerate(history[:start]) if isinstance(m, UserMessage)]
        if earlier:  # one more turn would not have fit
            assert cost(history[earlier[-1] :]) > tokens
    assert starts == {0, 2, 6, len(history)}  # whole turns only, from none to all


def test_not_even_the_newest_turn_fitting_sends_nothing() -> None:
    history = conversation()
    last_turn = history[6:]
    assert newest_within(history, cost(last_turn) - 1) == len(history)
    assert newest_within(history, cost(last_turn)) == 6
    assert newest_within([], 100) == 0


def test_a_tool_call_is_counted_with_its_id_and_framing() -> None:
    short = AssistantMessage(tool_calls=[ToolCall("a", "f", {"x": 1})])
    long = AssistantMessage(tool_calls=[ToolCall("toolu_" + "a" * 30, "f", {"x": 1})])
    assert estimate_message_tokens(long) - estimate_message_tokens(short) == 12  # 35 bytes / 3
    assert estimate_message_tokens(short) >= 8 + 20  # a message, and a call's own structure


def test_sendable_keeps_the_numbers_of_the_messages_it_sends() -> None:
    stored: list[tuple[int, Message]] = [
        (40, ToolResult("c0", "search", "an orphan: its call is before the window")),
        (41, UserMessage("Go on")),
        (42, AssistantMessage("Half an answ", interrupted=True)),
        (43, AssistantMessage("(stopped by user)")),  # a note of an older version: left out
        (44, UserMessage("Again?")),
    ]
    sent = sendable(stored)
    assert [seq for seq, _ in sent] == [41, 42, 44]
    assert sent[1][1] == AssistantMessage(f"Half an answ\n\n{CUT_NOTE}")
    assert [m for _, m in sent] == window([m for _, m in stored])


def test_a_message_no_model_was_sent_is_never_sent_and_round_trips_marked() -> None:
    """A person's message whose run was refused before its first request (``unsent``), with
    the empty interrupted turn its run left, is left out of what is sent, wherever it falls;
    stored and read back, it stays marked."""
    from agentrunner.engine.messages import message_from_dict

    refused = [UserMessage("never sent", unsent=True), AssistantMessage(interrupted=True)]
    for history in (
        [*refused, *conversation()],
        [*conversation()[:6], *refused, *refused, *conversation()[6:]],
        [*conversation(), *refused],
    ):
        assert window(history) == conversation()
    stored = UserMessage("never sent", unsent=True).to_dict()
    assert stored["unsent"] is True and message_from_dict(stored) == refused[0]
    assert "unsent" not in UserMessage("said").to_dict()  # others are stored as they were
