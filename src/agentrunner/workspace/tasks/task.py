"""Tasks (seed 004): run an agent once on an ``input`` object — no thread, no history — and get
a structured outcome, served from the result cache when the very same request ran before.

A task is a run without a thread (``AgentRunner.run_task``): the agent's tools, capabilities,
MCP servers, trust and budgets apply, and the run is recorded like any other. ``Task.run``
follows seed 004's ``run()``: obtain the cache, resolve the model, compute the key, look up; on a
miss populate the templates (the system body and the user-position ``prompt_template``),
execute, store in the background, return. The cache is used when the agent file says
``cache: true`` (or the caller asks); its key covers everything that reaches the model, so an
answer is only ever served for the same request (``tasks.cache``). A task runs once. Expected
failures are outcomes with a code from the taxonomy, never exceptions.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.run.app import AppParts
from agentrunner.workspace.tasks.cache import ResultCache, cache_key
from agentrunner.workspace.tasks.conversation import conversation, conversation_key

if TYPE_CHECKING:
    from agentrunner.agents.spec import AgentSpec
    from agentrunner.core.model_settings import ModelSettings
    from agentrunner.engine.abort import AbortSignal
    from agentrunner.engine.messages import Attachment
    from agentrunner.run.request import RunAgentOverrides
    from agentrunner.run.runner import AgentRunner

__all__ = ["Outcome", "Task", "TaskRunner"]


@dataclass(slots=True)
class Outcome:
    """``completed`` with ``output`` (the validated structured value when the agent has an
    ``output_schema``, else the text), or ``failed`` with ``error`` (code, message, hint).
    ``run_id`` names the recorded run (none for a cache hit)."""

    status: Literal["completed", "failed"]
    agent: str
    model: str | None = None
    output: Any = None
    usage: dict[str, Any] = field(default_factory=dict)
    cost_usd: float | None = 0.0
    cached: bool = False
    error: dict[str, Any] | None = None
    run_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "agent": self.agent,
            "model": self.model,
            "output": self.output,
            "usage": self.usage,
            "cost_usd": self.cost_usd,
            "cached": self.cached,
            "error": self.error,
            "run_id": self.run_id,
        }

    @classmethod
    def failure(cls, agent: str, exc: AgentRunnerError, model: str | None = None) -> Outcome:
        error: dict[str, Any] = {"code": str(exc.code), "message": exc.message}
        if exc.hint:
            error["hint"] = exc.hint
        if exc.file:  # which file, and line, of the agent is at fault
            error["file"] = exc.file
            if exc.line is not None:
                error["line"] = exc.line
        return cls("failed", agent, model, error=error)


class TaskRunner(AppParts):
    """Runs tasks for a project: its agents, through its runner, with its result cache.

    ``agentrunner.runtime.compose.open_task_runner`` builds one for a project:
    ``async with await open_task_runner() as tasks: await tasks.execute("summariser", {...})``
    """

    def __init__(
        self, runner: AgentRunner, cache: ResultCache, *, owns_runner: bool = False
    ) -> None:
        self.runner = runner
        self.app = runner.app
        self.cache = cache
        self._owns_runner = owns_runner  # opened for this task runner: closed with it

    async def close(self) -> None:
        try:
            await self.cache.flush()
        finally:
            if self._owns_runner:
                await self.runner.close()

    async def __aenter__(self) -> TaskRunner:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def task(
        self,
        agent: str,
        input: Mapping[str, Any],
        *,
        model: str | None = None,
        fallback: Sequence[str] = (),
        cache: bool | None = None,
        abort: AbortSignal | None = None,
        model_settings: ModelSettings | Mapping[str, Any] | None = None,
        attachments: Sequence[Attachment] = (),
        conversation: Sequence[Mapping[str, Any]] | None = None,
    ) -> Task:
        """One task. ``model`` replaces the agent's models (``fallback`` names models to fall
        back to); ``cache`` overrides the agent file's ``cache:``; ``model_settings`` win over
        the agent file's (a bad one: ``validation``, raised here); ``attachments``: files sent
        with its message (``runner.attach``), part of its cache key by their digests."""
        return Task(
            self,
            agent,
            input,
            model=model,
            fallback=fallback,
            cache=cache,
            abort=abort,
            model_settings=model_settings,
            attachments=attachments,
            conversation=conversation,
        )

    async def execute(
        self,
        agent: str,
        input: Mapping[str, Any],
        *,
        model: str | None = None,
        fallback: Sequence[str] = (),
        cache: bool | None = None,
        abort: AbortSignal | None = None,
        model_settings: ModelSettings | Mapping[str, Any] | None = None,
        attachments: Sequence[Attachment] = (),
        conversation: Sequence[Mapping[str, Any]] | None = None,
    ) -> Outcome:
        return await self.task(
            agent,
            input,
            model=model,
            fallback=fallback,
            cache=cache,
            abort=abort,
            model_settings=model_settings,
            attachments=attachments,
            conversation=conversation,
        ).run()

    async def execute_many(
        self,
        agent: str,
        inputs: Sequence[Mapping[str, Any]],
        *,
        concurrency: int = 8,
        model: str | None = None,
        fallback: Sequence[str] = (),
        cache: bool | None = None,
        on_done: Callable[[int, Outcome], None] | None = None,
        model_settings: ModelSettings | Mapping[str, Any] | None = None,
    ) -> list[Outcome]:
        """One task per input, at most ``concurrency`` at once; outcomes in input order. A
        failing input is a failed outcome and the rest go on. ``on_done(index, outcome)`` is
        called as each finishes (progress, or outcomes written as they come)."""
        gate = asyncio.Semaphore(concurrency)

        async def one(index: int, values: Mapping[str, Any]) -> Outcome:
            async with gate:
                outcome = await self.execute(
                    agent,
                    values,
                    model=model,
                    fallback=fallback,
                    cache=cache,
                    model_settings=model_settings,
                )
            if on_done is not None:
                on_done(index, outcome)
            return outcome

        return list(await asyncio.gather(*(one(i, v) for i, v in enumerate(inputs))))


class Task:
    """One execution of an agent on an input. Single use: ``run`` a second time raises."""

    def __init__(
        self,
        runner: TaskRunner,
        agent: str,
        input: Mapping[str, Any],
        *,
        model: str | None,
        fallback: Sequence[str] = (),
        cache: bool | None = None,
        abort: AbortSignal | None = None,
        model_settings: ModelSettings | Mapping[str, Any] | None = None,
        attachments: Sequence[Attachment] = (),
        conversation: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        self._runner = runner
        self._conversation = conversation
        self._attachments = tuple(attachments)
        self._agent = agent
        self._input = input
        self._model = model
        self._fallback = tuple(fallback)
        self._cache = cache
        self._abort = abort
        self._spent = False
        self._settings = model_settings

    async def run(self) -> Outcome:
        if self._spent:
            raise RuntimeError("a Task runs once; create another for another run")
        self._spent = True
        try:
            tracing = self._runner.app.engine.tracing
            with tracing.task(self._agent) as span:  # its cache lookup and run nest under it
                outcome = await self._run()
                tracing.task_done(
                    span, model=outcome.model, cached=outcome.cached, error=outcome.error
                )
                return outcome
        except AgentRunnerError as exc:
            if exc.code is ErrorCode.INTERNAL:  # a bug in the run, in seed 004's words
                exc = AgentRunnerError(
                    ErrorCode.EXECUTION_FAILED, f"Agent execution failed: {exc.message}"
                )
            return Outcome.failure(self._agent, exc, self._model)
        except Exception as exc:  # a bug, reported in the taxonomy's words
            return Outcome.failure(
                self._agent,
                AgentRunnerError(
                    ErrorCode.EXECUTION_FAILED,
                    f"Agent execution failed: {type(exc).__name__}: {exc}",
                ),
            )

    async def _run(self) -> Outcome:
        from agentrunner.run.request import RunAgentOverrides

        runner = self._runner.runner
        overrides = RunAgentOverrides(  # a bad setting: a failed outcome, as a bad input is
            model=self._model,
            fallback=self._fallback,
            stream=False,
            model_settings=self._settings,
            conversation=conversation(self._conversation),
        )
        cache = self._runner.cache  # 1. obtain the cache
        spec = runner.app.agents.runnable(self._agent)  # before the cache: no answer when disabled
        if not isinstance(self._input, Mapping):
            raise AgentRunnerError(ErrorCode.VALIDATION, "input must be a JSON object")
        chain = (
            [self._model, *self._fallback]
            if self._model
            else [spec.model or runner.app.config.default_model or "test", *spec.fallback]
        )
        models = [runner.app.engine.models.resolve(m).ref for m in chain]  # 2. resolve the model
        system = spec.render_system(self._input)  # templating first: its values make the key
        prompt = spec.render_prompt(self._input)
        message = prompt.text if prompt else json.dumps(dict(self._input), ensure_ascii=False)
        use_cache = spec.cache if self._cache is None else self._cache
        key = ""
        if use_cache:  # 3. the key
            sent = {**system.used, **prompt.used} if prompt else spec.with_defaults(self._input)
            facts = await self._request_facts(spec, models, sent, overrides)
            key = cache_key(spec.id, models[0], facts)
            hit = await self._look_up(cache, spec.id, models[0], key)  # 4. look up
            if hit is not None:
                return Outcome(
                    "completed",
                    spec.id,
                    models[0],
                    hit.get("output"),
                    hit.get("usage", {}),
                    0.0,
                    cached=True,
                )
        result = await runner.run_task(  # 5-6. populated specification, executed
            spec.id,
            message,
            overrides=overrides,
            abort=self._abort,
            input=dict(self._input),
            attachments=self._attachments,
        )
        if result.stop_reason == "cancelled":  # what the run spent before it stopped, kept
            stopped = AgentRunnerError(ErrorCode.CANCELLED, f"task stopped: run {result.run_id}")
            return replace(
                Outcome.failure(spec.id, stopped, result.model or models[0]),
                usage=result.usage.to_dict(),
                cost_usd=result.cost_usd if result.cost_known else None,
                run_id=result.run_id,
            )
        outcome = Outcome(
            "completed",
            spec.id,
            result.model or models[0],
            result.output,
            result.usage.to_dict(),
            result.cost_usd if result.cost_known else None,
            run_id=result.run_id,
        )
        if use_cache:  # 7.
            cache.put(spec.id, models[0], key, {"output": outcome.output, "usage": outcome.usage})
        return outcome

    async def _look_up(
        self, cache: ResultCache, agent_id: str, model: str, key: str
    ) -> dict[str, Any] | None:
        tracing = self._runner.app.engine.tracing
        with tracing.step("cache_lookup") as span:
            hit = await cache.get(agent_id, model, key)
            tracing.cache_looked_up(span, hit=hit is not None)
            return hit

    async def _request_facts(
        self,
        spec: AgentSpec,
        models: list[str],
        sent: Mapping[str, Any],
        overrides: RunAgentOverrides,
    ) -> dict[str, Any]:
        """Besides the agent's id and model, everything that decides what the model is sent:
        the input values that reach it, the definition (any edit of the agent file), the whole
        model chain, the model settings (the run's, the file's and ``[defaults]``'), the tone it
        is given (the project's persona configuration and files), the memory the agent may have
        written, the reports it may delegate to (the delegate tool lists them), and the
        conversation it carries."""
        from agentrunner.run.capabilities.toolset import delegates  # loaded with the runner

        runner = self._runner.runner
        facts: dict[str, Any] = {"input": dict(sent), "agent": spec.digest, "models": models}
        settings = runner.settings_for(spec, overrides.settings)
        if settings is not None:
            facts["model_settings"] = settings.to_dict()
        reports = delegates(runner.app.agents, spec.id)
        if reports:
            facts["reports"] = {r.id: r.description or r.name for r in reports}
        facts["persona"] = runner.prompt.personas.tone(spec)
        if "memory" in spec.capabilities:
            facts["memory"] = await runner.app.store.memory.blocks(spec.id)
        if overrides.conversation:  # the messages before the task's own, whole and in order
            facts["conversation"] = conversation_key(overrides.conversation)
        if self._attachments:  # what the model is sent of each file: its content, name, detail
            facts["attachments"] = [[a.sha256, a.name, a.detail] for a in self._attachments]
        return facts
