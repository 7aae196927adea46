"""A small HTTP/1.1 client: one request at a time per connection, connections kept alive per process. It carries
the operator's model endpoint (`Endpoint.post`, llm/transport.py) and, under the guard of
`kagent.egress`, every call to a tenant's URL (`Endpoint.send` with the guard's own `connect` and `before_write`:
kagent/egress/transport.py); the guard, not this module, decides where a connection may go.

Why not httpcore (which this replaced): its request cycle — h11's event objects and state machine, the pool's locks
and bookkeeping, httpx's request and response objects above it — cost several times the CPU of the same exchange
written out here, and a run makes two model calls and a tool call (the figures: bench/README.md).

What it reads is read strictly, as from any server: a head of at most `MAX_HEAD_BYTES`, a status line and header
lines as RFC 9112 spells them (no folded lines, no whitespace before a colon, a token for a name, no control
character), the body framed by `Transfer-Encoding: chunked` (the only transfer coding), one `Content-Length`, or the
connection's close (RFC 9112 §6.3); anything else is a `ProtocolFault`. A server's answer sent before it read the
whole request (a 413, then a reset) is read as the answer. A connection is used again only after an answer framed
exactly (no byte left over, no `Connection: close`, HTTP/1.1), and only if, idle, it has nothing to read (a server
that closed it while idle) and has not been idle longer than the endpoint's `idle_expiry`. Every wait is bounded by
the exchange's own deadline (connect and TLS handshake, write, each read; not the lookup of a name by `Endpoint`'s
own connect), so a server trickling bytes ends at the deadline, not after it. With `retry_idle` (the operator's
endpoint), a kept connection that turns out closed before any byte of the answer came back is tried once more on a
new one, as browsers do: a server that took the request and closed without a byte of answer gets it twice (a model
call has no effect but its cost). Tenant calls never are: the guard's caller decides what to do with a call that
may have reached its server.
"""

from __future__ import annotations

import os
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

MAX_HEAD_BYTES = 64 * 1024  # status line and headers (a chunk's size line and the trailers count here too)
MAX_IDLE = 20  # connections kept per endpoint and process
_READ = 64 * 1024


class ProtocolFault(Exception):
    """The server's answer is not HTTP/1.1 as this client reads it, or the connection ended inside it."""


class TooLarge(Exception):
    """The answer's body is over the caller's limit. `received`: the bytes of it read before that was known (0 when
    its declared length said so)."""

    def __init__(self, received: int = 0) -> None:
        super().__init__(received)
        self.received = received


@dataclass(frozen=True)
class Answer:
    status: int
    headers: list[tuple[str, str]]  # as sent, names lower-cased, in order
    body: bytes


@dataclass
class Connection:
    sock: socket.socket
    buffer: bytearray = field(default_factory=bytearray)
    deadline: float = 0.0
    read: int = 0  # the bytes of the current exchange's answer read so far, as sent
    body_from: int | None = None  # `read` where the answer's body began, once its head was read
    address: str = ""  # the address connected to, for whoever made the connection (the egress guard)
    idle_since: float = 0.0

    def recv(self) -> bytes:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        self.sock.settimeout(left)
        data = self.sock.recv(_READ)
        self.read += len(data)
        if time.monotonic() > self.deadline:
            raise TimeoutError  # a server trickling bytes never trips a read's own timeout
        return data

    @property
    def received(self) -> bool:
        """A byte of the current exchange's answer came back."""
        return self.read > 0

    @property
    def body_read(self) -> int:
        """The bytes of the current answer's body read so far, as sent (0 before its head ended)."""
        return 0 if self.body_from is None else self.read - self.body_from

    def fill(self) -> None:
        data = self.recv()
        if not data:
            raise ProtocolFault("the server closed the connection before the answer ended")
        self.buffer += data

    def until(self, terminator: bytes, limit: int, what: str) -> bytes:
        """The bytes up to `terminator` (which is dropped), at most `limit` of them."""
        while (end := self.buffer.find(terminator)) < 0:
            # Over only once no terminator can still end within the limit: the buffer's last bytes may be the start
            # of one (a read ending inside "\r\n\r\n").
            if len(self.buffer) >= limit + len(terminator):
                raise ProtocolFault(f"{what} is too long")
            self.fill()
        if end > limit:
            raise ProtocolFault(f"{what} is too long")
        data = bytes(self.buffer[:end])
        del self.buffer[: end + len(terminator)]
        return data

    def take(self, size: int) -> bytes:
        while len(self.buffer) < size:
            self.fill()
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data


Head = Callable[[int, list[tuple[str, str]]], None]
Body = Callable[[bytes], None]  # a piece of the answer's body (as sent, transfer coding undone), as it arrives


class Endpoint:
    """Keep-alive connections to one origin (scheme, host, port), for one process: `pid` says which, and a forked
    worker makes its own (llm/transport.py, kagent/egress/client.py), never sharing a socket across a
    fork. `idle_expiry` (seconds): a connection idle longer is closed instead of used again."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        tls: ssl.SSLContext | None,
        host_header: str,
        max_idle: int = MAX_IDLE,
        idle_expiry: float | None = None,
    ) -> None:
        self.host, self.port, self.tls = host, port, tls
        self.host_header = host_header
        self.max_idle, self.idle_expiry = max_idle, idle_expiry
        self._idle: list[Connection] = []
        self._lock = threading.Lock()
        self._closed = False  # closed: a connection coming back from an exchange under way is closed, not kept
        self.pid = os.getpid()

    def post(
        self,
        target: str,
        headers: Sequence[tuple[str, str]],
        body: bytes,
        *,
        connect_timeout: float,
        deadline: float,
        max_body: int,
        on_body: Body | None = None,
    ) -> Answer:
        """POSTs `body` and reads the whole answer before `deadline` (time.monotonic()), on a kept connection or a new
        one to `host`:`port` (its name looked up by the system). Raises what `send` raises."""
        return self.send(
            "POST",
            target,
            headers,
            body,
            deadline=deadline,
            max_body=max_body,
            connect=lambda: self._connect(min(connect_timeout, deadline - time.monotonic()), deadline),
            retry_idle=True,
            on_body=on_body,
        )

    def send(
        self,
        method: str,
        target: str,
        headers: Sequence[tuple[str, str]],
        body: bytes | None,
        *,
        deadline: float,
        max_body: int,
        connect: Callable[[], Connection],
        before_write: Callable[[Connection], None] | None = None,
        on_head: Head | None = None,
        retry_idle: bool = False,
        on_body: Body | None = None,
    ) -> Answer:
        """Sends one request and reads the whole answer before `deadline` (time.monotonic()), on a kept connection
        or one from `connect`. `before_write(connection)` runs before a byte is written on it, `on_head(status,
        headers)` once the final answer's head is read and before its body; either may raise to refuse (the
        connection is then closed). `on_body(piece)` is given the body as it arrives (a streamed answer: each chunk
        of a chunked one, each read of another), and the answer still holds it whole. `method`, `target` and
        `headers` must be checked by the caller (no CR, LF or space where HTTP forbids them). Raises TimeoutError,
        OSError (ssl.SSLError included), ProtocolFault, TooLarge or what the callbacks raise; the connection is then
        closed, never used again."""
        request = _request_bytes(method, target, self.host_header, headers, body)
        kept = self._idle_connection()
        if kept is not None:
            try:
                return self._exchange(kept, request, deadline, max_body, before_write, on_head, on_body)
            except (OSError, ProtocolFault) as exc:
                if not retry_idle or kept.received or isinstance(exc, TimeoutError):
                    raise
                # The server closed the kept connection while it was idle and we saw it only now (nothing of an
                # answer came back): once more on a new connection, as a browser would.
        return self._exchange(connect(), request, deadline, max_body, before_write, on_head, on_body)

    def _exchange(
        self,
        connection: Connection,
        request: bytes,
        deadline: float,
        max_body: int,
        before_write: Callable[[Connection], None] | None,
        on_head: Head | None,
        on_body: Body | None = None,
    ) -> Answer:
        connection.deadline = deadline
        try:
            if deadline - time.monotonic() <= 0:
                # Never a request written once its time is up (a TLS handshake that ended at the deadline): it
                # would reach the server and still be reported as timed out, as if it might have had its effect.
                raise TimeoutError
            if before_write is not None:
                before_write(connection)
            connection.sock.settimeout(max(deadline - time.monotonic(), 0.001))
            try:
                connection.sock.sendall(request)
            except TimeoutError:
                raise
            except OSError as write_error:
                # A server may answer before it has read the whole request (a 413 for a body too large) and close:
                # that answer is the one to report, as httpcore read it. Without one, the write's error stands.
                answer = _answer_after_failed_write(connection, max_body, on_head)
                if answer is None:
                    raise write_error from None
                reusable = False
            else:
                answer, reusable = _read_answer(connection, max_body, on_head, on_body)
        except BaseException:
            connection.sock.close()
            raise
        if reusable and not connection.buffer:
            connection.read, connection.body_from = 0, None
            self._keep(connection)
        else:
            connection.sock.close()
        return answer

    def _connect(self, timeout: float, deadline: float) -> Connection:
        """A new connection, its TLS handshake included, within `timeout`; refused once past `deadline`. (A name with
        several addresses gives each its own `timeout`, and the name's lookup has no limit of its own: the operator's
        endpoint is configuration, an address or a name of the deployment's own network.)"""
        if timeout <= 0:
            raise TimeoutError
        sock = socket.create_connection((self.host, self.port), timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                sock.settimeout(left)  # the handshake gets what is left, not the connect timeout again
                # Handshake inside this `try` (not in wrap_socket, which closes only on OSError): whatever interrupts
                # it, a Celery soft time limit included, the TLS socket is closed here.
                sock = self.tls.wrap_socket(sock, server_hostname=self.host, do_handshake_on_connect=False)
                sock.do_handshake()
            if time.monotonic() > deadline:
                raise TimeoutError  # connecting to a name's several addresses, each with its own timeout
        except BaseException:
            sock.close()
            raise
        return Connection(sock)

    def _idle_connection(self) -> Connection | None:
        while True:
            with self._lock:
                if not self._idle:
                    return None
                connection = self._idle.pop()
            # An idle connection with something to read was closed by the server (or sent what nobody asked for).
            if not self._expired(connection, time.monotonic()) and not _readable(connection.sock):
                return connection
            connection.sock.close()

    def _expired(self, connection: Connection, now: float) -> bool:
        return self.idle_expiry is not None and now - connection.idle_since > self.idle_expiry

    def _keep(self, connection: Connection) -> None:
        connection.idle_since = time.monotonic()
        with self._lock:
            if not self._closed and len(self._idle) < self.max_idle:
                self._idle.append(connection)
                return
        connection.sock.close()

    def prune(self) -> int:
        """Closes the connections idle past `idle_expiry`; returns how many stay idle."""
        now = time.monotonic()
        with self._lock:
            expired = [c for c in self._idle if self._expired(c, now)]
            self._idle = [c for c in self._idle if not self._expired(c, now)]
            left = len(self._idle)
        for connection in expired:
            connection.sock.close()
        return left

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.sock.close()


def _readable(sock: socket.socket) -> bool:
    """Whether `sock` has something to read (or was closed or failed), without waiting. poll, not select: select
    refuses a descriptor numbered FD_SETSIZE (1024) or more with a ValueError (a busy process has such numbers).
    select only where poll is gone (gevent's monkey-patching removes it; its select has no such limit)."""
    if _poll is None:
        return bool(select.select([sock], [], [], 0)[0])
    poller = _poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


_poll = getattr(select, "poll", None)


def _request_bytes(
    method: str, target: str, host_header: str, headers: Sequence[tuple[str, str]], body: bytes | None
) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host_header}"]
    lines += [f"{name}: {value}" for name, value in headers]
    if body is not None or method in _BODY_METHODS:
        lines.append(f"Content-Length: {len(body or b'')}")
    head = "\r\n".join(lines) + "\r\n\r\n"
    return head.encode("latin-1") + (body or b"")


_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})  # a Content-Length: 0 when they carry nothing, as httpx sends


def _read_answer(
    connection: Connection, max_body: int, on_head: Head | None = None, on_body: Body | None = None
) -> tuple[Answer, bool]:
    """The answer to one request and whether the connection can carry another."""
    while True:
        version, status, headers = _read_head(connection)
        if status >= 200:
            break
        if status == 101:
            raise ProtocolFault("the server switched protocols")
        # 100 Continue, 103 Early Hints: informational, the answer follows.
    connection.body_from = connection.read - len(connection.buffer)
    if on_head is not None:
        on_head(status, headers)
    fields: dict[str, list[str]] = {}
    for name, value in headers:
        fields.setdefault(name, []).append(value)
    tokens = _tokens(fields.get("connection", []))
    reusable = version == "1.1" and "close" not in tokens
    if status in (204, 304):
        return Answer(status, headers, b""), reusable
    if "transfer-encoding" in fields:
        if _tokens(fields["transfer-encoding"]) != ["chunked"]:
            # A transfer coding this client would not undo (gzip, ...): its body would pass for the decoded one.
            # Refused, as h11 refused it before the egress switch.
            raise ProtocolFault("the answer's Transfer-Encoding is not chunked alone")
        # With a Content-Length too (RFC 9112 §6.3: to be handled as an error) read as chunked, never reused.
        reusable = reusable and "content-length" not in fields
        return Answer(status, headers, _read_chunked(connection, max_body, on_body)), reusable
    if "content-length" in fields:
        values = {value.strip() for joined in fields["content-length"] for value in joined.split(",")}
        if len(values) != 1 or not (size := values.pop()).isdigit() or not size.isascii() or len(size) > 18:
            raise ProtocolFault("the answer's Content-Length is not one number")
        if int(size) > max_body:
            raise TooLarge
        return Answer(status, headers, _read_sized(connection, int(size), on_body)), reusable
    return Answer(status, headers, _read_to_close(connection, max_body, on_body)), False


def _answer_after_failed_write(connection: Connection, max_body: int, on_head: Head | None) -> Answer | None:
    try:
        answer, _ = _read_answer(connection, max_body, on_head)
    except TimeoutError:
        raise
    except (OSError, ProtocolFault):
        return None
    return answer


def _read_head(connection: Connection) -> tuple[str, int, list[tuple[str, str]]]:
    raw = connection.until(b"\r\n\r\n", MAX_HEAD_BYTES, "the answer's head")
    line_ends = raw.count(b"\r\n")
    if raw.count(b"\r") != line_ends or raw.count(b"\n") != line_ends:
        # A bare CR or LF inside a line (RFC 9112 §2.2): what a lenient reader in between would split into two
        # header lines this one would read as one.
        raise ProtocolFault("the answer's head has a bare CR or LF")
    if raw.translate(None, _HEAD_BYTES):
        # A control character (NUL, ESC, DEL...) in a status line or field (RFC 9110 §5.5), refused as h11 did
        # before this client: what a tenant's server sends is read as text by whatever reads the answer on.
        raise ProtocolFault("the answer's head has a control character")
    lines = raw.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if (
        version not in ("HTTP/1.1", "HTTP/1.0")
        or not (code.isdigit() and code.isascii() and code[0] != "0")
        or rest[3:4] not in ("", " ")
    ):
        raise ProtocolFault("the answer does not start with an HTTP/1.1 status line")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        # A name that is not a token (RFC 9110 §5.1): a space or tab (a folded line, whitespace before the colon), a
        # parenthesis, a non-ASCII byte...
        if not colon or not is_token(name):
            raise ProtocolFault("the answer has a malformed header line")
        headers.append((name.lower(), value.strip(" \t")))
    return version[5:], int(code), headers


TOKEN_CHARS = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # RFC 9110 §5.6.2


def is_token(text: str) -> bool:
    """A field name (or a method) as HTTP spells it: one or more token characters, nothing else."""
    return bool(text) and not text.strip(TOKEN_CHARS)


_HEAD_BYTES = bytes([9, 10, 13, *range(0x20, 0x7F), *range(0x80, 0x100)])  # tab, CR, LF, visible, space, obs-text


def _tokens(values: list[str]) -> list[str]:
    return [token.strip().lower() for value in values for token in value.split(",") if token.strip()]


def _read_sized(connection: Connection, size: int, on_body: Body | None) -> bytes:
    if on_body is None:
        return connection.take(size)
    pieces: list[bytes] = []
    left = size
    while left:
        if not connection.buffer:
            connection.fill()
        piece = bytes(connection.buffer[:left])
        del connection.buffer[: len(piece)]
        left -= len(piece)
        pieces.append(piece)
        on_body(piece)
    return b"".join(pieces)


def _read_chunked(connection: Connection, max_body: int, on_body: Body | None = None) -> bytes:
    chunks: list[bytes] = []
    size_so_far = 0
    while True:
        size_line = connection.until(b"\r\n", MAX_HEAD_BYTES, "a chunk's size line")
        size_field = size_line.split(b";", 1)[0].strip(b" \t")
        if not size_field or len(size_field) > 15 or size_field.strip(b"0123456789abcdefABCDEF"):
            raise ProtocolFault("the answer has a malformed chunk size")
        size = int(size_field, 16)
        if size == 0:
            break
        if size_so_far + size > max_body:
            raise TooLarge(size_so_far)
        size_so_far += size
        chunks.append(connection.take(size))
        if connection.take(2) != b"\r\n":
            raise ProtocolFault("a chunk of the answer does not end where its size says")
        if on_body is not None:
            on_body(chunks[-1])
    trailers = 0
    # Trailer fields, read and dropped, up to the empty line.
    while line := connection.until(b"\r\n", MAX_HEAD_BYTES, "a trailer line of the answer"):
        trailers += len(line) + 2
        if trailers > MAX_HEAD_BYTES:
            raise ProtocolFault("the answer's trailers are too long")
    return b"".join(chunks)


def _read_to_close(connection: Connection, max_body: int, on_body: Body | None = None) -> bytes:
    body = connection.buffer
    connection.buffer = bytearray()
    if len(body) > max_body:
        raise TooLarge(len(body))
    if body and on_body is not None:
        on_body(bytes(body))
    while data := connection.recv():
        body += data
        if len(body) > max_body:
            raise TooLarge(len(body))
        if on_body is not None:
            on_body(data)
    return bytes(body)
