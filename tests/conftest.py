from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Rich reads the width once; a wide fake terminal keeps CLI assertions free of wrapping.
os.environ["COLUMNS"] = "200"
os.environ.pop("AGENTRUNNER_DEBUG", None)

WriteAgent = Callable[[str, str], Path]
_KEEP = {
    "AGENTRUNNER_TEST_DATABASE_URL",
    "AGENTRUNNER_REQUIRE_POSTGRES",
    "AGENTRUNNER_TEST_POSTGRES_DIR",
    "AGENTRUNNER_TEST_POSTGRES_BIN",
    "AGENTRUNNER_TEST_PHOENIX",
    "AGENTRUNNER_REQUIRE_PHOENIX",
    "AGENTRUNNER_TEST_CHROMIUM",
    "AGENTRUNNER_REQUIRE_BROWSER",
    "AGENTRUNNER_REQUIRE_LLAMA",
    "AGENTRUNNER_SCREENSHOTS",
}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("AGENTRUNNER_") and name not in _KEEP:
            monkeypatch.delenv(name)


@pytest.fixture
def project_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty project (agentrunner.toml + agents/) that is also the working directory."""
    (tmp_path / "agentrunner.toml").write_text('[project]\nagents_dir = "agents"\n')
    (tmp_path / "agents").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def write_agent(project_dir: Path) -> WriteAgent:
    def write(agent_id: str, text: str) -> Path:
        path = project_dir / "agents" / f"{agent_id}.md"
        path.write_text(text)
        return path

    return write


# -- the mock provider server (real HTTP on 127.0.0.1) ---------------------------------------

from agentrunner.testing import MockProvider, MockProviderServer  # noqa: E402


@pytest.fixture(scope="session")
def mock_server() -> Iterator[MockProviderServer]:
    server = MockProviderServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama.cpp's server on SmolLM2, one a session: its base URL (``…/v1``); skipped where it
    is not installed, unless AGENTRUNNER_REQUIRE_LLAMA=1 (tests/llama_server.py)."""
    from tests.llama_server import llama_server as serve

    with serve(tmp_path_factory.mktemp("llama")) as url:
        yield url


@pytest.fixture
def mock(mock_server: MockProviderServer) -> Iterator[MockProvider]:
    mock_server.mock.reset()
    yield mock_server.mock
    mock_server.mock.reset()


async def cut_off(running: asyncio.Future[Any], deadline: str, seconds: float) -> None:
    """Await ``running`` under the caller's own deadline, as ``deadline`` names it:
    ``asyncio.wait_for`` or ``asyncio.timeout``; past it, ``TimeoutError``."""
    if deadline == "wait_for":
        await asyncio.wait_for(running, timeout=seconds)
    else:
        async with asyncio.timeout(seconds):
            await running


# -- stores: every contract test runs on SQLite and on PostgreSQL ----------------------------

import uuid  # noqa: E402

from tests.throwaway_postgres import ThrowawayPostgres  # noqa: E402

_PG_SERVER = pytest.StashKey[ThrowawayPostgres]()
from collections.abc import AsyncIterator  # noqa: E402

_PG_URL_VAR = "AGENTRUNNER_TEST_DATABASE_URL"
_TABLES = (
    "threads, messages, runs, run_steps, run_messages, events, costs, cost_totals, memory_blocks, "
    "notes, "
    "agent_state, thread_locks, channels, channel_members, channel_messages, workers, task_cache, "
    "budget_holds, retention_state, idempotency_keys, company_sessions, journal_entries, "
    "channel_activity, "
    "approvals, approval_grants, attachments, attachment_uses, schedule_state, schedule_fires, "
    "eval_runs, eval_cases"
)


def pytest_configure(config: pytest.Config) -> None:
    """No server named: start a throwaway one where PostgreSQL is installed. Under xdist each
    worker starts its own, not the controller one for all: a test that restarts its server
    would cut the other workers' sessions."""
    if os.environ.get(_PG_URL_VAR) or os.environ.get("AGENTRUNNER_TEST_POSTGRES") == "off":
        return
    if not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None):
        return  # the xdist controller: it runs no test
    from tests.throwaway_postgres import start_throwaway_postgres

    server = start_throwaway_postgres()
    if server is not None:
        os.environ[_PG_URL_VAR] = server.url
        config.stash[_PG_SERVER] = server


def pytest_unconfigure(config: pytest.Config) -> None:
    server = config.stash.get(_PG_SERVER, None)
    if server is not None:
        server.stop()
        os.environ.pop(_PG_URL_VAR, None)


def _require_pg() -> str:
    url = os.environ.get(_PG_URL_VAR)
    if url:
        return url
    if os.environ.get("AGENTRUNNER_REQUIRE_POSTGRES") == "1":
        pytest.fail("AGENTRUNNER_REQUIRE_POSTGRES=1 but no PostgreSQL server could be started")
    pytest.skip("no PostgreSQL server (none installed, and AGENTRUNNER_TEST_DATABASE_URL unset)")


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A fresh database for this test session on the test server; dropped at the end."""
    import psycopg

    base = _require_pg()
    name = f"agentrunner_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = base.rsplit("/", 1)[0] + "/" + name
    yield url
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pgbouncer(pg_database: str) -> Iterator[str]:
    """PgBouncer pooling by transaction in front of this session's database: its URL; skipped
    where PgBouncer is not installed, unless AGENTRUNNER_REQUIRE_PGBOUNCER=1 (CI)."""
    from tests.pgbouncer import start_pgbouncer

    bouncer = start_pgbouncer(pg_database)
    if bouncer is None:
        if os.environ.get("AGENTRUNNER_REQUIRE_PGBOUNCER") == "1":
            pytest.fail("PgBouncer is required (AGENTRUNNER_REQUIRE_PGBOUNCER=1) but not installed")
        pytest.skip("PgBouncer is not installed")
    yield bouncer.url
    bouncer.stop()


@pytest.fixture
def restart_postgres(request: pytest.FixtureRequest) -> Callable[[], None]:
    """Restart the test PostgreSQL (``pg_ctl restart -m fast``): the one pytest started, or one
    started outside whose directories the environment names."""
    from tests.throwaway_postgres import postgres_from_environment

    url = _require_pg()
    server = request.config.stash.get(_PG_SERVER, None) or postgres_from_environment(url)
    if server is None:
        reason = (
            "cannot restart the test PostgreSQL: set AGENTRUNNER_TEST_POSTGRES_DIR and "
            "AGENTRUNNER_TEST_POSTGRES_BIN (its pg_ctl's directory)"
        )
        if os.environ.get("AGENTRUNNER_REQUIRE_POSTGRES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return server.restart


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    url = request.getfixturevalue("pg_database")
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass('threads') IS NOT NULL").fetchone()
        if exists and exists[0]:
            conn.execute(f"TRUNCATE {_TABLES} RESTART IDENTITY CASCADE")
    yield url


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[object]:
    from agentrunner.store import open_store

    opened = await open_store(store_url, lock_lease_s=2.0)
    yield opened
    await opened.close()


# -- nothing blocks the event loop -------------------------------------------------------------
#
# blockbuster fails a test when agentrunner, on a running event loop, makes a call that can
# block it: file system, time.sleep, a blocking socket, sqlite3, a lock held elsewhere. Work
# like that goes to a thread (a sync @tool runs on one). What may block anyway, and why:

from blockbuster import BlockBuster, blockbuster_ctx  # noqa: E402

from agentrunner.agents.registry import AgentRegistry  # noqa: E402
from agentrunner.core.paths import display_path  # noqa: E402
from agentrunner.engine.http_pool import provider_transport  # noqa: E402
from agentrunner.store.drivers import SQLiteDriver  # noqa: E402
from agentrunner.store.drivers.sqlite_wal import Checkpointer  # noqa: E402
from agentrunner.store.wake import (  # noqa: E402
    ChangeSocket,
    SocketListener,
    listened,
    notify_changes,
)
from agentrunner.workspace.tasks.cache import FileCache  # noqa: E402

Where = Callable[..., object] | tuple[str, str]  # a function, or (a file's ending, a name)


@dataclass(frozen=True)
class MayBlock:
    """``calls`` (blockbuster's names; one ending in '.' names all under it, '*' all) may
    block the loop in ``where`` and in what those functions call."""

    where: tuple[Where, ...]
    calls: tuple[str, ...]
    why: str


MAY_BLOCK = (
    MayBlock(
        (("<frozen importlib._bootstrap>", "_find_and_load"),),
        ("*",),
        "importing a module the first time it is used: agentrunner imports lazily (the start-up "
        "discipline of docs/architecture.md), and a module may read files as it loads (psycopg "
        "reads its package's metadata): once per module per process",
    ),
    MayBlock(
        (
            SQLiteDriver.__init__,
            SQLiteDriver.migrate,
            SQLiteDriver.fetch_all,
            SQLiteDriver.fetch_one,
            SQLiteDriver.execute,
            SQLiteDriver.fetch_stamped,
            SQLiteDriver.fetch_in_transaction,
            SQLiteDriver._transaction,
            Checkpointer.rewind,
        ),
        ("sqlite3.", "os.mkdir", "os.stat"),
        "the SQLite driver runs sqlite3 on the loop's thread by design: an append costs tens of "
        "microseconds, less than a hop to a worker thread would, and the slow part, WAL "
        "checkpoints, runs on a background thread (store/drivers.py, docs/store.md). Opening "
        "the database (its folder made, pragmas set) and migrating it happen there too, once "
        "per store",
    ),
    MayBlock(
        (SocketListener.__init__, SocketListener.close),
        ("os.mkdir", "os.stat", "os.unlink"),
        "a SQLite worker makes its wake-up socket's folder and binds the socket when it starts "
        "listening, and removes the socket when it stops: once per worker, not per request",
    ),
    MayBlock(
        (ChangeSocket.__init__, ChangeSocket.close),
        ("os.mkdir", "os.stat", "os.unlink"),
        "a process tailing a SQLite store binds its socket for changes when its first reader "
        "starts and removes it a while after its last: once per process, not per read",
    ),
    MayBlock(
        (notify_changes, listened),
        ("os.stat",),
        "a SQLite commit that wrote events, and a run's log choosing when to commit, look "
        "whether anyone listens for changes with one stat of their folder (~1 us, metadata the "
        "kernel has cached: less than a hop to a thread would cost); reading the folder and "
        "sending are done on a thread",
    ),
    MayBlock(
        (FileCache.read,),
        ("io.BufferedReader.read",),
        "the task file cache reads a hit inline by design: one small file (~20 us) costs less "
        "than a hop to a worker thread would (tasks/cache.py); walking the cache, for its "
        "stats or a clear, is done on a thread",
    ),
    MayBlock(
        (AgentRegistry._refresh,),
        ("os.stat", "os.scandir", "os.listdir", "io.BufferedReader.read", "io.TextIOWrapper.read"),
        "a long-running runner follows its agent files: a lookup stats the agents folder and the "
        "agent's file (~2 us, metadata the kernel has cached: less than a hop to a worker thread "
        "would cost), and reads the folder again only when one of them changed",
    ),
    MayBlock(
        (display_path,),
        ("os.getcwd", "os.path.abspath"),
        "a path in a message is shown relative to the working directory, which is read from "
        "the process (no disk): error messages only",
    ),
    MayBlock(
        (provider_transport,),
        ("os.stat", "os.listdir"),
        "httpx2 builds a provider's TLS context, reading the system's CA certificates (~25 ms), "
        "when an engine first talks to that provider: once per provider, whose client the "
        "engine keeps",
    ),
    MayBlock(
        (("fastapi/routing.py", "_extract_endpoint_context"),),
        ("os.stat",),
        "FastAPI looks up an endpoint's source file once (it is cached), to name the endpoint "
        "in a validation error",
    ),
)


def _located(where: Where) -> tuple[str, str]:
    if isinstance(where, tuple):
        return where
    code = where.__code__  # type: ignore[attr-defined]
    return code.co_filename, code.co_name


def _names(call: str, name: str) -> bool:
    return call in ("*", name) or (call.endswith(".") and name.startswith(call))


def allow(detector: BlockBuster, exemptions: tuple[MayBlock, ...]) -> None:
    for exemption in exemptions:
        for name, function in detector.functions.items():
            if any(_names(call, name) for call in exemption.calls):
                for where in exemption.where:
                    function.can_block_in(*_located(where))


@pytest.fixture(autouse=True)
def blockbuster() -> Iterator[BlockBuster]:
    """On for every test: agentrunner's blocking calls on a running loop fail it."""
    with blockbuster_ctx("agentrunner") as detector:
        allow(detector, MAY_BLOCK)
        yield detector
