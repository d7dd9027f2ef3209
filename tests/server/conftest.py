from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.runner.conftest import agent, open_runner, project

__all__ = ["ServerThread", "agent", "open_runner", "open_thread", "project", "server"]

TOKEN = {"authorization": "Bearer secret-token"}


def open_thread(
    url: str, agent_id: str, thread_id: str, headers: dict[str, str] | None = None
) -> None:
    """Open ``agent_id``'s thread ``thread_id`` through the API, as a client does before it
    starts runs there (``POST /threads/{id}/runs`` does not open one)."""
    import httpx2

    made = httpx2.post(
        f"{url}/threads",
        headers=TOKEN if headers is None else headers,
        json={"agent_id": agent_id, "id": thread_id},
    )
    assert made.status_code == 201, made.text


class ServerThread:
    """The HTTP API under uvicorn in a background thread, on a free loopback port."""

    def __init__(self, app: Any, config: Any = None) -> None:
        """``config``: a ``uvicorn.Config`` of ``app`` to serve it with (else uvicorn's own)."""
        import uvicorn

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = uvicorn.Server(
            config or uvicorn.Config(app, log_level="critical", timeout_graceful_shutdown=2)
        )
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=20)


@pytest.fixture
def server(project: Path) -> Iterator[Any]:
    """Start the API (after the test has written its agents): ``srv = server()``."""
    from agentrunner.interfaces.server import create_app

    started: list[ServerThread] = []

    def start(**options: Any) -> ServerThread:
        options.setdefault("token", "secret-token")
        running = ServerThread(create_app(project, **options))
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()
