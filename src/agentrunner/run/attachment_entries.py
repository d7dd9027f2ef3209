"""A file as a JSON request names it, made an ``Attachment`` by the one check, ``attach``.

Every way in that takes JSON — the HTTP API's run bodies, stdio's ``params``, the MCP server's
arguments, the OpenAI-compatible endpoint's data URLs — names a file the same way: an entry
``{"name", "data"}`` (its bytes, base64) or ``{"name", "sha256"}`` (a file already kept, by an
upload or an earlier message), with an optional ``detail``. Reading an entry is pure
(``entry_of``, ``entries_of``, ``base64_bytes``, ``data_url_bytes``: ``validation`` naming the
field); making files of entries (``attach_entries``) checks each by ``attach`` and looks a
digest up in the store, then the message's bounds, so an interface checks no file itself
(docs/attachments.md).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from agentrunner.core.attachments import DETAILS, attachment_name
from agentrunner.core.inputs import invalid
from agentrunner.errors import AgentRunnerError, ErrorCode

if TYPE_CHECKING:
    from agentrunner.engine.messages import Attachment
    from agentrunner.run.app import AppParts

__all__ = [
    "AttachmentEntry",
    "attach_entries",
    "base64_bytes",
    "data_url_bytes",
    "entries_of",
    "entry_of",
]

_FIELDS = frozenset({"name", "data", "sha256", "detail"})
_SHA256 = re.compile(r"[0-9a-f]{64}")
_HINT = (
    'A file is {"name": "a.png", "data": "<its bytes, base64>"} or {"name": "a.png", '
    '"sha256": "<the digest of a file already kept>"}, with "detail" (auto, low or high) if '
    "you like (docs/attachments.md)."
)
_BASE64_HINT = (
    "Send the file's bytes as standard base64 (RFC 4648), or a data URL "
    "(data:image/png;base64,…): not a path or a web address."
)


@dataclass(frozen=True, slots=True)
class AttachmentEntry:
    """A file as a request names it: ``data`` (its bytes) with its ``name``, or ``sha256``, the
    digest of a file already kept, which it is called ``name`` in this message. ``where``: the
    request's field, for an error about it."""

    name: str
    data: bytes | None = None
    sha256: str | None = None
    detail: str = "auto"
    where: str = "attachments"


def entries_of(value: Any, where: str = "attachments") -> tuple[AttachmentEntry, ...]:
    """A JSON list of file entries (``None``: none), each read by ``entry_of``."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise invalid(where, "must be a list of files", _HINT)
    return tuple(entry_of(item, f"{where}.{n}") for n, item in enumerate(value))


def entry_of(value: Any, where: str) -> AttachmentEntry:
    """A JSON object naming a file (the module's docstring), read: ``validation`` naming the
    field for an unknown key, a missing or empty name, neither or both of ``data`` and
    ``sha256``, data that is not base64, a digest that is not 64 hex digits, a ``detail`` other
    than auto, low or high. The file itself is not looked at (``attach_entries``)."""
    if not isinstance(value, dict):
        raise invalid(where, "must be an object", _HINT)
    for key in value:
        if key not in _FIELDS:
            raise invalid(f"{where}.{key}", "is not a field of a file", _HINT)
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        raise invalid(f"{where}.name", "is required: the file's name, a string", _HINT)
    detail = value.get("detail")
    if detail is None:
        detail = "auto"
    elif detail not in DETAILS:
        raise invalid(
            f"{where}.detail", f"must be auto, low or high, not {str(detail)[:20]!r}", _HINT
        )
    data, sha256 = value.get("data"), value.get("sha256")
    if (data is None) == (sha256 is None):
        raise invalid(
            where,
            "needs one of data (the file's bytes, base64) or sha256 (a file already kept)",
            _HINT,
        )
    if data is not None:
        if not isinstance(data, str):
            raise invalid(f"{where}.data", "must be a string of base64", _BASE64_HINT)
        return AttachmentEntry(name, base64_bytes(data, f"{where}.data"), None, detail, where)
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256.lower()):
        raise invalid(
            f"{where}.sha256",
            "must be a file's sha256: 64 hexadecimal digits",
            "Send the digest a run's record or a thread's message names the file by, or "
            "the file's bytes (data).",
        )
    return AttachmentEntry(name, None, sha256.lower(), detail, where)


def base64_bytes(text: str, where: str) -> bytes:
    """The bytes ``text`` holds in base64 (its line breaks and spaces ignored, as a wrapped
    ``base64`` output has them), or in a base64 data URL; ``validation`` naming ``where``."""
    if text.startswith("data:"):
        return data_url_bytes(text, where)
    try:
        return base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        raise invalid(where, "is not base64", _BASE64_HINT) from None


def data_url_bytes(url: str, where: str) -> bytes:
    """The bytes of a base64 data URL (``data:image/png;base64,…``; the type it claims is not
    believed: ``attach`` reads the type from the bytes). A web address is refused, whatever
    it names: agentrunner fetches nothing. ``validation`` naming ``where``."""
    if not url.startswith("data:"):
        if url[:8].lower().startswith(("http://", "https://")):
            raise invalid(
                where,
                "is a web address; only data URLs (data:<type>;base64,<bytes>) are taken: "
                "agentrunner fetches nothing",
                "Download the file and send its bytes in a data URL.",
            )
        raise invalid(where, "is not a data URL (data:<type>;base64,<bytes>)", _BASE64_HINT)
    head, comma, body = url.partition(",")
    if not comma or not head.lower().endswith(";base64"):
        raise invalid(where, "is a data URL without ;base64: only base64 is taken", _BASE64_HINT)
    try:
        return base64.b64decode("".join(body.split()), validate=True)
    except (binascii.Error, ValueError):
        raise invalid(where, "is a data URL whose bytes are not base64", _BASE64_HINT) from None


async def attach_entries(
    entries: Sequence[AttachmentEntry], parts: AppParts
) -> tuple[Attachment, ...]:
    """``entries`` as the files of one message, in order: each file's bytes checked by
    ``parts.attach`` (on a worker thread: decoding an image takes time), each digest looked up
    in the store (``attachment_refused`` for one not kept), then the message's bounds
    (``check_attachments``). A refusal's ``details["field"]`` is the entry's ``where``.
    Nothing is stored: the files are kept with the message that carries them."""
    files: list[Attachment] = []
    for entry in entries:
        try:
            files.append(await _attachment(entry, parts))
        except AgentRunnerError as exc:
            exc.details.setdefault("field", entry.where)
            raise
    return parts.check_attachments(files)


async def _attachment(entry: AttachmentEntry, parts: AppParts) -> Attachment:
    if entry.data is not None:
        return await parts.attach(entry.data, entry.name, detail=entry.detail)  # off the loop
    assert entry.sha256 is not None
    kept = await parts.store.attachments.get(entry.sha256)
    shown = attachment_name(entry.name, kept.media_type if kept else "")
    if kept is None:
        raise AgentRunnerError(
            ErrorCode.ATTACHMENT_REFUSED,
            f"{shown}: no file is kept under sha256 {entry.sha256[:12]}…",
            hint="Send the file's bytes (data) instead: only a file a message or an upload "
            "kept can be named by its digest, and a deleted thread's files go with it.",
            details={"attachment": shown, "reason": "not_kept"},
        )
    return replace(kept, name=shown, detail=entry.detail)
