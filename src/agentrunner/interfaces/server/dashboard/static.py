"""``/ui/static/NAME``: the dashboard's few static files (its stylesheet, script, icon, htmx and
its SSE extension), read once as the server starts and answered from memory with an ``ETag``
(the icon at ``/favicon.ico`` too). Starlette's ``StaticFiles`` was not used: it stats the file
and, on its first answer, reads the system's MIME tables, on the event loop, for each request."""

from __future__ import annotations

import hashlib
from pathlib import Path

from fastapi import APIRouter, Request
from starlette.responses import Response

from agentrunner.errors import AgentRunnerError, ErrorCode

__all__ = ["load_static", "router"]

router = APIRouter()
FOLDER = Path(__file__).parent / "static"
_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
_FILES: dict[str, tuple[bytes, str, str]] = {}  # name: (body, content type, etag)


def load_static() -> None:
    for path in FOLDER.iterdir():
        if path.suffix in _TYPES:
            body = path.read_bytes()
            etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
            _FILES[path.name] = (body, _TYPES[path.suffix], etag)


@router.get("/favicon.ico")
async def favicon(request: Request) -> Response:
    """What a browser asks every site for: the dashboard's icon (an SVG, which browsers take
    whatever the name says), not a 404 in its console."""
    return await static_file("icon.svg", request)


@router.get("/ui/static/{name}")
async def static_file(name: str, request: Request) -> Response:
    found = _FILES.get(name)
    if found is None:
        raise AgentRunnerError(
            ErrorCode.NOT_FOUND, f"no static file '{name[:100]}'", details={"not_found": "file"}
        )
    body, kind, etag = found
    headers = {"etag": etag, "cache-control": "no-cache"}  # revalidated: 304 when unchanged
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    return Response(body, media_type=kind, headers=headers)
