"""What every form the dashboard receives passes first: its CSRF field, then its fields."""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request

from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.interfaces.server.dashboard.auth import CSRF_FIELD, csrf_valid

__all__ = ["checked_form", "is_htmx"]


async def checked_form(request: Request) -> FormData:
    """The form, once its CSRF field matches the browser's cookie (``unauthorized`` otherwise,
    before anything is done)."""
    form = await request.form()
    field = form.get(CSRF_FIELD)
    if not csrf_valid(request, field if isinstance(field, str) else None):
        raise AgentRunnerError(
            ErrorCode.UNAUTHORIZED,
            "this form did not come from this dashboard (its CSRF field is missing or stale)",
            hint="Reload the page and send the form again.",
            details={"forbidden": True},
        )
    return form


def is_htmx(request: Request) -> bool:
    """Whether htmx sent the request (it wants a fragment, not a redirect to a whole page)."""
    return request.headers.get("hx-request") == "true"
