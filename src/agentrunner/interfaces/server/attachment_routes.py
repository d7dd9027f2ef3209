"""``/attachments``: a file uploaded on its own, to be named by its digest in a message, and a
kept file's bytes (docs/attachments.md). An upload's body is the file itself, its name in
``?name=`` (``curl --data-binary @a.png``); it is read and checked as every way in checks a file
(``runner.attach``), with a bound that follows ``[attachments]`` rather than the JSON bodies'
(``guard.BodyBounds``)."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Path, Query, Request
from starlette.responses import Response

from agentrunner.core.attachments import attachment_name
from agentrunner.engine.messages import IMAGE_TYPES, PDF_TYPE
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.interfaces.server.responses import AttachmentRef, operation
from agentrunner.interfaces.server.routes import workspace
from agentrunner.store.store import Store
from agentrunner.workspace.uploads import SHA256_PATTERN, upload
from agentrunner.workspace.workspace import Workspace

__all__ = ["file_response", "router"]

router = APIRouter()
_TYPES = [*IMAGE_TYPES, PDF_TYPE]
Digest = Annotated[str, Path(pattern=SHA256_PATTERN, description="the file's sha256")]


@router.post(
    "/attachments",
    status_code=201,
    response_model_exclude_unset=True,
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "the file's bytes: an image (PNG, JPEG, GIF, WebP) or a PDF",
            "content": {"application/octet-stream": {"schema": {"type": "string"}}},
        }
    },
    **operation(
        "upload_attachment",
        AttachmentRef,
        tag="attachments",
        errors={
            413: "past the larger of `[attachments]` max_image_mb and max_pdf_mb",
            422: "`attachment_refused`: not an image or PDF by its bytes, too large, cannot be "
            "decoded or opened (`error.details.reason` says which)",
        },
    ),
)
async def upload_attachment(
    request: Request,
    name: str = Query(
        default="",
        max_length=1000,
        description="its file name (default: by its type, `image.png`, `document.pdf`)",
    ),
    ws: Workspace = Depends(workspace),
) -> dict[str, Any]:
    """Keep a file, once by its digest, to be named in a message (`{"name", "sha256"}`): the
    way for a file too large for a JSON body. 201 with its reference."""
    file = await upload(ws.runner, await request.body(), name)
    return file.to_dict()


@router.get(
    "/attachments/{sha256}",
    response_class=Response,
    operation_id="get_attachment",
    tags=["attachments"],
    responses={
        200: {
            "description": "the file's bytes, as its type; `Content-Disposition` names it",
            "content": {kind: {"schema": {"type": "string"}} for kind in _TYPES},
        },
    },
)
async def get_attachment(
    sha256: Digest,
    name: str = Query(default="", max_length=1000, description="the name to give it"),
    ws: Workspace = Depends(workspace),
) -> Response:
    """A kept file's bytes: what a message's `attachments` name (a thumbnail, a download)."""
    return await file_response(ws.app.store, sha256, name)


async def file_response(store: Store, sha256: str, name: str) -> Response:
    """The bytes kept under ``sha256`` as their type, named ``name`` (cleaned as a file's
    name is) in ``Content-Disposition``: an image shown in place, a PDF downloaded. Cached by
    the browser for as long as it likes: a digest's bytes never change. ``not_found`` when no
    file is kept with it."""
    kept = await store.attachments.get(sha256)
    data = await store.attachments.data(sha256) if kept is not None else None
    if kept is None or data is None:
        raise AgentRunnerError(
            ErrorCode.NOT_FOUND,
            f"no file is kept with the digest {sha256[:12]}…",
            hint="Name a file a message or an upload kept (POST /attachments answers its "
            "digest); a deleted thread's files go with it.",
            details={"not_found": "attachment"},
        )
    shown = attachment_name(name, kept.media_type)
    how = "attachment" if kept.media_type == PDF_TYPE else "inline"
    return Response(
        data,
        media_type=kept.media_type,
        headers={
            "content-disposition": f"{how}; filename*=UTF-8''{quote(shown, safe='')}",
            "cache-control": "private, max-age=31536000, immutable",
        },
    )
