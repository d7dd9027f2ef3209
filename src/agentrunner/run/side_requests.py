"""A model request made for a run but outside its turn — a thread's title, a brief's journal
entry, an embedding of a thread's messages or of a recall's query — paid for like any other,
on the run's account (``run_lifecycle``'s ``after``): its worst case reserved against the daily
budgets of the run's agent first (refused, or its reply shortened, as any request is), and what
it cost written as a cost row with the run, so that `cost`, `status` and the next budget check
count it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrunner.config import Budgets
    from agentrunner.engine.budget import ExternalBudget
    from agentrunner.engine.engine import Engine
    from agentrunner.engine.turn import EventSink, TurnLimits, TurnResult
    from agentrunner.store.store import Store

__all__ = ["embed_query", "embed_thread", "paid_request"]


@contextlib.asynccontextmanager
async def _on_account(
    store: Store, budgets: Budgets, agent_id: str, run_id: str
) -> AsyncIterator[tuple[ExternalBudget | None, EventSink]]:
    """Run ``run_id``'s account for requests made outside its turn: the day's budgets to hold
    them against, and what charges each attempt's ``cost.updated`` to it as a cost row
    (written when the block ends)."""
    from agentrunner.run.lifecycle import RunLifecycle

    run = RunLifecycle(store, budgets).after(agent_id, run_id)

    def charge(kind: str, data: Any) -> None:
        if kind == "cost.updated":
            run.rows.charge(data, time.time())

    try:
        yield run.budget, charge
    finally:
        await run.log.flush()


async def paid_request(
    engine: Engine,
    store: Store,
    budgets: Budgets,
    *,
    agent_id: str,
    run_id: str,
    model: str,
    system: str,
    message: str,
    limits: TurnLimits,
) -> TurnResult:
    async with _on_account(store, budgets, agent_id, run_id) as (budget, charge):
        return await engine.run(
            model=model,
            system=system,
            message=message,
            limits=limits,
            stream=False,
            emit=charge,
            budget=budget,
        )


async def embed_query(
    engine: Engine,
    store: Store,
    budgets: Budgets,
    model: str,
    query: str,
    *,
    payer: tuple[str, str],
) -> list[float]:
    """``query`` as a vector of ``model``, on the account of ``payer`` (an agent and its run)."""
    async with _on_account(store, budgets, *payer) as (budget, charge):
        embedded = await engine.embed(model, [query], budget=budget, emit=charge)
    return embedded.vectors[0]


async def embed_thread(
    engine: Engine,
    store: Store,
    budgets: Budgets,
    thread_id: str,
    model: str,
    *,
    payer: tuple[str, str],
    batch: int = 64,
) -> int:
    """Embed the thread's messages its cursor has not passed, ``batch`` at a time, on the
    account of ``payer`` (an agent and its run); how many were embedded. A failure leaves the
    cursor where it was, for the next run."""
    embedded = 0
    async with _on_account(store, budgets, *payer) as (budget, charge):
        more = True
        while more:
            found, through, more = await store.embeddings.unembedded(thread_id, batch)
            vectors: list[list[float]] = []
            if found:
                texts = [message.text for message in found]
                result = await engine.embed(model, texts, budget=budget, emit=charge)
                vectors = result.vectors
            await store.embeddings.add(
                thread_id, through, model, list(zip(found, vectors, strict=True))
            )
            embedded += len(found)
    return embedded
