"""The mock provider's images and PDFs: the multimodal shapes each API documents, checked as
it checks them (a 400 in its own words for what it refuses), what each costs in input tokens,
and what a request showed the model.

**What each API refuses** (``refused``; the messages are the APIs' own where known):

- Chat Completions: an ``image_url`` part in a message whose role is not ``user`` ("Image URLs
  are only allowed for messages with role 'user' …"); any part but text in a ``tool`` (or
  ``system``/``developer``) message, or but text and refusal in an ``assistant`` one; an image
  data URL whose type is not an image, or an image other than PNG, JPEG, GIF or WebP; a
  ``file`` part whose ``file_data`` is not a PDF data URL; invalid base64; an image that does
  not decode; a part type the API does not know.
- Responses: an ``input_image`` without ``detail`` or whose ``image_url`` is not a string; an
  image data URL as above; an ``input_file`` whose ``file_data`` is not a base64 data URL;
  input parts in an ``assistant`` message.
- Anthropic: an ``image`` whose ``media_type`` is not one of the four, whose ``data`` is not
  bare base64 (a ``data:`` prefix included), empty, not an image, or another kind of image
  than it says; a ``document`` whose ``media_type`` is not ``application/pdf`` or that is not a
  PDF; an empty ``tool_result`` content list.

**What they cost** (``weighed``: a request's JSON with each file's base64 replaced by a stand-in
of as many bytes as the file's tokens take in the mock's count of a token per 4 bytes, so
``count_input_tokens`` and ``PromptCacheModel`` bill files by size in pixels and pages, never by
their base64). An OpenAI image (``image_url``, ``input_image``) is OpenAI's tile rule: 85 tokens
at ``detail: low``, else fitted in 2048×2048, its short side brought down to 768, 85 + 170 per
512-pixel tile. An Anthropic image is its pixels ÷ 750, after the downscaling Anthropic does
(a long edge over 1,568 pixels, or over 1.15 megapixels). A PDF is ``PDF_PAGE_TOKENS`` a page,
on both. An image given by a URL (never fetched) counts as 1024×1024.

**What the model saw** (``saw``): the images and PDFs of a stretch of the conversation, as the
auto-reply appends them to its echo: `` [saw 1 image, 1 pdf]``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from agentrunner.engine.messages import IMAGE_TYPES, PDF_TYPE

__all__ = ["PDF_PAGE_TOKENS", "image_tokens", "refused", "saw", "weighed"]

PDF_PAGE_TOKENS = 1500  # a page's text and its picture, about what either provider bills
_URL_SIDE = 1024  # the size an image given by URL is counted as
_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
_OPENAI_IMAGE_EXAMPLE = "'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='"
_UNSUPPORTED_IMAGE = (
    "You uploaded an unsupported image. Please make sure your image has of one the following "
    "formats: ['png', 'jpeg', 'gif', 'webp']."
)
_INVALID_IMAGE = "You uploaded an unsupported image. Please make sure your image is valid."
_CHAT_PARTS = ("text", "image_url", "input_audio", "refusal", "audio", "file")
_RESPONSES_PARTS = ("input_text", "input_image", "input_file")


@dataclass(frozen=True, slots=True)
class _File:
    """What a part carries: ``openai`` (its rule for images) or not, the base64 (None: a URL
    or a file id, nothing to read) and the detail asked for."""

    kind: str  # "image" or "pdf"
    openai: bool
    data: str | None
    detail: str = "auto"


# -- what each API refuses -------------------------------------------------------------------


def refused(body: Mapping[str, Any], flavor: str) -> tuple[str, str | None] | None:
    """The 400 ``body`` gets for its images and files, as (message, param), or None."""
    if flavor == "openai":
        return _first(_chat_problem(m, r, w, p) for m, r, w, p in _chat_parts(body))
    if flavor == "responses":
        return _first(_responses_problem(r, w, p) for r, w, p in _responses_parts(body))
    return _first(_anthropic_problem(w, p) for w, p in _anthropic_parts(body))


def _first(
    problems: Iterator[tuple[str, str | None] | None],
) -> tuple[str, str | None] | None:
    return next((p for p in problems if p is not None), None)


def _chat_parts(body: Mapping[str, Any]) -> Iterator[tuple[str, str, str, Any]]:
    """(the message's place, its role, the part's place, the part) of each content part."""
    for i, message in enumerate(body.get("messages") or ()):
        content = message.get("content")
        if isinstance(content, list):
            for j, part in enumerate(content):
                yield (
                    f"messages[{i}]",
                    str(message.get("role")),
                    f"messages[{i}].content[{j}]",
                    part,
                )


def _responses_parts(body: Mapping[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(the role, the part's place, the part) of each message's and tool output's part."""
    given = body.get("input")
    for i, item in enumerate(given if isinstance(given, list) else ()):
        if item.get("type") == "function_call_output":
            output = item.get("output")
            if isinstance(output, list):
                for j, part in enumerate(output):
                    yield "tool", f"input[{i}].output[{j}]", part
            continue
        content = item.get("content")
        if isinstance(content, list):
            for j, part in enumerate(content):
                yield str(item.get("role")), f"input[{i}].content[{j}]", part


def _anthropic_parts(body: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """(the block's place, the block) of each block, a tool result's blocks too. A place
    names the block's type, as the API's messages do."""
    for i, message in enumerate(body.get("messages") or ()):
        content = message.get("content")
        for j, block in enumerate(content if isinstance(content, list) else ()):
            kind = block.get("type")
            where = f"messages.{i}.content.{j}.{kind}"
            yield where, block
            nested = block.get("content") if kind == "tool_result" else None
            for k, inner in enumerate(nested if isinstance(nested, list) else ()):
                yield f"{where}.content.{k}.{inner.get('type')}", inner


def _chat_problem(
    message: str, role: str, where: str, part: Mapping[str, Any]
) -> tuple[str, str | None] | None:
    kind = part.get("type")
    if kind == "text":
        return None
    if kind == "image_url" and role != "user":
        return (
            f"Invalid '{message}'. Image URLs are only allowed for messages with role 'user', "
            f"but this message with role '{role}' contains an image URL.",
            message,
        )
    allowed = {"user": _CHAT_PARTS, "assistant": ("text", "refusal")}.get(role, ("text",))
    if kind not in allowed:
        return (
            f"Invalid value: '{kind}'. Supported values are: {_listed(allowed)}.",
            f"{where}.type",
        )
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, Mapping) else None
        detail = image.get("detail", "auto") if isinstance(image, Mapping) else "auto"
        if detail not in ("auto", "low", "high", "original"):
            return (
                f"Invalid value: '{detail}'. Supported values are: 'auto', 'low', 'high', and "
                "'original'.",
                f"{where}.image_url.detail",
            )
        return _openai_image(url, f"{where}.image_url.url")
    if kind == "file":
        file = part.get("file")
        data = file.get("file_data") if isinstance(file, Mapping) else None
        if data is None:
            return None  # a file id: nothing here to check
        place = f"{where}.file.file_data"
        media_type, payload = _data_url(data)
        if payload is None or _decoded(payload) is None:
            got = "an invalid base64-encoded value"
        elif media_type != PDF_TYPE:
            got = f"unsupported MIME type '{media_type}'"
        else:
            return None
        return (
            f"Invalid file data: '{place}'. Expected a base64-encoded data URL with an "
            "application/pdf MIME type (e.g. 'data:application/pdf;base64,SGVsbG8sIFdvcmxkIQ=='), "
            f"but got {got}.",
            place,
        )
    return None


def _responses_problem(
    role: str, where: str, part: Mapping[str, Any]
) -> tuple[str, str | None] | None:
    kind = part.get("type")
    if role == "assistant":
        if kind in ("output_text", "refusal"):
            return None
        allowed: tuple[str, ...] = ("output_text", "refusal")
        return (
            f"Invalid value: '{kind}'. Supported values are: {_listed(allowed)}.",
            f"{where}.type",
        )
    if kind == "input_text":
        return None
    if kind not in _RESPONSES_PARTS:
        allowed = _RESPONSES_PARTS
        return (
            f"Invalid value: '{kind}'. Supported values are: {_listed(allowed)}.",
            f"{where}.type",
        )
    if kind == "input_image":
        if "detail" not in part:
            return f"Missing required parameter: '{where}.detail'.", f"{where}.detail"
        url = part.get("image_url")
        if url is None:
            return None  # a file id
        if not isinstance(url, str):
            return (
                f"Invalid type for '{where}.image_url': expected a string, but got "
                f"{_json_kind(url)} instead.",
                f"{where}.image_url",
            )
        return _openai_image(url, f"{where}.image_url")
    data = part.get("file_data")
    if data is None:
        return None  # a file id or a URL
    _, payload = _data_url(data)
    if payload is None or _decoded(payload) is None:
        return (
            f"Invalid file data: '{where}.file_data'. Expected a base64-encoded data URL with a "
            "valid file MIME type (e.g. 'data:text/plain;base64,SGVsbG8sIFdvcmxkIQ=='), but got "
            "an invalid base64-encoded value.",
            f"{where}.file_data",
        )
    return None


def _openai_image(url: Any, place: str) -> tuple[str, str | None] | None:
    """An OpenAI image URL: a web address (not fetched) or a data URL of a readable image."""
    if not isinstance(url, str):
        return (
            f"Invalid type for '{place}': expected a string, but got {_json_kind(url)} instead.",
            place,
        )
    if not url.startswith("data:"):
        return None
    media_type, payload = _data_url(url)
    expected = (
        f"Invalid '{place}'. Expected a base64-encoded data URL with an image MIME type "
        f"(e.g. {_OPENAI_IMAGE_EXAMPLE}), but got"
    )
    if media_type is not None and not media_type.startswith("image/"):
        return f"{expected} unsupported MIME type '{media_type}'.", place
    raw = _decoded(payload) if payload is not None else None
    if raw is None:
        return f"{expected} an invalid base64-encoded value.", place
    if media_type not in IMAGE_TYPES:
        return _UNSUPPORTED_IMAGE, place
    if _image_format(raw) is None:
        return _INVALID_IMAGE, place
    return None


def _anthropic_problem(where: str, block: Mapping[str, Any]) -> tuple[str, None] | None:
    kind = block.get("type")
    if kind == "tool_result":
        if block.get("content") != []:
            return None
        if block.get("is_error"):
            return f"{where}: content cannot be empty if `is_error` is true", None
        return f"{where}.content: List should have at least 1 item after validation, not 0", None
    if kind not in ("image", "document"):
        return None
    source = block.get("source")
    if not isinstance(source, Mapping) or source.get("type") != "base64":
        return None  # a URL, a file, text: not read here
    place = f"{where}.source.base64"
    media_type, data = source.get("media_type"), source.get("data")
    if kind == "image" and media_type not in IMAGE_TYPES:
        return f"{place}.media_type: Input should be {_listed(IMAGE_TYPES, 'or')}", None
    if kind == "document" and media_type != PDF_TYPE:
        return f"{place}.media_type: Input should be '{PDF_TYPE}'", None
    if not data:
        return f"{place}: {'image' if kind == 'image' else 'document'} cannot be empty", None
    raw = _decoded(data) if isinstance(data, str) else None
    if raw is None:  # a data: URL's prefix is not base64 either
        return f"{place}: invalid base64 data", None
    if kind == "document":
        if _pdf_pages(raw) is None:
            pdf = where.removesuffix(".document") + ".pdf"  # as the API names it here
            return f"{pdf}.source.base64.data: The PDF specified was not valid.", None
        return None
    found = _image_format(raw)
    if found is None:
        return f"{place}.data: Could not process image", None
    if found != media_type:
        return f"{place}.data: Image does not match the provided media type {media_type}", None
    return None


def _listed(values: tuple[str, ...], last: str = "and") -> str:
    quoted = [f"'{v}'" for v in values]
    if len(quoted) < 3:
        return f" {last} ".join(quoted)
    return ", ".join(quoted[:-1]) + f"{',' if last == 'and' else ''} {last} {quoted[-1]}"


def _json_kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return "a number" if isinstance(value, int | float) else "null" if value is None else "a value"


# -- reading a file --------------------------------------------------------------------------


def _data_url(value: Any) -> tuple[str | None, str | None]:
    """(media type, base64) of a ``data:TYPE;base64,DATA`` URL; (None, None) if it is not one."""
    if not isinstance(value, str) or not value.startswith("data:"):
        return None, None
    head, comma, payload = value.partition(",")
    if not comma or not head.endswith(";base64"):
        return None, None
    return head[5:-7], payload


def _decoded(payload: str) -> bytes | None:
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None


def _image_format(raw: bytes) -> str | None:
    """The media type Pillow reads in the image's header, or None if it reads none."""
    size_and_type = _image_header(raw)
    return size_and_type[2] if size_and_type is not None else None


def _image_header(raw: bytes) -> tuple[int, int, str] | None:
    from PIL import Image, UnidentifiedImageError  # only for requests with images

    try:
        with Image.open(io.BytesIO(raw)) as image:  # reads the header, decodes nothing
            width, height = image.size
            return width, height, _FORMATS.get(image.format or "", "")
    except (UnidentifiedImageError, OSError, ValueError):
        return None


def _pdf_pages(raw: bytes) -> int | None:
    from pypdf import PdfReader  # only for requests with PDFs
    from pypdf.errors import PyPdfError

    try:
        return len(PdfReader(io.BytesIO(raw)).pages)
    except (PyPdfError, OSError, ValueError):
        return None


# -- what they cost --------------------------------------------------------------------------


def image_tokens(width: int, height: int, *, openai: bool, detail: str = "auto") -> int:
    """The input tokens of a ``width``×``height`` image: OpenAI's tile rule, or Anthropic's
    pixels ÷ 750 after its downscaling."""
    if openai:
        if detail == "low":
            return 85
        fit = min(1.0, 2048 / max(width, height))
        w, h = width * fit, height * fit
        short = min(1.0, 768 / min(w, h))
        tiles = math.ceil(w * short / 512) * math.ceil(h * short / 512)
        return 85 + 170 * tiles
    scale = min(1.0, 1568 / max(width, height), math.sqrt(1_150_000 / (width * height)))
    return max(1, math.ceil(width * scale * height * scale / 750))


_COSTS: dict[tuple[str, bool, str], tuple[str, int]] = {}


def _cost(file: _File) -> tuple[str, int]:
    """(a digest of the file, its tokens), remembered: a conversation resends its files."""
    key = (file.data or "", file.openai, file.detail)
    known = _COSTS.get(key)
    if known is not None:
        return known
    raw = _decoded(file.data) if file.data else None
    digest = hashlib.sha256(raw or key[0].encode()).hexdigest()[:16]
    if file.kind == "pdf":
        tokens = PDF_PAGE_TOKENS * ((_pdf_pages(raw) if raw else None) or 1)
    else:
        header = _image_header(raw) if raw else None
        width, height = header[:2] if header else (_URL_SIDE, _URL_SIDE)
        tokens = image_tokens(width, height, openai=file.openai, detail=file.detail)
    if len(_COSTS) >= 256:
        _COSTS.clear()
    _COSTS[key] = (digest, tokens)
    return digest, tokens


def _file(part: Mapping[str, Any]) -> _File | None:
    """The file a part carries, or None for a part that is not one."""
    kind = part.get("type")
    if kind == "image_url":
        image = part.get("image_url") or {}
        _, data = _data_url(image.get("url"))
        return _File("image", True, data, str(image.get("detail", "auto")))
    if kind == "input_image":
        _, data = _data_url(part.get("image_url"))
        return _File("image", True, data, str(part.get("detail", "auto")))
    if kind == "file":
        _, data = _data_url((part.get("file") or {}).get("file_data"))
        return _File("pdf", True, data)
    if kind == "input_file":
        _, data = _data_url(part.get("file_data"))
        return _File("pdf", True, data)
    if kind in ("image", "document"):
        source = part.get("source") or {}
        data = source.get("data") if source.get("type") == "base64" else None
        return _File("pdf" if kind == "document" else "image", False, data)
    return None


def weighed(value: Any) -> Any:
    """``value`` (a message, an input item or a content block) with each file it carries
    replaced by its stand-in: the file's digest, padded to 4 bytes a token. What carries no
    file is returned as it is."""
    if isinstance(value, list):
        out = [weighed(v) for v in value]
        return value if all(a is b for a, b in zip(out, value, strict=True)) else out
    if not isinstance(value, Mapping):
        return value
    file = _file(value)
    if file is not None:
        digest, tokens = _cost(file)
        return {"type": value.get("type"), "file": digest.ljust(tokens * 4, ".")}
    for key in ("content", "output"):
        inner = value.get(key)
        if isinstance(inner, list):
            again = weighed(inner)
            if again is not inner:
                return {**value, key: again}
    return value


# -- what the model saw ----------------------------------------------------------------------


def saw(items: list[Any]) -> str:
    """`` [saw 1 image, 2 pdfs]`` for the files ``items`` (messages or input items) carry,
    their tool results' included; "" for none."""
    counts = {"image": 0, "pdf": 0}
    for item in items:
        for file in _files(item):
            counts[file.kind] += 1
    seen = [f"{n} {kind}{'s' if n > 1 else ''}" for kind, n in counts.items() if n]
    return f" [saw {', '.join(seen)}]" if seen else ""


def _files(value: Any) -> Iterator[_File]:
    if isinstance(value, list):
        for v in value:
            yield from _files(v)
        return
    if not isinstance(value, Mapping):
        return
    file = _file(value)
    if file is not None:
        yield file
        return
    for key in ("content", "output"):
        yield from _files(value.get(key))
