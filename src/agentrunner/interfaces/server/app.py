"""The HTTP API: a FastAPI app over a workspace (runner + channels), with an in-process worker.

Thin: every route parses its input, calls the library, shapes the output. What every request
passes first (Host, token, body size) is ``guard``; every error is JSON (``errors``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from agentrunner._version import __version__
from agentrunner.interfaces.server.errors import install_handlers
from agentrunner.interfaces.server.guard import BodyBounds, Guard
from agentrunner.interfaces.server.responses import Health
from agentrunner.interfaces.server.statuses import ERROR_RESPONSES
from agentrunner.interfaces.server.throttle import LoginThrottle, ThrottlePolicy

if TYPE_CHECKING:
    from agentrunner.workspace.workspace import Workspace

__all__ = ["MAX_BODY_BYTES", "create_app"]

log = logging.getLogger("agentrunner.server")

MAX_BODY_BYTES = 1_000_000


def _report_worker_exit(task: asyncio.Task[int]) -> None:
    """The server's own worker stopped before the server did: say so, rather than leave runs
    queued with nobody serving them."""
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        log.error("the server's worker stopped: %s: %s", type(error).__name__, error)


def create_app(
    start: Path | None = None,
    *,
    token: str | None = None,
    worker: bool = True,
    cors_origins: list[str] | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    allowed_hosts: Sequence[str] = (),
    workspace: Workspace | None = None,
    login_policy: ThrottlePolicy | None = None,
) -> FastAPI:
    """The app for the project at (or above) ``start``. ``max_body_bytes``: how large a JSON
    body may be (an upload's and the dashboard's post form's follow ``[attachments]``). With
    ``token``, every request needs
    ``Authorization: Bearer <token>``, and wrong ones are slowed, then refused, per client as
    ``login_policy`` says (``throttle``); without, only loopback names and ``allowed_hosts``
    (and the project's ``[server] allowed_hosts``) are accepted as ``Host``. ``worker`` serves
    mailboxes in this process. An open ``workspace`` is used as it is (its opener closes it);
    otherwise the app opens and closes the project's own."""
    hosts = {name.lower() for name in allowed_hosts}
    bounds = BodyBounds(max_body_bytes)  # the bodies that carry files: as the project says

    from agentrunner.interfaces.server import dashboard

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from agentrunner.runtime.compose import open_workspace

        opened = workspace or await open_workspace(start)
        await dashboard.ready()
        app.state.workspace = opened
        hosts.update(opened.app.config.allowed_hosts)
        bounds.limits = opened.app.config.attachments
        serving = opened.worker(schedules=True) if worker else None
        app.state.worker = serving  # stopped at the signal, before connections close
        task = asyncio.create_task(serving.run()) if serving else None
        if task is not None:
            task.add_done_callback(_report_worker_exit)
        try:
            yield
        finally:
            if serving is not None and task is not None:
                serving.stop()
                with contextlib.suppress(Exception):
                    await task
            if workspace is None:
                await opened.close()

    app = FastAPI(
        title="agentrunner",
        version=__version__,
        description="Run LLM agents: threads, runs, live events, channels, OpenAI-compatible chat.",
        lifespan=lifespan,
    )
    # Idempotency keys are scoped per caller: by a digest of its token, never the token.
    app.state.caller = hashlib.sha256(token.encode()).hexdigest()[:16] if token else "-"
    install_handlers(app)

    @app.get("/health", tags=["service"], operation_id="health", response_model=Health)
    async def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    # One count of wrong tokens for the API and the login form: they guess the same secret.
    throttle = LoginThrottle(token, login_policy) if token is not None else None
    app.state.login_throttle = throttle
    app.add_middleware(
        Guard,
        token=token,
        allowed_hosts=hosts,
        bounds=bounds,
        throttle=throttle,
    )
    if cors_origins:
        # Added last, so outermost: preflights are answered before the token check, and error
        # responses carry CORS headers too.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=cors_origins,
            allow_methods=["*"],
            allow_headers=["*"],
        )

    from agentrunner.interfaces.server import (
        approval_routes,
        attachment_routes,
        fork_routes,
        openai_compat,
        routes,
        schedule_routes,
    )

    app.include_router(routes.router, responses=ERROR_RESPONSES)
    app.include_router(attachment_routes.router, responses=ERROR_RESPONSES)
    app.include_router(approval_routes.router, responses=ERROR_RESPONSES)
    app.include_router(schedule_routes.router, responses=ERROR_RESPONSES)
    app.include_router(fork_routes.router, responses=ERROR_RESPONSES)
    app.include_router(openai_compat.router, responses=ERROR_RESPONSES)
    app.state.token = token  # what /login compares with; in memory only
    dashboard.install(app, login=token is not None)
    return app
