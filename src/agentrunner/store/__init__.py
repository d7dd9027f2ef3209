"""Persistence: threads, messages, runs, steps, events, costs, memory — SQLite or PostgreSQL."""

from agentrunner.store.drivers.contract import detach_reads
from agentrunner.store.records import (
    AgentState,
    EventRecord,
    Note,
    RunMessageRecord,
    RunRecord,
    StepRecord,
    Thread,
)
from agentrunner.store.run_log import RunLog
from agentrunner.store.store import Store, open_store

__all__ = [
    "AgentState",
    "EventRecord",
    "Note",
    "RunLog",
    "RunMessageRecord",
    "RunRecord",
    "StepRecord",
    "Store",
    "Thread",
    "detach_reads",
    "open_store",
]
