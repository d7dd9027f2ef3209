"""The web dashboard served by ``agentrunner serve`` at ``/``: server-rendered pages (Jinja2),
live parts over server-sent events with htmx, shipped as a few static files (no front-end
build). Each page is a module with a router of its own; this package puts them together.
Pages read through the same library calls as the JSON API; the only writes are a person's
post, a run's cancel and a job's stop, each a form with a CSRF field (``auth``).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from starlette.staticfiles import StaticFiles

__all__ = ["install"]

STATIC = Path(__file__).parent / "static"


def install(app: FastAPI, *, login: bool) -> None:
    """The pages and their static files on ``app``; ``login`` when a token guards the server
    (then a person logs in with it)."""
    from agentrunner.server.dashboard import channels, team, threads
    from agentrunner.server.dashboard import login as login_pages
    from agentrunner.server.dashboard.templating import environment

    environment()  # compiled now, not on the loop by the first page
    app.state.dashboard_login = login
    router = APIRouter(include_in_schema=False)
    for module in (login_pages, team, channels, threads):
        router.include_router(module.router)
    app.include_router(router)
    app.mount("/ui/static", StaticFiles(directory=STATIC), name="dashboard-static")
