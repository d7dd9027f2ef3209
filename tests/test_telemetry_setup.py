"""How telemetry is set up, in processes of their own (a process has one tracer provider):
off, nothing of OpenTelemetry is imported; on, the SDK sends spans over OTLP/HTTP to the
endpoint, headers from ``OTEL_EXPORTER_OTLP_HEADERS``; without the ``otel`` extra, a clear error."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

ROOT = Path(__file__).resolve().parents[1]

RUN = """\
import asyncio, sys
{before}
from agentrunner.compose import open_runner

async def main() -> None:
    async with await open_runner() as runner:
        result = await runner.run_agent("clerk", "desk", "hello there")
    print(result.text)
    loaded = {{m.split(".")[1] for m in sys.modules if m.startswith("opentelemetry.")}}
    print(",".join(sorted(loaded)))

asyncio.run(main())
"""


def run(
    project: Path, env: dict[str, str], before: str = "", timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENTRUNNER_"))}
    return subprocess.run(
        [sys.executable, "-c", RUN.format(before=before)],
        cwd=project,
        env={**clean, "PYTHONPATH": str(ROOT / "src"), **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "clerk.md").write_text("---\nname: Clerk\n---\nYou help.\n")
    (tmp_path / "agentrunner.toml").write_text('[defaults]\nmodel = "test"\n')
    return tmp_path


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP endpoint: what it was sent, by path, with the headers; serving while in
    a ``with`` block."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.received: list[tuple[str, dict[str, str], bytes]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def spans(self) -> list[Span]:
        """Every span it was sent, decoded."""
        return [
            span
            for _, _, body in self.received
            for resource in ExportTraceServiceRequest.FromString(body).resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]

    def __enter__(self) -> Receiver:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append((self.path, dict(self.headers), body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as server:
        yield server


def test_telemetry_off_imports_nothing_of_opentelemetry(project: Path) -> None:
    done = run(project, {})
    assert done.returncode == 0, done.stderr
    text, imported = done.stdout.splitlines()
    assert text and imported == ""  # a run, and neither the API nor the SDK loaded


def test_telemetry_on_exports_the_run_over_otlp_http(project: Path, receiver: Receiver) -> None:
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write(f'[telemetry]\nenabled = true\nendpoint = "{receiver.url}"\n')
    done = run(
        project,
        {"OTEL_SERVICE_NAME": "desk-agents", "OTEL_EXPORTER_OTLP_HEADERS": "x-team=research"},
    )
    assert done.returncode == 0, done.stderr
    assert {"sdk", "exporter"} <= set(done.stdout.splitlines()[1].split(","))
    # flushed when the process exited
    assert [path for path, _, _ in receiver.received] == ["/v1/traces"]
    _, headers, body = receiver.received[0]
    headers = {name.lower(): value for name, value in headers.items()}
    assert headers["x-team"] == "research"
    assert headers["content-type"] == "application/x-protobuf"
    export = ExportTraceServiceRequest.FromString(body)
    (resource,) = export.resource_spans
    service = {a.key: a.value.string_value for a in resource.resource.attributes}
    assert service["service.name"] == "desk-agents"
    spans = receiver.spans()
    assert {scope.scope.name for scope in resource.scope_spans} == {"agentrunner"}
    assert sorted(span.name for span in spans) == [
        "build_prompt",
        "chat test",  # the agent's request
        "chat test",  # the title's
        "invoke_agent clerk",
        "post_run title",
        "resolve_agent",
        "thread_lock",
    ]
    (run_span,) = (span for span in spans if span.name == "invoke_agent clerk")
    assert {span.trace_id for span in spans} == {run_span.trace_id}
    under_run = sorted(
        (s for s in spans if s.parent_span_id == run_span.span_id),
        key=lambda s: s.start_time_unix_nano,
    )
    assert [s.name for s in under_run] == [
        "thread_lock",
        "resolve_agent",
        "build_prompt",
        "chat test",
        "post_run title",
    ]
    run_attrs = {a.key: a.value for a in run_span.attributes}
    assert run_attrs["gen_ai.agent.name"].string_value == "Clerk"
    assert run_attrs["gen_ai.conversation.id"].string_value == "desk"


def test_a_second_endpoint_gets_the_spans_instead(project: Path, receiver: Receiver) -> None:
    """The endpoint comes from the environment over the file (no spans to the file's)."""
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write('[telemetry]\nenabled = true\nendpoint = "http://127.0.0.1:9"\n')
    done = run(project, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.url + "/custom/traces"})
    assert done.returncode == 0, done.stderr
    assert [path for path, _, _ in receiver.received] == ["/custom/traces"]


def test_telemetry_on_without_the_sdk_says_which_extra_to_install(project: Path) -> None:
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write("[telemetry]\nenabled = true\n")
    # as if the otel extra were not installed (the API comes with agentrunner), through the CLI
    code = (
        "import sys; sys.modules['opentelemetry.sdk'] = None; from agentrunner.cli import main; "
        "sys.argv = ['agentrunner', 'run', 'clerk', 'hi']; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    out = done.stdout + done.stderr
    assert "internal: [telemetry] is enabled but the OpenTelemetry SDK is not installed" in out
    assert 'hint: pip install "agentrunner[otel]"' in out
    assert "Traceback" not in out


def test_a_receiver_that_never_answers_does_not_hold_the_exit(project: Path) -> None:
    """The exporter would wait for it as long as OTEL_EXPORTER_OTLP_TIMEOUT says (here two
    minutes), and the SDK's own exit for 30 s, both past this test's limit (a hang, not a
    timing: the run itself takes a second or two); agentrunner's exit gives up after 3 s."""
    stalled = socket.create_server(("127.0.0.1", 0))  # accepts connections, never reads
    try:
        with (project / "agentrunner.toml").open("a") as toml:
            port = stalled.getsockname()[1]
            toml.write(f'[telemetry]\nenabled = true\nendpoint = "http://127.0.0.1:{port}"\n')
        done = run(project, {"OTEL_EXPORTER_OTLP_TIMEOUT": "120"}, timeout=20)
    finally:
        stalled.close()
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0]  # the run answered
    assert f"traces not sent: http://127.0.0.1:{port}/v1/traces did not take them" in (done.stderr)
