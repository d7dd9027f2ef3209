"""Traces in a receiver people use (issue 26): a local Arize Phoenix server, started here on
spare ports with a working directory (SQLite) of its own, takes what ``agentrunner run`` exports
over OTLP/HTTP, and the spans are read back through its REST API.

Phoenix is heavy, so it lives in a virtualenv of its own (its pins never constrain
agentrunner's): ``.ci/run`` installs it and names its ``phoenix`` in AGENTRUNNER_TEST_PHOENIX.
Without one (nor a ``phoenix`` on PATH) these tests are skipped, except where
AGENTRUNNER_REQUIRE_PHOENIX=1 (CI) makes that a failure."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from agentrunner.testing import Fault, MockProvider, MockProviderServer, Reply

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "agentrunner-test"  # Phoenix's project, named by the x-project-name header
# The attributes the outline shows, `gen_ai.` left off (ids that change from run to run left out).
SHOWN = (
    "gen_ai.agent.id",
    "gen_ai.provider.name",
    "gen_ai.response.model",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.response.finish_reasons",
    "error.type",
    "agentrunner.attempt",
    "agentrunner.fallback",
    "agentrunner.retry.reason",
)
DOC_MARK = (
    "<!-- docs-test: skip: read back from Phoenix by tests/test_phoenix.py, which checks it -->"
)

CONFIG = """\
[defaults]
model = "mockai:gpt-mock"
title_model = "test"

[providers.mockai]
kind = "openai"
base_url = "{openai}"
api_key_env = "MOCK_KEY"

[providers.mockant]
kind = "anthropic"
base_url = "{anthropic}"
api_key_env = "MOCK_KEY"

[telemetry]
enabled = true
capture_content = true
endpoint = "{phoenix}"
"""


def phoenix_executable() -> str | None:
    return os.environ.get("AGENTRUNNER_TEST_PHOENIX") or shutil.which("phoenix")


def spare_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Phoenix server's base URL (its UI, REST API and OTLP/HTTP endpoint share it)."""
    executable = phoenix_executable()
    if executable is None:
        if os.environ.get("AGENTRUNNER_REQUIRE_PHOENIX") == "1":
            pytest.fail("AGENTRUNNER_REQUIRE_PHOENIX=1 but AGENTRUNNER_TEST_PHOENIX is not set")
        pytest.skip("no Arize Phoenix: set AGENTRUNNER_TEST_PHOENIX to its phoenix executable")
    work = tmp_path_factory.mktemp("phoenix")
    port = spare_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(work),  # its SQLite database
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(spare_port()),  # not 4317, which another may hold
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (work / "phoenix.log").open("w")
    server = subprocess.Popen(
        [executable, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=work
    )
    url = f"http://127.0.0.1:{port}"
    try:
        # Started when it answers: it migrates its database first (seconds on a loaded machine).
        deadline = time.monotonic() + 300
        while True:
            if server.poll() is not None:
                pytest.fail(f"phoenix exited ({server.returncode}):\n{_tail(work)}")
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"phoenix did not answer {url}/healthz:\n{_tail(work)}")
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def _tail(work: Path) -> str:
    return "\n".join((work / "phoenix.log").read_text(errors="replace").splitlines()[-40:])


@pytest.fixture
def project(tmp_path: Path, mock_server: MockProviderServer, phoenix: str) -> Path:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agentrunner.toml").write_text(
        CONFIG.format(
            openai=mock_server.openai_url, anthropic=mock_server.anthropic_url, phoenix=phoenix
        )
    )
    agents = {
        "ceo": "name: CEO\ndescription: Runs the company\n"
        "fallback: [mockant:claude-mock]\nretry: {max: 1}",
        "cto": "name: CTO\ndescription: Owns technology\nreports_to: ceo\n"
        "model: mockant:claude-mock",
        "clerk": "name: Clerk\ndescription: Files things\nmodel: mockai:gpt-locked",
    }
    for agent_id, front in agents.items():
        (tmp_path / "agents" / f"{agent_id}.md").write_text(f"---\n{front}\n---\nYou work.\n")
    return tmp_path


def agentrunner(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENTRUNNER_"))}
    env = {
        **clean,
        "PYTHONPATH": str(ROOT / "src"),
        "MOCK_KEY": "sk-mock-key",
        "OTEL_EXPORTER_OTLP_HEADERS": f"x-project-name={PROJECT}",
        "OTEL_SERVICE_NAME": "agentrunner-test",
    }
    return subprocess.run(
        [sys.executable, "-m", "agentrunner", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def phoenix_spans(phoenix: str, trace_id: str, count: int) -> list[dict[str, Any]]:
    """The trace's spans as Phoenix stored them. Phoenix takes an export and stores it in the
    background, so this asks until it has ``count`` of them (or a minute has passed)."""
    url = f"{phoenix}/v1/projects/{PROJECT}/spans?trace_id={trace_id}&limit=1000"
    deadline = time.monotonic() + 60
    while True:
        try:
            spans: list[dict[str, Any]] = get(url)["data"]
        except urllib.error.HTTPError as exc:
            if exc.code != 404:  # 404: the project is made with its first span
                raise
            spans = []
        if len(spans) >= count or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


def outline(spans: list[dict[str, Any]]) -> str:
    """The spans as an indented tree, children in the order they started: each one's name, the
    kind Phoenix gave it, its status when not OK, and the attributes in SHOWN."""
    children: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    for span in sorted(spans, key=lambda s: datetime.fromisoformat(s["start_time"])):
        children[span["parent_id"]].append(span)
    lines: list[str] = []

    def walk(parent: str | None, depth: int) -> None:
        for span in children[parent]:
            attributes = span["attributes"]
            shown = [
                f"{key.removeprefix('gen_ai.')}={attributes[key]}"
                for key in SHOWN
                if key in attributes and attributes[key] is not False
            ]
            if span["status_code"] == "ERROR":
                shown.insert(0, "ERROR")
            head = "  " * depth + span["name"]
            lines.append(f"{head:<30} {span['span_kind']:<7} {' '.join(shown)}".rstrip())
            walk(span["context"]["span_id"], depth + 1)

    walk(None, 0)
    return "\n".join(lines)


def documented_outline() -> str:
    text = (ROOT / "docs" / "observability.md").read_text()
    found = re.search(re.escape(DOC_MARK) + r"\n```text\n(.*?)```", text, re.S)
    assert found, f"docs/observability.md has no block under {DOC_MARK}"
    return found[1].rstrip("\n")


def runs(project: Path) -> dict[str, dict[str, Any]]:
    done = agentrunner(project, "runs", "list", "--json")
    assert done.returncode == 0, done.stderr
    return {run["agent_id"]: run for run in json.loads(done.stdout)}


def test_a_delegating_run_with_a_fallback_is_one_trace_in_phoenix(
    project: Path, mock: MockProvider, phoenix: str
) -> None:
    # The CEO's primary is down (a 503); its fallback delegates to the CTO, who answers; the
    # fallback, asked first from then on (the primary failed), answers the CEO's last step.
    mock.queue(Reply(fault=Fault.http(503)), model="gpt-mock")
    mock.queue(
        Reply(
            tool_calls=[("delegate", {"agent": "cto", "task": "Pick a database"})],
            input_tokens=410,
            output_tokens=31,
        ),
        Reply(text="Postgres.", input_tokens=220, output_tokens=14),
        Reply(text="Decision: Postgres.", input_tokens=498, output_tokens=6),
        model="claude-mock",
    )
    done = agentrunner(project, "run", "ceo", "Choose our database", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["text"] == "Decision: Postgres."

    stored = runs(project)
    trace_id = stored["ceo"]["trace_id"]
    assert re.fullmatch("[0-9a-f]{32}", trace_id)
    assert stored["cto"]["trace_id"] == trace_id  # the delegated run is in its caller's trace

    spans = phoenix_spans(phoenix, trace_id, 15)
    assert outline(spans) == documented_outline()
    assert len({span["context"]["trace_id"] for span in spans}) == 1

    by_name = defaultdict(list)
    for span in spans:
        by_name[span["name"]].append(span)
    (ceo,) = by_name["invoke_agent ceo"]
    (cto,) = by_name["invoke_agent cto"]
    (tool,) = by_name["execute_tool delegate"]
    assert ceo["parent_id"] is None and tool["parent_id"] == ceo["context"]["span_id"]
    assert cto["parent_id"] == tool["context"]["span_id"]
    assert (
        ceo["attributes"]
        | {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "CEO",
            "gen_ai.agent.description": "Runs the company",
            "gen_ai.conversation.id": stored["ceo"]["thread_id"],
            "agentrunner.run.id": stored["ceo"]["id"],
        }
        == ceo["attributes"]
    )
    assert cto["attributes"]["agentrunner.parent_run.id"] == stored["ceo"]["id"]
    assert cto["attributes"]["gen_ai.conversation.id"] == stored["cto"]["thread_id"]
    assert tool["attributes"]["gen_ai.operation.name"] == "execute_tool"
    assert tool["attributes"]["gen_ai.tool.name"] == "delegate"
    assert tool["attributes"]["gen_ai.tool.call.id"]
    requests = [s for s in spans if s["parent_id"] == ceo["context"]["span_id"]]
    down, fallback, again = sorted(
        (s for s in requests if s["name"].startswith("chat ")), key=_start
    )
    assert down["status_code"] == "ERROR"
    assert down["attributes"]["error.type"] == "provider_unavailable"
    assert down["attributes"]["http.response.status_code"] == 503
    assert fallback["attributes"]["gen_ai.request.model"] == "claude-mock"
    assert fallback["attributes"]["agentrunner.retry.reason"] == "provider_unavailable"
    assert again["attributes"]["gen_ai.request.model"] == "claude-mock"
    assert "agentrunner.retry.reason" not in again["attributes"]  # the down primary not asked
    assert again["status_code"] != "ERROR"
    # Phoenix read the GenAI conventions without configuration: its own kinds and token counts.
    assert ceo["span_kind"] == "AGENT" and tool["span_kind"] == "TOOL"
    assert fallback["span_kind"] == "LLM"
    assert fallback["attributes"]["llm.token_count.prompt"] == 410
    # Its input and output columns (issue 39 item 23): OpenInference's input and output values.
    assert ceo["attributes"]["input.value"] == "Choose our database"
    assert ceo["attributes"]["output.value"] == "Decision: Postgres."
    assert json.loads(tool["attributes"]["input.value"]) == {
        "agent": "cto",
        "task": "Pick a database",
    }
    assert tool["attributes"]["output.value"] == "Postgres."
    (said,) = json.loads(again["attributes"]["output.value"])
    assert said["parts"] == [{"type": "text", "content": "Decision: Postgres."}]
    assert again["attributes"]["output.mime_type"] == "application/json"


def test_a_failed_run_is_a_trace_of_its_own_with_its_error_code(
    project: Path, mock: MockProvider, phoenix: str
) -> None:
    mock.queue(Reply(fault=Fault.http(401)), model="gpt-locked")
    done = agentrunner(project, "run", "clerk", "File the report")
    assert done.returncode != 0
    assert "provider_auth" in done.stdout + done.stderr

    run = runs(project)["clerk"]
    assert run["status"] == "failed"
    spans = phoenix_spans(phoenix, run["trace_id"], 4)
    assert outline(spans) == (
        "invoke_agent clerk             AGENT   ERROR agent.id=clerk error.type=provider_auth\n"
        "  thread_lock                  UNKNOWN\n"
        "  resolve_agent                UNKNOWN agent.id=clerk\n"
        "  build_prompt                 UNKNOWN\n"
        "  chat gpt-locked              LLM     ERROR provider.name=mockai "
        "error.type=provider_auth agentrunner.attempt=1"
    )
    (clerk,) = (s for s in spans if s["name"] == "invoke_agent clerk")
    assert clerk["attributes"]["agentrunner.run.id"] == run["id"]
    assert clerk["status_message"]  # the error's message, for the person reading the trace
    assert "sk-mock-key" not in json.dumps(spans)


def _start(span: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(span["start_time"])
