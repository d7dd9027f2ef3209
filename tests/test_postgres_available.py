"""CI runs a real PostgreSQL; this makes a broken CI database setup fail loudly, not skip."""

from __future__ import annotations

import os

import pytest

URL = os.environ.get("AGENTRUNNER_TEST_DATABASE_URL")


@pytest.mark.postgres
def test_postgres_server_answers() -> None:
    if not URL:
        if os.environ.get("AGENTRUNNER_REQUIRE_POSTGRES") == "1":
            pytest.fail("AGENTRUNNER_REQUIRE_POSTGRES=1 but AGENTRUNNER_TEST_DATABASE_URL is unset")
        pytest.skip("no PostgreSQL server (set AGENTRUNNER_TEST_DATABASE_URL)")
    import psycopg

    with psycopg.connect(URL, connect_timeout=5) as conn:
        row = conn.execute("select current_setting('server_version_num')::int").fetchone()
    assert row is not None and row[0] >= 120000
