"""``POST /v1/chat/completions`` does what the client asked, or says no: driven by the official
``openai`` client against the mock provider, whose recorded requests show what reached the
model."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx2
import pytest

from agentrunner.interfaces.server.chat_request import IGNORED, REFUSED, SETTINGS, ChatRequest
from agentrunner.testing import MockProvider, Reply
from tests.runner.conftest import Agent

AUTH = {"authorization": "Bearer secret-token"}
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def client(agent: Agent, server: Any) -> Any:
    """The official client, on a server whose agent ``helper`` answers on the mock."""
    import openai

    agent("helper", "capabilities: [notes]")
    return openai.OpenAI(base_url=f"{server().url}/v1", api_key="secret-token", max_retries=0)


def _bodies(mock: MockProvider) -> list[dict[str, Any]]:
    return [r.body for r in mock.requests]


def _threads() -> list[Any]:
    async def read() -> list[Any]:
        from agentrunner.store import open_store

        store = await open_store(os.environ["AGENTRUNNER_DATABASE_URL"])
        try:
            return await store.threads.list()
        finally:
            await store.close()

    return asyncio.run(read())


def test_every_field_of_the_clients_request_is_honoured_ignored_or_refused() -> None:
    """The official client's request fields, each one of the three (a new one fails here
    until it is given a place), and the request model declares each."""
    from openai.types.chat.completion_create_params import CompletionCreateParamsBase

    core = {"model", "messages", "stream", "stream_options", "user"}
    placed = [*core, *SETTINGS, *IGNORED, *REFUSED]
    assert len(placed) == len(set(placed))  # no field in two places
    assert set(CompletionCreateParamsBase.__annotations__) <= set(placed)
    assert set(ChatRequest.model_fields) == set(placed)


@pytest.mark.parametrize("stream", [False, True])
def test_sampling_and_length_reach_the_provider_as_the_client_sent_them(
    client: Any, mock: MockProvider, stream: bool
) -> None:
    asked = [
        {"temperature": 0.2, "max_tokens": 40, "top_p": 0.5, "seed": 7, "stop": "END"},
        {"temperature": 1.3, "max_completion_tokens": 900, "stop": ["A", "B"]},
        {"max_tokens": 300, "max_completion_tokens": 120, "reasoning_effort": "low"},
    ]
    for settings in asked:
        mock.queue(Reply(text="fine"))
        answer = client.chat.completions.create(
            model="helper", messages=HI, stream=stream, **settings
        )
        if stream:
            assert "".join(c.choices[0].delta.content or "" for c in answer if c.choices) == "fine"
        else:
            assert answer.choices[0].message.content == "fine"
    sent = _bodies(mock)
    assert len(sent) == 3
    first, second, third = sent
    assert (first["temperature"], first["max_tokens"], first["top_p"], first["seed"]) == (
        0.2,
        40,
        0.5,
        7,
    )
    assert first["stop"] == ["END"]
    assert (second["temperature"], second["max_tokens"], second["stop"]) == (1.3, 900, ["A", "B"])
    assert "top_p" not in second and "seed" not in second
    # both caps given: the lower, the one the client believes in force either way
    assert third["max_tokens"] == 120 and third["reasoning_effort"] == "low"
    assert "temperature" not in third


def test_an_answer_cut_at_the_clients_cap_says_length(client: Any, mock: MockProvider) -> None:
    mock.queue(Reply(text=" ".join(f"word{n}" for n in range(200))))
    cut = client.chat.completions.create(model="helper", messages=HI, max_tokens=5)
    assert cut.choices[0].finish_reason == "length"
    assert _bodies(mock)[-1]["max_tokens"] == 5
    assert cut.usage.completion_tokens <= 5
    mock.queue(Reply(text="short"))
    whole = client.chat.completions.create(model="helper", messages=HI, max_tokens=50)
    assert whole.choices[0].finish_reason == "stop"


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("temperature", 3, "temperature must be a number from 0 to 2, got 3"),
        ("top_p", -0.1, "top_p must be a number from 0 to 1"),
        ("max_tokens", 0, "max_tokens must be a positive integer"),
        ("max_completion_tokens", "many", "max_completion_tokens must be a positive integer"),
        ("seed", 1.5, "seed must be a whole number"),
        ("stop", [""], "stop must be a string or a list of non-empty strings"),
        ("reasoning_effort", "max", "reasoning_effort must be one of none, minimal"),
        ("stop", ["a\u0000b"], "stop holds a NUL character"),
    ],
)
def test_a_setting_is_checked_as_the_rest_api_checks_it(
    client: Any, mock: MockProvider, field: str, value: Any, said: str
) -> None:
    import openai

    with pytest.raises(openai.UnprocessableEntityError) as info:
        client.chat.completions.create(model="helper", messages=HI, extra_body={field: value})
    error = info.value.response.json()["error"]
    assert error["code"] == "validation" and error["message"].startswith(said), error
    assert mock.requests == [] and _threads() == []


REFUSALS: list[tuple[str, Any]] = [
    ("tools", [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]),
    ("tool_choice", "required"),
    ("parallel_tool_calls", False),
    ("functions", [{"name": "lookup", "parameters": {}}]),
    ("function_call", "auto"),
    ("n", 2),
    ("logprobs", True),
    ("top_logprobs", 3),
    ("logit_bias", {"50256": -100}),
    ("presence_penalty", 0.5),
    ("frequency_penalty", -1),
    ("response_format", {"type": "json_object"}),
    ("service_tier", "flex"),
    ("modalities", ["text", "audio"]),
    ("audio", {"voice": "alloy", "format": "wav"}),
    ("prediction", {"type": "content", "content": "draft"}),
    ("web_search_options", {}),
    ("verbosity", "low"),
    ("moderation", {"model": "omni-moderation-latest"}),
]


def test_the_refusals_cover_every_refused_field() -> None:
    assert {field for field, _ in REFUSALS} == set(REFUSED)


@pytest.mark.parametrize(("field", "value"), REFUSALS, ids=[f for f, _ in REFUSALS])
def test_a_field_a_run_cannot_honour_is_refused_naming_it(
    client: Any, mock: MockProvider, field: str, value: Any
) -> None:
    import openai

    with pytest.raises(openai.UnprocessableEntityError) as info:
        client.chat.completions.create(model="helper", messages=HI, **{field: value})
    error = info.value.response.json()["error"]
    assert error["code"] == "validation"
    assert error["message"].startswith(f"{field} "), error
    assert error["message"] == f"{field} {REFUSED[field].problem}" and error["hint"]
    assert mock.requests == [] and _threads() == []  # nothing ran, nothing was opened


def test_what_a_run_does_anyway_and_what_is_left_out_are_taken(
    client: Any, mock: MockProvider
) -> None:
    """The neutral values of refused fields ask for nothing more than a run does; the
    ignored fields change nothing the client gets back."""
    mock.queue(Reply(text="taken"))
    answer = client.chat.completions.create(
        model="helper",
        messages=HI,
        n=1,
        logprobs=False,
        logit_bias={},
        presence_penalty=0,
        frequency_penalty=0,
        response_format={"type": "text"},
        service_tier="auto",
        modalities=["text"],
        metadata={"team": "sales"},
        store=False,
        safety_identifier="user-1234",
        prompt_cache_key="conversation-9",
    )
    assert answer.choices[0].message.content == "taken"
    [sent] = _bodies(mock)
    leaked = {"metadata", "store", "safety_identifier", "n", "logprobs", "service_tier"}
    assert not leaked & set(sent)
    assert sent.get("prompt_cache_key") != "conversation-9"  # agentrunner's own, if any


def test_an_unknown_field_is_refused_naming_it(client: Any, mock: MockProvider) -> None:
    import openai

    for field, hint in (
        ("temprature", "Did you mean 'temperature'?"),
        ("frobnicate", "docs/http-api"),
    ):
        with pytest.raises(openai.UnprocessableEntityError) as info:
            client.chat.completions.create(model="helper", messages=HI, extra_body={field: 1})
        error = info.value.response.json()["error"]
        assert error["code"] == "validation"
        assert error["message"] == f"{field} is not a field of a chat completion request"
        assert hint in error["hint"]
    assert mock.requests == [] and _threads() == []


def test_a_system_message_is_context_in_the_user_position(client: Any, mock: MockProvider) -> None:
    """Each request's system message reaches the model marked as the client's, before the
    conversation and never in the system role; it is not kept in the thread."""
    for rule in ("Answer in French.", "Answer in haiku."):
        mock.queue(Reply(text="d'accord"))
        client.chat.completions.create(
            model="helper",
            messages=[
                {"role": "system", "content": rule},
                {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
                {"role": "user", "content": "Plan the launch"},
            ],
            user="ada",
        )
    first, second = _bodies(mock)
    for body, rule, other in ((first, "in French", "haiku"), (second, "in haiku", "French")):
        system = [m["content"] for m in body["messages"] if m["role"] == "system"]
        assert system and all(rule not in text and "Be brief." not in text for text in system)
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        [context] = [text for text in users if rule in text]
        assert "Be brief." in context and "an OpenAI client's system message" in context
        assert other not in context
        assert users[-1] == "Plan the launch"
    assert first["messages"][0] == second["messages"][0]  # the system prompt, byte-stable
    url = str(client.base_url).removesuffix("/").removesuffix("/v1")
    stored = httpx2.get(f"{url}/threads/helper-ada/messages", headers=AUTH).json()["data"]
    assert [m["content"] for m in stored if m["role"] == "user"] == ["Plan the launch"] * 2


def test_the_new_input_is_what_the_user_said_since_the_last_answer(
    client: Any, mock: MockProvider
) -> None:
    import openai

    mock.queue(Reply(text="ok"))
    client.chat.completions.create(
        model="helper",
        messages=[
            {"role": "user", "content": "an old question"},
            {"role": "assistant", "content": "an old answer"},
            {"role": "user", "content": "Here is the draft."},
            {"role": "user", "content": "Shorten it."},
        ],
    )
    [sent] = _bodies(mock)
    assert sent["messages"][-1] == {"role": "user", "content": "Here is the draft.\n\nShorten it."}
    for messages, field in (
        (
            [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}],
            "0.content.0.type",
        ),
        ([*HI, {"role": "tool", "content": "42", "tool_call_id": "c1"}], "1.role"),
        ([*HI, {"role": "assistant", "content": "done"}], ""),
        ([*HI, {"role": "assistant", "content": "done"}, {"role": "user", "content": " "}], ""),
    ):
        with pytest.raises(openai.UnprocessableEntityError) as info:
            client.chat.completions.create(model="helper", messages=messages)
        message = info.value.response.json()["error"]["message"]
        assert message.startswith(f"messages.{field}" if field else "messages "), message
    assert len(mock.requests) == 1


def _conversation(sent: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in sent["messages"] if m["role"] != "system"]


def test_a_client_that_keeps_the_conversation_is_answered_in_it(
    client: Any, mock: MockProvider
) -> None:
    """Issue 39 item 6: a client that sends the whole conversation each time (no thread named)
    had its earlier turns dropped: each request was a new thread with one message in it. A
    thread the request opens takes them as its history; one that exists keeps its own."""
    for question, answer in (("Is Postgres fine?", "Yes."), ("Which cloud?", "Any.")):
        mock.queue(Reply(text="noted"))
        client.chat.completions.create(
            model="helper",
            messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": question},
                {"role": "assistant", "content": answer},
                {"role": "user", "content": "And why?"},
            ],
        )
    first, second = (_conversation(sent) for sent in _bodies(mock))
    for sent, question, answer in (
        (first, "Is Postgres fine?", "Yes."),
        (second, "Which cloud?", "Any."),
    ):
        context, *conversation = sent  # the client's system message: context before it
        assert context[0] == "user" and context[1].endswith("\n\nBe brief.")
        assert conversation == [("user", question), ("assistant", answer), ("user", "And why?")]

    # A named thread (the user's) is opened once with the client's turns; the next request's
    # copy of them is not taken again, so nothing is said twice.
    mock.reset()
    said = [
        {"role": "user", "content": "Draft a plan."},
        {"role": "assistant", "content": "Plan: ship."},
        {"role": "user", "content": "Shorter."},
    ]
    mock.queue(Reply(text="Ship."), Reply(text="Friday."))
    client.chat.completions.create(model="helper", messages=said, user="ada")
    client.chat.completions.create(
        model="helper",
        messages=[*said, {"role": "assistant", "content": "Ship."}, HI[0] | {"content": "When?"}],
        user="ada",
    )
    once, again = (_conversation(sent) for sent in _bodies(mock))
    assert once == [("user", "Draft a plan."), ("assistant", "Plan: ship."), ("user", "Shorter.")]
    assert again == [*once, ("assistant", "Ship."), ("user", "When?")]
    ada = [t for t in _threads() if t.id == "helper-ada"]
    assert [t.message_count for t in ada] == [6]


def test_a_stream_leaves_out_the_usage_only_when_asked(client: Any, mock: MockProvider) -> None:
    import openai

    counts = []
    for options in (None, {"include_usage": True}, {"include_usage": False}):
        mock.queue(Reply(text="streamed"))
        chunks = list(
            client.chat.completions.create(
                model="helper", messages=HI, stream=True, stream_options=options
            )
        )
        counts.append(sum(1 for c in chunks if c.usage is not None))
    assert counts == [1, 1, 0]
    with pytest.raises(openai.UnprocessableEntityError) as info:
        client.chat.completions.create(
            model="helper", messages=HI, stream_options={"include_usage": True}
        )
    assert info.value.response.json()["error"]["message"].startswith("stream_options ")
