"""The web dashboard served by ``agentrunner serve`` at ``/``: server-rendered pages (Jinja2),
live parts over server-sent events with htmx, shipped as a few static files (no front-end
build). Each page is a module with a router of its own; this package puts them together.
Pages read through the same library calls as the JSON API; the only writes are a person's
post, a run's cancel, a job's stop, a decision on what a run asks and a schedule's pause,
resume or run-now, each a form with a CSRF field (``auth``).
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, FastAPI

__all__ = ["install", "ready"]


def install(app: FastAPI, *, login: bool) -> None:
    """The pages and their static files on ``app``; ``login`` when a token guards the server
    (then a person logs in with it)."""
    from agentrunner.interfaces.server.dashboard import (
        approvals,
        channels,
        costs,
        evals,
        files,
        jobs,
        runs,
        schedules,
        static,
        team,
        threads,
    )
    from agentrunner.interfaces.server.dashboard import login as login_pages

    app.state.dashboard_login = login
    router = APIRouter(include_in_schema=False)
    pages = (
        static,
        login_pages,
        team,
        channels,
        threads,
        runs,
        approvals,
        costs,
        jobs,
        schedules,
        evals,
        files,
    )
    for module in pages:
        router.include_router(module.router)
    app.include_router(router)


async def ready() -> None:
    """Templates compiled and static files read, off the event loop, before the first page."""
    from agentrunner.interfaces.server.dashboard.static import load_static
    from agentrunner.interfaces.server.dashboard.templating import load_templates

    await asyncio.to_thread(load_templates)
    await asyncio.to_thread(load_static)
