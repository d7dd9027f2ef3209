"""agentrunner over HTTP: REST, server-sent event streams, and OpenAI-compatible chat."""

from agentrunner.interfaces.server.app import create_app

__all__ = ["create_app"]
