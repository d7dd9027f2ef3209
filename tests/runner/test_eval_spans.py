"""Evals' spans (issue 45, item 3): each case of an eval is an ``eval_case`` span carrying the
eval run's id, the eval's name and the case; its run's ``invoke_agent`` span, under it, carries
them too, and so does the judge's request. Read from the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentrunner.agents.evals import load_eval
from agentrunner.runtime.compose import open_workspace
from agentrunner.testing import MockProvider
from agentrunner.workspace.evals import run_eval
from tests.runner.conftest import Agent
from tests.workspace.test_eval_judge import JUDGE_PRICES, _eval_file, _verdict


@pytest.fixture
def spans(
    exporter: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> Iterator[InMemorySpanExporter]:
    exporter.clear()
    yield exporter
    exporter.clear()


async def test_each_case_is_a_span_and_its_run_carries_the_eval_and_case_ids(
    agent: Agent, project: Path, mock: MockProvider, spans: InMemorySpanExporter
) -> None:
    with (project / "agentrunner.toml").open("a") as toml:
        toml.write("\n[telemetry]\nenabled = true\n" + JUDGE_PRICES)
    agent("clerk", "model: mockai:gpt-mock")
    spec = await asyncio.to_thread(load_eval, _eval_file(project, cases=3), agents=["clerk"])
    mock.queue(*(_verdict(True, n) for n in range(3)), model="gpt-judge")
    ws = await open_workspace(project)
    try:
        report = await run_eval(ws.runner, spec, concurrency=3)
        await ws.runner.effects.drain()
    finally:
        await ws.close()
    got = spans.get_finished_spans()
    cases = {s.attributes["agentrunner.eval.case"]: s for s in got if s.name.startswith("eval_")}
    assert sorted(cases) == ["item 0", "item 1", "item 2"]
    for outcome in report.reports[0].outcomes:
        case = cases[outcome.case]
        assert case.attributes["agentrunner.eval.id"] == report.eval_run_id
        assert case.attributes["agentrunner.eval.name"] == "graded"
        [run] = [
            s
            for s in got
            if s.name == "invoke_agent clerk"
            and s.attributes.get("agentrunner.run.id") == outcome.run_id
        ]
        assert run.parent is not None and run.parent.span_id == case.context.span_id
        assert run.attributes["agentrunner.eval.case"] == outcome.case
        assert run.attributes["agentrunner.eval.id"] == report.eval_run_id
        judged = [
            s
            for s in got
            if s.name == "chat gpt-judge" and s.parent and s.parent.span_id == case.context.span_id
        ]
        assert len(judged) == 1  # the grade is the case's too
    assert len({s.context.trace_id for s in cases.values()}) == 3
