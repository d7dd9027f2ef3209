"""Post-run effects (seed 000 step 13): fire-and-forget work after a response — the thread's
title, generated through the engine from the first exchange, and the embeddings of its new
messages (``[embeddings] model``, for ``recall``) — each paid for by the run that asked for it
(``side_requests``: its daily budgets, a cost row with the run). Never delays the response; a
failure (a budget's refusal too) is logged, never raised: a title is not tried again, what was
not embedded is taken up by the thread's next run (logged once a process, not each run)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from agentrunner.config import Budgets
from agentrunner.engine.engine import Engine
from agentrunner.engine.turn import TurnLimits
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.run.side_requests import embed_query, embed_thread, paid_request
from agentrunner.store.embeddings import Recalled
from agentrunner.store.store import Store

__all__ = ["PostRunEffects"]

log = logging.getLogger("agentrunner.effects")

TITLE_PROMPT = (
    "Write a title of at most six words for a conversation that starts with the user's "
    "message. Reply with the title only: no quotes, no punctuation at the end."
)


class PostRunEffects:
    def __init__(
        self,
        engine: Engine,
        store: Store,
        *,
        title_model: str | None = None,
        budgets: Budgets | None = None,
        embedding_model: str | None = None,
    ) -> None:
        self.engine = engine
        self.store = store
        self.title_model = title_model
        self.budgets = budgets or Budgets()
        self.embedding_model = embedding_model
        self._tasks: set[asyncio.Task[None]] = set()
        self._embedding: set[str] = set()  # threads whose messages are being embedded now
        self._embedding_failed = False  # logged once; the next run of the thread tries again

    def settled(
        self,
        thread_id: str | None,
        untitled: bool,
        model: str,
        question: str,
        payer: tuple[str, str],
    ) -> None:
        """A run of ``model`` answered ``question`` on ``thread_id``, on the account of
        ``payer`` (its agent and run): title the thread if it is ``untitled``, embed what is
        new in it."""
        if thread_id is None:
            return
        if untitled:
            agent_id, run_id = payer
            self.dispatch_title(thread_id, model, question, agent_id=agent_id, run_id=run_id)
        if self.embedding_model is not None and thread_id not in self._embedding:
            self._embedding.add(thread_id)
            self._spawn(self._embed(thread_id, self.embedding_model, payer))

    def dispatch_title(
        self, thread_id: str, model: str, question: str, *, agent_id: str, run_id: str
    ) -> None:
        """Title ``thread_id`` from its first message, on the account of ``run_id`` (of
        ``agent_id``), the run that opened it."""
        payer = (agent_id, run_id)
        self._spawn(self._title(thread_id, self.title_model or model, question, payer))

    async def recall(self, agent_id: str, run_id: str, query: str, limit: int) -> list[Recalled]:
        """``agent_id``'s own earlier messages nearest ``query`` by meaning, the query embedded
        on the account of ``run_id``; ``validation`` where no ``[embeddings] model`` is set."""
        model = self.embedding_model
        if model is None:
            raise AgentRunnerError(
                ErrorCode.VALIDATION,
                "recall is not set up in this project: no [embeddings] model",
                hint='Set [embeddings] model = "provider:model" in agentrunner.toml.',
            )
        embedded = await embed_query(
            self.engine, self.store, self.budgets, model, query, payer=(agent_id, run_id)
        )
        return await self.store.embeddings.search(agent_id, model, embedded, limit)

    async def drain(self, timeout_s: float | None = None) -> None:
        """Wait for the effects in flight (for shutdown and tests). Past ``timeout_s`` the rest
        are cancelled: a title is not worth holding a process open for a stalled provider."""
        if not self._tasks:
            return
        _, late = await asyncio.wait(list(self._tasks), timeout=timeout_s)
        for task in late:
            task.cancel()
        if late:
            log.warning("shutdown cancelled %d post-run effect(s) still running", len(late))
            await asyncio.gather(*late, return_exceptions=True)
        while self._tasks:  # effects spawned while waiting
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _embed(self, thread_id: str, model: str, payer: tuple[str, str]) -> None:
        with self.engine.tracing.effect("embeddings", thread_id):
            try:
                await embed_thread(
                    self.engine, self.store, self.budgets, thread_id, model, payer=payer
                )
            except Exception as exc:
                why = exc.one_line() if isinstance(exc, AgentRunnerError) else repr(exc)
                if not self._embedding_failed:
                    self._embedding_failed = True
                    log.warning(
                        "embedding messages with %s failed: %s (the next run of the thread "
                        "tries again; logged once)",
                        model,
                        why,
                    )
                log.debug("embedding thread %s failed", thread_id, exc_info=True)
            else:
                self._embedding_failed = False
            finally:
                self._embedding.discard(thread_id)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _title(
        self, thread_id: str, model: str, question: str, payer: tuple[str, str]
    ) -> None:
        agent_id, run_id = payer
        # under the run's span (the task was started in it): its own, so that the title's
        # model request is not taken for one of the agent's
        with self.engine.tracing.effect("title", thread_id):
            try:
                result = await paid_request(
                    self.engine,
                    self.store,
                    self.budgets,
                    agent_id=agent_id,
                    run_id=run_id,
                    model=model,
                    system=TITLE_PROMPT,
                    message=question[:2000],
                    limits=TurnLimits(max_steps=1, max_output_tokens=32),
                )
                title = " ".join(result.text.split()).strip(" \"'.")[:80]
                if title:
                    await self.store.threads.set_title(thread_id, title)
            except Exception as exc:  # a title is a nicety: one line, the traceback for --debug
                why = exc.one_line() if isinstance(exc, AgentRunnerError) else repr(exc)
                log.warning("title generation for thread %s failed: %s", thread_id, why)
                log.debug("title generation for thread %s failed", thread_id, exc_info=True)
