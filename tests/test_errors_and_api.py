"""The error taxonomy, its documentation, and the pinned public API."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import agentrunner
from agentrunner.errors import (
    AgentFileErrors,
    AgentRunnerError,
    ErrorCode,
    code_info,
    error_line,
)

ROOT = Path(__file__).resolve().parent.parent

SEED_001 = {
    "cancelled": False,
    "tool_denied": False,
    "tool_failed": True,
    "internal": False,
    "provider_auth": False,
    "provider_rate_limit": True,
    "provider_unavailable": True,
    "content_filter": False,
    "validation": False,
    "turn_limit": False,
}
SEED_004 = {
    "MISSING_MANDATORY_PLACEHOLDER": "missing_mandatory_placeholder",
    "INVALID_PLACEHOLDER_PATH": "invalid_placeholder_path",
    "AGENT_NOT_FOUND": "agent_not_found",
    "MODEL_NOT_FOUND": "model_not_found",
    "EXECUTION_FAILED": "execution_failed",
    "INVALID_SPECIFICATION": "invalid_specification",
    "PYTHON_RUNNER_ERROR": "runner_io",
}


def test_taxonomy_is_closed_and_complete() -> None:
    interfaces = {"thread_not_found", "not_found", "address_in_use", "unauthorized", "queue_full"}
    limits = {"budget_exceeded", "price_unknown", "run_timeout"}
    workers = {"run_settled", "worker_lost"}
    agents = {"agent_disabled"}
    company = {"session_active"}
    people = {"approval_decided", "thread_waiting"}  # a person in the loop (docs/approvals.md)
    guards = {"guard_blocked"}  # an extension's guard stopped a run (docs/approvals.md)
    # a file refused at the edge, or a part no model of the chain takes (docs/attachments.md)
    attachments = {"attachment_refused", "model_input_unsupported"}
    expected = (
        set(SEED_001)
        | set(SEED_004.values())
        | limits
        | interfaces
        | workers
        | agents
        | company
        | people
        | guards
        | attachments
    )
    assert {str(c) for c in ErrorCode} == expected
    assert ErrorCode.RUN_TIMEOUT.category is ErrorCode.TURN_LIMIT  # a limit, for seed 001
    assert ErrorCode.PRICE_UNKNOWN.category is ErrorCode.BUDGET_EXCEEDED  # a budget's refusal
    assert ErrorCode.GUARD_BLOCKED.category is ErrorCode.CONTENT_FILTER  # refused for content


@pytest.mark.parametrize(("code", "retryable"), SEED_001.items())
def test_seed_001_retryable_flags(code: str, retryable: bool) -> None:
    assert ErrorCode(code).retryable is retryable
    assert ErrorCode(code).category is ErrorCode(code)


@pytest.mark.parametrize(("seed_name", "code"), SEED_004.items())
def test_seed_004_names_map_to_codes(seed_name: str, code: str) -> None:
    info = code_info(code)
    assert info.seed_name == seed_name
    assert ErrorCode(code).category in {ErrorCode.VALIDATION, ErrorCode.INTERNAL}


def test_error_carries_code_message_hint_and_location() -> None:
    err = AgentRunnerError(
        ErrorCode.INVALID_SPECIFICATION, "bad", hint="fix it", file="a.md", line=3
    )
    assert err.one_line() == "a.md:3: invalid_specification: bad"
    assert err.to_dict() == {
        "code": "invalid_specification",
        "message": "bad",
        "retryable": False,
        "hint": "fix it",
        "file": "a.md",
        "line": 3,
    }
    assert AgentRunnerError("provider_unavailable", "x", retryable=False).retryable is False


@pytest.mark.parametrize(
    ("code", "message", "said"),
    [
        ("cancelled", "cancelled on request", "cancelled on request"),
        ("cancelled", "Ctrl-C", "cancelled: Ctrl-C"),
        ("cancelled", "cancelled: cancelled on request", "cancelled on request"),  # stored so
        ("cancelled", "cancelled: Ctrl-C", "cancelled: Ctrl-C"),
        ("provider_auth", "the key was refused", "provider_auth: the key was refused"),
        ("validation", "", "validation"),
        (
            "validation",
            "validation_error is not a code",
            "validation: validation_error is not a code",
        ),
    ],
)
def test_an_error_says_its_code_once(code: str, message: str, said: str) -> None:
    """Issue 39: "cancelled: cancelled: cancelled on request" on a job's page and `runs show`."""
    assert error_line(code, message) == said
    assert AgentRunnerError(code, message).one_line() == said


def test_aggregate_error() -> None:
    problems = [AgentRunnerError("validation", "one"), AgentRunnerError("validation", "two")]
    err = AgentFileErrors(problems)
    assert err.problems == problems
    assert "one" in err.message and "1 more problem" in err.message


def errors_markdown() -> str:
    lines = [
        "# Errors",
        "",
        "Every failure agentrunner reports carries one of these codes, a plain message and, where",
        "it helps, a hint. Codes are stable strings (they appear in JSON, the database and exit",
        "messages). A code whose category is itself is a run-error *category*; every other code",
        "belongs to one, so a client that only knows the categories can branch on any error. Codes",
        "that also have an upper-case name (as a caller of the task protocol may know them) list",
        "it. `retryable` says whether the same request may succeed if simply tried again.",
        "",
        "On the command line an error prints as one line, `file:line: code: message`, followed",
        "by `hint: …`, and the exit status is 1. `--debug` adds the traceback. Wherever an",
        "error is shown (the command line, the dashboard, a tool error) its code is said once: a",
        "message that already begins with it (`cancelled on request`) is not led by it again.",
        "",
        "| code | retryable | category | upper-case name |",
        "| --- | --- | --- | --- |",
    ]
    for code in ErrorCode:
        info = code.info
        lines.append(
            f"| `{code}` | {'yes' if info.retryable else 'no'} | `{code.category}` | "
            f"{'`' + info.seed_name + '`' if info.seed_name else '—'} |"
        )
    for code in ErrorCode:
        info = code.info
        lines += [
            "",
            f"## `{code}`",
            "",
            f"**Cause.** {info.cause}",
            "",
            f"**What to do.** {info.action}",
        ]
    return "\n".join(lines) + "\n"


def test_errors_doc_lists_every_code() -> None:
    doc = ROOT / "docs" / "errors.md"
    assert doc.read_text() == errors_markdown(), (
        "docs/errors.md is out of date: run `python tests/test_errors_and_api.py`"
    )


PUBLIC_API = [
    "AbortSignal",
    "AgentFileErrors",
    "AgentRegistry",
    "AgentRunner",
    "AgentRunnerCallbacks",
    "AgentRunnerError",
    "AgentSpec",
    "Attachment",
    "Budgets",
    "Config",
    "ConfigExtensionRegistry",
    "Engine",
    "ErrorCode",
    "Extensions",
    "FileCache",
    "FunctionModel",
    "InputSpec",
    "Limits",
    "McpServerSpec",
    "ModelRegistry",
    "ModelSettings",
    "Outcome",
    "PriceOverride",
    "Project",
    "PromptContext",
    "ProviderConfig",
    "Rendered",
    "Replay",
    "ResultCache",
    "RetryPolicy",
    "RunAgentOverrides",
    "RunEvent",
    "RunResult",
    "ScriptedModel",
    "StdioClient",
    "Store",
    "Task",
    "TaskRunner",
    "Template",
    "TestModel",
    "Tool",
    "ToolContext",
    "ToolDenied",
    "ToolRetry",
    "TurnError",
    "TurnLimits",
    "TurnResult",
    "__version__",
    "cache_key",
    "create_project",
    "execute",
    "find_config_file",
    "load_agent_file",
    "load_config",
    "load_project",
    "open_runner",
    "open_store",
    "open_task_runner",
    "parse_agent_text",
    "register_config_extension",
    "replay_run",
    "tool",
]


def test_public_api_is_pinned() -> None:
    assert agentrunner.__all__ == PUBLIC_API
    for name in PUBLIC_API:
        assert getattr(agentrunner, name) is not None


def _exports(tree: ast.Module) -> set[str] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            try:
                return set(ast.literal_eval(node.value))
            except ValueError:  # built at import time (the package's lazy table)
                return None
    return None


def test_every_name_imported_across_modules_is_exported() -> None:
    """A name one module takes from another is part of that module's interface: it is in its
    ``__all__`` (private names are not imported across modules)."""
    src = Path(agentrunner.__file__).parent.parent
    modules: dict[str, ast.Module] = {}
    for file in src.rglob("agentrunner/**/*.py"):
        parts = list(file.relative_to(src).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = ast.parse(
            file.read_text()
        )
    assert len(modules) > 50
    missing: list[str] = []
    for name, tree in modules.items():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
                continue
            target = modules.get(node.module)
            if target is None or node.module == "agentrunner":
                continue
            exported = _exports(target)
            for alias in node.names:
                if f"{node.module}.{alias.name}" in modules:  # a submodule
                    continue
                if exported is None or alias.name not in exported:
                    missing.append(f"{name} imports {node.module}.{alias.name}")
    assert missing == []


def test_import_is_light() -> None:
    """`import agentrunner` must not pull in the CLI, HTTP or YAML stacks."""
    code = (
        "import sys, agentrunner; "
        "heavy = [m for m in ('httpx', 'httpx2', 'typer', 'rich', 'yaml', 'jsonschema', "
        "'genai_prices', 'opentelemetry') if m in sys.modules]; print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


if __name__ == "__main__":
    (ROOT / "docs" / "errors.md").write_text(errors_markdown())
