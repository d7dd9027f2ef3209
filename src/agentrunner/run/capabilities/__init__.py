"""Capabilities: named bundles of tools an agent is granted, resolved per run."""

from agentrunner.run.capabilities.builtin import builtin_capabilities
from agentrunner.run.capabilities.registry import (
    AskAgent,
    CapabilityContext,
    CapabilityRegistry,
    Resolver,
)

__all__ = [
    "AskAgent",
    "CapabilityContext",
    "CapabilityRegistry",
    "Resolver",
    "builtin_capabilities",
]
