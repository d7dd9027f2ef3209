"""A file in a request body, as the routes declare it (``AttachmentIn``), and the files of one
message made of a body's entries (``attachments_of``): read by ``run/attachment_entries`` and
checked by ``attach``, so a route checks no file itself (docs/attachments.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from agentrunner.core.attachments import DETAILS
from agentrunner.run.attachment_entries import attach_entries, entry_of

if TYPE_CHECKING:
    from agentrunner.engine.messages import Attachment
    from agentrunner.run.app import AppParts

__all__ = ["AttachmentIn", "attachments_of"]


def _one_of_data_and_sha256(schema: dict[str, Any]) -> None:
    """The schema says what ``entry_of`` checks: one of ``data`` and ``sha256``, neither
    ``null`` (left out, rather)."""
    schema["oneOf"] = [{"required": ["data"]}, {"required": ["sha256"]}]
    for field in schema["properties"].values():
        if field.get("default", ...) is None:
            del field["default"]


class AttachmentIn(BaseModel):
    """A file sent with a message: its bytes (``data``) or the digest of a file already kept
    (``sha256``), and the name it is shown under. The schema states the shape; the rules are
    the library's (``entry_of``), so breaking one is a 422 naming the field."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_one_of_data_and_sha256)

    name: str = Field(
        description="the file's name, as the agent and people see it (its type is read from "
        "its bytes, never from the name)",
        json_schema_extra={"minLength": 1, "pattern": r"\S"},
    )
    data: Annotated[
        str | None,
        WithJsonSchema(
            {
                "type": "string",
                "contentEncoding": "base64",
                "description": "the file's bytes, base64 (or a base64 data URL): a PNG, JPEG, "
                "GIF or WebP image or a PDF",
            }
        ),
    ] = None
    sha256: Annotated[
        str | None,
        WithJsonSchema(
            {
                "type": "string",
                "pattern": "^[0-9a-fA-F]{64}$",
                "description": "instead of `data`: the digest of a file already kept (by an "
                "upload or an earlier message), as a run's record or a thread's message names it",
            }
        ),
    ] = None
    detail: Annotated[
        str | None,
        WithJsonSchema(
            {
                "enum": list(DETAILS),
                "description": "what OpenAI models are asked to see of an image (default auto)",
            }
        ),
    ] = None


async def attachments_of(
    entries: Sequence[AttachmentIn], runner: AppParts, field: str = "attachments"
) -> list[Attachment]:
    """The files of one message, from a body's ``field``: each read and checked (``attach``,
    a digest looked up in the store), then the message's bounds. Raises ``validation``
    naming the entry's field (``attachments.0.data``) or ``attachment_refused`` naming the
    file; nothing is stored either way (the files are kept with the message that carries
    them)."""
    read = [
        entry_of(entry.model_dump(exclude_none=True), f"{field}.{n}")
        for n, entry in enumerate(entries)
    ]
    return list(await attach_entries(read, runner))
