"""``AgentRunner.run_agent``: seed 000's seam — one agent turn on one thread, recorded.

The runner is sequencing only: it takes a run through seed 000's execution sequence (the
numbered comments), and each step's rules are another module's. ``run_lifecycle`` begins and
settles the run, ``run_thread`` reads and writes its thread, the prompt builder writes its
prompt, ``capabilities/toolset`` assembles its tools, ``model_settings`` checks its settings,
``compaction`` fits its history, the engine alone calls a model and the store alone knows SQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrunner.core.ids import new_id
from agentrunner.core.inputs import MAX_THREAD_ID_CHARS, check_id, check_input, check_text
from agentrunner.core.log_format import in_run
from agentrunner.core.paths import display_path
from agentrunner.engine.abort import AbortSignal
from agentrunner.engine.messages import Attachment, UserMessage, prompt_cache_key, text_and_files
from agentrunner.engine.model_calls import output_cap
from agentrunner.engine.pause import CallWaits, Resumed, TurnPaused
from agentrunner.engine.tools import ToolRetry
from agentrunner.engine.turn import TurnError, TurnLimits, TurnResult, cancelled_result
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.run.app import App, AppParts
from agentrunner.run.approvals import Waits, thread_waiting, waits_reason
from agentrunner.run.budgets import request_floors
from agentrunner.run.callbacks import AgentRunnerCallbacks, MessageHandlers, child_callbacks, safely
from agentrunner.run.capabilities.mcp import McpServers
from agentrunner.run.capabilities.registry import AskAgent, CapabilityRegistry
from agentrunner.run.capabilities.scope import RuntimeFiles
from agentrunner.run.capabilities.toolset import Caller, RunToolset, Toolsets
from agentrunner.run.compaction import Account, Compactor, Fitted, RequestShape
from agentrunner.run.guards import Guards
from agentrunner.run.lifecycle import LiveRun, RunLifecycle, as_error
from agentrunner.run.prompt import PromptBuilder, PromptContext, run_context
from agentrunner.run.request import Parent, RunAgentOverrides, RunRequest, RunResult
from agentrunner.run.sessions import agent_thread, find_thread, session_thread
from agentrunner.run.thread import RunThread

if TYPE_CHECKING:
    from agentrunner.agents.registry import AgentRegistry
    from agentrunner.agents.spec import AgentSpec
    from agentrunner.config import Config
    from agentrunner.core.model_settings import ModelSettings, RunSettings
    from agentrunner.engine.engine import Engine
    from agentrunner.engine.fallback import FallbackChain
    from agentrunner.run.effects import PostRunEffects
    from agentrunner.store.locks import HeldLock
    from agentrunner.store.records import ThreadSummary
    from agentrunner.store.run_log import RunLog
    from agentrunner.store.store import Store

__all__ = ["AgentRunner"]


@dataclass(slots=True)
class _Run:
    """One run of an agent in progress."""

    agent: AgentSpec
    thread: RunThread  # what it reads of its thread and writes there (a task's: nothing)
    live: LiveRun  # its rows, cost and lock (``run_lifecycle``)
    request: RunRequest
    settings: RunSettings | None  # its model settings; None: none set
    resumed: Resumed | None = None  # the step it finishes first, going on after a wait
    caller: Caller | None = None  # what bounds its tools and trust: the run that started it

    @property
    def run_id(self) -> str:
        return self.live.run_id

    @property
    def log(self) -> RunLog:
        return self.live.rows.log


class AgentRunner(AppParts):
    """Runs agents over an application (``app``: its config, agents, store and engine, which
    it closes with itself)."""

    def __init__(
        self,
        *,
        config: Config,
        agents: AgentRegistry,
        store: Store,
        engine: Engine,
        prompt: PromptBuilder,
        capabilities: CapabilityRegistry,
        effects: PostRunEffects,
        max_depth: int = 3,
        mcp: McpServers | None = None,
        runtime_files: RuntimeFiles | None = None,
        handlers: MessageHandlers | None = None,
        guards: Guards | None = None,
    ) -> None:
        self.app = App(config, agents, store, engine)
        self.prompt = prompt
        self.capabilities = capabilities
        self.effects = effects
        self.compactor = Compactor(engine, store, config)
        self.mcp = mcp or McpServers(config.root, config.state_dir / "logs")
        self.toolsets = Toolsets(
            capabilities,
            self.mcp,
            runtime_files or RuntimeFiles.of(config, agents),
            config=config,
            agents=agents,
            store=store,
            max_depth=max_depth,
            recall=effects.recall,
        )
        self.handlers = handlers or MessageHandlers()  # taps on every run's events
        self.lifecycle = RunLifecycle(store, config.budgets, self.handlers, engine.models)
        self.guards = Guards.of(config, guards)  # [guards]' built-ins, then extensions'
        self.waits = Waits(store, self.guards, engine.tracing)  # runs waiting for a person
        self.shutdown_grace_s = 5.0  # how long close() waits for post-run effects
        # Delegations running in this process, by run id: each has a signal of its own (its
        # caller's aborts it too), for a cancel asked of it alone (``abort_delegations``).
        self.delegations: dict[str, AbortSignal] = {}

    def abort_delegations(self, requested: Collection[str], reason: str) -> int:
        """Abort this process's delegations named in ``requested``; how many there were."""
        found = [self.delegations[run_id] for run_id in requested if run_id in self.delegations]
        for signal in found:
            signal.abort(reason)
        return len(found)

    async def close(self) -> None:
        await self.effects.drain(timeout_s=self.shutdown_grace_s)
        await self.mcp.aclose()
        await self.app.close()

    async def __aenter__(self) -> AgentRunner:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def check_run(self, agent_id: str, overrides: RunAgentOverrides | None) -> None:
        """Refused before anything is written: a tool its caller names that it is not granted."""
        if overrides is not None and overrides.only_tools is not None:
            agent = self.agents.runnable(agent_id, overrides.agent)
            self.toolsets.known(agent, None, overrides.tools, overrides.only_tools)

    async def session_thread(self, agent_id: str, *, new: bool = False) -> str:
        """The agent's current session thread (DESIGN decision 6); a new one if asked or none.
        ``agent_disabled`` for an agent that may not run, before a thread is opened."""
        self.agents.runnable(agent_id)
        return await session_thread(self.store, agent_id, new=new)

    async def agent_thread(self, agent_id: str, thread_id: str) -> str:
        """The id of ``agent_id``'s existing thread ``thread_id`` (or the only one beginning
        with it); ``thread_not_found``, naming the agent's recent threads, for an unknown id or
        another agent's thread: one a person names must exist (``run_agent`` opens any)."""
        self.agents.get(agent_id)
        return await agent_thread(self.store, agent_id, thread_id)

    async def smallest_requests(self, agent_ids: Iterable[str] | None = None) -> dict[str, int]:
        """What the smallest request of each agent (of ``agent_ids``) costs, with this runner's
        prompt, capabilities and models (``budgets.request_floors``): what a daily limit must
        have left for the agent to run. Empty when no daily limit is set."""
        return await request_floors(
            self.config,
            self.agents,
            self.store,
            only=agent_ids,
            personas=self.prompt.personas,
            capabilities=self.capabilities,
            models=self.engine.models,
        )

    async def compact_thread(
        self, thread_id: str, abort: AbortSignal | None = None
    ) -> ThreadSummary:
        """Summarize what thread ``thread_id``'s summary does not cover (by ``[compaction]
        model``, else its agent's); its next run is sent the summary instead; the messages stay.
        A run of its agent under the thread's lock (stop reason ``compacted``); refused before
        any write for an unknown thread or nothing to compact; a model's error or ``abort``
        ends the run ``failed`` or ``cancelled``, its id in the error's ``details["run_id"]``."""
        found = await find_thread(self.store, thread_id)
        agent = self.agents.get(found.agent_id)
        model = self.compactor.summarizer(agent)  # refused before any row
        async with self.store.locks.hold(found.id) as held:
            thread = await self.store.threads.get(found.id) or found
            if thread.waiting_run_id is not None:  # its paused step must stay as it is
                raise thread_waiting(thread.id, thread.waiting_run_id)
            summary, pairs = await self.compactor.unsummarized(thread)
            run = self.lifecycle.open(agent, new_id("run_"), thread.id, lock=held)
            self.lifecycle.begin(run)
            account = Account.of(run, agent.limits.timeout_s, abort)
            try:
                made = await self.compactor.compact_all(thread, summary, pairs, model, account)
            except BaseException as exc:
                failed = self.lifecycle.fail(run, as_error(exc), model=model, usage=run.cost.usage)
                await asyncio.shield(failed)
                if isinstance(exc, AgentRunnerError):  # which run to look at
                    exc.details["run_id"] = run.run_id
                raise
            usage = run.cost.usage
            await self.lifecycle.complete(run, stop_reason="compacted", model=model, usage=usage)
            return made

    async def run_agent(
        self,
        agent_id: str,
        thread_id: str,
        message: str,
        callbacks: AgentRunnerCallbacks | None = None,
        overrides: RunAgentOverrides | None = None,
        abort: AbortSignal | None = None,
        *,
        input: dict[str, Any] | None = None,
        run_id: str | None = None,
        attachments: Sequence[Attachment] = (),
    ) -> RunResult:
        """Run one turn of ``agent_id`` on ``thread_id`` with ``message``.

        Aborted: the run is ``cancelled``, its text empty, no error callback. Failed: the run is
        ``failed`` with its error's code and message, ``on_error`` fires and the error is raised.
        Either way the thread keeps what was said before the turn stopped (tool calls with their
        results, streamed text) ending in a message marked ``interrupted``, never the error;
        the session does not advance; what it cost is recorded (estimated for a request cut
        off). Cancelling the awaiting task settles the run cancelled, then re-raises.
        ``run_id`` names a run claimed from a mailbox (its row exists, ``running``). A thread
        id, message, input or tool list that cannot be (``check_run``) is ``validation``
        before anything is written. ``attachments``: the message's files (``attach``).
        """
        if run_id is None:
            check_id(thread_id, "thread_id", MAX_THREAD_ID_CHARS)
            self.check_run(agent_id, overrides)  # before its thread is opened
        check_text(message, "message", max_chars=None)
        input = check_input(input, max_bytes=None)
        return await self._run(
            RunRequest(
                agent_id,
                thread_id,
                message,
                callbacks or AgentRunnerCallbacks(),
                overrides or RunAgentOverrides(),
                abort,
                input or {},
                claimed_run_id=run_id,
                attachments=self.check_attachments(attachments),
            )
        )

    async def run_task(
        self,
        agent_id: str,
        message: str,
        callbacks: AgentRunnerCallbacks | None = None,
        overrides: RunAgentOverrides | None = None,
        abort: AbortSignal | None = None,
        *,
        input: dict[str, Any] | None = None,
        attachments: Sequence[Attachment] = (),
    ) -> RunResult:
        """Run ``agent_id`` once on ``message`` with no thread: no history before it, none kept
        after. Everything else is as ``run_agent``: the agent's tools, capabilities, MCP servers
        and trust, its budgets, the run recorded with its steps, events and costs (its
        ``thread_id`` empty), and the same outcomes. What tasks (seed 004) run on."""
        check_text(message, "message", max_chars=None)
        input = check_input(input, max_bytes=None)
        return await self._run(
            RunRequest(
                agent_id,
                None,
                message,
                callbacks or AgentRunnerCallbacks(),
                overrides or RunAgentOverrides(),
                abort,
                input or {},
                attachments=self.check_attachments(attachments),
            )
        )

    async def _run(self, request: RunRequest) -> RunResult:
        tracing = self.engine.tracing
        parent = request.parent
        with tracing.run(  # the run's span: its requests, tool calls and child runs nest
            request.agent_id,
            thread_id=request.thread_id,
            message=request.message,
            parent_run_id=parent.run_id if parent else None,
            depth=parent.depth + 1 if parent else 0,
        ) as span:
            result = await self._locked(request)
            tracing.run_done(
                span,
                stop_reason=result.stop_reason,
                model=result.model,
                usage=result.usage,
                cost_micros=result.cost_micros,
                cost_known=result.cost_known,
                text=result.text,
            )
            return result

    async def _locked(self, request: RunRequest) -> RunResult:
        thread_id = request.thread_id
        if thread_id is None:  # a task: no thread, so nothing to lock
            return await self._turn(request, None)
        hold = self.store.locks.hold(thread_id)  # 1. thread lock (its wait a span)
        async with self.engine.tracing.thread_lock(hold, thread_id) as held:
            return await self._turn(request, held)
        # 14. the lock is released when the block exits

    async def _turn(self, request: RunRequest, held: HeldLock | None) -> RunResult:
        parent, overrides = request.parent, request.overrides
        agent = overrides.applied(self._agent(request.agent_id, overrides.agent))  # 2.
        thread = await RunThread.read(  # 3. thread manifest, and its newest messages
            self.store, request.thread_id, agent.id, parent.thread_id if parent else None
        )
        run_id = request.claimed_run_id or new_id("run_")
        point = await self.waits.held(thread, request.claimed_run_id)
        # a delegation going on after a wait is bounded by its caller still
        caller = request.caller if point is None else Waits.caller_of(point)
        # the run's span is current: what it now knows
        trace_id = self.engine.tracing.run_started(run_id, agent.name, agent.description)
        live = self.lifecycle.open(
            agent,
            run_id,
            thread.id,
            callbacks=request.callbacks,
            channel=overrides.channel,
            notices=overrides.notify_channel,
            parent_run_id=parent.run_id if parent else None,
            parent_cost=parent.cost if parent else None,
            depth=caller.depth + 1 if caller else 0,
            lock=held,
        )
        settings = self._settings(agent, overrides.settings)
        known = self.toolsets.known(agent, caller, overrides.tools, overrides.only_tools)
        if settings is not None:  # what names what the run will not have: before any write
            settings.refuse_before_run(self.engine.models.providers, known)
        run = _Run(agent, thread, live, request, settings, caller=caller)
        user: UserMessage | None = None
        if point is None:
            # 4. append the user message (answering a crashed run's calls): written with the
            # run's first events, so a quick model's first step shares its transaction
            user = UserMessage(request.message, attachments=request.attachments)
            abandoned, said = thread.opening(run_id, user)
        else:  # going on after a wait: no new message; its paused step first
            run.resumed = await self.waits.going_on(live, point, thread)
            abandoned, said = thread.resuming(run_id, step_paused=run.resumed is not None)
        claimed = request.claimed_run_id is not None  # a queued run's row exists
        self.lifecycle.begin(live, before=abandoned, after=said, claimed=claimed, trace_id=trace_id)
        with in_run(run_id, agent.id, trace_id):  # what is logged meanwhile names the run
            return await self._outcome(run, user)

    async def _outcome(self, run: _Run, user: UserMessage | None) -> RunResult:
        """Steps 8-13 of a recorded run: the engine call, then the run settled however it
        ended."""
        request, thread = run.request, run.thread
        if request.parent is not None and request.abort is not None:
            self.delegations[run.run_id] = request.abort
        try:
            result = await self._execute(run, user)
        except asyncio.CancelledError as exc:  # the caller's task, not an abort signal
            # Shielded: recording the run must not be cut short by a second cancel.
            await asyncio.shield(self._settle_failure(run, as_error(exc), cancelled_result(exc)))
            raise
        except TurnPaused as paused:
            return await self._pause(run, paused)
        except Exception as exc:
            partial = exc.result if isinstance(exc, TurnError) else None
            return await self._settle_failure(run, as_error(exc), partial)
        await self.lifecycle.complete(  # 9-11. assistant messages, manifest, usage; 14. the
            run.live,  # thread's lock released with them: others may take the thread now
            [*thread.answer(result), *await self.waits.ended(run.live, result.text)],
            stop_reason=result.stop_reason,
            model=result.model,
            usage=run.live.cost.usage if run.live.waited else result.usage,
        )
        safely(request.callbacks.on_response, run.agent.id, thread.id or "", result.text)  # 12.
        payer, untitled = (run.agent.id, run.run_id), thread.untitled is not None
        self.effects.settled(thread.id, untitled, result.model or "test", request.message, payer)
        return RunResult.of(result, run.run_id, thread.id, run.agent.id, run.live.cost)

    async def _pause(self, run: _Run, paused: TurnPaused) -> RunResult:
        """The run waits for a person: it settles ``waiting``, holding its thread."""
        ops, requests = self.waits.pause_ops(run.agent, run.live, paused, run.caller)
        await self.lifecycle.wait(run.live, ops)
        requests = await self.waits.asked_of(run.run_id, requests)  # what a person decides
        cost, model = run.live.cost, paused.result.model
        return RunResult.waiting(requests, run.run_id, run.thread.id, run.agent.id, cost, model)

    async def _execute(self, run: _Run, user: UserMessage | None) -> TurnResult:
        agent, overrides, abort = run.agent, run.request.overrides, run.request.abort
        thread_id = run.thread.id
        if self.guards.inputs and user is not None:  # blocked: nothing is sent to a model
            await self.guards.check_input(
                agent, user.content, run_id=run.run_id, thread_id=thread_id
            )
        tracing = self.engine.tracing
        with tracing.step("build_prompt") as span:
            system, notes = overrides.prompt or await self._prompt(run)  # a replay's: as given
            tracing.prompt_built(span, system, notes)
        toolset = await self.toolsets.assemble(  # 6-7. capabilities, MCP servers, injections
            agent,
            run_id=run.run_id,
            thread_id=thread_id,
            caller=run.caller,
            callbacks=run.request.callbacks,
            emit=run.log.emit,
            injected=overrides.tools,
            only=overrides.only_tools,
        )
        tools = toolset.tools
        toolset.context.ask_agent = self._child_runs(run, toolset)
        settings = run.settings.for_tools(t.name for t in tools) if run.settings else None
        run.log.message("system_message", system)
        if notes:
            run.log.message("context_message", notes)
        for said in overrides.conversation:  # a task's, before its message: what was sent
            shown = text_and_files(said) if isinstance(said, UserMessage) else said.text
            run.log.message(f"{said.role}_message", shown)
        if user is not None:
            run.log.message("user_message", text_and_files(user))
        limits = agent.limits
        chain = self._chain(agent, overrides)
        fitted = Fitted([], None)
        if run.thread.recent is not None and overrides.history:  # what the window has room
            fitted = await self.compactor.fit(  # for of the thread, compacted
                run.thread.recent,
                run.thread.repairs,
                RequestShape(
                    chain=chain,
                    system=system,
                    notes=notes,
                    message=user.content if user is not None else "",
                    tools=tools,
                    output_schema=agent.output_schema,
                    max_output_tokens=output_cap(limits.max_output_tokens, settings),
                    history_tokens=limits.history_tokens,
                    attachments=user.attachments if user is not None else (),
                ),
                Account.of(run.live, limits.timeout_s, abort),
            )
        history = await self.store.attachments.hydrate([*fitted.history, *overrides.conversation])
        message = (await self.store.attachments.hydrate([user]))[0] if user else None
        policy = await self.waits.policy_of(agent, run.live, toolset.context.trust)
        return await self.engine.run(  # 8. the engine call
            chain=chain,
            system=system,
            history=[UserMessage(notes), *history] if notes else history,
            message=message,
            tools=tools,
            limits=TurnLimits(
                max_steps=overrides.max_steps or limits.max_steps,
                max_tool_calls=limits.max_tool_calls,
                max_tokens=limits.max_tokens,
                max_output_tokens=limits.max_output_tokens or fitted.output_cap,
                timeout_s=limits.timeout_s,
            ),
            emit=run.log.emit,
            abort=abort,
            stream=overrides.stream,
            output_schema=agent.output_schema,
            cost=run.live.cost,
            tool_context={"agent_id": agent.id, "thread_id": thread_id, "run_id": run.run_id},
            # before tools run: the model's tool calls (and earlier results) go into the
            # thread, with the events so far, in one transaction
            before_tools=lambda new: run.log.flush_with(run.thread.progress(new)),
            budget=run.live.budget,
            # A thread's turns share their prefix; runs on no thread share their agent's.
            cache_key=prompt_cache_key(f"thread:{thread_id}" if thread_id else f"agent:{agent.id}"),
            settings=settings,
            policy=policy,
            resume=run.resumed,
            check_answer=self.guards.answer_check(agent, run_id=run.run_id, thread_id=thread_id),
        )

    async def _prompt(self, run: _Run) -> tuple[str, str | None]:
        """The system prompt (5: the seeded memory only) and the user-position context: the
        caller's for this run, the agent's own notes and its thread's task (all untrusted)."""
        agent, overrides, thread = run.agent, run.request.overrides, run.thread.manifest
        task = thread.active_task if thread else None  # what its agent set (set_task)
        system = await self.prompt.build(
            PromptContext(
                agent,
                run.thread.id,
                run.request.input,
                overrides.background,
                channel_mode=overrides.channel_mode,
                task=task,
            ),
            memory=agent.memory,
        )
        return system, await run_context(agent, self.store.memory, overrides.context, task)

    async def _settle_failure(
        self, run: _Run, exc: AgentRunnerError, partial: TurnResult | None
    ) -> RunResult:
        """Seed 000's abort and engine-error semantics: the error goes to the run record, the
        events and the caller (``on_error``, then raised), never into the conversation, which
        keeps what the turn said (``RunThread.interrupted``); a cancelled run's result."""
        said = f"{run.agent.id} could not answer ({exc.code}): {exc.message}"
        await self.lifecycle.fail(
            run.live,
            exc,
            [
                *run.thread.interrupted(partial, run.log),
                *await self.waits.ended(run.live, said, failed=True),
            ],
            stop_reason=partial.stop_reason if partial else None,
            model=partial.model if partial else None,
            usage=partial.usage if partial else None,
        )
        if exc.code is ErrorCode.CANCELLED:
            thread_id, cost = run.thread.id, run.live.cost
            return RunResult.cancelled(partial, run.run_id, thread_id, run.agent.id, cost)
        safely(run.request.callbacks.on_error, run.agent.id, run.thread.id or "", exc.message)
        raise exc

    # -- helpers --------------------------------------------------------------------------

    def _agent(self, agent_id: str, version: AgentSpec | None = None) -> AgentSpec:
        """The agent as its file is now, or ``version`` of it, if it may run (a span)."""
        with self.engine.tracing.step("resolve_agent", agent_id=agent_id):
            return self.agents.runnable(agent_id, version)

    def settings_for(self, agent: AgentSpec, run: ModelSettings | None) -> ModelSettings | None:
        """A run's model settings: ``run``'s over the agent file's over ``[defaults]``'."""
        settings = self._settings(agent, run)
        return settings.merged if settings else None

    def _settings(self, agent: AgentSpec, run: ModelSettings | None) -> RunSettings | None:
        """A run's settings and whose each is (``RunSettings``); None when none is set (then
        ``model_settings``, pydantic, is not imported)."""
        config = self.config
        if run is None and agent.model_settings is None and config.model_settings is None:
            return None
        from agentrunner.core.model_settings import RunSettings

        return RunSettings.of(config.model_settings, agent, run, config.file)

    def _chain(self, agent: AgentSpec, overrides: RunAgentOverrides) -> FallbackChain:
        if overrides.model:
            return self.engine.chain([overrides.model, *overrides.fallback], agent.retry)
        refs = agent.model_refs(self.config.default_model or "test")
        try:
            return self.engine.chain([ref for _, ref in refs], agent.retry)
        except AgentRunnerError as exc:  # point at the line of the file that names the model
            if exc.code is ErrorCode.MODEL_NOT_FOUND and agent.path and exc.file is None:
                key = next(key for key, ref in refs if not self.engine.models.knows(ref))
                if key == "fallback" or agent.model is not None:  # else agentrunner.toml's
                    exc.file, exc.line = display_path(agent.path), agent.line_of(key)
            raise

    def _child_runs(self, run: _Run, toolset: RunToolset) -> AskAgent:
        """How ``ask_agent`` and ``delegate`` run another agent: a child run of this one, on
        a thread of its own under this run's (``<thread>.<agent>``), drawing on this run's
        budget, its grant and trust no wider than this run's, one level deeper."""
        request, abort = run.request, run.request.abort
        context = toolset.context
        caller = Caller(toolset.grant, context.trust, context.depth)

        async def ask(target: str, message: str) -> str:
            thread_id = run.thread.id
            parent = Parent(run.run_id, thread_id, run.live.cost, caller)
            # Its own signal: cancelling the delegation stops it alone (its caller is told and
            # goes on); the caller's abort stops it too.
            own = AbortSignal()
            unlink = abort.on_abort(lambda: own.abort(abort.reason or "")) if abort else None
            try:
                child = await self._run(
                    RunRequest(
                        target,
                        f"{thread_id}.{target}" if thread_id else None,  # a task's are tasks
                        message,
                        child_callbacks(request.callbacks, target, caller.depth + 1),
                        RunAgentOverrides(background=request.overrides.background),
                        own,
                        {},
                        parent,
                    )
                )
            except AgentRunnerError as exc:
                raise ToolRetry(f"{target} could not answer ({exc.code}): {exc.message}") from exc
            finally:
                if unlink is not None:
                    unlink()
                for run_id in [k for k, signal in self.delegations.items() if signal is own]:
                    del self.delegations[run_id]
            if own.aborted and not (abort and abort.aborted):
                raise ToolRetry(f"{target}'s run was cancelled ({own.reason}): it did not answer")
            if child.status == "waiting":  # this call's answer comes when that run ends
                raise CallWaits(child.run_id, waits_reason(target, child))
            return child.text

        return ask
