"""The live part of a run's or a job's page, or of what waits for a person, over server-sent
events: the page opens a stream, which follows the run or job (its ``feeds.RunFeed``; the
requests: ``feeds.PendingFeed``) and sends the part again (an HTML fragment, for htmx to swap
in) when a commit changed what it shows — in whichever process the commit was made
(``store/changes``) — and ``end`` once the run or job has ended, after which the browser does
not reconnect. Nothing is sent, and nothing asked, while nothing changes.

Woken, a stream looks at once, so the first change after a quiet spell is shown within
milliseconds; after it sends, it lets ``SPACING_S`` pass before it looks again, so a burst of
commits (a model writing, a commit every few milliseconds) is one fragment per spacing, not one
per commit. A browser that leaves closes its stream, and the stream its watch.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request

from agentrunner.interfaces.server.dashboard.auth import csrf_token
from agentrunner.interfaces.server.dashboard.templating import for_browser, keep_csrf
from agentrunner.interfaces.server.responses import event_source
from agentrunner.workspace.feeds import Feed

__all__ = ["SPACING_S", "Look", "Renderer", "live_stream"]

SPACING_S = 0.2  # the least time between two fragments of one stream
PING_S = 15


@dataclass(slots=True)
class Look:
    """What a stream saw: the part as it is now (None: as the page already shows it), and
    whether the run or job has ended (the stream then ends too)."""

    html: str | None
    finished: bool


class Renderer:
    """Renders a page's part as the page itself would, for the browser whose stream it is: its
    forms carry that browser's CSRF value."""

    def __init__(self, request: Request, csrf: str) -> None:
        self.request = request
        self.csrf = csrf

    def __call__(self, name: str, context: dict[str, Any]) -> str:
        return for_browser(self.request, self.csrf, name, context)


def live_stream(
    request: Request,
    feed: Feed[Any],
    event: str,
    look: Callable[[bool, Renderer], Awaitable[Look]],
) -> EventSourceResponse:
    """A page's stream: ``look(woken, render)`` once at the start and then whenever a commit
    named what ``feed`` follows (or the fallback timer passed: ``woken`` False); each part it
    returns is sent as ``event``. ``look`` may read ``feed`` (a job's, which then follows its
    new delegations too)."""
    csrf, new = csrf_token(request)
    render = Renderer(request, csrf)

    async def events() -> AsyncGenerator[dict[str, str], None]:
        async with feed.watching():
            woken = True
            while True:
                seen = await look(woken, render)
                if seen.html is not None:
                    yield {"event": event, "data": seen.html}
                if seen.finished:
                    yield {"event": "end", "data": "ended"}  # an event with no data is not one
                    return
                if seen.html is not None:
                    await asyncio.sleep(SPACING_S)  # commits meanwhile: seen at the next look
                woken = await feed.wait()

    response = event_source(events(), ping=PING_S)
    # the page set it; a browser that lost it since gets it here, for the forms sent
    keep_csrf(response, request, csrf, new)
    return response
