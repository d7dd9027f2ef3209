"""Real files for attachment tests, made in memory: images Pillow writes and PDFs pypdf does,
each different by its arguments (so two calls can be told apart)."""

from __future__ import annotations

import hashlib
import io

from PIL import Image
from pypdf import PdfWriter

from agentrunner.engine.messages import Attachment

__all__ = ["image", "image_attachment", "pdf", "pdf_attachment"]


def image(width: int = 4, height: int = 3, color: str = "red", fmt: str = "PNG") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format=fmt)
    return out.getvalue()


def pdf(pages: int = 1, size: float = 72) -> bytes:
    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(size, size)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def image_attachment(
    name: str = "a.png", width: int = 4, height: int = 3, color: str = "red"
) -> Attachment:
    data = image(width, height, color)
    return Attachment(
        hashlib.sha256(data).hexdigest(), "image/png", len(data), name, width, height, data=data
    )


def pdf_attachment(name: str = "r.pdf", pages: int = 1) -> Attachment:
    data = pdf(pages)
    return Attachment(
        hashlib.sha256(data).hexdigest(), "application/pdf", len(data), name, pages=pages, data=data
    )
