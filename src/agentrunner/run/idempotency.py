"""Requests a client may send twice (its connection dropped, it timed out, it was restarted):
with the same idempotency key, a repeat gets the first request's result and starts nothing —
answered by any process on the database, for a day.

An ``IdempotencyKey`` is the client's key within a scope (where the key applies: the HTTP API
uses the route and the caller's token) and a fingerprint of the request, so reusing a key for
a different request is refused rather than answered with the wrong result. Work done in one
transaction records its key in that transaction (``commit_once``); longer work claims the key
first and completes it at the end (``run_once``), and a repeat meanwhile waits for that result.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from agentrunner.core.inputs import invalid

if TYPE_CHECKING:
    from agentrunner.store.drivers import Op
    from agentrunner.store.idempotency import IdempotencyRecord
    from agentrunner.store.store import Store

__all__ = [
    "CLAIM_S",
    "MAX_KEY_CHARS",
    "TTL_S",
    "IdempotencyKey",
    "commit_once",
    "first_result",
    "run_once",
]

TTL_S = 86_400.0  # how long a key is remembered
CLAIM_S = 60.0  # a claim its request stopped renewing this long ago is taken over
MAX_KEY_CHARS = 255
_POLL_S = 0.25
_FIELD = "Idempotency-Key"


@dataclass(frozen=True, slots=True)
class IdempotencyKey:
    scope: str
    key: str
    fingerprint: str

    @classmethod
    def of(cls, scope: str, key: str, request: Any) -> IdempotencyKey:
        """The key for ``request`` (anything JSON can write; the same values give the same
        fingerprint whatever their keys' order). A key is 1 to 255 printable ASCII
        characters."""
        if not 0 < len(key) <= MAX_KEY_CHARS or not all(" " <= c <= "~" for c in key):
            raise invalid(
                _FIELD,
                f"must be 1 to {MAX_KEY_CHARS} printable ASCII characters",
                "Use a UUID: a new one for each new request, the same one for its retries.",
            )
        try:
            encoded = orjson.dumps(request, option=orjson.OPT_SORT_KEYS, default=str)
        except orjson.JSONEncodeError:  # an integer past 64 bits: the same request, same text
            encoded = json.dumps(request, sort_keys=True, default=str).encode()
        return cls(scope, key, hashlib.sha256(encoded).hexdigest())


def _same_request(record: IdempotencyRecord, key: IdempotencyKey) -> None:
    if record.fingerprint != key.fingerprint:
        raise invalid(
            _FIELD,
            f"'{key.key}' was first sent with a different request",
            "A key names one request and its retries: send a new key for a new request.",
        )


async def first_result(store: Store, key: IdempotencyKey | None) -> dict[str, Any] | None:
    """The result a repeat of ``key``'s request is answered with; ``None`` for a request not
    seen (or still being served). ``validation`` when the key came with another request."""
    if key is None:
        return None
    record = await store.idempotency.find(key.scope, key.key)
    if record is None:
        return None
    _same_request(record, key)
    return record.result


async def commit_once(
    store: Store,
    key: IdempotencyKey | None,
    result: dict[str, Any],
    commit: Callable[[Sequence[Op]], Awaitable[None]],
) -> dict[str, Any] | None:
    """Run ``commit(extra)``, one transaction's work that writes ``extra`` with it, with the
    record of ``key`` as ``extra``: the key answered by ``result``. ``None`` once committed;
    the first request's result instead when a concurrent one with the key committed first
    (then nothing of the work is written)."""
    if key is None:
        await commit(())
        return None
    record = store.idempotency.record_op(key.scope, key.key, key.fingerprint, result, TTL_S)
    try:
        await commit([record])
    except Exception:
        first = await first_result(store, key)
        if first is None:
            raise
        return first
    return None


async def run_once(
    store: Store, key: IdempotencyKey, work: Callable[[], Awaitable[dict[str, Any]]]
) -> tuple[dict[str, Any], bool]:
    """``work()``'s result, and whether it is a repeat's: the first request with ``key`` does
    the work, holding the key while it does; a repeat gets its result, waiting for it if need
    be. Work that fails gives the key up, so a retry does it again."""
    keys = store.idempotency
    while True:
        record = await keys.find(key.scope, key.key)
        if record is not None:
            _same_request(record, key)
            if record.result is not None:
                return record.result, True
        elif await keys.claim(key.scope, key.key, key.fingerprint, CLAIM_S):
            break
        await asyncio.sleep(_POLL_S)
    renewing = asyncio.ensure_future(_renew(store, key))
    try:
        result = await work()
    except BaseException:
        renewing.cancel()
        # Shielded: a cancelled request still gives its key up.
        with contextlib.suppress(Exception):
            await asyncio.shield(keys.release(key.scope, key.key, key.fingerprint))
        raise
    renewing.cancel()
    await keys.complete(key.scope, key.key, key.fingerprint, result, TTL_S)
    return result, False


async def _renew(store: Store, key: IdempotencyKey) -> None:
    while True:
        await asyncio.sleep(CLAIM_S / 3)
        with contextlib.suppress(Exception):  # a missed renewal is retried on the next beat
            await store.idempotency.renew(key.scope, key.key, key.fingerprint, CLAIM_S)
