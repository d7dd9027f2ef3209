"""Schemathesis against the live server's OpenAPI schema: no 5xx, and every response — its
status, content type, headers and body — as the schema declares (every route declares its body
with a response model, so bodies are checked field by field)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import CHECKS
from schemathesis.specs.openapi.checks import (
    positive_data_acceptance,
    response_schema_conformance,
)

from agentrunner.store.records import RUN_STATUSES
from agentrunner.testing import MockProvider, MockProviderServer, Reply
from tests.attachment_files import image
from tests.server.conftest import ServerThread
from tests.server.dashboard.pages_html import wait_for

AGENT = "---\nname: helper\ncapabilities: [notes]\n---\nYou help.\n"


@pytest.fixture(scope="module")
def api_schema(mock_server: MockProviderServer) -> Iterator[Any]:
    from agentrunner.interfaces.server import create_app

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
            # On by default; named here, with formats checked, as what this test is for.
            conformance = schema.config.checks.response_schema_conformance
            conformance.enabled = conformance.validate_formats = True
            # Event streams never end by design; they have their own tests.
            yield schema.exclude(path_regex=r".*/events$")
        finally:
            server.stop()
            if previous is not None:
                os.environ["AGENTRUNNER_DATABASE_URL"] = previous


# An upload's body is a file's bytes: no schema can say "a PNG", so the bytes the fuzzing makes
# are refused (422 attachment_refused) as they should be; a real file's upload is tested below.
UNSAYABLE = {"POST /attachments": [positive_data_acceptance]}


def test_api_conforms_to_its_schema(api_schema: Any) -> None:
    """Every operation, fuzzed: no 5xx, status codes, content types and bodies as documented."""
    checked = []
    for result in api_schema.get_all_operations():
        operation = result.ok()
        _fuzz(operation, UNSAYABLE.get(operation.label, []))
        checked.append(operation.label)
    assert len(checked) >= 15


def _fuzz(operation: Any, excluded: list[Any]) -> None:
    @given(case=operation.as_strategy())
    @settings(
        max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    def check(case: Any) -> None:
        case.call_and_validate(
            headers={"authorization": "Bearer secret-token"}, excluded_checks=excluded
        )

    check()


def test_a_body_unlike_its_model_fails_the_check(api_schema: Any) -> None:
    """The check the fuzzing runs compares bodies with the response models: an agent whose
    ``enabled`` is not a boolean, or that lacks its ``name``, is caught (a schema that said only
    "an object" let anything through)."""
    assert response_schema_conformance in CHECKS.get_all()
    operation = api_schema["/agents/{agent_id}"]["GET"]
    case = operation.Case(path_parameters={"agent_id": "helper"})
    response = case.call(headers={"authorization": "Bearer secret-token"})
    body = response.json()
    assert response.status_code == 200 and body["name"] == "helper"
    case.validate_response(response, checks=[response_schema_conformance])
    for wrong in ({**body, "enabled": "yes"}, {k: v for k, v in body.items() if k != "name"}):
        altered = type(response)(
            response.status_code,
            response.headers,
            json.dumps(wrong).encode(),
            response.request,
            response.elapsed,
            response.verify,
        )
        with pytest.raises(BaseExceptionGroup) as failed:
            case.validate_response(altered, checks=[response_schema_conformance])
        [violation] = failed.value.exceptions
        assert str(violation).startswith("Response violates schema")


def test_a_file_uploaded_and_read_back_conforms(api_schema: Any) -> None:
    """What the fuzzing cannot make: a real image, uploaded (201, its reference as declared) and
    read back (its bytes, as the type declared for them)."""
    auth = {"authorization": "Bearer secret-token"}
    png = image(5, 4, "blue")
    upload = api_schema["/attachments"]["POST"].Case(
        body=png, query={"name": "a.png"}, media_type="application/octet-stream"
    )
    response = upload.call(headers=auth)
    assert response.status_code == 201, response.text
    upload.validate_response(response, checks=[response_schema_conformance])
    ref = response.json()
    assert (ref["name"], ref["width"], ref["size"]) == ("a.png", 5, len(png))
    read = api_schema["/attachments/{sha256}"]["GET"].Case(
        path_parameters={"sha256": ref["sha256"]}
    )
    back = read.call(headers=auth)
    assert back.status_code == 200 and back.content == png
    read.validate_response(back, checks=[response_schema_conformance])


CLERK = (
    "---\nname: clerk\ncapabilities: [notes]\napproval:\n  tools: [note_create]\n---\n"
    "You keep notes.\n"
)


def test_a_waiting_run_and_its_approvals_conform(
    tmp_path: Path, mock_server: MockProviderServer, mock: MockProvider
) -> None:
    """What the fuzzing cannot make: a run that waits for a person. Its run, the list of what
    waits, one request, a decision and a refused second decision all answer as declared."""
    from agentrunner.interfaces.server import create_app

    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "clerk.md").write_text(CLERK)
    (tmp_path / "agentrunner.toml").write_text(
        f'[defaults]\nmodel = "mock:gpt-mock"\ntitle_model = "test"\n\n'
        f'[providers.mock]\nkind = "openai"\nbase_url = "{mock_server.openai_url}"\n'
    )
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "plan", "body": "x"})]), Reply(text="noted")
    )
    auth = {"authorization": "Bearer secret-token"}
    server = ServerThread(create_app(tmp_path, token="secret-token"))
    try:
        with httpx2.Client(base_url=server.url, headers=auth, timeout=30) as client:
            made = client.post("/threads", json={"agent_id": "clerk", "id": "t1"})
            assert made.status_code == 201, made.text
            started = client.post("/threads/t1/runs", json={"agent_id": "clerk", "message": "go"})
            run_id = started.json()["run_id"]
            wait_for("the run to wait", lambda: bool(client.get("/approvals").json()["approvals"]))
        schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json", headers=auth)

        def answer(path: str, method: str, status: int, **case: Any) -> Any:
            made = schema[path][method].Case(**case)
            response = made.call(headers=auth)
            assert response.status_code == status, response.text
            made.validate_response(response, checks=[response_schema_conformance])
            return response.json()

        run = answer("/runs/{run_id}", "GET", 200, path_parameters={"run_id": run_id})
        assert run["status"] == "waiting"
        declared = schema.raw_schema["components"]["schemas"]["Run"]["properties"]["status"]
        assert set(declared["enum"]) == set(RUN_STATUSES)  # every status a run can be in
        [asked] = answer("/approvals", "GET", 200)["approvals"]
        assert asked["run_id"] == run_id and asked["tool"] == "note_create"
        one = {"approval_id": asked["id"]}
        assert answer("/approvals/{approval_id}", "GET", 200, path_parameters=one) == asked
        decision = {"decision": "approve", "by": "ana"}
        decided = answer(
            "/approvals/{approval_id}", "POST", 200, path_parameters=one, body=decision
        )
        assert decided["approval"]["status"] == "approved" and decided["requeued"] is True
        late = {"decision": "deny", "reason": "too late"}
        refused = answer("/approvals/{approval_id}", "POST", 409, path_parameters=one, body=late)
        assert (
            refused["error"]["code"] == "approval_decided" and "ana" in refused["error"]["message"]
        )
    finally:
        server.stop()
