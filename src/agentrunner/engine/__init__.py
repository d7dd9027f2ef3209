"""The engine: the only part of agentrunner that talks to models.

A turn core over two wire adapters (OpenAI Chat Completions, Anthropic Messages) on one pooled
httpx2 client per provider, a fallback chain, error classification and pricing. Nothing above
the engine sees wire formats.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrunner.engine.abort import AbortSignal as AbortSignal
    from agentrunner.engine.doubles import FunctionModel as FunctionModel
    from agentrunner.engine.doubles import ScriptedModel as ScriptedModel
    from agentrunner.engine.doubles import TestModel as TestModel
    from agentrunner.engine.engine import Engine as Engine
    from agentrunner.engine.failures import FailureKind as FailureKind
    from agentrunner.engine.failures import ProviderError as ProviderError
    from agentrunner.engine.fallback import Attempt as Attempt
    from agentrunner.engine.fallback import ChainEntry as ChainEntry
    from agentrunner.engine.fallback import FallbackChain as FallbackChain
    from agentrunner.engine.http_client import HttpModelClient as HttpModelClient
    from agentrunner.engine.http_client import ModelClient as ModelClient
    from agentrunner.engine.messages import AssistantMessage as AssistantMessage
    from agentrunner.engine.messages import Attachment as Attachment
    from agentrunner.engine.messages import Message as Message
    from agentrunner.engine.messages import ModelRequest as ModelRequest
    from agentrunner.engine.messages import ModelResponse as ModelResponse
    from agentrunner.engine.messages import Thinking as Thinking
    from agentrunner.engine.messages import ToolCall as ToolCall
    from agentrunner.engine.messages import ToolDefinition as ToolDefinition
    from agentrunner.engine.messages import ToolResult as ToolResult
    from agentrunner.engine.messages import Usage as Usage
    from agentrunner.engine.messages import UserMessage as UserMessage
    from agentrunner.engine.messages import message_from_dict as message_from_dict
    from agentrunner.engine.models import BUILTIN_PROVIDERS as BUILTIN_PROVIDERS
    from agentrunner.engine.models import ModelRegistry as ModelRegistry
    from agentrunner.engine.models import ResolvedModel as ResolvedModel
    from agentrunner.engine.pricing import PriceBook as PriceBook
    from agentrunner.engine.tools import Tool as Tool
    from agentrunner.engine.tools import ToolContext as ToolContext
    from agentrunner.engine.tools import ToolDenied as ToolDenied
    from agentrunner.engine.tools import ToolRetry as ToolRetry
    from agentrunner.engine.tools import tool as tool
    from agentrunner.engine.turn import CostTracker as CostTracker
    from agentrunner.engine.turn import EventSink as EventSink
    from agentrunner.engine.turn import StopReason as StopReason
    from agentrunner.engine.turn import Turn as Turn
    from agentrunner.engine.turn import TurnError as TurnError
    from agentrunner.engine.turn import TurnLimits as TurnLimits
    from agentrunner.engine.turn import TurnResult as TurnResult
    from agentrunner.engine.turn import run_turn as run_turn

# Names load on first use: the store reads the message types (``engine.messages``) without
# paying for the HTTP client, the wire adapters and pricing, which only a model request needs.
_WHERE = {
    "AbortSignal": "agentrunner.engine.abort",
    "FunctionModel": "agentrunner.engine.doubles",
    "ScriptedModel": "agentrunner.engine.doubles",
    "TestModel": "agentrunner.engine.doubles",
    "Engine": "agentrunner.engine.engine",
    "FailureKind": "agentrunner.engine.failures",
    "ProviderError": "agentrunner.engine.failures",
    "Attempt": "agentrunner.engine.fallback",
    "ChainEntry": "agentrunner.engine.fallback",
    "FallbackChain": "agentrunner.engine.fallback",
    "HttpModelClient": "agentrunner.engine.http_client",
    "ModelClient": "agentrunner.engine.http_client",
    "AssistantMessage": "agentrunner.engine.messages",
    "Message": "agentrunner.engine.messages",
    "ModelRequest": "agentrunner.engine.messages",
    "ModelResponse": "agentrunner.engine.messages",
    "Thinking": "agentrunner.engine.messages",
    "ToolCall": "agentrunner.engine.messages",
    "ToolDefinition": "agentrunner.engine.messages",
    "ToolResult": "agentrunner.engine.messages",
    "Usage": "agentrunner.engine.messages",
    "UserMessage": "agentrunner.engine.messages",
    "Attachment": "agentrunner.engine.messages",
    "message_from_dict": "agentrunner.engine.messages",
    "BUILTIN_PROVIDERS": "agentrunner.engine.models",
    "ModelRegistry": "agentrunner.engine.models",
    "ResolvedModel": "agentrunner.engine.models",
    "PriceBook": "agentrunner.engine.pricing",
    "Tool": "agentrunner.engine.tools",
    "ToolContext": "agentrunner.engine.tools",
    "ToolDenied": "agentrunner.engine.tools",
    "ToolRetry": "agentrunner.engine.tools",
    "tool": "agentrunner.engine.tools",
    "CostTracker": "agentrunner.engine.turn",
    "EventSink": "agentrunner.engine.turn",
    "StopReason": "agentrunner.engine.turn",
    "Turn": "agentrunner.engine.turn",
    "TurnError": "agentrunner.engine.turn",
    "TurnLimits": "agentrunner.engine.turn",
    "TurnResult": "agentrunner.engine.turn",
    "run_turn": "agentrunner.engine.turn",
}

__all__ = [
    "BUILTIN_PROVIDERS",
    "AbortSignal",
    "AssistantMessage",
    "Attachment",
    "Attempt",
    "ChainEntry",
    "CostTracker",
    "Engine",
    "EventSink",
    "FailureKind",
    "FallbackChain",
    "FunctionModel",
    "HttpModelClient",
    "Message",
    "ModelClient",
    "ModelRegistry",
    "ModelRequest",
    "ModelResponse",
    "PriceBook",
    "ProviderError",
    "ResolvedModel",
    "ScriptedModel",
    "StopReason",
    "TestModel",
    "Thinking",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolDefinition",
    "ToolDenied",
    "ToolResult",
    "ToolRetry",
    "Turn",
    "TurnError",
    "TurnLimits",
    "TurnResult",
    "Usage",
    "UserMessage",
    "message_from_dict",
    "run_turn",
    "tool",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'agentrunner.engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
