"""Test support shipped with agentrunner: a mock provider server, usable in your own tests."""

from agentrunner.testing.mock_provider import MockProvider, MockProviderServer, RecordedRequest
from agentrunner.testing.prompt_cache import CacheBill, PromptCacheModel
from agentrunner.testing.replies import Fault, Reply

__all__ = [
    "CacheBill",
    "Fault",
    "MockProvider",
    "MockProviderServer",
    "PromptCacheModel",
    "RecordedRequest",
    "Reply",
]
