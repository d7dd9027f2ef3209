"""CI runs a real PostgreSQL (and pytest starts one where it is installed); this makes a broken
database setup fail loudly, not skip."""

from __future__ import annotations

import pytest

from tests.conftest import _require_pg


@pytest.mark.postgres
def test_postgres_server_answers() -> None:
    url = _require_pg()
    import psycopg

    with psycopg.connect(url, connect_timeout=5) as conn:
        row = conn.execute("select current_setting('server_version_num')::int").fetchone()
    assert row is not None and row[0] >= 120000
