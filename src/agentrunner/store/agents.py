"""What the store keeps of each agent: its memory blocks (``Memory``), its notes (``Notes``), its
cached task results (``TaskCacheRows``) and its state — the session thread, and a status derived
from its runs (``AgentStates``)."""

from __future__ import annotations

import time
from collections.abc import Mapping

from agentrunner.store.drivers import Op
from agentrunner.store.records import AgentState, Note
from agentrunner.store.repositories import Repository

__all__ = ["AgentStates", "Memory", "Notes", "TaskCacheRows"]


class Memory(Repository):
    async def blocks(self, agent_id: str) -> dict[str, str]:
        rows = await self.db.fetch_all(self.sql["memory_list"], {"agent_id": agent_id})
        return {r["label"]: r["content"] for r in rows}

    async def seed(self, agent_id: str, blocks: Mapping[str, str]) -> None:
        """Create the agent file's initial blocks; blocks that exist keep their content."""
        now = time.time()
        await self.db.batch(
            [
                self.op("memory_seed", agent_id=agent_id, label=k, content=v, now=now)
                for k, v in blocks.items()
            ]
        )

    async def set(self, agent_id: str, label: str, content: str) -> None:
        await self.db.execute(
            self.sql["memory_set"],
            {"agent_id": agent_id, "label": label, "content": content, "now": time.time()},
        )


class Notes(Repository):
    async def upsert(self, agent_id: str, slug: str, title: str, body: str) -> None:
        await self.db.execute(
            self.sql["note_upsert"],
            {"agent_id": agent_id, "slug": slug, "title": title, "body": body, "now": time.time()},
        )

    async def get(self, agent_id: str, slug: str) -> Note | None:
        row = await self.db.fetch_one(self.sql["note_get"], {"agent_id": agent_id, "slug": slug})
        return Note(**row) if row else None

    async def list(self, agent_id: str) -> list[Note]:
        return [
            Note(**r)
            for r in await self.db.fetch_all(self.sql["note_list"], {"agent_id": agent_id})
        ]


class TaskCacheRows(Repository):
    """Rows of the task result cache (``[cache] backend = "store"``)."""

    async def get(self, agent_id: str, model: str, key: str) -> tuple[str, float] | None:
        row = await self.db.fetch_one(
            self.sql["task_cache_get"], {"agent_id": agent_id, "model": model, "key": key}
        )
        return (row["result"], float(row["stored_at"])) if row else None

    async def put(self, agent_id: str, model: str, key: str, result: str) -> None:
        await self.db.execute(
            self.sql["task_cache_put"],
            {
                "agent_id": agent_id,
                "model": model,
                "key": key,
                "result": result,
                "bytes": len(result.encode()),
                "now": time.time(),
            },
        )

    async def per_agent(self) -> dict[str, tuple[int, int]]:
        """``agent -> (entries, bytes)``."""
        rows = await self.db.fetch_all(self.sql["task_cache_stats"], {})
        return {r["agent_id"]: (int(r["entries"]), int(r["bytes"] or 0)) for r in rows}

    async def evict_to(self, max_bytes: int) -> int:
        """Remove the oldest entries until the total is at most ``max_bytes``."""
        rows = await self.db.fetch_all(self.sql["task_cache_oldest"], {})
        total = sum(int(r["bytes"]) for r in rows)
        doomed: list[Op] = []
        for r in rows:
            if total <= max_bytes:
                break
            total -= int(r["bytes"])
            doomed.append(
                self.op(
                    "task_cache_delete",
                    agent_id=r["agent_id"],
                    model=r["model"],
                    key=r["cache_key"],
                )
            )
        if doomed:
            await self.db.batch(doomed)
        return len(doomed)

    async def clear(self, agent_id: str | None = None) -> int:
        if agent_id is None:
            return await self.db.execute(self.sql["task_cache_clear"], {})
        return await self.db.execute(self.sql["task_cache_clear_agent"], {"agent_id": agent_id})


class AgentStates(Repository):
    async def get(self, agent_id: str) -> AgentState:
        """The agent's session thread and its status, derived from its runs: ``working`` while
        a run is running, ``error`` when its last run failed, ``idle`` otherwise — a cancelled
        run (a person's Ctrl-C, a kill, a stop) leaves nothing wrong with the agent."""
        row = await self.db.fetch_one(self.sql["agent_state_get"], {"agent_id": agent_id})
        last = await self.db.fetch_one(self.sql["agent_last_run"], {"agent_id": agent_id})
        status, run_id = "idle", None
        if last is not None and last["status"] == "running":
            status, run_id = "working", last["id"]
        elif last is not None and last["status"] == "failed":
            status = "error"
        return AgentState(
            agent_id,
            row["current_thread_id"] if row else None,
            status,
            run_id,
            row["updated_at"] if row else None,
            last["id"] if last is not None else None,
        )

    async def set_current_thread(self, agent_id: str, thread_id: str) -> None:
        await self.db.execute(
            self.sql["agent_state_thread"],
            {"agent_id": agent_id, "thread_id": thread_id, "now": time.time()},
        )
