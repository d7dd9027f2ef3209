"""How telemetry is set up, in processes of their own (a process has one tracer provider and
one meter provider): off, nothing of OpenTelemetry is imported; on, the SDK sends spans and
metrics over OTLP/HTTP to the endpoint, headers from ``OTEL_EXPORTER_OTLP_HEADERS``; without the
``otel`` extra, a clear error."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from agentrunner.engine.messages import ToolCall, Usage
from agentrunner.errors import AgentRunnerError

ROOT = Path(__file__).resolve().parents[1]

RUN = """\
import asyncio, sys
{before}
from agentrunner.runtime.compose import open_runner

async def main() -> None:
    async with await open_runner() as runner:
        result = await runner.run_agent("clerk", "desk", "hello there")
    print(result.text)
    loaded = {{m.split(".")[1] for m in sys.modules if m.startswith("opentelemetry.")}}
    print(",".join(sorted(loaded)))

asyncio.run(main())
"""

# Every seam telemetry has: a run with a tool call, and a queued run a worker claims and serves.
WORK = """\
import asyncio, sys
from agentrunner.runtime.compose import open_workspace

async def main() -> None:
    workspace = await open_workspace()
    try:
        result = await workspace.runner.run_agent("clerk", "desk", "hello there")
        await workspace.runner.store.threads.open("queued", "clerk")
        await workspace.runs.queue("clerk", "queued", "and again")
        served = await workspace.worker().run(until_idle=True)
    finally:
        await workspace.close()
    print(" ".join(result.text.split()), served)
    loaded = {m.split(".")[1] for m in sys.modules if m.startswith("opentelemetry.")}
    print(",".join(sorted(loaded)))

asyncio.run(main())
"""


def run(
    project: Path, env: dict[str, str], before: str = "", timeout: float = 60, script: str = ""
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENTRUNNER_"))}
    return subprocess.run(
        [sys.executable, "-c", script or RUN.format(before=before)],
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
        """Every span it was sent, decoded (metrics come to the same receiver)."""
        return [
            span
            for path, _, body in self.received
            if path.endswith("/v1/traces")
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

    def paths(self) -> list[str]:
        return sorted(path for path, _, _ in self.received)

    def sent(self, path: str) -> tuple[dict[str, str], bytes]:
        """The headers (lower-case) and body of the one request posted to ``path``."""
        ((headers, body),) = [(h, b) for p, h, b in self.received if p == path]
        return {name.lower(): value for name, value in headers.items()}, body


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
    (project / "agents" / "clerk.md").write_text(
        "---\nname: Clerk\ncapabilities: [notify]\n---\nYou help.\n"
    )
    done = run(project, {}, script=WORK)
    assert done.returncode == 0, done.stderr
    text, imported = done.stdout.splitlines()
    # a run with a tool call (the test model calls each tool once) and a queued run served
    assert text.endswith(" 1") and "notify_user" in text
    assert imported == ""  # neither the API nor the SDK loaded


# Every module of the package but telemetry on's own and the interfaces whose libraries bring
# OpenTelemetry with them (FastAPI's, the MCP SDK's), and the entry points that run something.
IMPORT_ALL = """\
import sys
from pathlib import Path
{before}
import agentrunner

ON = ("agentrunner.telemetry.otel", "agentrunner.telemetry.spans", "agentrunner.telemetry.metrics")
OTHERS = ("agentrunner.interfaces.server", "agentrunner.interfaces.mcp_server")
root = Path(agentrunner.__file__).parent
for path in sorted(root.rglob("*.py")):
    name = ".".join(("agentrunner", *path.relative_to(root).with_suffix("").parts))
    name = name.removesuffix(".__init__")
    if name.startswith(ON + OTHERS) or name.endswith("__main__"):
        continue
    __import__(name)
    if "opentelemetry" in sys.modules:  # the first module that imported it
        print(name)
        break
print(len([m for m in sys.modules if m.startswith("agentrunner.")]))
"""


def test_importing_agentrunner_imports_nothing_of_opentelemetry(project: Path) -> None:
    """Telemetry off costs no import: not the package, not its null telemetry, not the set-up
    that would turn it on, not the composition root or the CLI (only telemetry on's modules
    import OpenTelemetry)."""
    done = run(project, {}, script=IMPORT_ALL.format(before=""))
    assert done.returncode == 0, done.stderr
    (count,) = done.stdout.splitlines()  # no module named as importing it
    assert int(count) > 100  # the walk found the package's modules
    on = run(project, {}, script=IMPORT_ALL.format(before="import agentrunner.telemetry.otel"))
    assert on.returncode == 0, on.stderr
    assert on.stdout.splitlines()[0] == "agentrunner"  # an import it would see


def test_telemetry_off_gives_back_what_it_is_given() -> None:
    """``NO_TRACING`` changes nothing a caller sees: the delta sink and the thread's lock it is
    handed come back as they are, a run has no trace id, a queued run keeps no trace context,
    and an error inside one of its spans is raised as it was."""
    from contextlib import nullcontext

    from agentrunner.telemetry import NO_TRACING

    entry: Any = object()
    for sink in (None, print):
        assert NO_TRACING.streaming(entry, sink) is sink
    for hold in (nullcontext("held"), nullcontext("other")):
        assert NO_TRACING.thread_lock(hold, "desk") is hold
    assert NO_TRACING.run_started("run_1", "Clerk", "") is None
    with NO_TRACING.enqueue("clerk") as (_, carrier):
        assert carrier is None
    with NO_TRACING.run("clerk", thread_id="desk", message="hi") as span:
        NO_TRACING.run_done(
            span,
            stop_reason="end_turn",
            model=None,
            usage=Usage(),
            cost_micros=0,
            cost_known=True,
            text="",
        )
    with pytest.raises(KeyError, match="gone"), NO_TRACING.tool(ToolCall("c1", "t", {})):
        raise KeyError("gone")


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
    assert receiver.paths() == ["/v1/metrics", "/v1/traces"]
    headers, body = receiver.sent("/v1/traces")
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

    headers, body = receiver.sent("/v1/metrics")
    assert headers["x-team"] == "research"
    assert headers["content-type"] == "application/x-protobuf"
    (resource,) = ExportMetricsServiceRequest.FromString(body).resource_metrics
    service = {a.key: a.value.string_value for a in resource.resource.attributes}
    assert service["service.name"] == "desk-agents"
    assert {scope.scope.name for scope in resource.scope_metrics} == {"agentrunner"}
    points = {
        metric.name: [
            (_attributes(p.attributes), p)
            for p in (metric.sum.data_points or metric.histogram.data_points)
        ]
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    clerk = {"gen_ai.agent.id": "clerk"}
    assert [(a, p.as_int) for a, p in points["agentrunner.runs.started"]] == [(clerk, 1)]
    (run_time,) = points["gen_ai.invoke_agent.duration"]  # completed: no error.type
    assert run_time[0] == {**clerk, "gen_ai.agent.name": "Clerk"} and run_time[1].count == 1
    # the agent's request and the title's
    (requests,) = points["gen_ai.client.operation.duration"]
    assert requests[0] == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "test",
        "gen_ai.request.model": "test",
        "gen_ai.response.model": "test",
    }
    assert requests[1].count == 2
    tokens = {
        a["gen_ai.token.type"]: p.sum
        for a, p in points["gen_ai.client.token.usage"]
        if a.get("gen_ai.agent.id") == "clerk"
    }
    assert tokens["input"] > 0 and tokens["output"] > 0


@pytest.mark.parametrize(
    ("ratio", "env", "traced"),
    [
        ("0", {}, False),  # none kept: the run's spans are not sent, its metrics are
        ("0", {"OTEL_TRACES_SAMPLER": "always_on"}, True),  # the environment over the file
        ("1", {}, True),
        ("0.5", {"OTEL_TRACES_SAMPLER": "always_off"}, False),
    ],
)
def test_sample_ratio_keeps_that_share_of_traces(
    project: Path, receiver: Receiver, ratio: str, env: dict[str, str], traced: bool
) -> None:
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write(
            f'[telemetry]\nenabled = true\nendpoint = "{receiver.url}"\nsample_ratio = {ratio}\n'
        )
    done = run(project, env)
    assert done.returncode == 0, done.stderr
    assert ("/v1/traces" in receiver.paths()) is traced
    assert "/v1/metrics" in receiver.paths()


@pytest.mark.parametrize("bad", ["1.5", "-0.1", '"half"', "true"])
def test_a_sample_ratio_that_is_no_share_is_refused_at_its_line(project: Path, bad: str) -> None:
    from agentrunner.config import load_config

    (project / "agentrunner.toml").write_text(f"[telemetry]\nsample_ratio = {bad}\n")
    with pytest.raises(AgentRunnerError) as refused:
        load_config(project)
    assert "telemetry.sample_ratio must be a number from 0 to 1" in refused.value.message
    assert refused.value.line == 2


def _attributes(attributes: Sequence[KeyValue]) -> dict[str, object]:
    return {
        a.key: getattr(a.value, a.value.WhichOneof("value") or "string_value") for a in attributes
    }


def test_a_second_endpoint_gets_the_spans_instead(project: Path, receiver: Receiver) -> None:
    """The endpoints come from the environment over the file (nothing to the file's)."""
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write('[telemetry]\nenabled = true\nendpoint = "http://127.0.0.1:9"\n')
    done = run(
        project,
        {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.url + "/custom/traces",
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": receiver.url + "/custom/metrics",
        },
    )
    assert done.returncode == 0, done.stderr
    assert receiver.paths() == ["/custom/metrics", "/custom/traces"]
    assert "not sent" not in done.stderr


WAIT = """\
import asyncio, sys
from agentrunner.runtime.compose import open_runner

async def main() -> None:
    async with await open_runner() as runner:
        await runner.run_agent("clerk", "desk", "hello there")
    sys.stdin.readline()  # the test says when to exit

asyncio.run(main())
"""


def test_metrics_are_sent_every_interval_while_the_process_runs(
    project: Path, receiver: Receiver
) -> None:
    """``OTEL_METRIC_EXPORT_INTERVAL``: sent while the process runs, not only as it exits (at
    the default, a minute, this test would wait for its limit and fail)."""
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write(f'[telemetry]\nenabled = true\nendpoint = "{receiver.url}"\n')
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENTRUNNER_"))}
    running = subprocess.Popen(
        [sys.executable, "-c", WAIT],
        cwd=project,
        env={**clean, "PYTHONPATH": str(ROOT / "src"), "OTEL_METRIC_EXPORT_INTERVAL": "100"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        limit = time.monotonic() + 30
        while "/v1/metrics" not in receiver.paths():
            assert running.poll() is None, running.communicate()
            assert time.monotonic() < limit, "no metrics sent while the process ran"
            time.sleep(0.05)
        sent = receiver.paths().count("/v1/metrics")
        _, stderr = running.communicate("\n", timeout=30)
    finally:
        if running.poll() is None:
            running.kill()
    assert running.returncode == 0, stderr
    assert receiver.paths().count("/v1/metrics") > sent  # and the last ones as it exited


def test_telemetry_on_without_the_sdk_says_which_extra_to_install(project: Path) -> None:
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write("[telemetry]\nenabled = true\n")
    # as if the otel extra were not installed (the API comes with agentrunner), through the CLI
    code = (
        "import sys; sys.modules['opentelemetry.sdk'] = None; "
        "from agentrunner.interfaces.cli import main; "
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
    # given up together, in one wait, saying why (connected, but no answer)
    assert done.stderr.splitlines() == [
        f"traces not sent: http://127.0.0.1:{port}/v1/traces did not answer within 3 s",
        f"metrics not sent: http://127.0.0.1:{port}/v1/metrics did not answer within 3 s",
    ]


def _refusing_endpoint() -> str:
    """An endpoint with nothing listening: each connection refused at once."""
    with socket.create_server(("127.0.0.1", 0)) as free:
        port = free.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _cli(project: Path, *args: str) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENTRUNNER_"))}
    code = "import sys; from agentrunner.interfaces.cli import main; main(sys.argv[1:])"
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=project,
        env={**clean, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "200"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _interrupt_the_exit_flush(running: subprocess.Popen[str]) -> tuple[int, str]:
    """Ctrl-C once the command says (``--debug``) it is waiting for its last telemetry to be
    sent: the exit status and all of stderr."""
    assert running.stderr is not None
    seen: list[str] = []
    try:
        for line in running.stderr:
            seen.append(line)
            if "sending the last spans and metrics" in line:
                running.send_signal(signal.SIGINT)
                break
        else:
            pytest.fail(f"the command ended without waiting for its telemetry: {seen}")
        _, rest = running.communicate(timeout=30)
    finally:
        if running.poll() is None:
            running.kill()
    return running.returncode, "".join(seen) + rest


@pytest.mark.parametrize(
    ("args", "status", "error"),
    [
        (["run", "clerk", "hello"], 130, None),  # a run that went well: the Ctrl-C's status
        # a run that failed (its provider down: its spans are there to send) keeps its own
        (["run", "--model", "down:model", "clerk", "hello"], 1, "provider_unavailable"),
    ],
)
def test_ctrl_c_during_the_exit_flush_gives_it_up_quietly(
    project: Path, args: list[str], status: int, error: str | None
) -> None:
    endpoint = _refusing_endpoint()
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write(f'[providers.down]\nkind = "openai"\nbase_url = "{endpoint}/v1"\n')
        toml.write(f'[telemetry]\nenabled = true\nendpoint = "{endpoint}"\n')
    code, stderr = _interrupt_the_exit_flush(_cli(project, "--debug", *args))
    assert code == status, stderr
    # (--debug prints the failed run's own traceback: the model error's, not the Ctrl-C's)
    assert "KeyboardInterrupt" not in stderr and "Exception ignored" not in stderr
    assert stderr.count("telemetry not sent: interrupted") == 1
    assert "traces not sent" not in stderr  # given up, not waited out
    assert (f"error: {error}" in stderr) if error else ("error:" not in stderr)


def test_ctrl_c_after_the_exit_flush_is_over_prints_no_traceback(project: Path) -> None:
    # A model that does not exist fails before anything is exported: the flush has nothing to
    # wait for, and the Ctrl-C comes as the interpreter exits (it once printed a traceback of
    # logging's atexit hook, about 1 time in 3).
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write(f'[telemetry]\nenabled = true\nendpoint = "{_refusing_endpoint()}"\n')
    for _ in range(5):
        running = _cli(project, "--debug", "run", "--model", "nosuch:model", "clerk", "hello")
        code, stderr = _interrupt_the_exit_flush(running)
        assert code == 1, stderr
        assert "KeyboardInterrupt" not in stderr and "Exception ignored" not in stderr
        assert "error: model_not_found" in stderr


def test_an_endpoint_down_gets_one_warning_each_without_the_exporters_retries(
    project: Path,
) -> None:
    endpoint = _refusing_endpoint()
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write(f'[telemetry]\nenabled = true\nendpoint = "{endpoint}"\n')
    # --json: the result on stdout, so stderr holds log lines only
    text_run = _cli(project, "run", "--json", "clerk", "hello")
    _, text = text_run.communicate(timeout=60)
    json_run = _cli(project, "--log-format", "json", "run", "--json", "clerk", "hello")
    _, lines = json_run.communicate(timeout=60)
    debug_run = _cli(project, "--debug", "run", "--json", "clerk", "hello")
    _, debug = debug_run.communicate(timeout=60)
    assert text_run.returncode == json_run.returncode == debug_run.returncode == 0, text + lines
    # why, said once each: the connection was refused (not "did not take them within 3 s"),
    # as the CLI says a warning
    said = [
        f"traces not sent: {endpoint}/v1/traces refused the connection",
        f"metrics not sent: {endpoint}/v1/metrics refused the connection",
    ]
    assert text.splitlines() == [f"warning: {line}" for line in said]
    records = [orjson.loads(line) for line in lines.splitlines()]  # every line is JSON
    assert [(r["level"], r["logger"], r["message"]) for r in records] == [
        ("WARNING", "agentrunner.telemetry", line) for line in said
    ]
    # the exporter's retries are there with --debug, as DEBUG lines
    assert "Transient error" not in text + lines
    assert "DEBUG opentelemetry.exporter.otlp.proto.http.trace_exporter: Transient error" in debug
