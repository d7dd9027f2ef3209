from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

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


@pytest.fixture
def mock(mock_server: MockProviderServer) -> Iterator[MockProvider]:
    mock_server.mock.reset()
    yield mock_server.mock
    mock_server.mock.reset()


# -- stores: every contract test runs on SQLite and on PostgreSQL ----------------------------

import uuid  # noqa: E402

from tests.throwaway_postgres import ThrowawayPostgres  # noqa: E402

_PG_SERVER = pytest.StashKey[ThrowawayPostgres]()
from collections.abc import AsyncIterator  # noqa: E402

_PG_URL_VAR = "AGENTRUNNER_TEST_DATABASE_URL"
_TABLES = (
    "threads, messages, runs, run_steps, run_messages, events, costs, cost_days, memory_blocks, "
    "notes, "
    "agent_state, thread_locks, channels, channel_members, channel_messages, workers, task_cache, "
    "budget_holds, idempotency_keys"
)


def pytest_configure(config: pytest.Config) -> None:
    """No server named: start a throwaway one where PostgreSQL is installed."""
    if os.environ.get(_PG_URL_VAR) or os.environ.get("AGENTRUNNER_TEST_POSTGRES") == "off":
        return
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


@pytest.fixture
def restart_postgres(request: pytest.FixtureRequest) -> Callable[[], None]:
    """Restart the test PostgreSQL (``pg_ctl restart -m fast``): the one pytest started, or one
    started outside whose directories the environment names (``.ci/postgres.sh`` does)."""
    from tests.throwaway_postgres import postgres_from_environment

    url = _require_pg()
    server = request.config.stash.get(_PG_SERVER, None) or postgres_from_environment(url)
    if server is None:
        reason = (
            "cannot restart the test PostgreSQL: set AGENTRUNNER_TEST_POSTGRES_DIR and "
            "AGENTRUNNER_TEST_POSTGRES_BIN (as .ci/postgres.sh does)"
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
