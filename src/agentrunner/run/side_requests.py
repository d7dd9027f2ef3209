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

__all__ = ["paid_request"]


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
