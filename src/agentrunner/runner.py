"""``AgentRunner.run_agent``: seed 000's seam — one agent turn on one thread, recorded.

The runner is sequencing only. It knows no prompt text (the prompt builder does), no tool
wiring (the capability registry does), no provider (the engine does) and no SQL (the store
does). The numbered comments are seed 000's execution sequence.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrunner._paths import display_path
from agentrunner.budgets import request_floors
from agentrunner.callbacks import (
    AgentRunnerCallbacks,
    MessageHandlers,
    child_callbacks,
    safely,
)
from agentrunner.capabilities.mcp import McpServers
from agentrunner.capabilities.registry import AskAgent, CapabilityContext, CapabilityRegistry
from agentrunner.capabilities.scope import RuntimeFiles
from agentrunner.compaction import (
    HISTORY_PAGE,
    Account,
    Compactor,
    Fitted,
    Recent,
    RequestShape,
)
from agentrunner.engine.abort import AbortSignal
from agentrunner.engine.history import missing_results, window
from agentrunner.engine.messages import (
    AssistantMessage,
    Message,
    Usage,
    UserMessage,
    prompt_cache_key,
)
from agentrunner.engine.tools import Tool, ToolRetry
from agentrunner.engine.turn import (
    CostTracker,
    TurnError,
    TurnLimits,
    TurnResult,
    cancelled_result,
    output_cap,
)
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.ids import new_id
from agentrunner.inputs import MAX_THREAD_ID_CHARS, check_id, check_input, check_text
from agentrunner.log_format import in_run
from agentrunner.prompt import (
    PromptBuilder,
    PromptContext,
    agent_notes,
    caller_context_message,
    notes_message,
)
from agentrunner.run_lifecycle import LiveRun, RunLifecycle, as_error
from agentrunner.run_rows import ChannelRun
from agentrunner.sessions import agent_thread, check_owner, find_thread, session_thread
from agentrunner.store.repositories import ops

if TYPE_CHECKING:
    from agentrunner.agents.registry import AgentRegistry
    from agentrunner.agents.spec import AgentSpec, Trust
    from agentrunner.config import Config
    from agentrunner.effects import PostRunEffects
    from agentrunner.engine.engine import Engine
    from agentrunner.engine.fallback import FallbackChain
    from agentrunner.engine.tracing import Tracing
    from agentrunner.model_settings import ModelSettings
    from agentrunner.store.locks import HeldLock
    from agentrunner.store.records import Thread, ThreadSummary
    from agentrunner.store.run_log import RunLog
    from agentrunner.store.store import Store

__all__ = ["AgentRunner", "RunAgentOverrides", "RunResult"]


@dataclass(frozen=True, slots=True)
class RunAgentOverrides:
    """How this run executes, not what the agent is (seed 000).

    ``model`` replaces the agent's whole fallback chain for this run (a one-off choice means
    that model only), unless ``fallback`` names models to fall back to. ``tools`` are run-time
    injections (step 7), e.g. a channel's ``send_message``; ``channel_mode`` tells the prompt
    builder the agent speaks only through them; with ``history=False`` the thread's earlier
    messages are not sent (the caller's message carries the context, as a channel transcript
    does); with ``stream=False`` the model's answers arrive whole (nobody watches tokens).
    ``model_settings`` (a ``ModelSettings`` or a mapping, checked here: ``validation`` naming
    a bad setting) win over the agent file's and ``[defaults]``', setting by setting.
    ``context`` is what the caller sends for this run besides its message (an OpenAI client's
    system message): untrusted, it goes in the user position before the transcript, marked as
    the caller's, and is kept in the run's record, not in the thread (DESIGN decision 1).
    """

    model: str | None = None
    fallback: tuple[str, ...] = ()
    max_steps: int | None = None
    background: bool = False
    channel_mode: bool = False
    channel: ChannelRun | None = None
    history: bool = True
    tools: tuple[Tool, ...] = ()
    stream: bool = True
    model_settings: ModelSettings | Mapping[str, Any] | None = None
    context: str | None = None

    def __post_init__(self) -> None:
        if self.fallback and self.model is None:  # else the fallbacks would be dropped unsaid
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                "fallback models need a model to fall back from",
                hint="Name the model too (--model with --fallback); the agent's own chain "
                "is in its file's fallback:.",
            )
        if self.context is not None:  # it is stored with the run: what could not be, refused
            check_text(self.context, "context", max_chars=None)
        if self.model_settings is not None:  # pydantic only for runs that set some
            from agentrunner.model_settings import model_settings

            object.__setattr__(self, "model_settings", model_settings(self.model_settings))

    @property
    def settings(self) -> ModelSettings | None:
        """``model_settings``, checked."""
        value = self.model_settings
        return None if isinstance(value, Mapping) else value


@dataclass(slots=True)
class RunResult:
    text: str
    run_id: str
    thread_id: str | None
    agent_id: str
    stop_reason: str
    usage: Usage
    cost_micros: int
    cost_known: bool
    model: str | None
    output: Any = None

    @property
    def cost_usd(self) -> float:
        return self.cost_micros / 1_000_000

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``run --json`` and of the stdio protocol's run result."""
        return {
            "status": "cancelled" if self.stop_reason == "cancelled" else "completed",
            "text": self.text,
            "output": self.output,
            "agent_id": self.agent_id,
            "thread_id": self.thread_id,
            "run_id": self.run_id,
            "stop_reason": self.stop_reason,
            "model": self.model,
            "usage": self.usage.to_dict(),
            "cost_usd": self.cost_usd if self.cost_known else None,
            "cost_known": self.cost_known,
        }


@dataclass(frozen=True, slots=True)
class _Parent:
    """The run that started this one through ``ask_agent`` or ``delegate``."""

    run_id: str
    thread_id: str | None
    depth: int
    grant: frozenset[str]
    trust: Trust  # the child's is no higher
    cost: CostTracker  # the child's tracker adds to it, so its limit bounds the child too


@dataclass(frozen=True, slots=True)
class _Request:
    """What a run was asked to do: by ``run_agent``, ``run_task``, ``ask_agent`` or
    ``delegate``."""

    agent_id: str
    thread_id: str | None  # None: a task, a run on no thread
    message: str
    callbacks: AgentRunnerCallbacks
    overrides: RunAgentOverrides
    abort: AbortSignal | None
    input: dict[str, Any]
    parent: _Parent | None = None
    claimed_run_id: str | None = None  # a run already claimed from a mailbox


@dataclass(slots=True)
class _Run:
    """One run of an agent in progress: its lifecycle's part, and its thread's."""

    agent: AgentSpec
    thread: Thread | None  # None: a task, a run on no thread
    live: LiveRun  # its rows, cost and lock (``run_lifecycle``)
    callbacks: AgentRunnerCallbacks
    next_seq: int
    saved: int = 0  # how many of the turn's new messages are already in the thread
    # the run's message as written in its thread: the thread, its number there, the message
    said: tuple[str, int, UserMessage] | None = None

    @property
    def run_id(self) -> str:
        return self.live.run_id

    @property
    def log(self) -> RunLog:
        return self.live.rows.log


class AgentRunner:
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
    ) -> None:
        self.config = config
        self.agents = agents
        self.store = store
        self.engine = engine
        self.prompt = prompt
        self.capabilities = capabilities
        self.effects = effects
        self.compactor = Compactor(engine, store, config)
        self.max_depth = max_depth
        self.mcp = mcp or McpServers(config.root, config.state_dir / "logs")
        self.runtime_files = runtime_files or RuntimeFiles.of(config, agents)
        self.handlers = handlers or MessageHandlers()  # taps on every run's events
        self.lifecycle = RunLifecycle(store, config.budgets, self.handlers, engine.models)
        self.shutdown_grace_s = 5.0  # how long close() waits for post-run effects
        # Delegations running in this process, by run id: each has a signal of its own (its
        # caller's aborts it too), for a cancel asked of it alone (``abort_delegations``).
        self.delegations: dict[str, AbortSignal] = {}

    def abort_delegations(self, requested: Collection[str], reason: str) -> int:
        """Abort the delegations running in this process whose ids are in ``requested`` (a
        cancel asked of one of them, from any process); how many there were."""
        found = [self.delegations[run_id] for run_id in requested if run_id in self.delegations]
        for signal in found:
            signal.abort(reason)
        return len(found)

    async def close(self) -> None:
        await self.effects.drain(timeout_s=self.shutdown_grace_s)
        await self.mcp.aclose()
        await self.engine.aclose()
        await self.store.close()

    async def __aenter__(self) -> AgentRunner:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def session_thread(self, agent_id: str, *, new: bool = False) -> str:
        """The agent's current session thread (DESIGN decision 6); a new one if asked or none.
        ``agent_disabled`` for an agent that may not run, before a thread is opened."""
        self.agents.runnable(agent_id)
        return await session_thread(self.store, agent_id, new=new)

    async def agent_thread(self, agent_id: str, thread_id: str) -> str:
        """The id of ``agent_id``'s existing thread ``thread_id`` — or the one whose id begins
        with it, if only one does. ``thread_not_found`` (with the agent's recent threads as a
        hint) for an unknown id or another agent's thread: a thread named by a person must
        exist, where ``run_agent`` opens a new one under any id it is given."""
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
        """Summarize the messages of thread ``thread_id`` (or of the one whose id begins with
        it) that its summary does not cover yet, by ``[compaction] model`` (default: its agent's
        model): its next run is sent the summary in their place; the messages stay. Done under
        the thread's lock as a run of its agent (stop reason ``compacted``), whose budgets apply
        and whose cost rows record it. ``thread_not_found`` for an unknown thread, ``validation``
        for one with nothing to compact, both before anything is written; the model's errors
        as a run's (the run ``failed``), and ``cancelled`` once ``abort`` fires (the run
        ``cancelled``, the request it cut off charged by estimate): either carries the run's id
        in its ``details["run_id"]``."""
        found = await find_thread(self.store, thread_id)
        agent = self.agents.get(found.agent_id)
        model = self.compactor.summarizer(agent)  # refused before any row
        async with self.store.locks.hold(found.id) as held:
            thread = await self.store.threads.get(found.id) or found
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
    ) -> RunResult:
        """Run one turn of ``agent_id`` on ``thread_id`` with ``message``.

        Aborted: the run is ``cancelled``, the result's text is empty, no error callback.
        Failed: the run is ``failed`` with its error's code and message, ``on_error`` fires and
        the error is raised again (an ``AgentRunnerError`` with its code). Either way the thread
        keeps what was said before the turn stopped — tool calls with their results, streamed
        text — ending in a message marked ``interrupted``, never the error itself, and the
        session does not advance; what the run cost is recorded (estimated, and marked so, for
        a request cut off before the provider reported it). Cancelling the task that awaits
        this settles the run as cancelled too, then re-raises ``CancelledError``.
        ``run_id`` names a run already claimed from a mailbox (its row exists, ``running``).
        A thread id, message or input that cannot be stored (``agentrunner.inputs``) is
        ``validation``, before anything is written (a claimed run's thread was named by the
        library when it was queued).
        """
        if run_id is None:
            check_id(thread_id, "thread_id", MAX_THREAD_ID_CHARS)
        check_text(message, "message", max_chars=None)
        input = check_input(input, max_bytes=None)
        return await self._run(
            _Request(
                agent_id,
                thread_id,
                message,
                callbacks or AgentRunnerCallbacks(),
                overrides or RunAgentOverrides(),
                abort,
                input or {},
                claimed_run_id=run_id,
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
    ) -> RunResult:
        """Run ``agent_id`` once on ``message`` with no thread: no history before it, none kept
        after. Everything else is as ``run_agent``: the agent's tools, capabilities, MCP servers
        and trust, its budgets, the run recorded with its steps, events and costs (its
        ``thread_id`` empty), and the same outcomes. What tasks (seed 004) run on."""
        check_text(message, "message", max_chars=None)
        input = check_input(input, max_bytes=None)
        return await self._run(
            _Request(
                agent_id,
                None,
                message,
                callbacks or AgentRunnerCallbacks(),
                overrides or RunAgentOverrides(),
                abort,
                input or {},
            )
        )

    async def _run(self, request: _Request) -> RunResult:
        tracing = self.engine.tracing
        if tracing is None:
            return await self._locked(request)
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

    async def _locked(self, request: _Request) -> RunResult:
        if request.thread_id is None:  # a task: no thread, so nothing to lock
            return await self._turn(request, None)
        tracing = self.engine.tracing
        if tracing is not None:
            return await self._traced_lock(tracing, request, request.thread_id)
        async with self.store.locks.hold(request.thread_id) as held:  # 1. thread lock
            return await self._turn(request, held)
        # 14. the lock is released when the block exits

    async def _traced_lock(self, tracing: Tracing, request: _Request, thread_id: str) -> RunResult:
        """As ``_locked``, the wait for the thread's lock a span of its own."""
        async with contextlib.AsyncExitStack() as locked:
            with tracing.step("thread_lock", thread_id=thread_id):
                held = await locked.enter_async_context(self.store.locks.hold(thread_id))
            return await self._turn(request, held)

    async def _turn(self, request: _Request, held: HeldLock | None) -> RunResult:
        agent_id, thread_id, message = request.agent_id, request.thread_id, request.message
        overrides, parent, claimed = request.overrides, request.parent, request.claimed_run_id
        agent = self._agent(agent_id)  # 2. agent config (agent_disabled: not run)
        thread: Thread | None = None
        recent: Recent | None = None
        last_seq = 0
        if thread_id is not None:
            thread = await self.store.threads.open(  # 3. thread manifest
                thread_id, agent_id, parent.thread_id if parent else None
            )
            check_owner(thread, agent_id)
            # its newest messages after its summary: more are read if the window has room
            newest, last_seq = await self.store.messages.tail(
                thread_id, HISTORY_PAGE, after=thread.summary_through
            )
            recent = Recent(thread, newest, last_seq)
        repairs = missing_results(window(recent.messages)) if recent else []
        run_id = claimed or new_id("run_")
        trace_id = None
        if self.engine.tracing is not None:  # the run's span is current: what it now knows
            trace_id = self.engine.tracing.run_started(run_id, agent.name, agent.description)
        live = self.lifecycle.open(
            agent,
            run_id,
            thread_id,
            callbacks=request.callbacks,
            channel=overrides.channel,
            parent_run_id=parent.run_id if parent else None,
            parent_cost=parent.cost if parent else None,
            depth=parent.depth + 1 if parent else 0,
            lock=held,
        )
        run = _Run(agent, thread, live, request.callbacks, last_seq + 1)
        self._refuse_bad_settings(agent, overrides, parent)  # before anything is written
        user = UserMessage(message)
        if thread is not None:
            run.said = (thread.id, run.next_seq + len(repairs), user)
        # 4. append the user message (answering a crashed run's calls): written with the
        # run's first events, so a quick model's first step shares its transaction
        self.lifecycle.begin(
            live,
            before=[]
            if thread is None
            else self.store.runs.abandon_ops(  # runs that died holding this thread (now ours)
                thread.id, run_id, message_count=thread.message_count, last_seq=last_seq
            ),
            after=self._append(run, [*repairs, user], session=False, final=False),
            claimed=claimed is not None,  # a queued run's row exists
            trace_id=trace_id,
        )
        with in_run(run_id, agent_id, trace_id):  # what is logged meanwhile names the run
            return await self._outcome(run, recent, repairs, user, request, last_seq == 0)

    async def _outcome(
        self,
        run: _Run,
        recent: Recent | None,
        repairs: Sequence[Message],
        user: UserMessage,
        request: _Request,
        new_thread: bool,
    ) -> RunResult:
        """Steps 8-13 of a recorded run: the engine call, then the run settled however it
        ended."""
        overrides, abort = request.overrides, request.abort
        agent_id, thread_id, callbacks = request.agent_id, request.thread_id, request.callbacks
        if request.parent is not None and abort is not None:
            self.delegations[run.run_id] = abort
        try:
            result = await self._execute(
                run,
                recent if overrides.history else None,
                repairs,
                user,
                overrides,
                abort,
                request.input,
                request.parent,
            )
        except asyncio.CancelledError as exc:  # the caller's task, not an abort signal
            # Shielded: recording the run must not be cut short by a second cancel.
            await asyncio.shield(self._settle_failure(run, as_error(exc), cancelled_result(exc)))
            raise
        except Exception as exc:
            partial = exc.result if isinstance(exc, TurnError) else None
            return await self._settle_failure(run, as_error(exc), partial)
        await self.lifecycle.complete(  # 9-11. assistant messages, manifest, usage; 14. the
            run.live,  # thread's lock released with them: others may take the thread now
            self._append(run, result.new_messages[run.saved :], session=True),
            stop_reason=result.stop_reason,
            model=result.model,
            usage=result.usage,
        )
        safely(callbacks.on_response, agent_id, thread_id or "", result.text)  # 12.
        thread = run.thread
        if thread is not None and thread.title is None and new_thread:  # 13. effects
            self.effects.dispatch_title(
                thread.id,
                result.model or "test",
                request.message,
                agent_id=agent_id,
                run_id=run.run_id,
            )
        return RunResult(
            result.text,
            run.run_id,
            thread_id,
            agent_id,
            result.stop_reason,
            result.usage,
            run.live.cost.micros,
            run.live.cost.known,
            result.model,
            result.output,
        )

    async def _execute(
        self,
        run: _Run,
        recent: Recent | None,
        repairs: Sequence[Message],
        user: UserMessage,
        overrides: RunAgentOverrides,
        abort: AbortSignal | None,
        input: dict[str, Any],
        parent: _Parent | None,
    ) -> TurnResult:
        agent = run.agent
        thread_id = run.thread.id if run.thread else None
        tracing = self.engine.tracing
        if tracing is None:
            system, notes = await self._prompt(run, overrides, input)
        else:
            with tracing.step("build_prompt") as span:
                system, notes = await self._prompt(run, overrides, input)
                tracing.prompt_built(span, system, notes)
        grant = self.capabilities.grant(agent)
        if parent is not None:
            grant = grant & parent.grant  # a child never gets more than its caller
        context = CapabilityContext(
            agent=agent,
            thread_id=thread_id,
            run_id=run.run_id,
            store=self.store,
            project_root=self.config.root,
            state_dir=self.config.state_dir,
            trust=agent.narrow_trust(parent.trust if parent else None),
            runtime_files=self.runtime_files,
            callbacks=run.callbacks,
            emit=run.log.emit,
            depth=parent.depth + 1 if parent else 0,
            max_depth=self.max_depth,
            team=self.agents.others(agent.id),
            reports=[a for a in self.agents.direct_reports(agent.id) if a.enabled],
        )
        tools = self.capabilities.resolve(context, grant)  # 6. capabilities → tools
        if agent.mcp_servers:  # … and the agent's MCP servers'
            served = await self.mcp.tools(agent, taken=[t.name for t in tools])
            if parent is not None:
                served = [t for t in served if t.name in parent.grant]
            tools += served
            grant = grant | {t.name for t in served}
        tools += self._injections(overrides, context)  # 7. run-time injections
        context.ask_agent = self._child_runs(run, context, grant, overrides, abort)
        settings = self._checked_settings(agent, overrides.settings, tools)
        run.log.message("system_message", system)
        if notes:
            run.log.message("context_message", notes)
        run.log.message("user_message", user.content)
        limits = agent.limits
        chain = self._chain(agent, overrides)
        fitted = Fitted([], None)
        if recent is not None:  # what the window has room for of the thread, compacted
            fitted = await self.compactor.fit(
                recent,
                repairs,
                RequestShape(
                    chain=chain,
                    system=system,
                    notes=notes,
                    message=user.content,
                    tools=tools,
                    output_schema=agent.output_schema,
                    max_output_tokens=output_cap(limits.max_output_tokens, settings),
                    history_tokens=limits.history_tokens,
                ),
                Account.of(run.live, limits.timeout_s, abort),
            )
        history = fitted.history
        return await self.engine.run(  # 8. the engine call
            chain=chain,
            system=system,
            history=[UserMessage(notes), *history] if notes else history,
            message=user.content,
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
            before_tools=lambda new: self._save_progress(run, new),
            budget=run.live.budget,
            # A thread's turns share their prefix; runs on no thread share their agent's.
            cache_key=prompt_cache_key(f"thread:{thread_id}" if thread_id else f"agent:{agent.id}"),
            settings=settings,
        )

    async def _prompt(
        self, run: _Run, overrides: RunAgentOverrides, input: dict[str, Any]
    ) -> tuple[str, str | None]:
        """The system prompt (5: the seeded memory only) and the user-position context: the
        caller's for this run and the agent's own notes (what it wrote into its memory is
        untrusted, as the caller's is)."""
        agent = run.agent
        system = await self.prompt.build(
            PromptContext(
                agent,
                run.thread.id if run.thread else None,
                input,
                overrides.background,
                channel_mode=overrides.channel_mode,
                task=run.thread.active_task if run.thread else None,
            ),
            memory=agent.memory,
        )
        notes = notes_message(await self._notes(agent))
        caller = caller_context_message(overrides.context)
        if caller is None:
            return system, notes
        return system, caller if notes is None else f"{caller}\n\n{notes}"

    async def _settle_failure(
        self, run: _Run, exc: AgentRunnerError, partial: TurnResult | None
    ) -> RunResult:
        """Seed 000's abort and engine-error semantics; the error itself goes to the run
        record, the events and the caller, never into the conversation (DESIGN decision 11).
        What the turn said stays in the thread, ending in a message marked ``interrupted``. A
        run that ended before any model request was sent (refused by a budget, say) leaves its
        message in the thread marked ``unsent``, so that no later request sends it."""
        kept = list(partial.new_messages[run.saved :]) if partial else []
        last = kept[-1] if kept else None
        if not (isinstance(last, AssistantMessage) and last.interrupted):
            kept.append(
                AssistantMessage(model=partial.model if partial else None, interrupted=True)
            )
        elif last.text:  # cut off mid-reply: what it said so far is part of the run's record
            run.log.message("assistant_message", last.text)
        unsent = []
        if run.said is not None and (partial is None or not partial.usage.requests):
            unsent.append(self.store.messages.unsent_op(*run.said))
        await self.lifecycle.fail(
            run.live,
            exc,
            ops(self._append(run, kept, session=False), unsent),  # the session does not advance
            stop_reason=partial.stop_reason if partial else None,
            model=partial.model if partial else None,
            usage=partial.usage if partial else None,
        )
        if exc.code is ErrorCode.CANCELLED:
            return RunResult(
                "",
                run.run_id,
                run.thread.id if run.thread else None,
                run.agent.id,
                "cancelled",
                partial.usage if partial else Usage(),
                run.live.cost.micros,
                run.live.cost.known,
                partial.model if partial else None,
            )
        thread_id = run.thread.id if run.thread else ""
        safely(run.callbacks.on_error, run.agent.id, thread_id, exc.message)
        raise exc

    # -- helpers --------------------------------------------------------------------------

    async def _save_progress(self, run: _Run, new: Sequence[Message]) -> None:
        """Before tools run: the model's tool calls (and earlier results) go into the thread,
        with the events so far, in one transaction."""
        unsaved = list(new[run.saved :])
        run.saved = len(new)
        await run.log.flush_with(self._append(run, unsaved, session=False, final=False))

    def _append(
        self, run: _Run, messages: list[Message], *, session: bool, final: bool = True
    ) -> list[Any]:
        """Append messages; ``final`` appends also update the manifest (step 10), and
        ``session`` advances it to this run."""
        if run.thread is None:  # a task keeps no conversation
            return []
        first, run.next_seq = run.next_seq, run.next_seq + len(messages)
        rows = self.store.messages.append_ops(run.thread.id, first, messages, run.run_id)
        if final:
            rows.append(
                self.store.threads.manifest_op(
                    run.thread.id,
                    message_count=run.next_seq - 1,
                    session_run_id=run.run_id if session else None,
                )
            )
        return rows

    def _agent(self, agent_id: str) -> AgentSpec:
        """The agent as its file is now (read again if it changed since; refused if it may
        not run): with telemetry on, a ``resolve_agent`` span."""
        tracing = self.engine.tracing
        if tracing is None:
            return self.agents.runnable(agent_id)
        with tracing.step("resolve_agent", agent_id=agent_id):
            return self.agents.runnable(agent_id)

    def settings_for(self, agent: AgentSpec, run: ModelSettings | None) -> ModelSettings | None:
        """The model settings a run of ``agent`` asks for: ``run``'s over the agent file's over
        ``[defaults]``', setting by setting."""
        layers = (self.config.model_settings, agent.model_settings, run)
        if all(layer is None for layer in layers):
            return None
        from agentrunner.model_settings import merge_settings

        return merge_settings(*layers)

    def _refuse_bad_settings(
        self, agent: AgentSpec, overrides: RunAgentOverrides, parent: _Parent | None
    ) -> None:
        """Refuse, before the run writes anything, settings that name what the run will not
        have: a provider in ``extra`` the project lacks, a ``tool_choice`` naming no tool the
        run is granted or injected. Its MCP servers' tools are known only once they run, and
        the tools every agent is granted only where offered: ``_checked_settings`` again."""
        run = overrides.settings
        settings = self.settings_for(agent, run)
        if settings is None:
            return
        if settings.extra:
            self._check_providers(agent, run, settings)
        if not settings.forces_tool or settings.tool_choice == "required" or agent.mcp_servers:
            return
        try:
            grant = self.capabilities.grant(agent)
        except AgentRunnerError:  # refused by the run itself, recorded
            return
        if parent is not None:
            grant = grant & parent.grant
        injected = {t.name for t in overrides.tools}
        if settings.tool_choice in grant or settings.tool_choice in injected:
            return
        from agentrunner.model_settings import tool_choice_problem  # loaded: settings are set

        named = grant & set(self.capabilities.tool_names)  # an implicit tool: only if offered
        problem = tool_choice_problem(settings, named | injected)
        if problem is not None:
            raise self._settings_error(agent, run, "tool_choice", problem)

    def _checked_settings(
        self, agent: AgentSpec, run: ModelSettings | None, tools: Sequence[Tool]
    ) -> ModelSettings | None:
        """The run's settings; a ``tool_choice`` naming no tool of the run is refused, as an
        error of the file that set it, or of the caller (``validation``). Most are refused
        before the run is recorded (``_refuse_bad_settings``); what is left are the tools
        known only now."""
        settings = self.settings_for(agent, run)
        if settings is None or not settings.forces_tool:
            return settings
        from agentrunner.model_settings import tool_choice_problem

        problem = tool_choice_problem(settings, [t.name for t in tools])
        if problem is None:
            return settings
        raise self._settings_error(agent, run, "tool_choice", problem)

    def _check_providers(
        self, agent: AgentSpec, run: ModelSettings | None, settings: ModelSettings
    ) -> None:
        """Refuse an ``extra`` for a provider the project does not have: its fields would
        reach no request, unsaid."""
        from agentrunner.model_settings import unknown_providers

        providers = self.engine.models.providers
        for provider, problem in unknown_providers(settings, providers):
            key = f"extra.{provider}"
            hint = f"extra is keyed by provider: {', '.join(sorted(providers))}."
            raise self._settings_error(agent, run, key, problem, hint)

    def _settings_error(
        self,
        agent: AgentSpec,
        run: ModelSettings | None,
        key: str,
        problem: str,
        hint: str = "Name one of the agent's tools, or auto, required (with tools) or none.",
    ) -> AgentRunnerError:
        """``problem`` of the setting at ``key`` as an error of whoever set it: the caller's
        (``validation``), else the agent file's, else ``[defaults]``'."""
        name, field = key.split(".")[0], f"model_settings.{key}"

        def sets(layer: ModelSettings | None) -> bool:
            if layer is None or getattr(layer, name) is None:
                return False
            return name != "extra" or key.split(".")[1] in (layer.extra or {})

        code, file, line = ErrorCode.VALIDATION, None, None  # the caller's
        if not sets(run):  # the file's, or else [defaults]'
            code = ErrorCode.INVALID_SPECIFICATION
            if sets(agent.model_settings):
                if agent.path is not None:
                    file = display_path(agent.path)
                    line = agent.line_of(field) or agent.line_of(f"model_settings.{name}")
            else:
                file = display_path(self.config.path) if self.config.path else "agentrunner.toml"
        return AgentRunnerError(
            code,
            f"'model_settings.{name}' {problem}",
            hint=hint,
            file=file,
            line=line,
            details={"invalid": field},
        )

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

    async def _notes(self, agent: AgentSpec) -> dict[str, str]:
        """The memory blocks the agent wrote (its file's seeds are stored first, as the start of
        the blocks its memory tools change)."""
        if not agent.memory and "memory" not in agent.capabilities:
            return {}
        blocks = await self.store.memory.blocks(agent.id)
        missing = {k: v for k, v in agent.memory.items() if k not in blocks}
        if missing:
            await self.store.memory.seed(agent.id, missing)
            blocks.update(missing)
        return agent_notes(agent.memory, blocks)

    def _injections(self, overrides: RunAgentOverrides, context: CapabilityContext) -> list[Tool]:
        """Tools the caller injects for this run (seed 000 step 7), e.g. a channel's tools."""
        return list(overrides.tools)

    def _child_runs(
        self,
        run: _Run,
        context: CapabilityContext,
        grant: frozenset[str],
        overrides: RunAgentOverrides,
        abort: AbortSignal | None,
    ) -> AskAgent:
        """How ``ask_agent`` and ``delegate`` run another agent: a child run of this one, on
        a thread of its own under this run's (``<thread>.<agent>``), drawing on this run's
        budget, its grant and trust no wider than this run's, one level deeper."""

        async def ask(target: str, message: str) -> str:
            thread_id = run.thread.id if run.thread else None
            parent = _Parent(
                run.run_id, thread_id, context.depth, grant, context.trust, run.live.cost
            )
            # Its own signal: cancelling the delegation stops it alone (its caller is told and
            # goes on); the caller's abort stops it too.
            own = AbortSignal()
            unlink = abort.on_abort(lambda: own.abort(abort.reason or "")) if abort else None
            try:
                child = await self._run(
                    _Request(
                        target,
                        f"{thread_id}.{target}" if thread_id else None,  # a task's are tasks
                        message,
                        child_callbacks(run.callbacks, target, context.depth + 1),
                        RunAgentOverrides(background=overrides.background),
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
            return child.text

        return ask
