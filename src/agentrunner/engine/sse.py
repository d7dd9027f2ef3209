"""Server-sent events: the stream's bytes in, (event, data) out. Tolerant of padding, comments
and pings.

It reads bytes as they arrive rather than lines of text: a provider sends one event per
network chunk, and each layer of httpx2's line iterator (bytes → text → lines) costs a
generator step per chunk. Lines end at CR, LF or CRLF only (the SSE spec), never at the other
breaks ``str.splitlines`` knows (U+2028 in a token is text). The stream is UTF-8 whatever its
headers say (the SSE spec); a byte that is not is read as U+FFFD.
"""

from __future__ import annotations

__all__ = ["SSEDecoder"]

Event = tuple[str | None, str]


class SSEDecoder:
    """Feed it the stream's bytes, chunk by chunk; each ``feed`` returns the events that
    chunk completed (a blank line dispatches one)."""

    __slots__ = ("_cr", "_data", "_event", "_rest")

    def __init__(self) -> None:
        self._event: str | None = None
        self._data: list[bytes] = []
        self._rest = b""  # a line begun, not yet ended
        self._cr = False  # the last chunk ended with CR: a LF opening the next is its CRLF

    def feed(self, chunk: bytes) -> list[Event]:
        if (
            chunk[:6] == b"data: "
            and chunk.find(b"\n") == len(chunk) - 2
            and chunk[-1:] == b"\n"
            and b"\r" not in chunk
            and not self._rest
            and not self._data
            and not self._cr
        ):  # most of a stream: a chunk that is one event of one data line, and its blank line
            event, self._event = self._event, None
            return [(event, chunk[6:-2].decode("utf-8", "replace"))]
        if self._cr:
            self._cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if b"\r" in chunk:
            self._cr = chunk[-1:] == b"\r"
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        elif chunk.endswith(b"\n\n") and not self._rest and not self._data:
            whole = self._whole(chunk)
            if whole is not None:
                return [whole]
        if self._rest:
            chunk = self._rest + chunk
        lines = chunk.split(b"\n")
        self._rest = lines.pop()
        events: list[Event] = []
        for line in lines:
            if line:
                self._field(line)
            elif self._data:
                events.append(self._dispatch())
            else:
                self._event = None
        return events

    def _whole(self, chunk: bytes) -> Event | None:
        """The event ``chunk`` is, if it is a named event of one data line and its blank line
        (the Responses API's and Anthropic's streams, a chunk an event)."""
        if chunk.startswith(b"event: "):
            line = chunk.find(b"\n")
            end = len(chunk) - 2
            if chunk.startswith(b"data: ", line + 1) and chunk.find(b"\n", line + 1) == end:
                self._event = None
                name = chunk[7:line].decode("utf-8", "replace")
                return name, chunk[line + 7 : end].decode("utf-8", "replace")
        return None

    def flush(self) -> list[Event]:
        """What a stream that just ends leaves: its last line, and an event without its
        closing blank line."""
        if self._rest:
            self._field(self._rest)
            self._rest = b""
        if self._data:
            return [self._dispatch()]
        return []

    def _field(self, line: bytes) -> None:
        if line[0] == 58:  # ":", a comment (a ping)
            return
        name, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")

    def _dispatch(self) -> Event:
        data = self._data
        text = (data[0] if len(data) == 1 else b"\n".join(data)).decode("utf-8", "replace")
        out = (self._event, text)
        self._event = None
        self._data = []
        return out
