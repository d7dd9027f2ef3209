"""Idempotency keys: what a repeat of a client's request is answered from, across processes.

A key is recorded either with its result in the transaction that does the work
(``record_op``: a second live row for the key fails that transaction, so the work is never
written twice), or claimed first and completed when the work is done (``claim``, ``renew``,
``complete``, ``release``) for work that is not one transaction. Rows past ``expires_at`` count
as absent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from agentrunner.store.drivers import Op
from agentrunner.store.records import from_json, to_json
from agentrunner.store.repositories import Repository

__all__ = ["IdempotencyKeys", "IdempotencyRecord"]


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    fingerprint: str
    result: dict[str, Any] | None  # None: the first request is still being served
    created_at: float
    expires_at: float


class IdempotencyKeys(Repository):
    async def find(self, scope: str, key: str) -> IdempotencyRecord | None:
        """The live record of ``key``; an expired one is deleted and counts as absent."""
        params = {"scope": scope, "client_key": key}
        row = await self.db.fetch_one(self.sql["idempotency_get"], params)
        if row is None:
            return None
        now = time.time()
        if row["expires_at"] <= now:
            await self.db.execute(self.sql["idempotency_drop_expired"], {**params, "now": now})
            return None
        return IdempotencyRecord(
            row["fingerprint"], from_json(row["result"]), row["created_at"], row["expires_at"]
        )

    def record_op(
        self, scope: str, key: str, fingerprint: str, result: dict[str, Any], ttl_s: float
    ) -> Op:
        """Record ``key`` with its result, in the batch that does the work."""
        now = time.time()
        return self.op(
            "idempotency_record",
            scope=scope,
            client_key=key,
            fingerprint=fingerprint,
            result=to_json(result),
            now=now,
            expires_at=now + ttl_s,
        )

    async def claim(self, scope: str, key: str, fingerprint: str, ttl_s: float) -> bool:
        """Claim ``key`` for work to come (its result empty until ``complete``); False when a
        live row has it."""
        now = time.time()
        claimed = await self.db.execute(
            self.sql["idempotency_claim"],
            {
                "scope": scope,
                "client_key": key,
                "fingerprint": fingerprint,
                "now": now,
                "expires_at": now + ttl_s,
            },
        )
        return claimed > 0

    async def renew(self, scope: str, key: str, fingerprint: str, ttl_s: float) -> bool:
        """Keep a claim alive; False when it is no longer this request's."""
        return await self._while_claimed(
            "idempotency_renew", scope, key, fingerprint, expires_at=time.time() + ttl_s
        )

    async def complete(
        self, scope: str, key: str, fingerprint: str, result: dict[str, Any], ttl_s: float
    ) -> bool:
        return await self._while_claimed(
            "idempotency_complete",
            scope,
            key,
            fingerprint,
            result=to_json(result),
            expires_at=time.time() + ttl_s,
        )

    async def release(self, scope: str, key: str, fingerprint: str) -> bool:
        """Give a claim up (the work failed): a retry with the key does the work again."""
        return await self._while_claimed("idempotency_release", scope, key, fingerprint)

    async def sweep(self) -> int:
        """Delete every expired row; returns how many."""
        return await self.db.execute(self.sql["idempotency_sweep"], {"now": time.time()})

    async def _while_claimed(
        self, query: str, scope: str, key: str, fingerprint: str, **params: Any
    ) -> bool:
        changed = await self.db.execute(
            self.sql[query],
            {"scope": scope, "client_key": key, "fingerprint": fingerprint, **params},
        )
        return changed > 0
