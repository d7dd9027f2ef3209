"""Files a request gives in its body or uploads on their own, as every interface that takes
them over a wire receives them (docs/attachments.md): the HTTP API's posts and uploads, the
dashboard's form.

A body names each file as ``{"name": ..., "data": "<base64>"}`` — its bytes, read and checked
by ``runner.attach`` as every way in checks one — or ``{"name": ..., "sha256": ...}``: a file
kept before (uploaded, or carried by an earlier message), by its digest, under the name given.
An upload (``upload``) reads and checks a file the same way and keeps it, to be named by its
digest later: a file too large for a JSON body goes that way.

Reading a file decodes it (Pillow, pypdf), so it is done off the event loop.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agentrunner.core.attachments import attachment_name
from agentrunner.core.inputs import invalid

if TYPE_CHECKING:
    from agentrunner.engine.messages import Attachment
    from agentrunner.run.app import AppParts

__all__ = ["SHA256_PATTERN", "checked_digest", "files_given", "files_read", "kept_file", "upload"]

SHA256_PATTERN = r"^[0-9a-f]{64}$"
_SHA256 = re.compile(SHA256_PATTERN)
_SHAPE = 'Give each file as {"name": ..., "data": "<base64 of its bytes>"} or, once uploaded '
_SHAPE += '(POST /attachments), {"name": ..., "sha256": "<its digest>"}.'


async def files_given(
    parts: AppParts, given: Sequence[Mapping[str, Any]], field: str = "attachments"
) -> list[Attachment]:
    """The files ``given`` names, in order, each read and checked (``runner.attach``) or found
    by its digest. ``validation`` naming the item (``attachments[1].data``) for one that is
    neither shape, bad base64 or a digest no kept file has; ``attachment_refused`` for a file
    that fails its check. A message's bounds are the poster's to check (``post``,
    ``run_agent``)."""
    files = []
    for n, item in enumerate(given):
        where = f"{field}[{n}]"
        if not isinstance(item, Mapping):
            raise invalid(where, f"must be an object, not {type(item).__name__}", _SHAPE)
        name = item.get("name", "")
        if not isinstance(name, str):
            raise invalid(f"{where}.name", "must be a string", _SHAPE)
        data, digest = item.get("data"), item.get("sha256")
        if (data is None) == (digest is None):
            raise invalid(where, "must give either data or sha256, not both or neither", _SHAPE)
        if digest is not None:
            files.append(await kept_file(parts, digest, name, f"{where}.sha256"))
            continue
        if not isinstance(data, str):
            raise invalid(f"{where}.data", "must be a string of base64", _SHAPE)
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise invalid(
                f"{where}.data", "is not base64", "Send the file's bytes in standard base64."
            ) from None
        files.append(await asyncio.to_thread(parts.attach, raw, name))
    return files


async def files_read(parts: AppParts, named: Sequence[tuple[str, bytes]]) -> list[Attachment]:
    """Files sent as they are (a form's), each ``(name, bytes)`` read and checked by
    ``runner.attach``, in order; ``attachment_refused`` for the first that fails."""
    return [await asyncio.to_thread(parts.attach, data, name) for name, data in named]


async def kept_file(parts: AppParts, digest: Any, name: str, field: str = "sha256") -> Attachment:
    """The file kept under ``digest`` (a reference, without its bytes), named ``name`` as a
    file is (``attachment_name``). ``validation`` naming ``field`` for a digest that is not
    one, or that no kept file has."""
    digest = checked_digest(digest, field)
    kept = await parts.store.attachments.get(digest)
    if kept is None:
        raise invalid(
            field,
            f"no file is kept with the digest {digest[:12]}…",
            "Upload it first (POST /attachments answers its digest), or send its bytes as data.",
        )
    return replace(kept, name=attachment_name(name, kept.media_type))


def checked_digest(value: Any, field: str = "sha256") -> str:
    """``value`` as a file's digest (64 lowercase hex digits), else ``validation`` naming
    ``field``."""
    if not isinstance(value, str) or not _SHA256.match(value):
        raise invalid(field, "must be a file's sha256: 64 lowercase hex digits", _SHAPE)
    return value


async def upload(parts: AppParts, data: bytes, name: str) -> Attachment:
    """``data`` read and checked as a file named ``name`` (``runner.attach``) and kept, once,
    by its digest, for a message to name: what ``POST /attachments`` answers (a reference,
    without the bytes). ``attachment_refused`` for a file that fails its check, with nothing
    kept."""
    file = await asyncio.to_thread(parts.attach, data, name)
    await parts.store.attachments.keep([file])
    return replace(file, data=None)
