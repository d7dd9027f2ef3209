"""The model registry: ``provider:model`` strings and aliases → a model and its client.

Built-in providers cover OpenAI, Anthropic and the common OpenAI-compatible services; the
project's ``[providers.NAME]`` tables add or override them. Credentials come only from the
environment variable a provider names; a missing one, or one that could not be sent as a header
(a line break, a control character: what an HTTP library would echo back in its error), is
``provider_auth`` naming the variable and never the value, raised when the client is first
needed — before any request is sent.
"""

from __future__ import annotations

import difflib
import os
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING

from agentrunner.config import BUILTIN_PROVIDERS, OPENAI_KINDS, Config, ProviderConfig
from agentrunner.engine.model_inputs import default_inputs
from agentrunner.engine.pricing import PriceBook
from agentrunner.engine.secrets import Secrets, held
from agentrunner.errors import AgentRunnerError, ErrorCode

if TYPE_CHECKING:
    from agentrunner.engine.http_client import ModelClient, Wire

__all__ = ["BUILTIN_PROVIDERS", "DEFAULT_CONTEXT_WINDOW", "ModelRegistry", "ResolvedModel"]

ANTHROPIC_VERSION = "2023-06-01"
# The context window of a model nothing lists (a local server's, a custom provider's, one too
# new for genai-prices): small enough for most models served today, so that a long thread is
# compacted rather than refused; `[models."provider:model"] context_window` says otherwise.
DEFAULT_CONTEXT_WINDOW = 32_768


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    """A model the engine can call: ``ref`` is ``provider:model``, ``name`` what the API wants."""

    ref: str
    provider: ProviderConfig
    name: str

    @property
    def is_test(self) -> bool:
        return self.provider.kind == "test"


class ModelRegistry:
    """Resolves model strings and owns one client per provider (close with ``aclose``)."""

    def __init__(
        self,
        providers: Mapping[str, ProviderConfig] | None = None,
        aliases: Mapping[str, str] | None = None,
        *,
        prices: PriceBook | None = None,
        env: Mapping[str, str] | None = None,
        context_windows: Mapping[str, int] | None = None,
        model_kinds: Mapping[str, str] | None = None,
        secret_env: Iterable[str] = (),
        model_inputs: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        self.providers: dict[str, ProviderConfig] = {**BUILTIN_PROVIDERS, **(providers or {})}
        self.aliases = dict(aliases or {})
        self.prices = prices or PriceBook()
        self.context_windows = dict(context_windows or {})  # by ref: config's, then looked up
        self.model_inputs = dict(model_inputs or {})  # by ref: config's; else the family's
        self.model_kinds = dict(model_kinds or {})  # by ref: an OpenAI model's API, if not its
        self._env = os.environ if env is None else env
        self.secret_env = tuple(secret_env)  # [security] secret_env: the operator's secrets
        # By provider and kind: one provider's models may be spoken to in two APIs.
        self._clients: dict[tuple[str, str], ModelClient] = {}

    @classmethod
    def from_config(cls, config: Config, *, env: Mapping[str, str] | None = None) -> ModelRegistry:
        return cls(
            config.providers,
            config.aliases,
            prices=PriceBook(config.prices, allow_unpriced=config.budgets.allow_unpriced),
            env=env,
            context_windows=config.context_windows,
            model_kinds=config.model_kinds,
            secret_env=config.secret_env,
            model_inputs=config.model_inputs,
        )

    def add_model(self, provider: str, client: ModelClient) -> None:
        """Serve ``provider:*`` with an in-process client (e.g. a ``FunctionModel``)."""
        self.providers[provider] = ProviderConfig(provider, "test")
        self._clients[(provider, "test")] = client

    def resolve(self, ref: str) -> ResolvedModel:
        """``provider:model`` or an alias → ``ResolvedModel``; ``model_not_found`` otherwise."""
        seen: list[str] = []
        while ref in self.aliases and ref not in seen and len(seen) < 8:
            seen.append(ref)
            ref = self.aliases[ref]
        if ref == "test":
            ref = "test:test"
        provider_name, sep, name = ref.partition(":")
        if sep and name and provider_name in self.providers:
            provider = self.providers[provider_name]
            kind = self.model_kinds.get(ref)
            if kind is not None and kind != provider.kind and provider.kind in OPENAI_KINDS:
                provider = replace(provider, kind=kind)  # this model's API, not the provider's
            return ResolvedModel(ref, provider, name)
        raise self._not_found(ref, provider_name if sep else None)

    @cached_property
    def secrets(self) -> Secrets:
        """Every secret the runtime holds (``engine.secrets.held``): every configured provider's
        key, the variables ``[security] secret_env`` names, the server's token, credentials in
        the URLs and headers it connects with — what must never be stored, shown or sent to a
        model, in whatever text it turns up. Read from the environment once."""
        keys = [p.api_key_env for p in self.providers.values() if p.api_key_env]
        return held(self._env, [*keys, *self.secret_env])

    def context_window(self, model: ResolvedModel) -> int:
        """How many tokens ``model`` takes in one request, input and output together:
        ``[models."provider:model"] context_window``, else what genai-prices lists for the
        providers it prices, else ``DEFAULT_CONTEXT_WINDOW``. Looked up once per model."""
        known = self.context_windows.get(model.ref)
        if known is None and model.provider.kind == "local":
            from agentrunner.engine.local_model import LOCAL_CONTEXT_WINDOW

            known = self.context_windows[model.ref] = LOCAL_CONTEXT_WINDOW
        if known is None:
            from agentrunner.engine.pricing import listed_context_window

            known = listed_context_window(model.provider.name, model.name)
            self.context_windows[model.ref] = known = known or DEFAULT_CONTEXT_WINDOW
        return known

    def inputs(self, model: ResolvedModel) -> frozenset[str]:
        """What ``model`` takes (``[models."provider:model"] input``, else its family's)."""
        known = self.model_inputs.get(model.ref)
        if known is None:
            known = default_inputs(model.provider.kind, model.name)
        return known

    def knows(self, ref: str) -> bool:
        """Whether ``resolve(ref)`` would find the model."""
        try:
            self.resolve(ref)
        except AgentRunnerError:
            return False
        return True

    def has_credential(self, model: ResolvedModel) -> bool:
        """Whether the environment holds the key ``model``'s provider names (if it names one)."""
        variable = model.provider.api_key_env
        return not variable or bool(self._env.get(variable, "").strip())

    def check_credential(self, model: ResolvedModel) -> None:
        """``provider_auth`` now, as a request to ``model`` would be refused, when its
        provider's key is unset or could not be sent; nothing is built."""
        self._credential(model.provider)

    def client(self, model: ResolvedModel) -> ModelClient:
        """The provider's client, created on first use; ``provider_auth`` if its key is unset."""
        key = (model.provider.name, model.provider.kind)
        existing = self._clients.get(key)
        if existing is not None:
            return existing
        client = self._build(model.provider)
        self._clients[key] = client
        return client

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()

    def _build(self, provider: ProviderConfig) -> ModelClient:
        if provider.kind == "test":
            from agentrunner.engine.doubles import TestModel

            return TestModel()
        if provider.kind == "local":
            from agentrunner.engine.local_model import LocalModel

            return LocalModel(
                provider.name,
                lambda name: self.context_window(
                    ResolvedModel(f"{provider.name}:{name}", provider, name)
                ),
            )
        secret = self._credential(provider)
        headers = dict(provider.headers)
        if provider.kind == "anthropic":
            from agentrunner.engine.wire_anthropic import AnthropicWire

            wire: Wire = AnthropicWire(
                provider.name, prompt_cache=provider.prompt_cache is not False
            )
            headers.setdefault("anthropic-version", ANTHROPIC_VERSION)
        elif provider.kind == "openai-responses":
            from agentrunner.engine.wire_responses import ResponsesWire

            wire = ResponsesWire(
                provider.name,
                native_structured_output=provider.structured_output == "native",
                prompt_cache_key=_sends_prompt_cache_key(provider),
            )
        else:
            from agentrunner.engine.wire_openai import OpenAIWire

            azure = provider.api_version is not None
            wire = OpenAIWire(
                provider.name,
                max_tokens_field="max_completion_tokens"
                if provider.name == "openai" or azure
                else "max_tokens",
                native_structured_output=provider.structured_output == "native",
                azure_api_version=provider.api_version,
                prompt_cache_key=_sends_prompt_cache_key(provider),
            )
        headers.update(_auth_headers(provider, secret))
        if not provider.base_url:
            raise AgentRunnerError(
                ErrorCode.INTERNAL,
                f"provider '{provider.name}' has no base_url",
                hint=f"Set base_url under [providers.{provider.name}] in agentrunner.toml.",
            )
        # Here, once per provider, as the wires are: resolving models and reading prices (a
        # background brief's budget check) need no HTTP client.
        from agentrunner.engine.http_client import HttpModelClient

        return HttpModelClient(
            wire,
            base_url=provider.base_url,
            headers=headers,
            timeout_s=provider.timeout_s,
            secret=secret,
            secrets=self.secrets,
            refresh=lambda: self._refreshed(provider),
        )

    def _refreshed(self, provider: ProviderConfig) -> tuple[str, dict[str, str]] | None:
        """The provider's key as its environment variable holds it now, with the headers that
        send it; None where it has none (a variable unset since is ``provider_auth``)."""
        secret = self._credential(provider)
        return None if secret is None else (secret, _auth_headers(provider, secret))

    def _credential(self, provider: ProviderConfig) -> str | None:
        variable = provider.api_key_env
        if not variable:
            return None
        # Whitespace around a key (a file's last line break, a pasted space) is not part of it.
        value = self._env.get(variable, "").strip()
        if not value:
            raise AgentRunnerError(
                ErrorCode.PROVIDER_AUTH,
                f"the environment variable {variable} is not set "
                f"(needed by provider '{provider.name}')",
                hint=f"export {variable}=… (keys only ever come from the environment)",
            )
        problem = _unsendable(value)
        if problem is not None:
            raise AgentRunnerError(
                ErrorCode.PROVIDER_AUTH,
                f"the environment variable {variable} (the key of provider "
                f"'{provider.name}') holds {problem}: an API key is one line of printable "
                "characters",
                hint=f"Set {variable} to the key alone, e.g. export {variable}='sk-…' (a key "
                "copied from a file or a web page can bring a line break or an invisible "
                "character with it).",
            )
        return value

    def _not_found(self, ref: str, provider_name: str | None) -> AgentRunnerError:
        if provider_name is None:
            guesses = [f"{p}:{ref}" for p in _providers_for(ref)]
            close = difflib.get_close_matches(ref, list(self.aliases), n=2, cutoff=0.6)
            hint = f"Write models as provider:model, e.g. {' or '.join(guesses)}" + (
                f"; close aliases: {', '.join(close)}" if close else ""
            )
            return AgentRunnerError(
                ErrorCode.MODEL_NOT_FOUND, f"Model '{ref}' not found: no provider given", hint=hint
            )
        close = difflib.get_close_matches(provider_name, list(self.providers), n=3, cutoff=0.5)
        hint = (
            f"Did you mean {' or '.join(repr(c) for c in close)}?"
            if close
            else f"Known providers: {', '.join(sorted(self.providers))}."
        )
        return AgentRunnerError(
            ErrorCode.MODEL_NOT_FOUND,
            f"Model '{ref}' not found: unknown provider '{provider_name}'",
            hint=hint + " Add [providers.NAME] to agentrunner.toml for another endpoint.",
        )


def _auth_headers(provider: ProviderConfig, secret: str | None) -> dict[str, str]:
    """The header that carries ``secret`` to ``provider``, as its API takes it."""
    if not secret:
        return {}
    if provider.kind == "anthropic":
        return {"x-api-key": secret}
    if provider.kind != "openai-responses" and provider.api_version is not None:  # Azure
        return {"api-key": secret}
    return {"authorization": f"Bearer {secret}"}


def _sends_prompt_cache_key(provider: ProviderConfig) -> bool:
    """Only OpenAI is known to take the field; another server gets it when asked."""
    if provider.prompt_cache is not None:
        return provider.prompt_cache
    return provider.name == "openai"


def _unsendable(key: str) -> str | None:
    """What in ``key`` cannot go into an HTTP header as it is, and where (1-based) — never the
    character itself, which is part of a secret. Printable ASCII, no spaces, is sendable."""
    for position, char in enumerate(key, 1):
        if "!" <= char <= "~":
            continue
        if char in "\r\n":
            what = "a line break"
        elif char == " ":
            what = "a space"
        elif char.isascii() or unicodedata.category(char) == "Cc":
            what = "a control character"
        else:
            what = "a character that is not ASCII"
        return f"{what} at position {position}"
    return None


def _providers_for(name: str) -> tuple[str, ...]:
    """The built-in providers that serve a model named like ``name``, for a hint."""
    if name.startswith("claude"):
        return ("anthropic",)
    if name.startswith(("gpt", "chatgpt", "o1", "o3", "o4")):
        return ("openai",)
    return ("openai", "anthropic")
