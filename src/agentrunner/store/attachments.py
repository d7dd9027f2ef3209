"""Attachments' bytes, kept once by their sha256 (docs/attachments.md).

A message names its files by reference (``engine.messages.Attachment``); the bytes are a row
of ``attachments``, written with the first message that carries them and left as they are by
every later one (``INSERT … ON CONFLICT DO NOTHING``), and each message's use of one is a row
of ``attachment_uses``. ``hydrate`` loads the bytes of the messages a request is about to send,
from a bounded cache of the process's recent files before the database.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TypeVar

from agentrunner.engine.messages import AssistantMessage, Attachment, Message
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.store.drivers import Driver, Op
from agentrunner.store.repositories import Repository
from agentrunner.store.sql import SqlSet

__all__ = ["Attachments", "attachment_ops"]

# The bytes a process keeps of files it loaded lately: a thread's image is sent again on
# every turn, and reading it again each time is a row of megabytes.
_CACHE_BYTES = 64 * 1024 * 1024
M = TypeVar("M", bound=Message)


def attachment_ops(
    repo: Repository, thread_id: str | None, seq: int, attachments: Iterable[Attachment]
) -> list[Op]:
    """What keeps ``attachments`` of message ``seq`` of ``thread_id``: each file whose bytes
    the message carries (kept once, whoever else sent it), and its use by the message (none for
    a run on no thread)."""
    now = time.time()
    ops: list[Op] = []
    for a in attachments:
        if a.data is not None:
            ops.append(
                repo.op(
                    "attachment_insert",
                    sha256=a.sha256,
                    media_type=a.media_type,
                    size=a.size,
                    width=a.width,
                    height=a.height,
                    pages=a.pages,
                    data=a.data,
                    now=now,
                )
            )
        if thread_id is not None:
            ops.append(
                repo.op(
                    "attachment_use_insert",
                    thread_id=thread_id,
                    seq=seq,
                    sha256=a.sha256,
                    name=a.name,
                )
            )
    return ops


class Attachments(Repository):
    def __init__(self, driver: Driver, sql: SqlSet) -> None:
        super().__init__(driver, sql)
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._cached_bytes = 0

    def keep_ops(self, attachments: Iterable[Attachment]) -> list[Op]:
        """What keeps files before any message names them: those of a message queued for a
        worker (written with the run's row), or uploaded to be named later."""
        return attachment_ops(self, None, 0, attachments)

    async def keep(self, attachments: Iterable[Attachment]) -> None:
        ops = self.keep_ops(attachments)
        if ops:
            await self.db.batch(ops)

    async def get(self, sha256: str) -> Attachment | None:
        """The file kept under ``sha256``, as a reference without a name or its bytes."""
        row = await self.db.fetch_one(self.sql["attachment_get"], {"sha256": sha256})
        if row is None:
            return None
        return Attachment(
            row["sha256"],
            row["media_type"],
            int(row["size"]),
            width=row["width"],
            height=row["height"],
            pages=row["pages"],
        )

    async def data(self, sha256: str) -> bytes | None:
        cached = self._cache.get(sha256)
        if cached is not None:
            self._cache.move_to_end(sha256)
            return cached
        row = await self.db.fetch_one(self.sql["attachment_data"], {"sha256": sha256})
        if row is None:
            return None
        data = bytes(row["data"])
        self._remember(sha256, data)
        return data

    async def hydrate(self, messages: Sequence[M]) -> list[M]:
        """``messages`` with the bytes of each file they name loaded, for a request. A file
        whose bytes are gone (its thread deleted meanwhile) is ``not_found``, before anything
        is sent."""
        out: list[M] = []
        for message in messages:
            if isinstance(message, AssistantMessage) or not message.attachments:
                out.append(message)
                continue
            loaded = []
            for a in message.attachments:
                if a.data is None:
                    data = await self.data(a.sha256)
                    if data is None:
                        raise AgentRunnerError(
                            ErrorCode.NOT_FOUND,
                            f"attachment {a.name or a.sha256[:12]} ({a.sha256[:12]}) is no "
                            "longer stored",
                            hint="Its thread was deleted; attach the file again.",
                        )
                    a = a.with_data(data)
                else:
                    self._remember(a.sha256, a.data)
                loaded.append(a)
            out.append(replace(message, attachments=tuple(loaded)))
        return out

    async def uses(self, sha256: str) -> int:
        row = await self.db.fetch_one(self.sql["attachment_uses_count"], {"sha256": sha256})
        return int(row["n"]) if row else 0

    async def stats(self) -> tuple[int, int]:
        """How many files are kept, and their bytes."""
        row = await self.db.fetch_one(self.sql["attachment_stats"], {})
        return (int(row["files"]), int(row["bytes"])) if row else (0, 0)

    def release_ops(self, digests: Iterable[str]) -> list[Op]:
        """Drop each of ``digests`` no message names any more (run after the uses that named
        them were deleted, in the same transaction)."""
        digests = list(digests)
        for sha256 in digests:
            self._forget(sha256)
        return [self.op("attachment_delete_unused", sha256=d) for d in digests]

    def _remember(self, sha256: str, data: bytes) -> None:
        if sha256 in self._cache or len(data) > _CACHE_BYTES // 4:
            return
        self._cache[sha256] = data
        self._cached_bytes += len(data)
        while self._cached_bytes > _CACHE_BYTES:
            _, dropped = self._cache.popitem(last=False)
            self._cached_bytes -= len(dropped)

    def _forget(self, sha256: str) -> None:
        dropped = self._cache.pop(sha256, None)
        if dropped is not None:
            self._cached_bytes -= len(dropped)
