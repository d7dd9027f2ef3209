"""The one place a file given with a message is checked before agentrunner keeps it
(docs/attachments.md, "Checked at the edge"): every way in — the CLI's ``--attach``, the HTTP
API, the OpenAI-compatible endpoint, stdio, MCP, a tool's result — reads a file with
``read_attachment`` and a message's files with ``check_message``; what passes is an
``Attachment`` with its bytes, what does not is ``attachment_refused`` naming the file and
the reason, before anything is stored.

An image is read by Pillow and a PDF by pypdf, so that a file that would only fail at a
provider (and again on every turn after, being in the thread) fails here instead:

- the type comes from the bytes (``core.attachments.sniff_media_type``), never the name, and
  Pillow opens an image only with its own format's reader;
- an image's size is read from its header and bounded (``max_image_edge``, and Pillow's
  ``Image.MAX_IMAGE_PIXELS`` where that is lower) before any pixel is decoded, so a small file
  that claims a huge picture (a decompression bomb) is refused having cost nothing;
- then it is decoded as cheaply as its format allows: a PNG's every chunk read and its checksum
  checked (``verify``), a JPEG decoded at an eighth of its size, a GIF's first frame and a WebP
  decoded whole (neither has a cheaper check; a WebP over 16 megapixels is refused rather than
  decoded, see ``_DECODE_BUDGET``); an animated image is refused (OpenAI takes no animated GIF,
  and a model sees one frame of any);
- a PDF is opened and its pages counted; an encrypted one (Anthropic takes none) is refused.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from io import BytesIO
from pathlib import Path
from typing import TYPE_CHECKING

from agentrunner.core.attachments import (
    DETAILS,
    TYPE_NAMES,
    AttachmentLimits,
    attachment_name,
    claimed_type,
    describe_content,
    sniff_media_type,
)
from agentrunner.engine.messages import PDF_TYPE, Attachment
from agentrunner.errors import AgentRunnerError, ErrorCode

if TYPE_CHECKING:
    from PIL.ImageFile import ImageFile

__all__ = ["check_message", "read_attachment", "read_file", "refused"]

# pypdf warns through logging of what it repairs in a PDF written a little wrong (a common
# thing, and no concern of the person attaching it); with nowhere to log to, Python would
# print each on stderr. Where logging is set up, the warnings still reach its handlers.
logging.getLogger("pypdf").addHandler(logging.NullHandler())

_TAKEN = "PNG, JPEG, GIF and WebP images and PDFs"
_HINTS = {
    "detail": "detail is what OpenAI is asked to see of an image: auto, low or high.",
    "empty": "Attach the file itself; this one has no bytes.",
    "type": "Attach a PNG, JPEG, GIF or WebP image or a PDF: the type is read from the "
    "file's bytes, not its name.",
    "size": "Make it smaller (a lower resolution, fewer pages), or raise the limit in "
    "[attachments] in agentrunner.toml.",
    "dimensions": "Scale it down: models see at most about 2000 px a side anyway.",
    "decode": "The file is damaged or incomplete: open it and save it again, or attach "
    "the original.",
    "animated": "Models take still images: save the frame you mean as a PNG or JPEG.",
    "encrypted": "Save a copy without a password or encryption: no provider can open it.",
    "pages": "Split it, or raise [attachments] max_pdf_pages (Anthropic takes at most 100 "
    "pages a request).",
    "files": "Send the files over several messages, or raise [attachments] max_files "
    "(Anthropic allows at most 2000 px a side when a request has more than 20 images).",
    "message_size": "Send the files over several messages, or raise [attachments] "
    "max_message_mb (Anthropic refuses a request over 32 MB).",
    "unreadable": "Check the path: the file must exist and be readable.",
}


def refused(name: str, problem: str, reason: str) -> AgentRunnerError:
    """``attachment_refused``: ``name`` (as kept), what is wrong with it, and ``reason``, one
    of the hints' keys, in ``details`` for a caller that answers in its own terms."""
    return AgentRunnerError(
        ErrorCode.ATTACHMENT_REFUSED,
        f"{name}: {problem}",
        hint=_HINTS[reason],
        details={"attachment": name, "reason": reason},
    )


def read_attachment(
    data: bytes, name: str, limits: AttachmentLimits, *, detail: str = "auto"
) -> Attachment:
    """``data``, a file called ``name``, checked: an ``Attachment`` carrying its bytes, its
    sha256, type (read from the bytes), size, its name as kept (``attachment_name``), and its
    width and height (an image) or pages (a PDF). Raises ``attachment_refused`` naming the file
    and the reason: a ``detail`` not auto, low or high; no bytes; a type not taken (whatever
    the name says); over the size limit for its type; an image over ``max_image_edge`` or that
    cannot be decoded or is animated; a PDF that cannot be opened, is encrypted or has more
    than ``max_pdf_pages`` pages."""
    media_type = sniff_media_type(data)
    shown = attachment_name(name, media_type or "")
    if detail not in DETAILS:
        raise refused(shown, f"detail must be auto, low or high, not {detail!r}", "detail")
    if not data:
        raise refused(shown, "the file is empty", "empty")
    if media_type is None:
        raise refused(shown, _not_taken(shown, data), "type")
    most = limits.max_pdf_bytes if media_type == PDF_TYPE else limits.max_image_bytes
    if len(data) > most:
        what = "a PDF" if media_type == PDF_TYPE else "an image"
        key = "max_pdf_mb" if media_type == PDF_TYPE else "max_image_mb"
        raise refused(
            shown,
            f"the file is {len(data):,} bytes; {what} may be at most {most:,} bytes "
            f"({most / 1_000_000:g} MB, [attachments] {key})",
            "size",
        )
    width = height = pages = None
    if media_type == PDF_TYPE:
        pages = _pdf_pages(data, shown, limits)
    else:
        width, height = _image_size(data, media_type, shown, limits)
    return Attachment(
        hashlib.sha256(data).hexdigest(),
        media_type,
        len(data),
        shown,
        width,
        height,
        pages,
        detail,
        data,
    )


def read_file(
    path: str | os.PathLike[str], limits: AttachmentLimits, *, detail: str = "auto"
) -> Attachment:
    """The file at ``path``, checked as ``read_attachment`` checks bytes; a file that cannot
    be read, or is larger than any file may be, is refused before it is read whole."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > max(limits.max_pdf_bytes, limits.max_image_bytes):
            most = max(limits.max_pdf_bytes, limits.max_image_bytes)
            raise refused(
                path.name, f"the file is {size:,} bytes; no file may be over {most:,}", "size"
            )
        data = path.read_bytes()
    except OSError as exc:
        problem = exc.strerror or type(exc).__name__
        raise refused(path.name, f"cannot read {path}: {problem}", "unreadable") from None
    return read_attachment(data, path.name, limits, detail=detail)


def check_message(attachments: Sequence[Attachment], limits: AttachmentLimits) -> None:
    """A message's files together: at most ``max_files`` of them and ``max_message_bytes``
    in all (each already read by ``read_attachment``). Raises ``attachment_refused`` naming
    the files."""
    if len(attachments) > limits.max_files:
        past = attachments[limits.max_files]
        raise refused(
            past.name,
            f"a message may carry at most {_files(limits.max_files)} ([attachments] max_files); "
            f"this one has {len(attachments)}, {past.name} the first past the limit",
            "files",
        )
    total = sum(a.size for a in attachments)
    if total > limits.max_message_bytes:
        names = ", ".join(a.name for a in attachments[:5]) + (
            f" and {len(attachments) - 5} more" if len(attachments) > 5 else ""
        )
        most = limits.max_message_bytes
        raise refused(
            names,
            f"a message's files may come to at most {most:,} bytes ({most / 1_000_000:g} MB, "
            f"[attachments] max_message_mb); these come to {total:,}",
            "message_size",
        )


def _files(count: int) -> str:
    return f"{count} file" if count == 1 else f"{count} files"


def _not_taken(name: str, data: bytes) -> str:
    what = describe_content(data)
    claimed = claimed_type(name)
    if claimed is not None:
        return (
            f"its name says it is a {TYPE_NAMES[claimed]}, but its content is {what}; "
            f"only {_TAKEN} are taken"
        )
    return f"its content is {what}; only {_TAKEN} are taken"


def _open_image(data: bytes, media_type: str) -> ImageFile:
    """The image's header read by its own format's Pillow reader (never by guessing), no pixel
    decoded. The readers are called themselves, not ``Image.open``, whose check for
    decompression bombs only warns below twice its limit: ``_too_large`` bounds the size."""
    from PIL import GifImagePlugin, JpegImagePlugin, PngImagePlugin, WebPImagePlugin

    readers: dict[str, type[ImageFile]] = {
        "image/png": PngImagePlugin.PngImageFile,
        "image/jpeg": JpegImagePlugin.JpegImageFile,
        "image/gif": GifImagePlugin.GifImageFile,
        "image/webp": WebPImagePlugin.WebPImageFile,
    }
    return readers[media_type](BytesIO(data))


def _image_size(
    data: bytes, media_type: str, name: str, limits: AttachmentLimits
) -> tuple[int, int]:
    kind = TYPE_NAMES[media_type]
    try:
        with _open_image(data, media_type) as image:
            width, height = image.size
            too_large = _too_large(width, height, media_type, limits)
            animated = not too_large and bool(getattr(image, "is_animated", False))
    except Exception as exc:  # whatever a reader raises on bytes it cannot read
        raise refused(name, f"cannot be read as a {kind}: {_why(exc)}", "decode") from exc
    if too_large:
        raise refused(name, f"the image is {width}x{height} px; {too_large}", "dimensions")
    if animated:
        raise refused(name, f"the {kind} is animated; only still images are taken", "animated")
    try:
        with _open_image(data, media_type) as image:
            _decode(image)
    except Exception as exc:
        raise refused(name, f"cannot be decoded as a {kind}: {_why(exc)}", "decode") from exc
    return width, height


# Where an image is decoded whole to be checked, what that takes a pixel at most (measured:
# a GIF's first frame is a byte a pixel; libwebp, through Pillow, about 15), and the most one
# check may take: a WebP's header that claims 8000 x 8000 px, in a file of 100 KB, would
# otherwise cost a gigabyte to check. A PNG (its chunks read) and a JPEG (decoded at an eighth
# of its size) cost next to nothing.
_DECODED_BYTES_PER_PIXEL = {"image/gif": 1, "image/webp": 16}
_DECODE_BUDGET = 256_000_000


def _too_large(width: int, height: int, media_type: str, limits: AttachmentLimits) -> str | None:
    """Why an image of this size is not decoded, if it is too large: over the edge limit; over
    Pillow's ``Image.MAX_IMAGE_PIXELS`` (its guard against decompression bombs, obeyed even
    where the edge limit is raised past it); or over what decoding it whole may take."""
    from PIL import Image

    if max(width, height) > limits.max_image_edge:
        return (
            f"an image may be at most {limits.max_image_edge} px a side "
            "([attachments] max_image_edge)"
        )
    pixels = width * height
    most = Image.MAX_IMAGE_PIXELS
    if most is not None and pixels > most:
        return (
            f"{pixels:,} pixels is over {most:,}, the most Pillow decodes "
            "(Image.MAX_IMAGE_PIXELS, against decompression bombs)"
        )
    per_pixel = _DECODED_BYTES_PER_PIXEL.get(media_type, 0)
    if pixels * per_pixel > _DECODE_BUDGET:
        return (
            f"a {TYPE_NAMES[media_type]} is decoded whole to be checked, and one of more than "
            f"{_DECODE_BUDGET // per_pixel / 1e6:g} megapixels takes too much memory for it: "
            "save it as a PNG or JPEG, or scale it down"
        )
    return None


def _decode(image: ImageFile) -> None:
    """Read the whole image as cheaply as its format allows (see the module's docstring)."""
    if image.format == "PNG":
        image.verify()
        return
    if image.format == "JPEG":
        image.draft(None, (max(1, image.width // 8), max(1, image.height // 8)))
    image.load()


def _pdf_pages(data: bytes, name: str, limits: AttachmentLimits) -> int:
    from pypdf import PdfReader

    try:
        reader = PdfReader(BytesIO(data))
        encrypted = reader.is_encrypted
        pages = 0 if encrypted else len(reader.pages)
    except Exception as exc:  # pypdf's errors, and what a damaged file makes it raise
        raise refused(name, f"cannot be opened as a PDF: {_why(exc)}", "decode") from exc
    if encrypted:
        raise refused(name, "the PDF is encrypted (or has a password)", "encrypted")
    if pages == 0:
        raise refused(name, "the PDF has no pages", "decode")
    if pages > limits.max_pdf_pages:
        raise refused(
            name,
            f"the PDF has {pages} pages; a PDF may have at most {limits.max_pdf_pages} "
            "([attachments] max_pdf_pages)",
            "pages",
        )
    return pages


def _why(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"
