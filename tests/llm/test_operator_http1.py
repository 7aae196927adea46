"""How the operator's model endpoint is read on the wire (kagent/http1.py): answers framed every way HTTP/1.1
allows, kept-alive connections used again only when that is safe, and answers no server should send refused with
the connection dropped. Servers here write raw bytes on loopback, so the answer is exactly what each test says."""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fakes.llm import FakeLLM, text
from fakes.upstream import server_context
from kagent import http1
from llm import transport
from llm.transport import operator_post
from llm.types import ModelError
from tests.raw_server import Answer, RawServer, closes_after

CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


@pytest.fixture
def raw_server() -> Iterator[Callable[..., RawServer]]:
    made: list[RawServer] = []

    def make(*answers: Answer) -> RawServer:
        made.append(RawServer(list(answers)))
        return made[-1]

    yield make
    for server in made:
        server.close()


def post(url: str, key: str = "op-key") -> transport.HttpAnswer:
    return operator_post(url, headers={"Authorization": f"Bearer {key}"}, body=b'{"n": 1}', secrets=[key])


def test_the_request_is_one_post_with_its_length_and_no_compression(raw_server):
    server = raw_server(OK)
    post(server.url)
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /v1/chat/completions HTTP/1.1"
    assert {b"Host: " + server.url.split("/")[2].encode(), b"Accept-Encoding: identity", b"Content-Length: 8"} <= set(
        lines
    )
    assert body == b'{"n": 1}'


def test_a_chunked_answer_is_joined_and_its_connection_kept(raw_server):
    chunked = CHUNKED + b'4;ext=1\r\n{"a"\r\n5\r\n: 1}\n\r\n0\r\nX-Trailer: yes\r\n\r\n'
    server = raw_server(chunked)
    assert post(server.url).body == b'{"a": 1}\n'
    assert post(server.url).body == b'{"a": 1}\n'
    assert server.connections == 1


def test_an_answer_read_to_the_close_of_its_connection(raw_server):
    server = raw_server(closes_after(b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"old": true}'))
    assert post(server.url).body == b'{"old": true}'
    assert post(server.url).body == b'{"old": true}'
    assert server.connections == 2


def test_informational_answers_before_the_answer_are_skipped(raw_server):
    server = raw_server(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + OK)
    answer = post(server.url)
    assert (answer.status, answer.body) == (200, b"{}")


def test_connection_close_and_a_server_closing_an_idle_connection_mean_a_new_one(raw_server):
    server = raw_server(OK.replace(b"OK\r\n", b"OK\r\nConnection: close\r\n", 1), closes_after(OK), OK)
    for _ in range(4):
        assert post(server.url).body == b"{}"
    # 1: told to close; 2: closed by the server while idle (seen before sending); 3 and 4 share one.
    assert server.connections == 3


def test_bytes_after_the_answer_drop_the_connection(raw_server):
    server = raw_server(OK + b'HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{"x":1}', OK)
    assert post(server.url).body == b"{}"
    assert post(server.url).body == b"{}"  # not the unasked-for answer left on the first connection
    assert server.connections == 2


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n X-Folded: yes\r\n\r\n{}", id="folded header"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\n{}", id="space before colon"),
        pytest.param(b"HTTP/2 200\r\nContent-Length: 2\r\n\r\n{}", id="not http/1"),
        pytest.param(b"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\n{}", id="status of four digits"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", id="two lengths"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\n{}", id="negative length"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: \xd9\xa2\r\n\r\n{}", id="non-ascii digit"),
        pytest.param(CHUNKED + b"zz\r\n{}\r\n0\r\n\r\n", id="bad chunk size"),
        pytest.param(CHUNKED + b"2\r\n{}XX0\r\n\r\n", id="chunk overrun"),
        pytest.param(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", id="protocol switch"),
    ],
)
def test_an_answer_no_server_should_send_is_refused_and_its_connection_dropped(raw_server, answer):
    server = raw_server(answer, OK)
    with pytest.raises(ModelError, match="could not be reached") as caught:
        post(server.url)
    assert caught.value.retryable is True and "op-key" not in caught.value.detail
    assert post(server.url).body == b"{}"  # the next exchange is on a new connection
    assert server.connections == 2


def test_an_answer_cut_short_is_refused(raw_server):
    server = raw_server(closes_after(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}"))
    with pytest.raises(ModelError, match="could not be reached") as caught:
        post(server.url)
    assert "closed the connection before the answer ended" in caught.value.detail


def test_a_head_that_never_ends_is_refused(raw_server):
    server = raw_server(b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * 70_000 + b"\r\n\r\n{}")
    with pytest.raises(ModelError, match="could not be reached") as caught:
        post(server.url)
    assert "head is too long" in caught.value.detail


class _Pieces:
    """A socket whose reads return these pieces, one a read (then the end of the stream)."""

    def __init__(self, *pieces: bytes) -> None:
        self.pieces = list(pieces)

    def settimeout(self, timeout: float) -> None:
        pass

    def recv(self, size: int) -> bytes:
        return self.pieces.pop(0) if self.pieces else b""


class _ClosedForWriting(_Pieces):
    """Fault injection: a socket the server reset while the request was being written, with what it sent before."""

    closed = False

    def sendall(self, data: bytes) -> None:
        raise ConnectionResetError("reset by peer")

    def close(self) -> None:
        self.closed = True


def test_an_answer_sent_before_the_request_was_read_is_the_answer():
    # A server answering 413 to a body too large and closing mid-upload: the 413 is what the caller is told (as
    # httpcore did), the connection closed; with nothing to read, the write's error.
    endpoint = http1.Endpoint(host="example.test", port=443, tls=None, host_header="example.test")

    def send(sock: _ClosedForWriting) -> http1.Answer:
        connection = http1.Connection(sock)  # type: ignore[arg-type]
        deadline = time.monotonic() + 5
        return endpoint.send("POST", "/x", [], b"x" * 100, deadline=deadline, max_body=1024, connect=lambda: connection)

    early = _ClosedForWriting(b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 9\r\n\r\ntoo large")
    answer = send(early)
    assert (answer.status, answer.body, early.closed) == (413, b"too large", True)
    silent = _ClosedForWriting()
    with pytest.raises(ConnectionResetError):
        send(silent)
    assert silent.closed


class _Answering(_Pieces):
    def sendall(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_kept_connection_reset_while_the_request_is_written_is_retried_once_unless_an_answer_began(monkeypatch):
    # The server closed the kept connection while it was idle, seen only when the write failed: one more try on a new
    # connection, as when the write goes through and the read finds the close. Never once a byte of an answer came
    # back (the server may have acted on the request), and never on a tenant's call (no retry_idle).
    monkeypatch.setattr(http1, "_readable", lambda sock: False)

    def post(kept: _ClosedForWriting, *, retry_idle: bool = True) -> tuple[http1.Answer | Exception, int]:
        endpoint = http1.Endpoint(host="example.test", port=443, tls=None, host_header="example.test")
        endpoint._idle.append(http1.Connection(kept))  # type: ignore[arg-type]
        connected: list[_Answering] = []

        def connect() -> http1.Connection:
            connected.append(_Answering(OK))
            return http1.Connection(connected[-1])  # type: ignore[arg-type]

        def send() -> http1.Answer:
            deadline = time.monotonic() + 5
            return endpoint.send(
                "POST", "/x", [], b"{}", deadline=deadline, max_body=1024, connect=connect, retry_idle=retry_idle
            )

        try:
            return send(), len(connected)
        except (OSError, http1.ProtocolFault) as exc:
            return exc, len(connected)

    answer, connections = post(_ClosedForWriting())
    assert (getattr(answer, "body", None), connections) == (b"{}", 1)
    begun, connections = post(_ClosedForWriting(b"HTTP/1.1 200 OK\r\nContent-Len"))
    assert (type(begun), connections) == (ConnectionResetError, 0)
    tenant, connections = post(_ClosedForWriting(), retry_idle=False)
    assert (type(tenant), connections) == (ConnectionResetError, 0)


@pytest.mark.parametrize(
    "pieces",
    [
        [b"x" * 10 + b"\r\n\r\n"],
        [b"x" * 10, b"\r\n\r\n"],
        [b"x" * 10 + b"\r", b"\n\r\n"],
        [b"x" * 10 + b"\r\n\r", b"\n"],
        [b"x" * 5, b"x" * 5 + b"\r\n", b"\r", b"\nrest"],
    ],
)
def test_the_limit_is_the_same_wherever_the_reads_split_the_terminator(pieces):
    connection = http1.Connection(_Pieces(*pieces), deadline=time.monotonic() + 5)  # type: ignore[arg-type]
    assert connection.until(b"\r\n\r\n", 10, "the head") == b"x" * 10
    over = http1.Connection(_Pieces(*pieces[:-1], b"x" + pieces[-1]), deadline=time.monotonic() + 5)  # type: ignore[arg-type]
    with pytest.raises(http1.ProtocolFault, match="the head is too long"):
        over.until(b"\r\n\r\n", 10, "the head")


@pytest.mark.parametrize("framing", ["length", "chunked", "close"])
def test_an_answer_over_the_limit_is_refused_however_it_is_framed(raw_server, monkeypatch, framing):
    monkeypatch.setattr(transport, "MAX_ANSWER_BYTES", 1000)
    body = b"x" * 1500
    answer: bytes | Callable[[socket.socket], None] = {
        "length": b"HTTP/1.1 200 OK\r\nContent-Length: 1500\r\n\r\n" + body,
        "chunked": CHUNKED + (b"100\r\n" + b"x" * 256 + b"\r\n") * 6,
        "close": closes_after(b"HTTP/1.0 200 OK\r\n\r\n" + body),
    }[framing]
    server = raw_server(answer)
    with pytest.raises(ModelError, match="too large") as caught:
        post(server.url)
    assert caught.value.retryable is False


@pytest.mark.parametrize("key", ["op-key\r\nX-Injected: 1", "op-key\n", "clé"])
def test_a_key_that_would_break_the_request_is_a_misconfiguration(raw_server, key):
    server = raw_server(OK)
    with pytest.raises(ModelError, match="not configured correctly") as caught:
        post(server.url, key=key)
    assert caught.value.retryable is False
    assert server.requests == []  # nothing was sent


@pytest.fixture
def tls_model(cert_dir: Path) -> Iterator[FakeLLM]:
    fake = FakeLLM(ssl_context=server_context(cert_dir), server_name="localhost").start()
    fake.script("tls", [text("over TLS")] * 3)
    yield fake
    fake.stop()


def test_an_https_endpoint_is_verified_against_its_certificate(tls_model, ca_file, monkeypatch):
    url = f"{tls_model.origin}/v1/chat/completions"
    body = b'{"model": "script:tls", "messages": [{"role": "user", "content": "hi"}]}'

    # The system's trust store doesn't know the test CA: refused, nothing read.
    with pytest.raises(ModelError, match="could not be reached") as caught:
        operator_post(url, headers={}, body=body, secrets=[])
    assert "CERTIFICATE_VERIFY_FAILED" in caught.value.detail

    monkeypatch.setattr(transport, "_operator_endpoints", {})
    monkeypatch.setattr(transport, "_operator_tls", lambda: ssl.create_default_context(cafile=str(ca_file)))
    answer = operator_post(url, headers={}, body=body, secrets=[])
    assert answer.status == 200 and b"over TLS" in answer.body
    assert b"over TLS" in operator_post(url, headers={}, body=body, secrets=[]).body


def test_a_kept_connection_numbered_over_fd_setsize_is_used_again(raw_server):
    # select() refuses descriptors >= FD_SETSIZE (1024) with a ValueError: the idle check must not use it.
    import os
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        if hard != resource.RLIM_INFINITY and hard < 1200:
            pytest.skip("cannot open more than 1024 descriptors here")
        resource.setrlimit(resource.RLIMIT_NOFILE, (1200, hard))
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        server = raw_server(OK)
        for _ in range(3):
            assert post(server.url).body == b"{}"
        [kept] = transport._operator_endpoint(transport._operator_url(server.url))._idle
        assert kept.sock.fileno() >= 1024
        assert server.connections == 1
    finally:
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(b"HTTP/1.1 200 OK\r\nX-A: a\nContent-Length: 9\r\nContent-Length: 2\r\n\r\n{}", id="bare LF"),
        pytest.param(b"HTTP/1.1 200 OK\r\nX-A: a\rContent-Length: 9\r\nContent-Length: 2\r\n\r\n{}", id="bare CR"),
        pytest.param(b"HTTP/1.1 200 O\nK\r\nContent-Length: 2\r\n\r\n{}", id="bare LF in the status line"),
        pytest.param(b"HTTP/1.1 099 Odd\r\n\r\n" + OK, id="status under 100"),
    ],
)
def test_a_head_no_server_should_send_is_refused(raw_server, answer):
    server = raw_server(answer, OK)
    with pytest.raises(ModelError, match="could not be reached"):
        post(server.url)
    assert post(server.url).body == b"{}"
    assert server.connections == 2


def test_a_chunked_answer_with_a_content_length_too_is_read_chunked_and_its_connection_dropped(raw_server):
    server = raw_server(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
    )
    assert post(server.url).body == b"{}"
    assert post(server.url).body == b"{}"
    assert server.connections == 2
