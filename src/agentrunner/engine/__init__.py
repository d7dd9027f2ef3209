"""The engine: the only part of agentrunner that talks to models.

A turn core over two wire adapters (OpenAI Chat Completions, Anthropic Messages) on one pooled
httpx2 client per provider, a fallback chain, error classification and pricing. Nothing above
the engine sees wire formats.
"""

from agentrunner.engine.abort import AbortSignal
from agentrunner.engine.doubles import FunctionModel, ScriptedModel, TestModel
from agentrunner.engine.engine import Engine
from agentrunner.engine.failures import FailureKind, ProviderError
from agentrunner.engine.fallback import Attempt, ChainEntry, FallbackChain
from agentrunner.engine.http_client import HttpModelClient, ModelClient
from agentrunner.engine.messages import (
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    Thinking,
    ToolCall,
    ToolDefinition,
    ToolResult,
    Usage,
    UserMessage,
    message_from_dict,
)
from agentrunner.engine.models import BUILTIN_PROVIDERS, ModelRegistry, ResolvedModel
from agentrunner.engine.pricing import PriceBook
from agentrunner.engine.tools import Tool, ToolContext, ToolDenied, ToolRetry, tool
from agentrunner.engine.turn import (
    CostTracker,
    EventSink,
    StopReason,
    Turn,
    TurnError,
    TurnLimits,
    TurnResult,
    run_turn,
)

__all__ = [
    "BUILTIN_PROVIDERS",
    "AbortSignal",
    "AssistantMessage",
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
