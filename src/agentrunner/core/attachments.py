"""What a file given with a message may be before agentrunner keeps it, in plain rules: the
limits (``AttachmentLimits``, ``[attachments]`` in agentrunner.toml), the type its first bytes
say it is (``sniff_media_type``: never its name), and the name it is kept under
(``attachment_name``). Decoding it is ``engine.attachment_checks``'; docs/attachments.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Final

from agentrunner.core.inputs import without_controls

__all__ = [
    "DETAILS",
    "MAX_NAME_CHARS",
    "TYPE_NAMES",
    "AttachmentLimits",
    "attachment_name",
    "claimed_type",
    "describe_content",
    "sniff_media_type",
]

# What OpenAI may be asked to see of an image (``detail``); ``auto`` lets it choose.
DETAILS: Final = ("auto", "low", "high")
# A kept name's longest: room for any file name a person gives, not for a paragraph.
MAX_NAME_CHARS: Final = 128
_LONGEST_SUFFIX = 10  # ".jpeg", ".webp": a longer "suffix" is part of the name

# The first bytes of each type taken (each format's own signature), and a name for the type.
_SIGNATURES: Final[tuple[tuple[bytes, str], ...]] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
)
TYPE_NAMES: Final = {
    "image/png": "PNG image",
    "image/jpeg": "JPEG image",
    "image/gif": "GIF image",
    "image/webp": "WebP image",
    "application/pdf": "PDF",
}
# What a name's suffix claims, so a refusal can say "named like a PNG image".
_SUFFIXES: Final = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".pdf": "application/pdf",
}
_FALLBACK_NAMES: Final = {
    "image/png": "image.png",
    "image/jpeg": "image.jpg",
    "image/gif": "image.gif",
    "image/webp": "image.webp",
    "application/pdf": "document.pdf",
}
# Marks that reorder how text is shown (U+202E turns "gpj.exe" around) or are invisible: a
# name is shown to people, so they go with the control characters.
_BIDI = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


@dataclass(frozen=True, slots=True)
class AttachmentLimits:
    """How large a file, and a message's files together, may be (``[attachments]``).

    The defaults sit just inside what the providers take: an image's bytes grow by a third in
    base64, and Anthropic refuses an image over 5 MB of base64 (so 3.75 MB raw) and a request
    over 32 MB (so 24 MB raw for a message's files); Anthropic takes PDFs of at most 100 pages
    and images of at most 8000 px a side, and at most 2000 px a side once a request has more
    than 20 images (so 20 files a message). Sizes are bytes; ``max_image_edge`` is pixels on an
    image's longer side."""

    max_image_bytes: int = 3_750_000
    max_pdf_bytes: int = 20_000_000
    max_pdf_pages: int = 100
    max_message_bytes: int = 24_000_000
    max_files: int = 20
    max_image_edge: int = 8000

    def __post_init__(self) -> None:
        for limit in fields(self):
            value = getattr(self, limit.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"AttachmentLimits.{limit.name} must be a whole number >= 1")


def sniff_media_type(data: bytes) -> str | None:
    """The type ``data`` is by its first bytes — PNG, JPEG, GIF, WebP or PDF — else ``None``.
    Only the signature: whether the rest is whole is for decoding to say."""
    for signature, media_type in _SIGNATURES:
        if data.startswith(signature):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def describe_content(data: bytes) -> str:
    """What a file that is none of the types taken holds, in words: ``text`` (UTF-8 without
    NUL, as far as its first 4 KB go), else ``binary data``."""
    head = data[:4096]
    if b"\x00" in head:
        return "binary data"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # not just a character cut at 4 KB
            return "binary data"
    return "text"


def claimed_type(name: str) -> str | None:
    """The type a name's suffix claims (``photo.png``: a PNG image), if one of those taken."""
    dot = name.rfind(".")
    return _SUFFIXES.get(name[dot:].lower()) if dot >= 0 else None


def attachment_name(name: str, media_type: str) -> str:
    """The name a file is kept and shown under: its base name only (no folders, whichever
    system's separators), without control characters or marks that reorder text, at most
    ``MAX_NAME_CHARS`` characters (its suffix kept); ``image.png`` or ``document.pdf`` by its
    type when nothing is left."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    clean = _BIDI.sub("", without_controls(base)).strip()
    if clean in ("", ".", ".."):
        return _FALLBACK_NAMES.get(media_type, "attachment")
    if len(clean) <= MAX_NAME_CHARS:
        return clean
    dot = clean.rfind(".")
    suffix = clean[dot:] if dot > 0 and len(clean) - dot <= _LONGEST_SUFFIX else ""
    return clean[: MAX_NAME_CHARS - len(suffix)].rstrip() + suffix
