"""Tiny real images and PDFs made in the test (Pillow, pypdf), and ``Attachment``s of them with
their bytes loaded, as the runner hands them to a request."""

from __future__ import annotations

import base64
import hashlib
import io
import random

from PIL import Image
from pypdf import PdfReader, PdfWriter

from agentrunner.engine.messages import PDF_TYPE, Attachment


def picture(width: int, height: int, fmt: str = "PNG", color: str = "red") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format=fmt)
    return out.getvalue()


def noise(side: int, seed: int = 1) -> bytes:
    """A PNG of random pixels: it does not compress, so its base64 is long (~4 bytes a pixel)."""
    pixels = random.Random(seed).randbytes(side * side * 3)
    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), pixels).save(out, format="PNG")
    return out.getvalue()


def pdf(pages: int = 1) -> bytes:
    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(72, 72)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def attached(data: bytes, media_type: str, name: str = "", *, detail: str = "auto") -> Attachment:
    """``data`` as the edge would describe it (pixels or pages read here), bytes loaded."""
    width = height = pages = None
    if media_type == PDF_TYPE:
        pages = len(PdfReader(io.BytesIO(data)).pages)
    else:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
    return Attachment(
        hashlib.sha256(data).hexdigest(),
        media_type,
        len(data),
        name,
        width,
        height,
        pages,
        detail,
        data=data,
    )


PNG = picture(2, 3)
JPEG = picture(4, 4, "JPEG", "blue")
PDF_1, PDF_2 = pdf(1), pdf(2)
# Two sets of files, each an image and a PDF: every wire's bodies of them differ.
FIRST = (attached(PNG, "image/png", "chart.png"), attached(PDF_1, PDF_TYPE, "report.pdf"))
SECOND = (attached(JPEG, "image/jpeg", "photo.jpg", detail="low"), attached(PDF_2, PDF_TYPE))
