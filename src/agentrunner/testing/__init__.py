"""Test support shipped with agentrunner: a mock provider server, usable in your own tests."""

from agentrunner.testing.mock_provider import (
    Fault,
    MockProvider,
    MockProviderServer,
    RecordedRequest,
    Reply,
)
from agentrunner.testing.prompt_cache import CacheBill, PromptCacheModel

__all__ = [
    "CacheBill",
    "Fault",
    "MockProvider",
    "MockProviderServer",
    "PromptCacheModel",
    "RecordedRequest",
    "Reply",
]
