"""agentrunner: a durable, observable, budget-safe runtime for LLM agents defined in Markdown.

The public API is re-exported here. Names load on first use, so ``import agentrunner`` stays
cheap for the CLI and for programs that only need part of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentrunner._version import __version__

if TYPE_CHECKING:
    from agentrunner.agents import (
        AgentRegistry,
        AgentSpec,
        InputSpec,
        Limits,
        McpServerSpec,
        Rendered,
        RetryPolicy,
        Template,
        load_agent_file,
        parse_agent_text,
    )
    from agentrunner.callbacks import AgentRunnerCallbacks
    from agentrunner.config import (
        Budgets,
        Config,
        ConfigExtensionRegistry,
        PriceOverride,
        ProviderConfig,
        find_config_file,
        load_config,
        register_config_extension,
    )
    from agentrunner.engine import (
        AbortSignal,
        Engine,
        FunctionModel,
        ModelRegistry,
        ScriptedModel,
        TestModel,
        Tool,
        ToolContext,
        ToolDenied,
        ToolRetry,
        TurnError,
        TurnLimits,
        TurnResult,
        tool,
    )
    from agentrunner.errors import AgentFileErrors, AgentRunnerError, ErrorCode
    from agentrunner.project import Project, load_project
    from agentrunner.runner import AgentRunner, RunAgentOverrides, RunResult
    from agentrunner.scaffold import create_project
    from agentrunner.store import Store, open_store

_EXPORTS: dict[str, str] = {
    "AgentRunner": "agentrunner.runner",
    "AgentRunnerCallbacks": "agentrunner.callbacks",
    "RunAgentOverrides": "agentrunner.runner",
    "RunResult": "agentrunner.runner",
    "Store": "agentrunner.store",
    "open_store": "agentrunner.store",
    "AbortSignal": "agentrunner.engine",
    "Engine": "agentrunner.engine",
    "FunctionModel": "agentrunner.engine",
    "ModelRegistry": "agentrunner.engine",
    "ScriptedModel": "agentrunner.engine",
    "TestModel": "agentrunner.engine",
    "Tool": "agentrunner.engine",
    "ToolContext": "agentrunner.engine",
    "ToolDenied": "agentrunner.engine",
    "ToolRetry": "agentrunner.engine",
    "TurnError": "agentrunner.engine",
    "TurnLimits": "agentrunner.engine",
    "TurnResult": "agentrunner.engine",
    "tool": "agentrunner.engine",
    "AgentFileErrors": "agentrunner.errors",
    "AgentRegistry": "agentrunner.agents",
    "AgentRunnerError": "agentrunner.errors",
    "AgentSpec": "agentrunner.agents",
    "Budgets": "agentrunner.config",
    "Config": "agentrunner.config",
    "ConfigExtensionRegistry": "agentrunner.config",
    "ErrorCode": "agentrunner.errors",
    "InputSpec": "agentrunner.agents",
    "Limits": "agentrunner.agents",
    "McpServerSpec": "agentrunner.agents",
    "PriceOverride": "agentrunner.config",
    "Project": "agentrunner.project",
    "ProviderConfig": "agentrunner.config",
    "Rendered": "agentrunner.agents",
    "RetryPolicy": "agentrunner.agents",
    "Template": "agentrunner.agents",
    "create_project": "agentrunner.scaffold",
    "find_config_file": "agentrunner.config",
    "load_agent_file": "agentrunner.agents",
    "load_config": "agentrunner.config",
    "load_project": "agentrunner.project",
    "parse_agent_text": "agentrunner.agents",
    "register_config_extension": "agentrunner.config",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentrunner' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
