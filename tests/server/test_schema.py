"""Schemathesis against the live server's OpenAPI schema: no 5xx, responses match the schema."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from agentrunner.testing import MockProviderServer
from tests.server.conftest import ServerThread

AGENT = "---\nname: helper\ncapabilities: [notes]\n---\nYou help.\n"


@pytest.fixture(scope="module")
def api_schema(mock_server: MockProviderServer) -> Iterator[Any]:
    from agentrunner.server import create_app

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "agents").mkdir()
        (root / "agents" / "helper.md").write_text(AGENT)
        (root / "agentrunner.toml").write_text(
            f'[defaults]\nmodel = "mock:gpt-mock"\ntitle_model = "test"\n\n'
            f'[providers.mock]\nkind = "openai"\nbase_url = "{mock_server.openai_url}"\n\n'
            '[channels.general]\nmembers = ["helper", "you"]\n'
        )
        previous = os.environ.pop("AGENTRUNNER_DATABASE_URL", None)
        server = ServerThread(create_app(root, token="secret-token"))
        try:
            schema = schemathesis.openapi.from_url(
                f"{server.url}/openapi.json", headers={"authorization": "Bearer secret-token"}
            )
            # Event streams never end by design; they have their own tests.
            yield schema.exclude(path_regex=r".*/events$")
        finally:
            server.stop()
            if previous is not None:
                os.environ["AGENTRUNNER_DATABASE_URL"] = previous


def test_api_conforms_to_its_schema(api_schema: Any) -> None:
    """Every operation, fuzzed: no 5xx, status codes, content types and bodies as documented."""
    checked = []
    for result in api_schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(
            max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), database=None
        )
        def check(case: Any) -> None:
            case.call_and_validate(headers={"authorization": "Bearer secret-token"})

        check()
        checked.append(operation.label)
    assert len(checked) >= 15
