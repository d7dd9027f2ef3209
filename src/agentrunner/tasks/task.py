"""Tasks (seed 004): run an agent once on an ``input`` object — no thread, no history — and get
a structured outcome, served from the result cache when the same agent, model and template
values ran before.

``Task.run`` follows seed 004's ``run()``: obtain the cache, resolve the model, compute the key,
look up; on a miss populate the templates (the system body and the user-position
``prompt_template``), execute, store in the background, return. A task runs once. Expected
failures are outcomes with a code from the taxonomy, never exceptions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agentrunner.budgets import usd_to_micros
from agentrunner.engine.turn import TurnLimits
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.tasks.cache import ResultCache, cache_key

if TYPE_CHECKING:
    from pathlib import Path

    from agentrunner.agents.registry import AgentRegistry
    from agentrunner.config import Config
    from agentrunner.engine.engine import Engine
    from agentrunner.runner import AgentRunner
    from agentrunner.store import Store

__all__ = ["Outcome", "Task", "TaskRunner", "execute", "runner_with_tasks"]


@dataclass(slots=True)
class Outcome:
    """``completed`` with ``output`` (the validated structured value when the agent has an
    ``output_schema``, else the text), or ``failed`` with ``error`` (code, message, hint)."""

    status: Literal["completed", "failed"]
    agent: str
    model: str | None = None
    output: Any = None
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = 0.0
    cached: bool = False
    error: dict[str, Any] | None = None

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
        }

    @classmethod
    def failure(cls, agent: str, exc: AgentRunnerError, model: str | None = None) -> Outcome:
        error: dict[str, Any] = {"code": str(exc.code), "message": exc.message}
        if exc.hint:
            error["hint"] = exc.hint
        return cls("failed", agent, model, error=error)


class TaskRunner:
    """Runs tasks for a project: its agents, its engine, its result cache.

    ``async with await TaskRunner.open() as tasks: await tasks.execute("summariser", {...})``
    """

    def __init__(
        self,
        config: Config,
        agents: AgentRegistry,
        engine: Engine,
        cache: ResultCache,
        *,
        store: Store | None = None,
    ) -> None:
        self.config = config
        self.agents = agents
        self.engine = engine
        self.cache = cache
        self._store = store  # opened for a store-backed cache, closed with the runner

    @classmethod
    async def open(cls, start: Path | None = None) -> TaskRunner:
        from agentrunner.engine.engine import Engine
        from agentrunner.project import load_project
        from agentrunner.store import open_store
        from agentrunner.tasks.cache import open_cache

        project = load_project(start)
        config = project.config
        store = None
        if config.cache_backend == "store":
            store = await open_store(config.resolved_database_url)
        return cls(
            config,
            project.agents,
            Engine.from_config(config),
            open_cache(config, store),
            store=store,
        )

    async def close(self) -> None:
        try:
            await self.cache.flush()
            await self.engine.aclose()
        finally:
            if self._store is not None:
                await self._store.close()

    async def __aenter__(self) -> TaskRunner:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def task(
        self, agent: str, input: Mapping[str, Any], *, model: str | None = None, cache: bool = True
    ) -> Task:
        return Task(self, agent, input, model=model, use_cache=cache)

    async def execute(
        self, agent: str, input: Mapping[str, Any], *, model: str | None = None, cache: bool = True
    ) -> Outcome:
        return await self.task(agent, input, model=model, cache=cache).run()

    async def execute_many(
        self,
        agent: str,
        inputs: Sequence[Mapping[str, Any]],
        *,
        concurrency: int = 8,
        model: str | None = None,
        cache: bool = True,
        on_done: Callable[[int, Outcome], None] | None = None,
    ) -> list[Outcome]:
        """One task per input, at most ``concurrency`` at once; outcomes in input order. A
        failing input is a failed outcome and the rest go on. ``on_done(index, outcome)`` is
        called as each finishes (progress)."""
        gate = asyncio.Semaphore(concurrency)

        async def one(index: int, values: Mapping[str, Any]) -> Outcome:
            async with gate:
                outcome = await self.execute(agent, values, model=model, cache=cache)
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
        use_cache: bool,
    ) -> None:
        self._runner = runner
        self._agent = agent
        self._input = input
        self._model = model
        self._use_cache = use_cache
        self._spent = False

    async def run(self) -> Outcome:
        if self._spent:
            raise RuntimeError("a Task runs once; create another for another run")
        self._spent = True
        try:
            return await self._run()
        except AgentRunnerError as exc:
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
        runner = self._runner
        cache = runner.cache  # 1. obtain the cache
        spec = runner.agents.get(self._agent)
        if not isinstance(self._input, Mapping):
            raise AgentRunnerError(ErrorCode.VALIDATION, "input must be a JSON object")
        model_ref = self._model or spec.model or runner.config.default_model or "test"
        resolved = runner.engine.models.resolve(model_ref)  # 2. resolve the model
        system = spec.render_system(self._input)  # templating first: its values make the key
        prompt = spec.render_prompt(self._input)
        used = {**system.used, **(prompt.used if prompt else {})}
        key = cache_key(spec.id, resolved.ref, used)  # 3. the key
        if self._use_cache:
            hit = await cache.get(spec.id, resolved.ref, key)  # 4. look up
            if hit is not None:
                return Outcome(
                    "completed",
                    spec.id,
                    resolved.ref,
                    hit.get("output"),
                    hit.get("usage", {}),
                    0.0,
                    cached=True,
                )
        message = prompt.text if prompt else json.dumps(dict(self._input), ensure_ascii=False)
        result = await runner.engine.run(  # 5-6. populated specification, executed
            model=[resolved.ref, *spec.fallback],
            retry=spec.retry,
            system=system.text,
            message=message,
            output_schema=spec.output_schema,
            stream=False,
            limits=TurnLimits(
                max_turns=spec.limits.max_turns,
                max_tokens=spec.limits.max_tokens,
                max_output_tokens=spec.limits.max_output_tokens,
                max_budget_micros=usd_to_micros(spec.limits.max_budget_usd)
                if spec.limits.max_budget_usd is not None
                else None,
            ),
        )
        outcome = Outcome(
            "completed",
            spec.id,
            result.model or resolved.ref,
            result.output,
            result.usage.to_dict(),
            result.cost_micros / 1e6 if result.cost_known else None,
        )
        if self._use_cache:
            cache.put(
                spec.id, resolved.ref, key, {"output": outcome.output, "usage": outcome.usage}
            )  # 7.
        return outcome


async def execute(
    agent: str, input: Mapping[str, Any], *, model: str | None = None, cache: bool = True
) -> Outcome:
    """Run ``agent`` once on ``input`` in the project at or above the working directory.

    A project that cannot be loaded (a broken agent file is ``invalid_specification``, an
    unreadable one ``runner_io``) is a failed outcome too, never a raised error.
    """
    try:
        tasks = await TaskRunner.open()
    except AgentRunnerError as exc:
        return Outcome.failure(agent, exc, model)
    async with tasks:
        return await tasks.execute(agent, input, model=model, cache=cache)


@contextlib.asynccontextmanager
async def runner_with_tasks(
    start: Path | None = None,
) -> AsyncIterator[tuple[AgentRunner, TaskRunner]]:
    """The project's runner and a task runner sharing its engine and store, as a long-lived
    interface (stdio, MCP) serves both; on exit the result cache is flushed, then the runner
    closed."""
    from agentrunner.runner import AgentRunner
    from agentrunner.tasks.cache import open_cache

    runner = await AgentRunner.open(start)
    cache = open_cache(runner.config, runner.store)
    try:
        yield runner, TaskRunner(runner.config, runner.agents, runner.engine, cache)
    finally:
        try:
            await cache.flush()
        finally:
            await runner.close()
