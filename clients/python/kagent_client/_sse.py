"""A Server-Sent Events parser, as the WHATWG HTML standard ("Parsing an event stream") describes it, fed bytes as
they arrive:

- UTF-8, a byte order mark at the start of the stream ignored, invalid bytes replaced;
- lines end with CRLF, LF or CR, also when the CR and the LF arrive in different chunks;
- a line starting with ":" is a comment (our keep-alives); a line without ":" is a field with an empty value; one
  space after the colon is removed;
- `data` lines are joined with newlines; `event` names the event (default "message"); `id` sets the last event id
  (unless it contains NUL) and is kept for the following events; `retry` is the reconnection delay in milliseconds
  (digits only); other fields are ignored;
- a blank line dispatches the event; an event with no data lines dispatches nothing; an event the stream ends in
  the middle of (no blank line after it) is dropped.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class RawEvent:
    event: str
    data: str
    id: str | None  # the stream's last event id when this event was dispatched


class SSEDecoder:
    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._started = False
        self._pending_cr = False
        self._event = ""
        self._data: list[str] = []
        self._id_buffer: str | None = None
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None

    def feed(self, chunk: bytes) -> Iterator[RawEvent]:
        """The events completed by this chunk."""
        text = self._text.decode(chunk)
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        for line in self._lines(text):
            event = self._line(line)
            if event is not None:
                yield event

    def _lines(self, text: str) -> Iterator[str]:
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]  # the LF of a CRLF whose CR ended the previous chunk
        self._pending_cr = False
        buffer = self._buffer + text
        start = 0
        index = 0
        size = len(buffer)
        while index < size:
            char = buffer[index]
            if char == "\n" or char == "\r":
                yield buffer[start:index]
                if char == "\r":
                    if index + 1 < size:
                        if buffer[index + 1] == "\n":
                            index += 1
                    else:
                        self._pending_cr = True
                start = index + 1
            index += 1
        self._buffer = buffer[start:]

    def _line(self, line: str) -> RawEvent | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            if "\0" not in value:
                self._id_buffer = value
        elif name == "retry":
            if value.isascii() and value.isdigit():
                self.retry_ms = int(value)
        return None

    def _dispatch(self) -> RawEvent | None:
        if self._id_buffer is not None:
            self.last_event_id = self._id_buffer or None  # an empty id resets it
        event, data = self._event, self._data
        self._event, self._data = "", []
        if not data:
            return None
        return RawEvent(event=event or "message", data="\n".join(data), id=self.last_event_id)
