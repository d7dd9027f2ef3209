from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from agentrunner import AgentRunner
from agentrunner.runtime.compose import open_runner as open_project_runner
from agentrunner.testing import MockProviderServer

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

CONFIG = """\
[project]
agents_dir = "agents"

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

[prices."mockai:gpt-mock"]
input_per_mtok = 1.0
output_per_mtok = 2.0

[prices."mockant:claude-mock"]
input_per_mtok = 1.0
output_per_mtok = 2.0
{extra}
"""

AGENT = "---\n{front}\n---\n{body}\n"
Agent = Callable[..., Path]


@pytest.fixture
def project(
    tmp_path: Path, mock_server: MockProviderServer, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> Path:
    root = tmp_path / "proj"
    (root / "agents").mkdir(parents=True)
    (root / "agentrunner.toml").write_text(
        CONFIG.format(openai=mock_server.openai_url, anthropic=mock_server.anthropic_url, extra="")
    )
    monkeypatch.setenv("MOCK_KEY", "sk-mock-key")
    monkeypatch.setenv("AGENTRUNNER_DATABASE_URL", store_url)
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def agent(project: Path) -> Agent:
    def write(agent_id: str, front: str = "", body: str = "You are a helpful agent.") -> Path:
        path = project / "agents" / f"{agent_id}.md"
        path.write_text(AGENT.format(front=front or "name: " + agent_id, body=body))
        return path

    return write


@pytest.fixture
async def open_runner(project: Path) -> AsyncIterator[Callable[[], object]]:
    opened: list[AgentRunner] = []

    async def make() -> AgentRunner:
        runner = await open_project_runner(project)
        opened.append(runner)
        return runner

    yield make  # type: ignore[misc]
    for runner in opened:
        await runner.close()


# Telemetry's providers: OpenTelemetry allows a process one of each, so they are set once, for
# the session, by the tests that turn telemetry on. agentrunner finds them set up and sends its
# spans and metrics there, as it would to an application's own.


@pytest.fixture(scope="session")
def exporter() -> InMemorySpanExporter:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(provider)
    assert trace.get_tracer_provider() is provider, "a tracer provider was set before"
    return memory


@pytest.fixture(scope="session")
def metric_reader() -> InMemoryMetricReader:
    """The process's meter provider's reader: deltas, so that each collection holds what was
    recorded since the one before."""
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
    from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader

    delta = AggregationTemporality.DELTA
    reader = InMemoryMetricReader(preferred_temporality={Counter: delta, Histogram: delta})
    provider = MeterProvider([reader])
    metrics.set_meter_provider(provider)
    assert metrics.get_meter_provider() is provider, "a meter provider was set before"
    return reader
