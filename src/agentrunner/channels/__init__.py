"""Channels, DMs and thread replies routed to agents' mailboxes (seed 003)."""

from agentrunner.channels.resolver import resolve_targets
from agentrunner.channels.service import ChannelService, Posted

__all__ = ["ChannelService", "Posted", "resolve_targets"]
