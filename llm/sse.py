"""Server-Sent Events as a model server streams them (OpenAI's `stream: true`, Anthropic's event stream), read as the
bytes arrive: `SseReader.feed(piece)` returns the events completed by that piece, each `(event, data)`.

The format (WHATWG HTML, "Server-sent events"): lines end with LF, CRLF or CR; an empty line ends an event; `event:`
names it (default "message"), `data:` lines are joined with LF; `:` starts a comment; other fields are ignored. A
body that is not a stream at all (an error's JSON, a server that ignored `stream: true`) yields no event: the
provider then reads the body whole, as before. Bounded: an event's data is at most MAX_EVENT_BYTES (the whole
answer is bounded by the transport already); past it the event is dropped and the stream marked `broken`.
"""

from __future__ import annotations

MAX_EVENT_BYTES = 1 << 20


class SseReader:
    def __init__(self) -> None:
        self._pending = b""  # an unfinished line
        self._event = ""
        self._data: list[bytes] = []
        self._size = 0
        self.events = 0  # events read so far
        self.broken = False

    def feed(self, piece: bytes) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        buffer = self._pending + piece
        start = 0
        length = len(buffer)
        while start < length:
            # The next line end: LF, CR or CRLF (a CR last in the buffer waits: an LF may follow in the next piece).
            lf = buffer.find(b"\n", start)
            cr = buffer.find(b"\r", start)
            ends = [i for i in (lf, cr) if i >= 0]
            if not ends:
                break
            end = min(ends)
            if buffer[end : end + 1] == b"\r":
                if end + 1 == length:
                    break
                after = end + 2 if buffer[end + 1 : end + 2] == b"\n" else end + 1
            else:
                after = end + 1
            self._line(buffer[start:end], out)
            start = after
        self._pending = buffer[start:]
        if len(self._pending) > MAX_EVENT_BYTES:
            self._pending, self.broken = b"", True
        return out

    def _line(self, line: bytes, out: list[tuple[str, str]]) -> None:
        if not line:
            if self._data:
                data = b"\n".join(self._data).decode("utf-8", "replace")
                out.append((self._event or "message", data))
                self.events += 1
            self._event, self._data, self._size = "", [], 0
            return
        if line.startswith(b":"):
            return
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._size += len(value) + 1
            if self._size > MAX_EVENT_BYTES:
                self._data, self.broken = [], True
                return
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
