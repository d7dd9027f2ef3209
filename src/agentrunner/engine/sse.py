"""Server-sent events: lines in, (event, data) out. Tolerant of padding, comments and pings."""

from __future__ import annotations

__all__ = ["SSEDecoder"]


class SSEDecoder:
    """Feed it one line at a time (without the newline); a blank line dispatches an event."""

    __slots__ = ("_data", "_event")

    def __init__(self) -> None:
        self._event: str | None = None
        self._data: list[str] = []

    def feed(self, line: str) -> tuple[str | None, str] | None:
        if not line:
            if not self._data:
                self._event = None
                return None
            out = (self._event, "\n".join(self._data))
            self._event = None
            self._data = []
            return out
        if line[0] == ":":
            return None
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        return None

    def flush(self) -> tuple[str | None, str] | None:
        """An event left without its closing blank line (a stream that just ends)."""
        return self.feed("")
