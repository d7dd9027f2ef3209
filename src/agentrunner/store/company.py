"""Company mode's rows (seed 002, DESIGN decision 6): the company sessions (the root agent's
session thread marked active, at most one at a time), the journal (a model-written summary of
each brief), and the jobs — which are runs: the root runs on the sessions' threads."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentrunner.core.ids import new_id
from agentrunner.store.drivers import Op
from agentrunner.store.records import RunRecord, from_json, to_json
from agentrunner.store.repositories import Repository

__all__ = ["Company", "CompanySession", "JournalEntry"]


@dataclass(frozen=True, slots=True)
class CompanySession:
    id: str
    root_agent: str
    thread_id: str
    started_at: float
    ended_at: float | None = None


@dataclass(frozen=True, slots=True)
class JournalEntry:
    id: str
    session_id: str
    run_id: str
    directive: str
    summary: str
    model: str | None
    cost_micros: int
    created_at: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session_id": self.session_id,
            "run_id": self.run_id,
            "directive": self.directive,
            "summary": self.summary,
            "model": self.model,
            "cost_usd": self.cost_micros / 1e6,
            "created_at": self.created_at,
        }


class Company(Repository):
    # -- sessions ---------------------------------------------------------------------------

    async def open_session(self, root_agent: str, thread_id: str) -> CompanySession | None:
        """A new active session on ``thread_id``; None (nothing written) when one is active."""
        session_id = new_id("ses_")
        written = await self.db.execute(
            self.sql["company_session_open"],
            {
                "id": session_id,
                "root_agent": root_agent,
                "thread_id": thread_id,
                "now": time.time(),
            },
        )
        return await self.get(session_id) if written else None

    async def active(self) -> CompanySession | None:
        row = await self.db.fetch_one(self.sql["company_session_active"], {})
        return CompanySession(**row) if row else None

    async def get(self, session_id: str) -> CompanySession | None:
        row = await self.db.fetch_one(self.sql["company_session_get"], {"id": session_id})
        return CompanySession(**row) if row else None

    async def cost(self, session_id: str, since_day: str) -> dict[str, Any]:
        """The cost rows of the session's briefs and their delegations, summed as
        ``costs.summary`` sums them (``since_day``: the UTC day the session started)."""
        row = await self.db.fetch_one(
            self.sql["company_session_cost"], {"id": session_id, "since": since_day}
        )
        return dict(row) if row else {}

    async def end(self, session_id: str) -> bool:
        """Mark the session ended; False when it was not active."""
        changed = await self.db.execute(
            self.sql["company_session_end"], {"id": session_id, "now": time.time()}
        )
        return changed > 0

    # -- journal ----------------------------------------------------------------------------

    async def add_entry(
        self,
        *,
        session_id: str,
        run_id: str,
        directive: str,
        summary: str,
        model: str | None,
        cost_micros: int,
    ) -> bool:
        """Save a brief's entry; False when the brief has one already (nothing written)."""
        written = await self.db.execute(
            self.sql["journal_insert"],
            {
                "id": new_id("jrn_"),
                "session_id": session_id,
                "run_id": run_id,
                "directive": directive,
                "summary": summary,
                "model": model,
                "cost_micros": cost_micros,
                "now": time.time(),
            },
        )
        return written > 0

    async def entries(self, *, limit: int = 10, search: str | None = None) -> list[JournalEntry]:
        """The newest entries first; with ``search``, those whose summary or directive holds
        it (case-insensitive, literally: ``%`` and ``_`` match themselves)."""
        if search:
            escaped = search.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            rows = await self.db.fetch_all(
                self.sql["journal_search"], {"pattern": f"%{escaped}%", "limit": limit}
            )
        else:
            rows = await self.db.fetch_all(self.sql["journal_recent"], {"limit": limit})
        return [JournalEntry(**row) for row in rows]

    async def unjournaled(self, session_id: str) -> list[tuple[str, dict[str, Any]]]:
        """(run id, request) of the session's completed root runs that have no entry."""
        rows = await self.db.fetch_all(self.sql["journal_pending"], {"session_id": session_id})
        return [(row["id"], from_json(row["request"]) or {}) for row in rows]

    # -- jobs (runs) ------------------------------------------------------------------------

    async def jobs(self, *, limit: int = 20) -> list[tuple[RunRecord, str]]:
        """(run, session id) of the root runs on every session's thread, newest first."""
        rows = await self.db.fetch_all(self.sql["company_jobs"], {"limit": limit})
        out = []
        for row in rows:
            session_id = row.pop("session_id")
            out.append((RunRecord.from_row(row), session_id))
        return out

    async def running_jobs(self) -> list[dict[str, Any]]:
        """id, thread_id, worker_id and session_id of every job still marked running."""
        return await self.db.fetch_all(self.sql["company_jobs_running"], {})

    async def children(self, run_id: str) -> list[RunRecord]:
        """The runs ``run_id`` started (its delegations), oldest first."""
        rows = await self.db.fetch_all(self.sql["run_children"], {"id": run_id})
        return [RunRecord.from_row(row) for row in rows]

    def brief_op(
        self,
        run_id: str,
        *,
        agent_id: str,
        thread_id: str,
        request: Mapping[str, Any],
        worker_id: str,
    ) -> Op:
        """A root run that this process, ``worker_id``, runs now (not queued)."""
        return self.op(
            "company_brief_insert",
            id=run_id,
            agent_id=agent_id,
            thread_id=thread_id,
            request=to_json(dict(request)),
            worker_id=worker_id,
            now=time.time(),
        )

    async def fail_gone(self, run_id: str, message: str) -> bool:
        """Fail a run still marked running whose process is gone; False if it had settled."""
        changed = await self.db.execute(
            self.sql["run_process_gone"], {"id": run_id, "message": message, "now": time.time()}
        )
        return changed > 0
