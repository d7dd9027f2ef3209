"""What a driver raises that the store and the workers act on: a guarded statement that changed
no row, and a database that cannot be had for now."""

from __future__ import annotations

import sqlite3

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.store.drivers.contract import Params

__all__ = ["DatabaseUnavailable", "GuardRefused", "is_unavailable"]


class GuardRefused(Exception):
    """A guarded statement changed no row (a run settled twice, say): its batch was rolled
    back. ``query`` names the statement's block, ``params`` are its parameters."""

    def __init__(self, query: str, params: Params) -> None:
        super().__init__(f"{query} changed no row")
        self.query = query
        self.params = params


class DatabaseUnavailable(AgentRunnerError):
    """The database could not be reached for longer than the store waits for it. Workers wait
    and try again; the HTTP API answers 503."""

    def __init__(self, message: str) -> None:
        super().__init__(
            ErrorCode.RUNNER_IO,
            message,
            hint="Check that the database server is running and reachable; agentrunner "
            "reconnects by itself once it is.",
            retryable=True,
            details={"unavailable": True, "retry_after_s": 5},
        )


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot be had for now — worth waiting for — rather
    than that an operation is wrong: PostgreSQL unreachable past the driver's retries, or
    SQLite locked by another process past its busy timeout."""
    if isinstance(exc, DatabaseUnavailable):
        return True
    code = getattr(exc, "sqlite_errorcode", None)
    return (
        isinstance(exc, sqlite3.OperationalError)
        and code is not None
        and (code & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    )
