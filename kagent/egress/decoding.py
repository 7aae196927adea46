"""The response body's Content-Encoding undone chunk by chunk with a bound, so a gzip bomb never inflates past it."""

from __future__ import annotations

import zlib
from typing import Any

from kagent.egress.errors import EgressError


def _undecodable() -> EgressError:
    return EgressError("bad_response", "the response body does not decode", may_have_reached_upstream=True)


def too_large() -> EgressError:
    return EgressError("response_too_large", "the response is over 1 MiB", may_have_reached_upstream=True)


class BoundedDecoder:
    """Undo Content-Encoding chunk by chunk, never holding more than `limit` + 1 decoded bytes in total."""

    def __init__(self, encoding: str, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.encoding = encoding.strip().lower()
        self._zlib: Any = None
        self._pending = b""  # deflate: bytes seen before the zlib-or-raw decision
        if self.encoding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif self.encoding not in ("", "identity", "deflate"):
            raise EgressError("bad_response", "unsupported content encoding", may_have_reached_upstream=True)

    def _count(self, data: bytes) -> bytes:
        self.size += len(data)
        if self.size > self.limit:
            raise too_large()
        return data

    def feed(self, data: bytes) -> list[bytes]:
        if self.encoding in ("", "identity"):
            return [self._count(data)]
        if self._zlib is None:  # deflate: a zlib stream, or raw deflate as some servers send
            self._pending += data
            if len(self._pending) < 2:
                return []
            b0, b1 = self._pending[0], self._pending[1]
            wrapped = (b0 & 0x0F) == 8 and ((b0 << 8) | b1) % 31 == 0
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
            data, self._pending = self._pending, b""
        out: list[bytes] = []
        try:
            while data:
                out.append(self._count(self._zlib.decompress(data, self.limit - self.size + 1)))
                data = self._zlib.unconsumed_tail
        except zlib.error as exc:
            raise _undecodable() from exc
        return out

    def flush(self) -> list[bytes]:
        if self.encoding in ("", "identity"):
            return []
        if self._zlib is None:
            if self._pending:
                raise _undecodable()
            return []
        try:
            return [self._count(self._zlib.flush())]
        except zlib.error as exc:
            raise _undecodable() from exc
