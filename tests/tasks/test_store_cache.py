"""The store-backed result cache: the same contract as the file cache, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentrunner.runtime.compose import open_task_runner
from agentrunner.store import Store
from agentrunner.testing import MockProvider, MockProviderServer, Reply
from agentrunner.workspace.tasks import StoreCache


async def test_get_put_stats_clear(store: Store) -> None:
    cache = StoreCache(store)
    assert await cache.get("a", "m", "k") is None
    cache.put("a", "m", "k", {"output": "é", "usage": {"requests": 1}})
    assert await cache.get("a", "m", "k") == {"output": "é", "usage": {"requests": 1}}  # pending
    await cache.flush()
    fresh = StoreCache(store)  # another process's view: only what the database holds
    assert await fresh.get("a", "m", "k") == {"output": "é", "usage": {"requests": 1}}
    assert await fresh.get("a", "other-model", "k") is None
    cache.put("a", "m", "k", {"output": "replaced"})
    cache.put("b", "m", "k", {"output": 2})
    await cache.flush()
    assert await fresh.get("a", "m", "k") == {"output": "replaced"}
    stats = await fresh.stats()
    assert (stats.entries, stats.agents) == (2, {"a": 1, "b": 1}) and stats.bytes > 0
    assert (await fresh.stats("b")).entries == 1
    assert await fresh.clear("a") == 1
    assert await fresh.get("a", "m", "k") is None and await fresh.get("b", "m", "k") is not None
    assert await fresh.clear() == 1


async def test_ttl_size_limit_and_bad_rows(store: Store, caplog: pytest.LogCaptureFixture) -> None:
    expired = StoreCache(store, ttl_s=0.000001)
    expired.put("a", "m", "k", {"output": 1})
    await expired.flush()
    assert await expired.get("a", "m", "k") is None
    small = StoreCache(store, max_bytes=300)
    for n in range(10):
        small.put("s", "m", f"k{n}", {"output": "x" * 100})
        await small.flush()
    stats = await small.stats("s")
    assert stats.bytes <= 300 and 0 < stats.entries < 10
    assert await small.get("s", "m", "k9") is not None and await small.get("s", "m", "k0") is None
    await store.task_cache.put("c", "m", "k", "{not json")
    assert await small.get("c", "m", "k") is None
    assert any("unreadable" in r.getMessage() for r in caplog.records)


async def test_a_closed_store_never_fails_the_cache(store_url: str) -> None:
    from agentrunner.store import open_store

    store = await open_store(store_url)
    cache = StoreCache(store)
    await store.close()
    cache.put("a", "m", "k", {"output": 1})
    await cache.flush()  # the write failed and was logged, not raised
    assert await cache.get("a", "m", "k") is None


CONFIG = """\
[defaults]
model = "mockai:gpt-mock"

[database]
url = "{db}"

[cache]
backend = "store"

[providers.mockai]
kind = "openai"
base_url = "{url}"
api_key_env = "MOCK_KEY"
"""


async def test_task_runner_with_the_store_backend(
    tmp_path: Path,
    store_url: str,
    mock_server: MockProviderServer,
    mock: MockProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agentrunner.toml").write_text(
        CONFIG.format(db=store_url, url=mock_server.openai_url)
    )
    echo = "---\nname: Echo\ncache: true\n---\nEcho {{input.word}}.\n"
    (tmp_path / "agents" / "echo.md").write_text(echo)
    monkeypatch.setenv("MOCK_KEY", "sk-mock")
    mock.queue(Reply(text="hello"))
    outcomes: list[Any] = []
    for _ in range(2):  # two runners: the second finds the row the first wrote
        async with await open_task_runner(tmp_path) as tasks:
            assert isinstance(tasks.cache, StoreCache)
            outcomes.append(await tasks.execute("echo", {"word": "hi"}))
    assert [(o.output, o.cached) for o in outcomes] == [("hello", False), ("hello", True)]
    assert len(mock.requests) == 1
    assert not (tmp_path / ".agentrunner" / "cache").exists()
    assert json.loads(json.dumps(outcomes[1].to_dict()))["cached"] is True
