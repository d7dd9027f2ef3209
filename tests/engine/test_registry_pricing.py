"""Model registry (resolution, aliases, credentials, URL shapes), pricing, and test models."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from inline_snapshot import snapshot
from jsonschema import validate

from agentrunner.config import PriceOverride, ProviderConfig
from agentrunner.engine import (
    ModelRegistry,
    PriceBook,
    TestModel,
    Usage,
    run_turn,
    tool,
)
from agentrunner.engine.doubles import example_from_schema
from agentrunner.engine.models import BUILTIN_PROVIDERS, DEFAULT_CONTEXT_WINDOW
from agentrunner.engine.wire_openai import OpenAIWire
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.testing import MockProvider, MockProviderServer, Reply
from tests.engine.helpers import Recorder, chain


def test_builtin_providers() -> None:
    expected = {
        "openai": ("openai-responses", "https://api.openai.com/v1", "OPENAI_API_KEY"),
        "anthropic": ("anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY"),
        "ollama": ("openai", "http://127.0.0.1:11434/v1", None),
        "openrouter": ("openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
        "groq": ("openai", "https://api.groq.com/openai/v1", "GROQ_API_KEY"),
        "deepseek": ("openai", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
        "gemini": (
            "openai",
            "https://generativelanguage.googleapis.com/v1beta/openai",
            "GEMINI_API_KEY",
        ),
    }
    for name, (kind, url, key) in expected.items():
        p = BUILTIN_PROVIDERS[name]
        assert (p.kind, p.base_url, p.api_key_env) == (kind, url, key)


def test_resolve_provider_model_alias_and_test() -> None:
    reg = ModelRegistry(aliases={"fast": "openai:gpt-4.1-mini", "quick": "fast"})
    assert reg.resolve("anthropic:claude-haiku-4-5").name == "claude-haiku-4-5"
    assert reg.resolve("quick").ref == "openai:gpt-4.1-mini"
    assert reg.resolve("test").is_test
    assert reg.resolve("ollama:llama3.2:3b").name == "llama3.2:3b"


@pytest.mark.parametrize(
    ("ref", "fragment", "hint"),
    [
        ("gpt-4o", "no provider given", "openai:gpt-4o"),
        ("opnai:gpt-4o", "unknown provider 'opnai'", "'openai'"),
        ("nobody:x", "unknown provider 'nobody'", "Known providers"),
    ],
)
def test_model_not_found_with_suggestions(ref: str, fragment: str, hint: str) -> None:
    with pytest.raises(AgentRunnerError) as info:
        ModelRegistry().resolve(ref)
    assert info.value.code is ErrorCode.MODEL_NOT_FOUND
    assert fragment in info.value.message
    assert info.value.hint and hint in info.value.hint


def test_missing_key_names_the_variable_and_never_the_value() -> None:
    reg = ModelRegistry(env={})
    with pytest.raises(AgentRunnerError) as info:
        reg.client(reg.resolve("anthropic:claude-haiku-4-5"))
    assert info.value.code is ErrorCode.PROVIDER_AUTH
    assert "ANTHROPIC_API_KEY" in info.value.message


async def test_auth_headers_and_azure_shape(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    providers = {
        "az": ProviderConfig("az", "openai", mock_server.url, "AZ_KEY", api_version="2024-10-21"),
        "oa": ProviderConfig("oa", "openai", mock_server.openai_url, "OA_KEY"),
        "an": ProviderConfig("an", "anthropic", mock_server.anthropic_url, "AN_KEY"),
    }
    reg = ModelRegistry(
        providers, env={"AZ_KEY": "az-secret", "OA_KEY": "oa-secret", "AN_KEY": "an-secret"}
    )
    for ref in ("az:my-deployment", "oa:gpt-x", "an:claude-x"):
        mock.queue(Reply(text="hi"))
        await run_turn(_text_turn(reg, ref))
    await reg.aclose()
    az, oa, an = mock.requests
    assert az.path == "/openai/deployments/my-deployment/chat/completions"
    assert az.headers["api-key"] == "az-secret" and "authorization" not in az.headers
    assert oa.headers["authorization"] == "Bearer oa-secret"
    assert (
        an.headers["x-api-key"] == "an-secret" and an.headers["anthropic-version"] == "2023-06-01"
    )


def _text_turn(reg: ModelRegistry, ref: str) -> Any:
    from agentrunner.engine import Turn, UserMessage

    return Turn(system="s", messages=[UserMessage("hi")], chain=chain(reg, ref), prices=reg.prices)


async def test_each_model_is_spoken_to_in_the_api_its_provider_or_its_table_names(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    """One provider, two APIs: a model's [models] api over its provider's kind, each API its
    own client; OpenAI itself is sent the thread's prompt-cache key on either."""
    providers = {
        "mockai": ProviderConfig("mockai", "openai", mock_server.openai_url, "K"),
        "openai": ProviderConfig("openai", "openai-responses", mock_server.openai_url, "K"),
    }
    reg = ModelRegistry(
        providers,
        env={"K": "k-secret"},
        model_kinds={"mockai:gpt-5-mock": "openai-responses", "openai:gpt-4o": "openai"},
    )
    refs = ["mockai:gpt-4.1-mock", "mockai:gpt-5-mock", "openai:gpt-5", "openai:gpt-4o"]
    for ref in refs:
        mock.queue(Reply(text="hi"))
        t = _text_turn(reg, ref)
        t.cache_key = "agentrunner-thread-1"
        await run_turn(t)
    clients = {ref: reg.client(reg.resolve(ref)) for ref in refs}
    same = reg.client(reg.resolve("openai:gpt-5-mini")) is clients["openai:gpt-5"]
    await reg.aclose()
    requests = zip(refs, mock.requests, strict=True)
    sent = {ref: (r.path, r.body.get("prompt_cache_key")) for ref, r in requests}
    assert sent == {
        "mockai:gpt-4.1-mock": ("/v1/chat/completions", None),
        "mockai:gpt-5-mock": ("/v1/responses", None),
        "openai:gpt-5": ("/v1/responses", "agentrunner-thread-1"),
        "openai:gpt-4o": ("/v1/chat/completions", "agentrunner-thread-1"),
    }
    assert len({id(c) for c in clients.values()}) == 4  # by provider and API
    assert reg.resolve("mockai:gpt-5-mock").provider.kind == "openai-responses"
    assert reg.resolve("openai:gpt-4o").provider.kind == "openai"
    assert same


def test_max_tokens_field_by_provider() -> None:
    from agentrunner.engine import ModelRequest

    req = ModelRequest("m", "", [], max_output_tokens=50, stream=False)
    built = {
        "openai": OpenAIWire("openai", max_tokens_field="max_completion_tokens").build(req),
        "ollama": OpenAIWire("ollama").build(req),
    }
    assert built == snapshot(
        {
            "openai": {"model": "m", "messages": [], "max_completion_tokens": 50, "stream": False},
            "ollama": {"model": "m", "messages": [], "max_tokens": 50, "stream": False},
        }
    )


def test_context_windows_from_the_config_then_genai_prices_then_the_default() -> None:
    reg = ModelRegistry(
        {"local": ProviderConfig("local", "openai", "http://127.0.0.1:1/v1")},
        {"fast": "openai:gpt-4o-mini"},
        context_windows={"openai:gpt-4.1-mini": 8000, "local:small": 2048},
    )
    window = reg.context_window
    assert window(reg.resolve("openai:gpt-4.1-mini")) == 8000  # the config's, over the listed
    assert window(reg.resolve("local:small")) == 2048
    assert window(reg.resolve("fast")) == 128_000  # listed by genai-prices, through an alias
    assert window(reg.resolve("anthropic:claude-sonnet-4-5")) == 200_000
    assert window(reg.resolve("local:other")) == DEFAULT_CONTEXT_WINDOW  # listed nowhere
    assert window(reg.resolve("ollama:llama3.2")) == DEFAULT_CONTEXT_WINDOW  # not priced there
    assert window(reg.resolve("openai:no-such-model")) == DEFAULT_CONTEXT_WINDOW
    assert window(reg.resolve("test")) == DEFAULT_CONTEXT_WINDOW


def test_the_config_gives_the_registry_its_context_windows(tmp_path: Any) -> None:
    from agentrunner.config import load_config

    (tmp_path / "agentrunner.toml").write_text('[models."openai:gpt-4o"]\ncontext_window = 9000\n')
    reg = ModelRegistry.from_config(load_config(tmp_path, env={}), env={})
    assert reg.context_window(reg.resolve("openai:gpt-4o")) == 9000
    assert reg.context_window(reg.resolve("openai:gpt-4o-mini")) == 128_000


# -- pricing -----------------------------------------------------------------------------------


def test_known_price_from_genai_prices() -> None:
    micros = PriceBook().cost_micros(
        "openai", "gpt-4.1-mini", Usage(input_tokens=1_000_000, output_tokens=0)
    )
    assert micros == 400_000  # $0.40 per million input tokens


def test_override_wins_and_prices_cache_tokens() -> None:
    book = PriceBook({"openai:gpt-4.1-mini": PriceOverride(1.0, 2.0, cache_read_per_mtok=0.5)})
    usage = Usage(input_tokens=1000, output_tokens=100, cache_read_tokens=400)
    assert book.cost_micros("openai", "gpt-4.1-mini", usage) == 600 + 200 + 200


def test_local_providers_are_free_and_unknown_is_unknown(caplog: pytest.LogCaptureFixture) -> None:
    book = PriceBook()
    assert book.cost_micros("ollama", "llama3.2", Usage(input_tokens=10)) == 0
    assert book.cost_micros("test", "test", Usage(input_tokens=10)) == 0
    assert book.cost_micros("local", "smollm2", Usage(input_tokens=10, output_tokens=5)) == 0
    with caplog.at_level(logging.WARNING, "agentrunner.pricing"):
        # A custom OpenAI-compatible endpoint is not priced as OpenAI.
        assert book.cost_micros("my-vllm", "gpt-4.1-mini", Usage(input_tokens=10)) is None
        assert book.cost_micros("my-vllm", "gpt-4.1-mini", Usage(input_tokens=10)) is None
        assert book.cost_micros("openai", "no-such-model-xyz", Usage(input_tokens=10)) is None
    warnings = [r for r in caplog.records if "no price known" in r.message]
    assert len(warnings) == 2  # once per model


async def test_unknown_price_is_reported_not_zero(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    # (not named "local": the built-in local provider, llama.cpp in-process, is free)
    reg = ModelRegistry({"lan": ProviderConfig("lan", "openai", mock_server.openai_url)})
    mock.queue(Reply(text="hi"))
    rec = Recorder()
    t = _text_turn(reg, "lan:llama")
    t.emit = rec
    result = await run_turn(t)
    await reg.aclose()
    [cost] = rec.of("cost.updated")
    assert cost["cost_known"] is False and cost["cost_micros"] is None
    assert result.cost_known is False


# -- the test model ----------------------------------------------------------------------------


@tool
def lookup(city: str, days: int, metric: bool = True) -> str:
    """Look something up."""
    return f"{city}:{days}:{metric}"


@tool
def note(text: str) -> dict[str, Any]:
    """Write a note."""
    return {"saved": text}


async def test_test_model_calls_each_tool_once_then_summarises() -> None:
    reg = ModelRegistry()
    from agentrunner.engine import Turn, UserMessage

    rec = Recorder()
    t = Turn(
        system="s",
        messages=[UserMessage("plan my trip")],
        chain=chain(reg, "test"),
        tools=[lookup, note],
        emit=rec,
    )
    result = await run_turn(t)
    calls = rec.of("agent.tool_call")
    assert sorted(c["name"] for c in calls) == ["lookup", "note"]
    for c in calls:
        validate(c["input"], {"lookup": lookup, "note": note}[c["name"]].parameters)
    assert result.text.startswith("[test model] I called lookup, note.")
    assert result.cost_micros == 0 and result.cost_known

    # the next message on the same conversation: answered for itself, not for the first
    rec = Recorder()
    again = await run_turn(
        Turn(
            system="s",
            messages=[*t.messages, UserMessage("and book the hotel")],
            chain=chain(reg, "test"),
            tools=[lookup, note],
            emit=rec,
        )
    )
    assert again.text.startswith("[test model] I called lookup, note.\n")
    assert again.text.count("- lookup:") == 1  # this message's calls only


@tool(writes=True)
def remember(text: str) -> str:
    """Keep something for later runs."""
    return "kept"


@pytest.mark.parametrize(
    ("message", "called"),
    [
        ("plan my trip", ["lookup"]),
        ("plan my trip and remember it", ["lookup", "remember"]),  # named: asked to
        ("Remember: plan my trip", ["lookup", "remember"]),
        ("plan my trip (remembering is not asking)", ["lookup"]),
    ],
)
async def test_test_model_calls_a_tool_that_writes_only_when_asked_to(
    message: str, called: list[str]
) -> None:
    """Issue 39: it wrote `example` memory blocks into a project's agents on every brief."""
    from agentrunner.engine import Turn, UserMessage

    rec = Recorder()
    turn = Turn(
        system="s",
        messages=[UserMessage(message)],
        chain=chain(ModelRegistry(), "test"),
        tools=[lookup, remember],
        emit=rec,
    )
    result = await run_turn(turn)
    assert [c["name"] for c in rec.of("agent.tool_call")] == called
    assert result.text.startswith(f"[test model] I called {', '.join(called)}.")


async def test_test_model_answers_schema_valid_json() -> None:
    from agentrunner.engine import Turn, UserMessage

    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 3},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["n"],
    }
    reg = ModelRegistry()
    t = Turn(
        system="s", messages=[UserMessage("q")], chain=chain(reg, "test"), output_schema=schema
    )
    result = await run_turn(t)
    validate(result.output, schema)


json_schemas = st.recursive(
    st.sampled_from(
        [
            {"type": "string"},
            {"type": "integer"},
            {"type": "number"},
            {"type": "boolean"},
            {"enum": ["a", "b"]},
        ]
    ),
    lambda inner: st.one_of(
        st.builds(lambda i: {"type": "array", "items": i}, inner),
        st.dictionaries(st.text("abcdef", min_size=1, max_size=4), inner, max_size=4).map(
            lambda props: {"type": "object", "properties": props, "required": sorted(props)}
        ),
    ),
    max_leaves=10,
)


@settings(max_examples=60)
@given(schema=json_schemas)
def test_examples_satisfy_their_schema(schema: dict[str, Any]) -> None:
    validate(example_from_schema(schema), schema)


def test_test_model_is_labelled() -> None:
    assert TestModel.provider == "test"
