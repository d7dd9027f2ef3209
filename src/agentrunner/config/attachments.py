"""``[attachments]``: how large a file given with a message, and a message's files together, may
be (docs/attachments.md, "Limits"). Sizes are written in MB, a million bytes each (the unit
the providers' limits are given in); each key left out keeps its default, which sits just
inside what the providers take (``core.attachments.AttachmentLimits``)."""

from __future__ import annotations

from typing import ClassVar

from agentrunner.config.source import Table
from agentrunner.config.values import amount, positive
from agentrunner.core.attachments import AttachmentLimits

__all__ = ["ATTACHMENTS_KEYS", "Attachments"]

_MB = 1_000_000
# key: (the AttachmentLimits field, in MB or as written)
_SIZES = {
    "max_image_mb": "max_image_bytes",
    "max_pdf_mb": "max_pdf_bytes",
    "max_message_mb": "max_message_bytes",
}
_COUNTS = {
    "max_pdf_pages": "max_pdf_pages",
    "max_files": "max_files",
    "max_image_edge": "max_image_edge",
}
ATTACHMENTS_KEYS: tuple[str, ...] = (*_SIZES, *_COUNTS)
_SIZE_HINT = (
    "A positive number of megabytes (a million bytes each), e.g. max_image_mb = 3.75; leave "
    "it out for the default, just inside what the providers take (docs/attachments.md)."
)
_COUNT_HINT = (
    "A whole number, at least 1, e.g. max_files = 20; leave it out for the default, just "
    "inside what the providers take (docs/attachments.md)."
)


class Attachments:
    """``[attachments]``, read into the ``AttachmentLimits`` every way in checks files by."""

    NAME: ClassVar[str] = "attachments"
    KEYS: ClassVar[tuple[str, ...]] = ATTACHMENTS_KEYS

    @classmethod
    def read(cls, table: Table) -> AttachmentLimits:
        """``[attachments]``; ``invalid_specification`` at the line of a wrong value (its keys
        are checked with every section's, ``load_config``)."""
        default = AttachmentLimits()
        limits: dict[str, int] = {}
        for key, limit in _SIZES.items():
            megabytes = amount(table, key, "megabytes", _SIZE_HINT)
            if megabytes is not None:
                limits[limit] = int(megabytes * _MB)
                if limits[limit] < 1:
                    raise table.error(key, f"{table.name(key)} is less than a byte", _SIZE_HINT)
        for key, limit in _COUNTS.items():
            limits[limit] = positive(table, key, getattr(default, limit), _COUNT_HINT)
        return AttachmentLimits(**limits)
