"""Test support shipped with agentrunner: a mock provider server, usable in your own tests."""

from agentrunner.testing.mock_provider import (
    Fault,
    MockProvider,
    MockProviderServer,
    RecordedRequest,
    Reply,
)

__all__ = ["Fault", "MockProvider", "MockProviderServer", "RecordedRequest", "Reply"]
