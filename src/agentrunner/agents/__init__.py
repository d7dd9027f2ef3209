"""Agent definitions: files → specs, templating, the registry and org chart."""

from agentrunner.agents.approval import ApprovalRules
from agentrunner.agents.loader import load_agent_file, parse_agent_text
from agentrunner.agents.registry import AgentRegistry
from agentrunner.agents.spec import (
    CAPABILITIES,
    PERSONA_PRESETS,
    TRUST_LEVELS,
    AgentSpec,
    InputSpec,
    Limits,
    McpServerSpec,
    RetryPolicy,
)
from agentrunner.agents.templating import Placeholder, Rendered, Template, render_value

__all__ = [
    "CAPABILITIES",
    "PERSONA_PRESETS",
    "TRUST_LEVELS",
    "AgentRegistry",
    "AgentSpec",
    "ApprovalRules",
    "InputSpec",
    "Limits",
    "McpServerSpec",
    "Placeholder",
    "Rendered",
    "RetryPolicy",
    "Template",
    "load_agent_file",
    "parse_agent_text",
    "render_value",
]
