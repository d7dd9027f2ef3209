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
        AgentRegistry as AgentRegistry,
    )
    from agentrunner.agents import (
        AgentSpec as AgentSpec,
    )
    from agentrunner.agents import (
        InputSpec as InputSpec,
    )
    from agentrunner.agents import (
        Limits as Limits,
    )
    from agentrunner.agents import (
        McpServerSpec as McpServerSpec,
    )
    from agentrunner.agents import (
        Rendered as Rendered,
    )
    from agentrunner.agents import (
        RetryPolicy as RetryPolicy,
    )
    from agentrunner.agents import (
        Template as Template,
    )
    from agentrunner.agents import (
        load_agent_file as load_agent_file,
    )
    from agentrunner.agents import (
        parse_agent_text as parse_agent_text,
    )
    from agentrunner.agents.project import Project as Project
    from agentrunner.agents.project import load_project as load_project
    from agentrunner.config import (
        Budgets as Budgets,
    )
    from agentrunner.config import (
        Config as Config,
    )
    from agentrunner.config import (
        ConfigExtensionRegistry as ConfigExtensionRegistry,
    )
    from agentrunner.config import (
        PriceOverride as PriceOverride,
    )
    from agentrunner.config import (
        ProviderConfig as ProviderConfig,
    )
    from agentrunner.config import (
        find_config_file as find_config_file,
    )
    from agentrunner.config import (
        load_config as load_config,
    )
    from agentrunner.config import (
        register_config_extension as register_config_extension,
    )
    from agentrunner.core.model_settings import ModelSettings as ModelSettings
    from agentrunner.engine import (
        AbortSignal as AbortSignal,
    )
    from agentrunner.engine import (
        Attachment as Attachment,
    )
    from agentrunner.engine import (
        Engine as Engine,
    )
    from agentrunner.engine import (
        FunctionModel as FunctionModel,
    )
    from agentrunner.engine import (
        ModelRegistry as ModelRegistry,
    )
    from agentrunner.engine import (
        ScriptedModel as ScriptedModel,
    )
    from agentrunner.engine import (
        TestModel as TestModel,
    )
    from agentrunner.engine import (
        Tool as Tool,
    )
    from agentrunner.engine import (
        ToolContext as ToolContext,
    )
    from agentrunner.engine import (
        ToolDenied as ToolDenied,
    )
    from agentrunner.engine import (
        ToolRetry as ToolRetry,
    )
    from agentrunner.engine import (
        TurnError as TurnError,
    )
    from agentrunner.engine import (
        TurnLimits as TurnLimits,
    )
    from agentrunner.engine import (
        TurnResult as TurnResult,
    )
    from agentrunner.engine import (
        tool as tool,
    )
    from agentrunner.errors import (
        AgentFileErrors as AgentFileErrors,
    )
    from agentrunner.errors import (
        AgentRunnerError as AgentRunnerError,
    )
    from agentrunner.errors import (
        ErrorCode as ErrorCode,
    )
    from agentrunner.interfaces.stdio_client import StdioClient as StdioClient
    from agentrunner.run.callbacks import AgentRunnerCallbacks as AgentRunnerCallbacks
    from agentrunner.run.callbacks import RunEvent as RunEvent
    from agentrunner.run.extensions import Extensions as Extensions
    from agentrunner.run.prompt import PromptContext as PromptContext
    from agentrunner.run.replay import Replay as Replay
    from agentrunner.run.replay import replay_run as replay_run
    from agentrunner.run.request import (
        RunAgentOverrides as RunAgentOverrides,
    )
    from agentrunner.run.request import (
        RunResult as RunResult,
    )
    from agentrunner.run.runner import (
        AgentRunner as AgentRunner,
    )
    from agentrunner.runtime.compose import execute as execute
    from agentrunner.runtime.compose import open_runner as open_runner
    from agentrunner.runtime.compose import open_task_runner as open_task_runner
    from agentrunner.runtime.scaffold import create_project as create_project
    from agentrunner.store import Store as Store
    from agentrunner.store import open_store as open_store
    from agentrunner.workspace.tasks import FileCache as FileCache
    from agentrunner.workspace.tasks import Outcome as Outcome
    from agentrunner.workspace.tasks import ResultCache as ResultCache
    from agentrunner.workspace.tasks import Task as Task
    from agentrunner.workspace.tasks import TaskRunner as TaskRunner
    from agentrunner.workspace.tasks import cache_key as cache_key

_EXPORTS: dict[str, str] = {
    "AgentRunner": "agentrunner.run.runner",
    "AgentRunnerCallbacks": "agentrunner.run.callbacks",
    "RunAgentOverrides": "agentrunner.run.request",
    "ModelSettings": "agentrunner.core.model_settings",
    "RunResult": "agentrunner.run.request",
    "Replay": "agentrunner.run.replay",
    "replay_run": "agentrunner.run.replay",
    "RunEvent": "agentrunner.run.callbacks",
    "Extensions": "agentrunner.run.extensions",
    "PromptContext": "agentrunner.run.prompt",
    "Store": "agentrunner.store",
    "open_store": "agentrunner.store",
    "AbortSignal": "agentrunner.engine",
    "Attachment": "agentrunner.engine",
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
    "Project": "agentrunner.agents.project",
    "ProviderConfig": "agentrunner.config",
    "Rendered": "agentrunner.agents",
    "RetryPolicy": "agentrunner.agents",
    "Template": "agentrunner.agents",
    "create_project": "agentrunner.runtime.scaffold",
    "find_config_file": "agentrunner.config",
    "load_agent_file": "agentrunner.agents",
    "load_config": "agentrunner.config",
    "load_project": "agentrunner.agents.project",
    "parse_agent_text": "agentrunner.agents",
    "register_config_extension": "agentrunner.config",
    "FileCache": "agentrunner.workspace.tasks",
    "Outcome": "agentrunner.workspace.tasks",
    "ResultCache": "agentrunner.workspace.tasks",
    "Task": "agentrunner.workspace.tasks",
    "TaskRunner": "agentrunner.workspace.tasks",
    "cache_key": "agentrunner.workspace.tasks",
    "execute": "agentrunner.runtime.compose",
    "open_runner": "agentrunner.runtime.compose",
    "open_task_runner": "agentrunner.runtime.compose",
    "StdioClient": "agentrunner.interfaces.stdio_client",
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
