"""Approval rules (issue 41, item 1): an agent file's ``approval:`` and agentrunner.toml's
``[approval]``, read, checked and merged into ``AgentSpec.approval``; ``rule_for``, which names
the rule a call needs a person's yes by; and ``agents validate`` checking the names."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrunner.agents import AgentSpec, ApprovalRules, parse_agent_text
from agentrunner.agents.project import load_project
from agentrunner.config import load_config
from agentrunner.config.approval import Approval
from agentrunner.errors import AgentFileErrors, AgentRunnerError, ErrorCode
from agentrunner.interfaces.cli import main
from tests.conftest import WriteAgent


def parse(front: str, defaults: Approval | None = None) -> AgentSpec:
    return parse_agent_text(
        f"---\nmodel: test\n{front}\n---\nHi.\n",
        agent_id="writer",
        file="agents/writer.md",
        approval=defaults,
    )


# -- the agent file ------------------------------------------------------------------------


def test_two_different_blocks_give_different_rules() -> None:
    first = parse('approval:\n  tools: [write_file, "github/*"]\n  timeout_s: 3600')
    second = parse("approval: {tools: [note_create], destructive: true}")
    assert first.approval == ApprovalRules(tools=("write_file", "github/*"), timeout_s=3600.0)
    assert second.approval == ApprovalRules(tools=("note_create",), destructive=True)
    assert first.approval != second.approval
    assert (first.approval.timeout_s, second.approval.timeout_s) == (3600.0, 86400.0)
    assert first.line_of("approval.tools") == 4 and second.line_of("approval") == 3
    assert first.approval.rule_for("write_file") == "approval.tools: write_file"
    assert second.approval.rule_for("write_file") is None


def test_no_rules_anywhere_is_none() -> None:
    assert parse("name: Plain").approval is None
    assert parse("approval: {}").approval is None
    assert parse("approval: {timeout_s: 60}").approval is None  # a wait for nothing
    assert parse("approval: {tools: [], destructive: false}").approval is None


@pytest.mark.parametrize(
    ("front", "line", "fragment"),
    [
        ("approval:\n  tools: write_file", 4, "'approval.tools' must be a list, got 'write_file'"),
        ('approval:\n  tools: [write_file, ""]', 4, "'approval.tools' holds '', which is not"),
        ("approval:\n  tools: [write_file, 3]", 4, "'approval.tools' holds 3, which is not"),
        ('approval:\n  tools: [" x"]', 4, "'approval.tools' holds ' x', which is not"),
        ('approval:\n  tools: ["a/b/c"]', 4, "holds 'a/b/c': an MCP server's tools are"),
        ('approval:\n  tools: ["/x"]', 4, "holds '/x': an MCP server's tools are SERVER/TOOL"),
        ('approval:\n  tools: ["github/"]', 4, "holds 'github/': an MCP server's tools"),
        ("approval:\n  destructive: yes please", 4, "'approval.destructive' must be true or"),
        ("approval:\n  timeout_s: 0", 4, "'approval.timeout_s' must be a positive number of s"),
        ("approval:\n  timeout_s: -5", 4, "seconds, got -5"),
        ("approval:\n  timeout_s: soon", 4, "seconds, got 'soon'"),
        ("approval:\n  timeout_s: .nan", 4, "seconds, got nan"),
        ("approval:\n  timeout_s: true", 4, "seconds, got True"),
        ("approval:\n  tools: []\n  tool: [x]", 5, "unknown key 'approval.tool' (did you mean"),
        (
            "approval: yes",
            3,
            "'approval' must be a mapping of tools, destructive, above_usd, timeout_s",
        ),
        ("approval: [write_file]", 3, "or false, got ['write_file']"),
    ],
)
def test_a_bad_value_is_named_at_its_line(front: str, line: int, fragment: str) -> None:
    with pytest.raises(AgentFileErrors) as info:
        parse(front)
    [error] = info.value.problems
    assert error.code is ErrorCode.INVALID_SPECIFICATION
    assert (error.file, error.line) == ("agents/writer.md", line)
    assert fragment in error.message
    assert error.hint


def test_every_problem_of_a_block_is_listed_together() -> None:
    with pytest.raises(AgentFileErrors) as info:
        parse("approval:\n  tools: x\n  destructive: 1\n  timeout_s: 0\n  wait: 5")
    found = sorted((p.line, p.message.split("'")[1]) for p in info.value.problems)
    assert found == [
        (4, "approval.tools"),
        (5, "approval.destructive"),
        (6, "approval.timeout_s"),
        (7, "approval.wait"),
    ]


# -- the project's defaults, merged key by key ---------------------------------------------

DEFAULTS = Approval(tools=("write_*",), destructive=True, timeout_s=600.0)


def test_the_projects_defaults_only() -> None:
    rules = parse("name: Writer", DEFAULTS).approval
    assert rules == ApprovalRules(
        tools=("write_*",),
        destructive=True,
        timeout_s=600.0,
        tools_from="[approval] tools",
        destructive_from="[approval] destructive",
    )
    assert rules.rule_for("write_file") == "[approval] tools: write_*"
    assert rules.rule_for("wipe", destructive=True, server="s") == "[approval] destructive"


def test_the_agents_own_only() -> None:
    rules = parse("approval: {tools: [notify_user]}", None).approval
    assert rules == ApprovalRules(tools=("notify_user",))
    assert rules.rule_for("wipe", destructive=True, server="s") is None


def test_both_the_agents_keys_win_one_by_one() -> None:
    rules = parse("approval: {tools: [notify_user], timeout_s: 60}", DEFAULTS).approval
    assert rules is not None
    assert rules.tools == ("notify_user",)  # replaces the project's list, does not add to it
    assert rules.rule_for("write_file") is None
    assert rules.rule_for("notify_user") == "approval.tools: notify_user"
    assert rules.timeout_s == 60.0
    assert rules.destructive and rules.destructive_from == "[approval] destructive"


def test_an_agent_turns_the_defaults_off() -> None:
    assert parse("approval: false", DEFAULTS).approval is None
    emptied = parse("approval: {tools: []}", DEFAULTS).approval  # the list only
    assert emptied is not None and emptied.tools == () and emptied.destructive
    assert parse("approval: {tools: [], destructive: false}", DEFAULTS).approval is None


def test_a_broken_block_leaves_the_defaults_on_the_partial_spec() -> None:
    with pytest.raises(AgentFileErrors) as info:
        parse("approval: {tools: x}", DEFAULTS)
    partial = info.value.partial
    assert isinstance(partial, AgentSpec) and partial.approval is not None
    assert partial.approval.tools_from == "[approval] tools"


def test_the_config_reaches_every_agent_through_the_project(
    project_dir: Path, write_agent: WriteAgent
) -> None:
    config = project_dir / "agentrunner.toml"
    config.write_text(
        config.read_text()
        + '[defaults]\nmodel = "test"\n[approval]\ntools = ["write_file", "github/*"]\n'
    )
    write_agent("plain", "Hi.\n")
    write_agent("own", "---\napproval: {tools: [notify_user], timeout_s: 5}\n---\nHi.\n")
    write_agent("off", "---\napproval: false\n---\nHi.\n")
    agents = load_project().agents
    plain, own = agents.get("plain").approval, agents.get("own").approval
    assert plain is not None and own is not None
    assert plain.tools == ("write_file", "github/*") and plain.timeout_s == 86400.0
    assert own.tools == ("notify_user",) and own.timeout_s == 5.0
    assert agents.get("off").approval is None


# -- agentrunner.toml's [approval] --------------------------------------------------------


def test_the_approval_section(tmp_path: Path) -> None:
    (tmp_path / "agentrunner.toml").write_text(
        '[approval]\ntools = ["write_file", "github/*"]\ndestructive = true\ntimeout_s = 300\n'
    )
    config = load_config(tmp_path, env={})
    assert config.approval == Approval(("write_file", "github/*"), True, 300.0)
    (tmp_path / "agentrunner.toml").write_text("approval = { destructive = false }\n")
    assert load_config(tmp_path, env={}).approval == Approval(destructive=False)
    (tmp_path / "agentrunner.toml").write_text("[project]\n")
    assert load_config(tmp_path, env={}).approval is None


@pytest.mark.parametrize(
    ("body", "line", "key", "fragment"),
    [
        ('tools = "write_file"', 3, "tools", "'approval.tools' must be a list"),
        ('tools = ["a", ""]', 3, "tools", "'approval.tools' holds ''"),
        ('destructive = "yes"', 3, "destructive", "'approval.destructive' must be true or"),
        ("timeout_s = 0", 3, "timeout_s", "'approval.timeout_s' must be a positive number"),
        ("timeout_s = -1.5", 3, "timeout_s", "seconds, got -1.5"),
        ("tool = []", 3, "tool", "unknown key 'approval.tool' (did you mean 'approval.tools'?)"),
    ],
)
def test_a_bad_approval_section_names_its_line(
    tmp_path: Path, body: str, line: int, key: str, fragment: str
) -> None:
    (tmp_path / "agentrunner.toml").write_text(f"[project]\n[approval]\n{body}\n")
    with pytest.raises(AgentRunnerError) as info:
        load_config(tmp_path, env={})
    error = info.value
    assert error.code is ErrorCode.INVALID_SPECIFICATION
    assert error.file == str(tmp_path / "agentrunner.toml") and error.line == line
    assert error.details["config_key"] == ("approval", key)
    assert fragment in error.message and error.hint


# -- rule_for -------------------------------------------------------------------------------


def test_rule_for_names_globs_servers_and_destructive_tools() -> None:
    rules = ApprovalRules(tools=("write_file", "note_*", "github/*", "fs/delete_?", "*/drop_table"))
    asked = {
        call: rules.rule_for(call[0], server=call[1], destructive=call[2])
        for call in [
            ("write_file", None, False),
            ("read_file", None, False),
            ("note_create", None, False),
            ("notify_user", None, False),
            ("create_issue", "github", False),
            ("create_issue", "gitlab", False),
            ("delete_x", "fs", False),
            ("delete_xy", "fs", False),
            ("drop_table", "db", False),
            ("drop_table", None, False),  # a SERVER/TOOL rule is for MCP tools only
            ("wipe", "db", True),  # destructive: off here
            ("write_file", "fs", False),  # a plain name covers an MCP tool of that name too
        ]
    }
    assert asked == {
        ("write_file", None, False): "approval.tools: write_file",
        ("read_file", None, False): None,
        ("note_create", None, False): "approval.tools: note_*",
        ("notify_user", None, False): None,
        ("create_issue", "github", False): "approval.tools: github/*",
        ("create_issue", "gitlab", False): None,
        ("delete_x", "fs", False): "approval.tools: fs/delete_?",
        ("delete_xy", "fs", False): None,
        ("drop_table", "db", False): "approval.tools: */drop_table",
        ("drop_table", None, False): None,
        ("wipe", "db", True): None,
        ("write_file", "fs", False): "approval.tools: write_file",
    }
    destructive = ApprovalRules(destructive=True)
    assert destructive.rule_for("wipe", destructive=True, server="db") == "approval.destructive"
    assert destructive.rule_for("wipe", server="db") is None
    assert destructive.rule_for("write_file") is None


def test_rule_for_is_case_sensitive_and_matches_whole_names() -> None:
    rules = ApprovalRules(tools=("write_*", "Deploy"))
    assert rules.rule_for("write_file") is not None
    assert rules.rule_for("rewrite_file") is None
    assert rules.rule_for("WRITE_FILE") is None
    assert rules.rule_for("deploy") is None and rules.rule_for("Deploy") is not None


def test_rules_are_immutable_values() -> None:
    rules = ApprovalRules(tools=("a",))
    with pytest.raises(AttributeError):
        rules.tools = ("b",)  # type: ignore[misc]
    assert rules == ApprovalRules(tools=("a",)) and hash(rules) == hash(ApprovalRules(("a",)))
    assert "_names" not in repr(rules)


# -- agents validate ------------------------------------------------------------------------


def validate(capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        main(["agents", "validate"])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


GOOD = """\
---
model: test
capabilities: [files]
mcp_servers:
  github: {command: github-mcp}
approval:
  tools: [write_file, "write_*", send_message, delegate, "github/*", "git*/create_*"]
  destructive: true
---
Hi.
"""


def test_validate_passes_names_the_agent_can_have(
    write_agent: WriteAgent, capsys: pytest.CaptureFixture[str]
) -> None:
    write_agent("writer", GOOD)
    # no MCP server: a name is checked against the agent's own tools
    write_agent(
        "filer",
        "---\nmodel: test\ncapabilities: [files]\n"
        'approval: {tools: [write_file, "*_file"]}\n---\nHi.\n',
    )
    code, out, err = validate(capsys)
    assert (code, err) == (0, "")
    assert "2 agents valid" in out


def test_validate_refuses_a_misspelt_tool_and_a_server_the_agent_lacks(
    write_agent: WriteAgent, capsys: pytest.CaptureFixture[str]
) -> None:
    write_agent(
        "writer",
        "---\nmodel: test\ncapabilities: [files]\nmcp_servers:\n  github: {command: gh}\n"
        'approval:\n  tools: [write_file, "githb/*"]\n---\nHi.\n',
    )
    write_agent(
        "filer",
        "---\nmodel: test\ncapabilities: [files]\n"
        'approval:\n  tools: [write_fiel, "github/*", deploy, "zz_*"]\n---\nHi.\n',
    )
    code, _, err = validate(capsys)
    assert code == 1
    assert err.splitlines() == [
        "agents/filer.md:5: invalid_specification: approval.tools: 'write_fiel' is not among "
        "the agent's tools (did you mean 'write_file'?)",
        "agents/filer.md:5: invalid_specification: approval.tools: 'github/*' names MCP "
        "server 'github', which is not in the agent's mcp_servers",
        "agents/writer.md:7: invalid_specification: approval.tools: 'githb/*' names MCP "
        "server 'githb', which is not in the agent's mcp_servers (did you mean 'github/*'?)",
        "warning: agents/filer.md:5: approval.tools: 'deploy' is not among the agent's tools; "
        "it asks for nothing unless a run is given such a tool from Python",
        "warning: agents/filer.md:5: approval.tools: 'zz_*' matches none of the agent's "
        "tools; it asks for nothing unless a run is given such a tool from Python",
        "3 problems in agents",
    ]


def test_validate_checks_the_projects_names_once(
    project_dir: Path, write_agent: WriteAgent, capsys: pytest.CaptureFixture[str]
) -> None:
    config = project_dir / "agentrunner.toml"
    base = config.read_text()
    write_agent("a", "---\nmodel: test\n---\nHi.\n")
    write_agent("b", "---\nmodel: test\ncapabilities: [notify]\n---\nHi.\n")
    config.write_text(base + '[approval]\ntools = ["notify_user", "write_file", "jira/*"]\n')
    code, out, err = validate(capsys)
    assert code == 0 and "2 agents valid" in out
    assert err.splitlines() == [
        "warning: agentrunner.toml:4: [approval] tools: 'jira/*' names MCP server 'jira', "
        "which is not in any agent's mcp_servers; it asks for nothing unless an agent "
        "declares that server"
    ]
    config.write_text(base + '[approval]\ntools = ["notify_usr"]\n')
    code, _, err = validate(capsys)
    assert code == 1
    assert err.splitlines()[0] == (
        "agentrunner.toml:4: invalid_specification: [approval] tools: 'notify_usr' is not "
        "among any agent's tools (did you mean 'notify_user'?)"
    )
    assert "1 problem in agentrunner.toml" in err
