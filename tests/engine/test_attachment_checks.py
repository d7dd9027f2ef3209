"""The edge's check of a file given with a message (engine.attachment_checks): real images made
with Pillow and real PDFs made with pypdf are read into attachments; a file whose type, bytes,
size, pixels, frames, encryption or pages are wrong is refused with ``attachment_refused``
naming it and saying why."""

from __future__ import annotations

import hashlib
import os
import random
import struct
import zlib
from io import BytesIO

import pytest
from PIL import Image
from pypdf import PdfWriter

from agentrunner.core.attachments import MAX_NAME_CHARS, AttachmentLimits, attachment_name
from agentrunner.engine import attachment_checks
from agentrunner.engine.attachment_checks import check_message, read_attachment
from agentrunner.engine.messages import Attachment
from agentrunner.errors import AgentRunnerError, ErrorCode

LIMITS = AttachmentLimits()
FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}


def image(fmt: str, size: tuple[int, int], colour: tuple[int, int, int] = (200, 30, 90)) -> bytes:
    out = BytesIO()
    picture = Image.new("RGB", size, colour)
    picture.putpixel((0, 0), (1, 2, 3))  # not one flat colour
    picture.save(out, fmt)
    return out.getvalue()


def pdf(pages: int, *, password: str | None = None, side: int = 72) -> bytes:
    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(side, side)
    if password is not None:
        writer.encrypt(password, algorithm="RC4-128")
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


def refusal(
    data: bytes, name: str, limits: AttachmentLimits = LIMITS, **kw: str
) -> AgentRunnerError:
    with pytest.raises(AgentRunnerError) as caught:
        read_attachment(data, name, limits, **kw)
    error = caught.value
    assert error.code is ErrorCode.ATTACHMENT_REFUSED
    assert error.message.startswith(f"{attachment_name(name, '')}: "), error.message
    assert error.hint
    return error


# -- what is taken ------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_image_type_is_read_from_its_bytes_with_its_size(fmt: str) -> None:
    small, large = image(fmt, (64, 48)), image(fmt, (300, 500), (10, 200, 30))
    first = read_attachment(small, f"a.{fmt.lower()}", LIMITS)
    second = read_attachment(large, f"b.{fmt.lower()}", LIMITS, detail="low")
    assert (first.media_type, first.width, first.height) == (FORMATS[fmt], 64, 48)
    assert (second.media_type, second.width, second.height) == (FORMATS[fmt], 300, 500)
    assert first.sha256 == hashlib.sha256(small).hexdigest() != second.sha256
    assert (first.size, second.size) == (len(small), len(large))
    assert (first.data, second.data) == (small, large)
    assert (first.detail, second.detail, first.pages, first.kind) == ("auto", "low", None, "image")


def test_a_pdf_is_opened_and_its_pages_counted() -> None:
    one, three = pdf(1), pdf(3, side=200)
    first = read_attachment(one, "one.pdf", LIMITS)
    second = read_attachment(three, "three.pdf", LIMITS)
    assert (first.media_type, first.pages, first.width, first.kind) == (
        "application/pdf",
        1,
        None,
        "pdf",
    )
    assert second.pages == 3
    assert first.sha256 == hashlib.sha256(one).hexdigest() != second.sha256
    assert (first.size, second.size) == (len(one), len(three))


def test_the_type_is_the_contents_not_the_names() -> None:
    jpeg = read_attachment(image("JPEG", (20, 10)), "really-a-jpeg.png", LIMITS)
    assert (jpeg.media_type, jpeg.name) == ("image/jpeg", "really-a-jpeg.png")
    named_nothing = read_attachment(pdf(2), "scan", LIMITS)
    assert (named_nothing.media_type, named_nothing.pages) == ("application/pdf", 2)


def test_the_limits_are_inclusive() -> None:
    data = image("PNG", (40, 8000))
    limits = AttachmentLimits(max_image_bytes=len(data), max_image_edge=8000)
    assert read_attachment(data, "tall.png", limits).height == 8000
    assert read_attachment(pdf(3), "p.pdf", AttachmentLimits(max_pdf_pages=3)).pages == 3


# -- names --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("/home/ann/shots/photo.png", "photo.png"),
        ("C:\\Users\\ann\\report final.pdf", "report final.pdf"),
        ("bad\nname\t\x00.png", "badname.png"),
        ("inv\u202egnp.exe", "invgnp.exe"),  # a right-to-left override shows it as "exe.png"
        ("  spaced.gif  ", "spaced.gif"),
        ("../", "image.png"),
        ("", "image.png"),
    ],
)
def test_the_name_kept_is_the_base_name_cleaned(given: str, kept: str) -> None:
    assert read_attachment(image("PNG", (4, 4)), given, LIMITS).name == kept


def test_a_long_name_is_trimmed_keeping_its_suffix() -> None:
    kept = attachment_name("x" * 500 + ".jpeg", "image/jpeg")
    assert len(kept) == MAX_NAME_CHARS and kept.endswith("x.jpeg")
    assert attachment_name("y" * 300, "application/pdf") == "y" * MAX_NAME_CHARS
    assert attachment_name("", "application/pdf") == "document.pdf"


# -- what is refused ----------------------------------------------------------------------------


def test_a_text_file_named_like_an_image_is_refused() -> None:
    error = refusal(b"just some notes\nabout a photo\n", "photo.png")
    assert "its name says it is a PNG image, but its content is text" in error.message
    assert error.details == {"attachment": "photo.png", "reason": "type"}


def test_random_bytes_named_pdf_are_refused_as_binary_data() -> None:
    error = refusal(b"\x00\x01" + os.urandom(4096), "report.pdf")
    assert "its name says it is a PDF, but its content is binary data" in error.message
    assert refusal(b"\x00\x02\x03", "blob").details["reason"] == "type"


def test_another_image_type_is_refused() -> None:
    error = refusal(image("BMP", (10, 10)), "old.bmp")
    assert "its content is binary data" in error.message
    assert error.details["reason"] == "type"


def noisy(fmt: str, size: tuple[int, int]) -> bytes:
    """An image of seeded noise: its pixel data far larger than its header."""
    pixels = random.Random(42).randbytes(size[0] * size[1] * 3)
    out = BytesIO()
    Image.frombytes("RGB", size, pixels).save(out, fmt)
    return out.getvalue()


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_image_cut_short_is_refused_by_decoding(fmt: str) -> None:
    data = noisy(fmt, (160, 120))
    cut = data[: len(data) * 2 // 3]  # the header whole, the pixels cut off
    error = refusal(cut, f"cut.{fmt.lower()}")
    assert error.details["reason"] == "decode"
    # WebP's reader takes the file whole or not at all: it fails on opening it
    stage = "cannot be read" if fmt == "WEBP" else "cannot be decoded"
    kind = "WebP" if fmt == "WEBP" else fmt
    assert f"{stage} as a {kind} image" in error.message


def test_a_png_with_a_damaged_chunk_is_refused() -> None:
    data = bytearray(image("PNG", (120, 80)))
    data[len(data) // 2] ^= 0xFF  # inside the pixel data: its checksum no longer holds
    assert refusal(bytes(data), "bitrot.png").details["reason"] == "decode"


def test_a_webp_with_damaged_pixels_is_refused() -> None:
    data = bytearray(image("WEBP", (300, 200)))
    for at in range(40, len(data), 7):  # the container whole, the picture garbled
        data[at] ^= 0x5A
    assert refusal(bytes(data), "garbled.webp").details["reason"] == "decode"


def test_a_pdf_that_cannot_be_opened_is_refused() -> None:
    error = refusal(b"%PDF-1.7\n" + bytes(range(256)) * 20, "junk.pdf")
    assert "cannot be opened as a PDF" in error.message
    assert error.details["reason"] == "decode"
    whole = pdf(2)
    assert refusal(whole[: len(whole) // 2], "half.pdf").details["reason"] == "decode"


def test_an_encrypted_pdf_is_refused() -> None:
    error = refusal(pdf(2, password="secret"), "locked.pdf")
    assert "encrypted" in error.message
    assert error.details == {"attachment": "locked.pdf", "reason": "encrypted"}
    assert read_attachment(pdf(2), "open.pdf", LIMITS).pages == 2


def test_an_animated_gif_is_refused() -> None:
    frames = [Image.new("RGB", (20, 20), (i * 60, 0, 0)) for i in range(3)]
    out = BytesIO()
    frames[0].save(out, "GIF", save_all=True, append_images=frames[1:], duration=100)
    error = refusal(out.getvalue(), "dance.gif")
    assert "animated" in error.message and error.details["reason"] == "animated"


def test_an_image_over_the_byte_limit_is_refused() -> None:
    data = image("PNG", (200, 200))
    limits = AttachmentLimits(max_image_bytes=len(data) - 1)
    error = refusal(data, "big.png", limits)
    assert f"the file is {len(data):,} bytes" in error.message
    assert f"at most {len(data) - 1:,} bytes" in error.message
    assert "max_image_mb" in error.message and error.details["reason"] == "size"
    assert read_attachment(data, "big.png", AttachmentLimits(max_image_bytes=len(data)))


def test_a_pdf_over_its_byte_limit_is_refused_by_the_pdf_limit() -> None:
    data = pdf(1)
    # the image limit does not apply to a PDF, nor the PDF limit to an image
    assert read_attachment(data, "a.pdf", AttachmentLimits(max_image_bytes=1)).pages == 1
    error = refusal(data, "a.pdf", AttachmentLimits(max_pdf_bytes=len(data) - 1))
    assert "max_pdf_mb" in error.message and error.details["reason"] == "size"


def test_a_pdf_over_the_page_limit_is_refused() -> None:
    error = refusal(pdf(101), "long.pdf")
    assert "101 pages" in error.message and "at most 100" in error.message
    assert error.details["reason"] == "pages"
    assert refusal(pdf(4), "four.pdf", AttachmentLimits(max_pdf_pages=3)).details["reason"] == (
        "pages"
    )


def test_an_image_over_the_edge_limit_is_refused() -> None:
    error = refusal(image("PNG", (8001, 20)), "banner.png")
    assert "8001x20 px" in error.message and "at most 8000 px" in error.message
    assert error.details["reason"] == "dimensions"
    limits = AttachmentLimits(max_image_edge=50)
    assert refusal(image("JPEG", (20, 51)), "tall.jpg", limits).details["reason"] == "dimensions"


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG that claims ``width`` x ``height`` and holds no pixels: a decompression bomb's
    header, a few dozen bytes."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b"")


def test_a_decompression_bomb_is_refused_from_its_header() -> None:
    """9,500 x 9,500 is under twice Pillow's ``Image.MAX_IMAGE_PIXELS``, where ``Image.open``
    would only warn: the edge limit refuses it, and no pixel is decoded (there are none)."""
    error = refusal(_png_header_only(9_500, 9_500), "bomb.png")
    assert error.details["reason"] == "dimensions"
    assert "9500x9500 px" in error.message and "at most 8000 px a side" in error.message


def test_pillows_pixel_limit_holds_where_the_edge_limit_is_raised() -> None:
    side = 50_000
    assert side * side > 2 * (Image.MAX_IMAGE_PIXELS or 0)
    error = refusal(_png_header_only(side, side), "huge.png", AttachmentLimits(max_image_edge=side))
    assert error.details["reason"] == "dimensions"
    assert f"{side * side:,} pixels" in error.message and "decompression" in error.message


def test_a_webp_that_would_take_too_much_memory_to_check_is_refused() -> None:
    """A WebP is decoded whole (libwebp holds about 15 bytes a pixel): a header that claims
    more than 16 megapixels is refused before any decoding, however small the file (this one,
    lossless and of one colour, is a few dozen bytes)."""
    out = BytesIO()
    Image.new("RGB", (4001, 4000), (200, 30, 90)).save(out, "WEBP", lossless=True, method=0)
    assert len(out.getvalue()) < 1000
    error = refusal(out.getvalue(), "huge.webp")
    assert error.details["reason"] == "dimensions"
    assert "4001x4000 px" in error.message and "16 megapixels" in error.message
    assert "PNG or JPEG" in error.message


def test_the_decoding_budget_is_inclusive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attachment_checks, "_DECODE_BUDGET", 16 * 100 * 100)
    assert read_attachment(image("WEBP", (100, 100)), "ok.webp", LIMITS).height == 100
    assert refusal(image("WEBP", (101, 100)), "over.webp").details["reason"] == "dimensions"
    assert read_attachment(image("GIF", (200, 200)), "ok.gif", LIMITS).height == 200


def test_a_bad_detail_is_refused() -> None:
    error = refusal(image("PNG", (4, 4)), "x.png", detail="ultra")
    assert "auto, low or high" in error.message and "'ultra'" in error.message
    assert error.details["reason"] == "detail"
    assert read_attachment(image("PNG", (4, 4)), "x.png", LIMITS, detail="high").detail == "high"


def test_an_empty_file_is_refused() -> None:
    assert refusal(b"", "nothing.png").details["reason"] == "empty"


def test_a_refusal_names_the_file_as_kept_without_its_control_characters() -> None:
    error = refusal(b"text", "/tmp/evil\n\x1b[31mred.png")
    assert error.details["attachment"] == "evil[31mred.png"
    assert "\n" not in error.message and "\x1b" not in error.message


# -- a message's files together -----------------------------------------------------------------


def _attachments(count: int, size: int) -> list[Attachment]:
    return [
        Attachment(f"{i:064x}", "image/png", size, f"shot{i}.png", 10, 10) for i in range(count)
    ]


def test_a_message_within_its_limits_passes() -> None:
    check_message([], LIMITS)
    check_message(_attachments(20, 1_200_000), LIMITS)  # 20 files, 24,000,000 bytes: both limits
    files = [
        read_attachment(image("PNG", (9, 9)), "a.png", LIMITS),
        read_attachment(pdf(1), "b.pdf", LIMITS),
    ]
    check_message(
        files, AttachmentLimits(max_files=2, max_message_bytes=sum(f.size for f in files))
    )


def test_too_many_files_in_a_message_are_refused() -> None:
    with pytest.raises(AgentRunnerError) as caught:
        check_message(_attachments(21, 10), LIMITS)
    error = caught.value
    assert error.code is ErrorCode.ATTACHMENT_REFUSED
    assert "at most 20 files" in error.message and "this one has 21" in error.message
    assert error.details == {"attachment": "shot20.png", "reason": "files"}
    with pytest.raises(AgentRunnerError, match="at most 1 file "):
        check_message(_attachments(2, 10), AttachmentLimits(max_files=1))


def test_too_many_bytes_in_a_message_are_refused() -> None:
    with pytest.raises(AgentRunnerError) as caught:
        check_message(_attachments(3, 8_000_001), LIMITS)
    error = caught.value
    assert error.code is ErrorCode.ATTACHMENT_REFUSED
    assert error.message.startswith("shot0.png, shot1.png, shot2.png: ")
    assert "24,000,003" in error.message and "at most 24,000,000 bytes" in error.message
    assert error.details["reason"] == "message_size" and error.hint
    with pytest.raises(AgentRunnerError, match="and 2 more"):
        check_message(_attachments(7, 100), AttachmentLimits(max_message_bytes=699))


@pytest.mark.parametrize("field", ["max_files", "max_image_bytes", "max_image_edge"])
@pytest.mark.parametrize("value", [0, -1])
def test_limits_below_one_are_a_mistake(field: str, value: int) -> None:
    with pytest.raises(ValueError, match=field):
        AttachmentLimits(**{field: value})
