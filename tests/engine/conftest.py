"""The engine's tests: the providers' transport (test_http_pool.py) on both event loops it
meets, asyncio's own and uvloop's (uvicorn runs `agentrunner serve` and its worker on uvloop);
every other test on asyncio's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest
import uvloop

BOTH_LOOPS: Mapping[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    if item.path.name == "test_http_pool.py":
        return BOTH_LOOPS
    return {"asyncio": asyncio.new_event_loop}
