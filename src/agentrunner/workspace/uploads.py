"""A file uploaded on its own (``POST /attachments``), to be named by its digest in a message
later: the way for a file too large for a JSON body (docs/attachments.md). It is read and
checked as every way in reads a file (``run/attachment_entries``, ``runner.attach``) and kept
once by its digest, before any message names it.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agentrunner.core.inputs import invalid
from agentrunner.run.attachment_entries import AttachmentEntry, attach_entries

if TYPE_CHECKING:
    from agentrunner.engine.messages import Attachment
    from agentrunner.run.app import AppParts

__all__ = ["SHA256_PATTERN", "checked_digest", "upload"]

SHA256_PATTERN = r"^[0-9a-f]{64}$"
_SHA256 = re.compile(SHA256_PATTERN)


async def upload(parts: AppParts, data: bytes, name: str) -> Attachment:
    """``data`` read and checked as a file named ``name`` and kept, once, by its digest, for a
    message to name: what ``POST /attachments`` answers (a reference, without the bytes).
    ``attachment_refused`` for a file that fails its check, with nothing kept."""
    [file] = await attach_entries([AttachmentEntry(name, data, where="body")], parts)
    await parts.store.attachments.keep([file])
    return replace(file, data=None)


def checked_digest(value: Any, field: str = "sha256") -> str:
    """``value`` as a file's digest (64 lowercase hex digits, as the store keys files), else
    ``validation`` naming ``field``."""
    if not isinstance(value, str) or not _SHA256.match(value):
        raise invalid(field, "must be a file's sha256: 64 lowercase hexadecimal digits")
    return value
