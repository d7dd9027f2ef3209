"""Channels, DMs and thread replies routed to agents' mailboxes (seed 003)."""

from agentrunner.workspace.channels.resolver import resolve_targets
from agentrunner.workspace.channels.service import ChannelService, Posted

__all__ = ["ChannelService", "Posted", "resolve_targets"]
