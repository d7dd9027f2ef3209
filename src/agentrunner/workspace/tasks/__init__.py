"""Tasks: templated, cacheable one-shot executions of an agent (seed 004)."""

from agentrunner.workspace.tasks.cache import (
    CacheStats,
    FileCache,
    ResultCache,
    StoreCache,
    cache_key,
    canonical_json,
)
from agentrunner.workspace.tasks.task import Outcome, Task, TaskRunner

__all__ = [
    "CacheStats",
    "FileCache",
    "Outcome",
    "ResultCache",
    "StoreCache",
    "Task",
    "TaskRunner",
    "cache_key",
    "canonical_json",
]
