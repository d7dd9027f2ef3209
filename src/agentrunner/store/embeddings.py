"""Messages as vectors, for ``recall`` (docs/recall.md): what a settled run's messages said,
embedded after it and kept with the agent whose run wrote each one; a thread's cursor says how
far its messages were looked at. Search is exact: every vector of the agent's, by cosine."""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Sequence
from dataclasses import dataclass

from agentrunner.engine.embeddings import similarity, to_blob, unit
from agentrunner.engine.messages import AssistantMessage, Message, UserMessage, message_from_dict
from agentrunner.store.records import from_json
from agentrunner.store.repositories import Repository

__all__ = ["Embeddings", "Recalled", "Unembedded"]

MAX_TEXT_CHARS = 8000  # of one message, embedded: an embedding model reads a few thousand tokens


@dataclass(frozen=True, slots=True)
class Unembedded:
    """A message that says something, not embedded yet."""

    seq: int
    agent_id: str
    role: str
    text: str


@dataclass(frozen=True, slots=True)
class Recalled:
    """One of an agent's earlier messages, found by meaning."""

    thread_id: str
    seq: int
    role: str
    text: str
    score: float
    created_at: float

    def to_dict(self) -> dict[str, object]:
        return {
            "thread_id": self.thread_id,
            "role": self.role,
            "text": self.text,
            "score": round(self.score, 3),
            "at": self.created_at,
        }


class Embeddings(Repository):
    async def unembedded(
        self, thread_id: str, limit: int = 64
    ) -> tuple[list[Unembedded], int, bool]:
        """Of the thread's next ``limit`` messages after its cursor, those that say something
        (a person's, an answer; not a tool's result); the last one looked at (the cursor where
        there was none); whether more follow."""
        row = await self.db.fetch_one(self.sql["embedding_cursor"], {"thread_id": thread_id})
        after = int(row["through_seq"]) if row is not None else 0
        rows = await self.db.fetch_all(
            self.sql["embedding_candidates"],
            {"thread_id": thread_id, "after": after, "limit": limit},
        )
        found: list[Unembedded] = []
        for r in rows:
            if r["agent_id"] is None:
                continue
            message = message_from_dict(from_json(r["body"]))
            said = _said(message)
            if said:
                found.append(Unembedded(int(r["seq"]), str(r["agent_id"]), message.role, said))
        return found, int(rows[-1]["seq"]) if rows else after, len(rows) == limit

    async def add(
        self,
        thread_id: str,
        through_seq: int,
        model: str,
        rows: Sequence[tuple[Unembedded, Sequence[float]]],
    ) -> None:
        """The vectors of a thread's messages, and its cursor moved to ``through_seq``, in one
        transaction."""
        now = time.time()
        ops = [
            self.op(
                "embedding_insert",
                thread_id=thread_id,
                seq=message.seq,
                agent_id=message.agent_id,
                model=model,
                vector=to_blob(unit(vector)),  # unit length: a search's cosine is a dot
                now=now,
            )
            for message, vector in rows
        ]
        ops.append(self.op("embedding_cursor_set", thread_id=thread_id, seq=through_seq))
        await self.db.batch(ops)

    async def search(
        self, agent_id: str, model: str, query: Sequence[float], limit: int
    ) -> list[Recalled]:
        """``agent_id``'s own messages embedded by ``model``, nearest ``query`` first."""
        rows = await self.db.fetch_all(
            self.sql["embeddings_of_agent"], {"agent_id": agent_id, "model": model}
        )
        if not rows:
            return []

        wanted = unit(query)

        def nearest() -> list[tuple[float, str, int]]:
            scored = (
                (similarity(wanted, r["vector"]), str(r["thread_id"]), int(r["seq"])) for r in rows
            )
            return heapq.nlargest(limit, scored)

        # the comparing is CPU (8 ms a thousand 256-dimension vectors): off the event loop
        best = await asyncio.to_thread(nearest) if len(rows) > 200 else nearest()
        found: list[Recalled] = []
        for score, thread_id, seq in best:
            if score <= 0:
                break
            row = await self.db.fetch_one(
                self.sql["embedded_message"], {"thread_id": thread_id, "seq": seq}
            )
            if row is None:
                continue
            message = message_from_dict(from_json(row["body"]))
            found.append(
                Recalled(
                    thread_id, seq, message.role, _said(message), score, float(row["created_at"])
                )
            )
        return found


def _said(message: Message) -> str:
    if isinstance(message, UserMessage):
        return message.content.strip()[:MAX_TEXT_CHARS]
    if isinstance(message, AssistantMessage):
        return message.text.strip()[:MAX_TEXT_CHARS]
    return ""
