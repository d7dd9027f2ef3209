"""``/ui/attachments/{sha256}``: a kept file's bytes for the dashboard's pages (an image's
thumbnail, a PDF's link), behind the dashboard's session as its pages are — the JSON API's
``GET /attachments/{sha256}`` wants a bearer token, which a browser's ``<img>`` does not send.
The same answer as the API's (``attachment_routes.file_response``)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from agentrunner.interfaces.server.attachment_routes import file_response
from agentrunner.workspace.uploads import checked_digest
from agentrunner.workspace.workspace import Workspace

__all__ = ["router"]

router = APIRouter()


@router.get("/ui/attachments/{sha256}")
async def attachment(request: Request, sha256: str, name: str = "") -> Response:
    """The file kept under ``sha256``, named ``name``: an image shown, a PDF downloaded."""
    ws: Workspace = request.app.state.workspace
    return await file_response(ws.app.store, checked_digest(sha256), name[:1000])
