"""A model request made for a run but outside its turn — a thread's title, a brief's journal
entry — paid for like any other, on the run's account (``run_lifecycle``'s ``after``): its worst
case reserved against the daily budgets of the run's agent first (refused, or its reply
shortened, as any request is), and what it cost written as a cost row with the run, so that
`cost`, `status` and the next budget check count it."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrunner.config import Budgets
    from agentrunner.engine.engine import Engine
    from agentrunner.engine.turn import TurnLimits, TurnResult
    from agentrunner.store.store import Store

__all__ = ["embed_query", "embed_thread", "paid_request"]


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
    from agentrunner.run.lifecycle import RunLifecycle

    run = RunLifecycle(store, budgets).after(agent_id, run_id)

    def charge(kind: str, data: Any) -> None:
        if kind == "cost.updated":
            run.rows.charge(data, time.time())

    try:
        return await engine.run(
            model=model,
            system=system,
            message=message,
            limits=limits,
            stream=False,
            emit=charge,
            budget=run.budget,
        )
    finally:
        await run.log.flush()


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
    from agentrunner.run.lifecycle import RunLifecycle

    run = RunLifecycle(store, budgets).after(*payer)

    def charge(kind: str, data: Any) -> None:
        if kind == "cost.updated":
            run.rows.charge(data, time.time())

    try:
        embedded = await engine.embed(model, [query], budget=run.budget, emit=charge)
    finally:
        await run.log.flush()
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
    from agentrunner.run.lifecycle import RunLifecycle

    agent_id, run_id = payer
    run = RunLifecycle(store, budgets).after(agent_id, run_id)

    def charge(kind: str, data: Any) -> None:
        if kind == "cost.updated":
            run.rows.charge(data, time.time())

    embedded = 0
    try:
        more = True
        while more:
            found, through, more = await store.embeddings.unembedded(thread_id, batch)
            vectors: list[list[float]] = []
            if found:
                texts = [message.text for message in found]
                result = await engine.embed(model, texts, budget=run.budget, emit=charge)
                vectors = result.vectors
            await store.embeddings.add(
                thread_id, through, model, list(zip(found, vectors, strict=True))
            )
            embedded += len(found)
    finally:
        await run.log.flush()
    return embedded
