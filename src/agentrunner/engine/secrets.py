"""The providers' keys as text may spell them, and cutting them out of text.

A key must never be stored, logged or sent to a model. The HTTP client cuts its own key out of
every error it raises; the turn cuts every provider's key out of each tool result, since an
agent with ``full`` trust may read the environment or a file that holds one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from urllib.parse import quote

__all__ = ["REDACTED", "Secrets", "spellings"]

REDACTED = "[redacted]"


def spellings(secret: str | None) -> tuple[str, ...]:
    """``secret`` as text spells it: as written, escaped as in the ``repr`` of a str or of bytes
    (how h11 shows a header value), in JSON, URL-quoted; longest first."""
    if not secret:
        return ()
    forms = {
        secret,
        repr(secret)[1:-1],
        repr(secret.encode("utf-8", "backslashreplace"))[2:-1],
        json.dumps(secret)[1:-1],
        quote(secret, safe=""),
    }
    return tuple(sorted((f for f in forms if f), key=len, reverse=True))


class Secrets:
    """Some secrets, each in every spelling; ``scrub`` replaces them with ``[redacted]``."""

    __slots__ = ("forms",)

    def __init__(self, secrets: Iterable[str]) -> None:
        forms = {form for secret in secrets for form in spellings(secret)}
        self.forms = tuple(sorted(forms, key=len, reverse=True))

    def __bool__(self) -> bool:
        return bool(self.forms)

    def scrub(self, text: str) -> str:
        for form in self.forms:
            if form in text:
                text = text.replace(form, REDACTED)
        return text
