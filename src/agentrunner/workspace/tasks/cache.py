"""The task result cache (seed 004): the same request → the same result, and only then.

Key: the hex SHA-256 of ``"{agent}:{model}:{canonical JSON}"`` (seed 004's form), where the
canonical JSON holds everything else that decides what the model is sent (DESIGN decision 10):
the input values that reach it — those the templates use, by dotted path, or the whole input
when it is itself the message — the digest of the agent file (any edit misses), the whole model
chain, the project's default tone, and the agent's memory when it may write some. Canonical JSON
is seed 004's: keys sorted, no whitespace, non-ASCII kept as UTF-8, numbers as Python's JSON
writes them (so ``1`` and ``1.0`` differ, and a float is its shortest round-trip form). Same key
→ same file, forever, in every process.

A cache never fails a task: a read or write problem (a corrupt file, a full disk, no permission)
is logged and the task runs (or its result is simply not kept).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentrunner.config import Config
    from agentrunner.store import Store

__all__ = [
    "CacheStats",
    "FileCache",
    "ResultCache",
    "StoreCache",
    "cache_key",
    "canonical_json",
    "open_cache",
]

log = logging.getLogger("agentrunner.cache")


def canonical_json(values: Mapping[str, Any]) -> str:
    return json.dumps(values, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def cache_key(agent: str, model: str, values: Mapping[str, Any]) -> str:
    return hashlib.sha256(f"{agent}:{model}:{canonical_json(values)}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class CacheStats:
    entries: int
    bytes: int
    agents: dict[str, int]


class ResultCache(Protocol):
    """Where task results are kept. ``get`` answers ``None`` rather than raising; ``put`` stores
    in the background and never raises; ``flush`` waits for the stores in flight."""

    async def get(self, agent: str, model: str, key: str) -> dict[str, Any] | None: ...

    def put(self, agent: str, model: str, key: str, result: Mapping[str, Any]) -> None: ...

    async def flush(self) -> None: ...

    async def stats(self, agent: str | None = None) -> CacheStats: ...

    async def clear(self, agent: str | None = None) -> int: ...


class _WriteBehind:
    """Results stored in the background, served from memory until their write lands: a repeat
    of a task that just ran in this process is a hit, not a second model call.

    A write that is done counts as landed whether or not its done-callback has run: a batch
    on a loaded machine once left ``flush`` spinning on six finished writes whose callbacks
    had not taken them out (seen with py-spy; why they had not run was not found), so nothing
    here waits on those callbacks, which only tidy up early."""

    def __init__(self) -> None:
        self._writes: set[asyncio.Future[None]] = set()
        self._pending: dict[tuple[str, str, str], tuple[dict[str, Any], asyncio.Future[None]]] = {}

    def _pending_result(self, agent: str, model: str, key: str) -> dict[str, Any] | None:
        slot = (agent, model, key)
        held = self._pending.get(slot)
        if held is None:
            return None
        result, write = held
        if write.done():  # landed: read from where it was written
            self._landed(slot, write)
            return None
        return dict(result)

    def _track(
        self, agent: str, model: str, key: str, result: dict[str, Any], write: asyncio.Future[None]
    ) -> None:
        slot = (agent, model, key)
        self._pending[slot] = (result, write)
        self._writes.add(write)
        write.add_done_callback(lambda done: self._landed(slot, done))

    def _landed(self, slot: tuple[str, str, str], write: asyncio.Future[None]) -> None:
        self._writes.discard(write)
        held = self._pending.get(slot)
        if held is not None and held[1] is write:
            del self._pending[slot]

    def _forget(self, agent: str | None) -> None:
        for slot in [k for k in self._pending if agent is None or k[0] == agent]:
            del self._pending[slot]

    async def flush(self) -> None:
        """Wait for background writes (shutdown, tests)."""
        while self._writes:
            writes = list(self._writes)
            await asyncio.gather(*writes, return_exceptions=True)
            self._writes.difference_update(writes)
        for slot in [k for k, (_, write) in self._pending.items() if write.done()]:
            del self._pending[slot]


class FileCache(_WriteBehind):
    """``<root>/<agent>/<model>/<key>.json``, written atomically (temp file + rename) on a
    background thread. ``ttl_s`` expires entries; ``max_bytes`` bounds the whole cache (oldest
    entries go first)."""

    def __init__(
        self, root: Path, *, ttl_s: float | None = None, max_bytes: int | None = None
    ) -> None:
        super().__init__()
        self.root = root
        self.ttl_s = ttl_s
        self.max_bytes = max_bytes

    def path(self, agent: str, model: str, key: str) -> Path:
        return self.root / _segment(agent) / _segment(model) / f"{key}.json"

    async def get(self, agent: str, model: str, key: str) -> dict[str, Any] | None:
        # Inline, not on a thread: a small file read (~20 µs) costs less than the thread hop.
        return self.read(agent, model, key)

    def read(self, agent: str, model: str, key: str) -> dict[str, Any] | None:
        pending = self._pending_result(agent, model, key)
        if pending is not None:
            return pending
        path = self.path(agent, model, key)
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("cache entry %s unreadable (%s); running the task", path, exc)
            return None
        if not isinstance(data, dict) or "result" not in data:
            log.warning("cache entry %s malformed; running the task", path)
            return None
        if self.ttl_s is not None and time.time() - float(data.get("stored_at", 0)) > self.ttl_s:
            return None
        result: dict[str, Any] = data["result"]
        return result

    def put(self, agent: str, model: str, key: str, result: Mapping[str, Any]) -> None:
        """Store in the background; never raises."""
        kept = dict(result)
        entry = {
            "agent": agent,
            "model": model,
            "key": key,
            "stored_at": time.time(),
            "result": kept,
        }
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._write(self.path(agent, model, key), entry)
            return
        write = loop.run_in_executor(None, self._write, self.path(agent, model, key), entry)
        self._track(agent, model, key, kept, write)

    def _write(self, path: Path, entry: Mapping[str, Any]) -> None:
        tmp_name: str | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(
                "w", dir=path.parent, suffix=".tmp", delete=False, encoding="utf-8"
            ) as tmp:
                tmp_name = tmp.name
                json.dump(entry, tmp, ensure_ascii=False)
            os.replace(tmp_name, path)
        except OSError as exc:
            log.warning("could not write cache entry %s (%s); the result is not cached", path, exc)
            if tmp_name is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp_name)
            return
        if self.max_bytes is not None:
            self._evict()

    def _evict(self) -> None:
        files = sorted(self._files(None), key=lambda p: p.stat().st_mtime)
        total = sum(p.stat().st_size for p in files)
        while files and self.max_bytes is not None and total > self.max_bytes:
            oldest = files.pop(0)
            with contextlib.suppress(OSError):
                total -= oldest.stat().st_size
                oldest.unlink()

    def _files(self, agent: str | None) -> list[Path]:
        base = self.root / _segment(agent) if agent else self.root
        return [p for p in base.glob("**/*.json") if p.is_file()] if base.is_dir() else []

    async def stats(self, agent: str | None = None) -> CacheStats:
        # On a thread, unlike get: this walks the whole cache, however many files it holds.
        return await asyncio.to_thread(self._stats, agent)

    def _stats(self, agent: str | None) -> CacheStats:
        files = self._files(agent)
        agents: dict[str, int] = {}
        for path in files:
            name = path.relative_to(self.root).parts[0]
            agents[name] = agents.get(name, 0) + 1
        return CacheStats(len(files), sum(p.stat().st_size for p in files), agents)

    async def clear(self, agent: str | None = None) -> int:
        self._forget(agent)
        return await asyncio.to_thread(self._clear, agent)

    def _clear(self, agent: str | None) -> int:
        removed = 0
        for path in self._files(agent):
            with contextlib.suppress(OSError):
                path.unlink()
                removed += 1
        return removed


class StoreCache(_WriteBehind):
    """The cache in agentrunner's store (``[cache] backend = "store"``): shared by every
    process on one database, PostgreSQL included. Same contract as ``FileCache``."""

    def __init__(
        self, store: Store, *, ttl_s: float | None = None, max_bytes: int | None = None
    ) -> None:
        super().__init__()
        self.rows = store.task_cache
        self.ttl_s = ttl_s
        self.max_bytes = max_bytes

    async def get(self, agent: str, model: str, key: str) -> dict[str, Any] | None:
        pending = self._pending_result(agent, model, key)
        if pending is not None:
            return pending
        try:
            row = await self.rows.get(agent, model, key)
            if row is None:
                return None
            text, stored_at = row
            if self.ttl_s is not None and time.time() - stored_at > self.ttl_s:
                return None
            result = json.loads(text)
        except Exception as exc:  # a database or decoding problem never fails the task
            log.warning(
                "cache entry %s/%s/%s unreadable (%s); running the task", agent, model, key, exc
            )
            return None
        if not isinstance(result, dict):
            log.warning("cache entry %s/%s/%s malformed; running the task", agent, model, key)
            return None
        return result

    def put(self, agent: str, model: str, key: str, result: Mapping[str, Any]) -> None:
        entry = dict(result)
        self._track(
            agent, model, key, entry, asyncio.ensure_future(self._write(agent, model, key, entry))
        )

    async def _write(self, agent: str, model: str, key: str, entry: dict[str, Any]) -> None:
        try:
            await self.rows.put(agent, model, key, json.dumps(entry, ensure_ascii=False))
            if self.max_bytes is not None:
                await self.rows.evict_to(self.max_bytes)
        except Exception as exc:
            log.warning("could not store cache entry %s/%s/%s (%s)", agent, model, key, exc)

    async def stats(self, agent: str | None = None) -> CacheStats:
        per_agent = await self.rows.per_agent()
        if agent is not None:
            per_agent = {k: v for k, v in per_agent.items() if k == agent}
        return CacheStats(
            sum(n for n, _ in per_agent.values()),
            sum(b for _, b in per_agent.values()),
            {k: n for k, (n, _) in per_agent.items()},
        )

    async def clear(self, agent: str | None = None) -> int:
        self._forget(agent)
        return await self.rows.clear(agent)


def open_cache(config: Config, store: Store | None = None) -> ResultCache:
    """The cache ``[cache] backend`` names: files under the state directory, or the store."""
    if config.cache_backend == "store":
        if store is None:
            raise ValueError("a store-backed cache needs the store")
        return StoreCache(store, ttl_s=config.cache_ttl_s, max_bytes=config.cache_max_bytes)
    return FileCache(
        config.state_dir / "cache", ttl_s=config.cache_ttl_s, max_bytes=config.cache_max_bytes
    )


def _segment(name: str) -> str:
    """A name as one path segment ("/" would nest; ".." would escape)."""
    cleaned = name.replace("/", "_").replace("\\", "_")
    return "_" + cleaned if cleaned in ("", ".", "..") else cleaned
