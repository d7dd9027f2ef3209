"""AgentRegistry: lookup, org chart, and the problems that span files."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrunner.agents import AgentRegistry
from agentrunner.errors import AgentFileErrors, AgentRunnerError, ErrorCode
from tests.conftest import WriteAgent

AGENT = "---\nmodel: test\n{extra}\n---\nI am {name}.\n"


def agent(extra: str = "", name: str = "x") -> str:
    return AGENT.format(extra=extra, name=name)


@pytest.fixture
def company(write_agent: WriteAgent, project_dir: Path) -> AgentRegistry:
    write_agent("ceo", agent())
    for report in ("cto", "cmo", "cfo"):
        write_agent(report, agent("reports_to: ceo"))
    write_agent("engineer", agent("reports_to: cto"))
    return AgentRegistry.load(project_dir / "agents")


def test_lookup_by_id(company: AgentRegistry) -> None:
    assert company.get("cto").reports_to == "ceo"
    assert len(company) == 5
    assert "ceo" in company and "nobody" not in company


def test_unknown_id_suggests_close_ids(company: AgentRegistry) -> None:
    with pytest.raises(AgentRunnerError) as info:
        company.get("cfoo")
    err = info.value
    assert err.code is ErrorCode.AGENT_NOT_FOUND
    assert err.code.category is ErrorCode.VALIDATION
    assert err.message == "Agent 'cfoo' not found in registry"
    assert err.hint and "'cfo'" in err.hint


def test_org_chart(company: AgentRegistry) -> None:
    assert sorted(a.id for a in company.direct_reports("ceo")) == ["cfo", "cmo", "cto"]
    assert [a.id for a in company.chain_of_command("engineer")] == ["engineer", "cto", "ceo"]
    assert [a.id for a in company.roots()] == ["ceo"]


def test_reports_to_missing_agent(write_agent: WriteAgent, project_dir: Path) -> None:
    write_agent("cto", agent("reports_to: ceoo"))
    write_agent("ceo", agent())
    with pytest.raises(AgentFileErrors) as info:
        AgentRegistry.load(project_dir / "agents")
    [err] = info.value.problems
    assert err.file == "agents/cto.md" and err.line == 3
    assert "'ceoo', which does not exist (did you mean 'ceo'?)" in err.message


def test_reports_to_cycle_reported_once(write_agent: WriteAgent, project_dir: Path) -> None:
    write_agent("a", agent("reports_to: b"))
    write_agent("b", agent("reports_to: c"))
    write_agent("c", agent("reports_to: a"))
    write_agent("d", agent("reports_to: a"))
    with pytest.raises(AgentFileErrors) as info:
        AgentRegistry.load(project_dir / "agents")
    [err] = info.value.problems
    assert "cycle: a → b → c → a" in err.message
    assert err.line == 3


def test_self_report_is_a_cycle(write_agent: WriteAgent, project_dir: Path) -> None:
    write_agent("a", agent("reports_to: a"))
    with pytest.raises(AgentFileErrors) as info:
        AgentRegistry.load(project_dir / "agents")
    assert "a → a" in info.value.problems[0].message


def test_duplicate_ids_ignoring_case(write_agent: WriteAgent, project_dir: Path) -> None:
    write_agent("ceo", agent())
    write_agent("CEO", agent())
    with pytest.raises(AgentFileErrors) as info:
        AgentRegistry.load(project_dir / "agents")
    [err] = info.value.problems
    assert "duplicate agent id" in err.message


def test_non_strict_load_keeps_good_agents(write_agent: WriteAgent, project_dir: Path) -> None:
    write_agent("good", agent())
    write_agent("bad", "---\nmodle: x\n---\nbody\n")
    registry = AgentRegistry.load(project_dir / "agents", strict=False)
    assert registry.ids() == ["good"]
    assert len(registry.problems) == 2  # unknown key and no model
    assert {p.file for p in registry.problems} == {"agents/bad.md"}


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(AgentRunnerError) as info:
        AgentRegistry.load(tmp_path / "nope")
    assert info.value.code is ErrorCode.RUNNER_IO
    assert info.value.hint and "agentrunner init" in info.value.hint


def test_error_summary_points_to_validate(write_agent: WriteAgent, project_dir: Path) -> None:
    write_agent("a", "---\nmodle: x\n---\n")
    with pytest.raises(AgentFileErrors) as info:
        AgentRegistry.load(project_dir / "agents")
    assert info.value.hint and "agents validate" in info.value.hint
    assert "and 1 more problem" in info.value.message


def test_a_running_registry_sees_its_files_change(
    write_agent: WriteAgent, project_dir: Path
) -> None:
    """A server or worker keeps one registry for hours: what it serves is the files as they
    are now — a lowered trust, a new agent, a broken or removed file."""
    write_agent("ceo", agent("trust: full"))
    write_agent("cfo", agent())
    agents = AgentRegistry.load(project_dir / "agents")
    assert agents.get("ceo").trust == "full"
    path = project_dir / "agents" / "ceo.md"
    path.write_text(agent("trust: sandboxed"))  # in place: the folder's mtime may not move
    assert agents.get("ceo").trust == "sandboxed"
    assert "cto" not in agents
    write_agent("cto", agent("reports_to: ceo"))
    assert "cto" in agents and agents.get("cto").reports_to == "ceo"
    assert [a.id for a in agents.direct_reports("ceo")] == ["cto"]
    path.write_text("---\nmodel: test\ntrust: root\n---\nBroken.\n")
    with pytest.raises(AgentRunnerError) as broken:
        agents.get("ceo")
    assert broken.value.code is ErrorCode.INVALID_SPECIFICATION
    assert (broken.value.file or "").endswith("agents/ceo.md")
    assert agents.get("cfo").trust == "sandboxed"  # the other files still serve
    path.unlink()
    with pytest.raises(AgentRunnerError) as gone:
        agents.get("ceo")
    assert gone.value.code is ErrorCode.AGENT_NOT_FOUND
