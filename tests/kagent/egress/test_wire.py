"""What a tenant's server can do on the wire, as the hardened client reads it (kagent/http1.py under the guard of
kagent/egress/transport.py): a server here writes raw bytes over TLS, so each answer is exactly what a test says."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes.upstream import server_context
from kagent import egress
from kagent.egress import EgressClient, EgressError, transport
from kagent.models import EgressEvent
from tests.raw_server import Answer, RawServer, closes_after

pytestmark = pytest.mark.django_db  # every attempt is recorded as an EgressEvent

OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


@pytest.fixture
def wire(egress_settings: Any, cert_dir: Path) -> Iterator[Callable[..., RawServer]]:
    """A raw TLS server on port 8443 of a free loopback address, reached as https://wire.test:8443 (that address
    alone exempt from the deny list, besides the upstream's)."""
    made: list[RawServer] = []

    def make(*answers: Answer) -> RawServer:
        for last in range(10, 60):
            try:
                server = RawServer(list(answers), host=f"127.0.0.{last}", port=8443, tls=server_context(cert_dir))
            except OSError:  # the port is taken on that address (another test process)
                continue
            made.append(server)
            egress_settings.KAGENT_EGRESS_ALLOW_NETWORKS = [
                *egress_settings.KAGENT_EGRESS_ALLOW_NETWORKS,
                f"{server.host}/32",
            ]
            egress_settings.KAGENT_EGRESS_RESOLVE += f" wire.test:8443:{server.host}"
            return server
        raise RuntimeError("no loopback address has port 8443 free")

    yield make
    for server in made:
        server.close()


def get(client: EgressClient, path: str = "/orders/1", *, origin: str = "https://wire.test:8443", **kwargs: Any) -> Any:
    return client.request(
        project_id=None,
        purpose="http_tool",
        method=kwargs.pop("method", "GET"),
        url=f"{origin}{path}",
        headers=kwargs.pop("headers", {}),
        body=kwargs.pop("body", None),
        timeout_ms=kwargs.pop("timeout_ms", 5000),
        **kwargs,
    )


def test_the_request_line_and_headers_on_the_wire(client, wire):
    server = wire(OK)
    get(client, "/orders/8812?lang=ar", headers={"X-Trace": "abc", "Accept": "application/json"})
    get(client, "/orders", method="POST")
    head, _, _ = server.requests[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"GET /orders/8812?lang=ar HTTP/1.1"
    assert set(lines[1:]) == {
        b"Host: wire.test:8443",
        b"User-Agent: K-Agent/1",
        b"Accept: application/json",  # the caller's, not a second one
        b"X-Trace: abc",
        b"Accept-Encoding: gzip, deflate",
    }
    post_lines = server.requests[1].split(b"\r\n")
    assert post_lines[0] == b"POST /orders HTTP/1.1" and b"Content-Length: 0" in post_lines
    assert server.connections == 1


def test_a_kept_connection_closed_after_the_request_is_never_sent_again(client, wire):
    # The server took the request and closed without a byte of answer: the call may have had its effect, so it is
    # reported as such (the run engine decides), never silently sent a second time by the client.
    server = wire(OK, closes_after(b""), OK)
    assert get(client).status == 200
    with pytest.raises(EgressError) as info:
        get(client)
    assert (info.value.code, info.value.may_have_reached_upstream) == ("bad_response", True)
    assert info.value.resolved_address == server.host
    assert len(server.requests) == 2
    assert get(client).status == 200  # and the next call gets a new connection
    assert server.connections == 2


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nX-A: 1\nX-B: 2\r\nContent-Length: 2\r\n\r\n{}",  # a bare LF inside the head
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",  # two lengths
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n X-Folded: 1\r\nContent-Length: 2\r\n\r\n{}",  # an obsolete folded line
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",  # a chunk size not in hex
        b"HTTP/2 200\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\n{}",  # a digit to str.isdigit, not to int (latin-1 \xb2)
        b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 2\r\n\r\n{}",  # a control character in a field
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",  # never undone here
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nConnection: close\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nX(A): 1\r\nContent-Length: 2\r\n\r\n{}",  # a field name that is not a token
        b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\n{}",  # whitespace before the colon
    ],
    ids=[
        "bare-lf",
        "two-lengths",
        "switching",
        "folded",
        "bad-chunk",
        "not-http-1",
        "superscript-length",
        "nul",
        "gzip-chunked",
        "gzip",
        "name-not-token",
        "space-before-colon",
    ],
)
def test_an_answer_no_server_should_send_is_a_bad_response_and_its_connection_dropped(client, wire, answer):
    server = wire(answer, OK)
    with pytest.raises(EgressError) as info:
        get(client)
    assert (info.value.code, info.value.may_have_reached_upstream) == ("bad_response", True)
    assert get(client).status == 200
    assert server.connections == 2


def test_a_chunked_answer_with_trailers_is_read_and_its_connection_kept(client, wire):
    server = wire(
        b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{"a"\r\n3\r\n: 1\r\n1\r\n}\r\n0\r\nX-T: 1\r\n\r\n'
    )
    assert get(client).body == b'{"a": 1}'
    assert get(client).body == b'{"a": 1}'
    assert server.connections == 1


def test_a_declared_length_of_thousands_of_digits_is_too_large(client, wire):
    server = wire(b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n{}", OK)
    with pytest.raises(EgressError) as info:
        get(client)
    assert (info.value.code, info.value.status) == ("response_too_large", 200)
    assert get(client).status == 200
    assert server.connections == 2


def test_an_answer_read_to_the_close_is_cut_off_at_the_limit_and_logged_with_the_bytes_read(client, wire):
    # No length declared: the body ends when the server closes. Read until it passes 1 MiB, then refused.
    big = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b"x" * (2 * egress.MAX_RESPONSE_BYTES)
    wire(closes_after(big))
    with pytest.raises(EgressError) as info:
        get(client)
    assert (info.value.code, info.value.status) == ("response_too_large", 200)
    received = EgressEvent.objects.get().bytes_received
    assert egress.MAX_RESPONSE_BYTES < received <= egress.MAX_RESPONSE_BYTES + 64 * 1024


def test_an_answer_broken_off_in_its_body_is_logged_with_the_bytes_read(client, wire):
    wire(closes_after(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 10))
    with pytest.raises(EgressError) as info:
        get(client)
    assert info.value.code == "bad_response" and info.value.may_have_reached_upstream
    assert EgressEvent.objects.get().bytes_received == 10


def test_a_redirect_is_refused_before_its_body_and_its_connection_dropped(client, wire):
    # The body is never read: a 302 announcing 2 MiB is refused as a redirect, not as too large.
    server = wire(b"HTTP/1.1 302 Found\r\nLocation: https://internal.test/\r\nContent-Length: 2097152\r\n\r\n", OK)
    with pytest.raises(EgressError) as info:
        get(client)
    assert (info.value.code, info.value.status) == ("redirect_not_followed", 302)
    assert get(client).status == 200
    assert server.connections == 2


def test_idle_connections_expire_and_are_closed(client, wire, monkeypatch):
    monkeypatch.setattr(transport, "IDLE_EXPIRY_S", 0.2)
    monkeypatch.setattr(transport, "_PRUNE_EVERY_S", 0.0)
    server = wire(OK)
    assert get(client).status == 200
    time.sleep(0.3)
    assert get(client).status == 200  # the first connection had expired: a new one, the old one closed
    assert server.connections == 2
    time.sleep(0.3)
    # A call to another origin prunes what expired meanwhile: the process keeps no socket to a host it stopped
    # calling.
    with pytest.raises(EgressError):
        get(client, "/", origin="https://does-not-exist.invalid", timeout_ms=2000)
    deadline = time.monotonic() + 5
    while server.closed_by_client < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.closed_by_client == 2


def test_only_the_most_recent_origins_keep_connections(client, wire, egress_settings, monkeypatch):
    # A tenant calling a new name each time (a wildcard DNS zone) must not make the process keep a socket per name.
    monkeypatch.setattr(transport, "MAX_ORIGINS", 2)
    server = wire(OK)
    egress_settings.KAGENT_EGRESS_RESOLVE += f" rebind.test:8443:{server.host} other.test:8443:{server.host}"
    for name in ("wire.test", "rebind.test", "other.test"):
        assert get(client, "/", origin=f"https://{name}:8443").status == 200
    deadline = time.monotonic() + 5
    while server.closed_by_client < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert (server.connections, server.closed_by_client) == (3, 1)  # the least recent origin's, wire.test's
    assert get(client).status == 200
    assert server.connections == 4


def test_nothing_is_written_once_the_deadline_has_passed(client, wire, monkeypatch):
    # A handshake that ends at the deadline: the call times out before a byte of the request, so it is reported as
    # never having reached the server.
    server = wire(OK)
    start_tls = transport._start_tls

    def slow_start_tls(connection: Any, context: Any, host: str, exchange: Any) -> None:
        start_tls(connection, context, host, exchange)
        time.sleep(max(exchange.remaining(), 0) + 0.05)

    monkeypatch.setattr(transport, "_start_tls", slow_start_tls)
    with pytest.raises(EgressError) as info:
        get(client, timeout_ms=300)
    assert (info.value.code, info.value.may_have_reached_upstream) == ("timeout", False)
    time.sleep(0.1)
    assert server.requests == []


def test_a_stalled_tls_handshake_ends_at_the_connect_timeout(client, wire, monkeypatch):
    monkeypatch.setattr(transport, "CONNECT_TIMEOUT_S", 0.3)
    server = wire(OK)
    server.tls = None  # it accepts, then waits for a request and never answers the handshake
    started = time.monotonic()
    with pytest.raises(EgressError) as info:
        get(client, timeout_ms=5000)
    assert (info.value.code, info.value.may_have_reached_upstream) == ("timeout", False)
    assert time.monotonic() - started < 2


def test_a_connection_in_use_when_its_policy_changes_is_closed_when_its_call_ends(client, wire, egress_settings):
    # The policy changed while a call was under way on the old transport: its connection is not kept where nothing
    # would ever use or close it again, and a call that took the old transport just before keeps nothing either.
    server = wire(OK)
    policy, connections = client._policy_transport()
    target = egress.url_check("https://wire.test:8443/orders/1")

    def send(on_head: Callable[[int, list[tuple[str, str]]], None]) -> int:
        exchange = transport.Exchange(policy=policy, deadline=time.monotonic() + 5)
        return connections.send(exchange, "GET", target, [], None, on_head).status

    assert send(lambda status, headers: connections.close()) == 200  # closed in the middle of the call
    assert send(lambda status, headers: None) == 200  # on the transport already closed
    deadline = time.monotonic() + 5
    while server.closed_by_client < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert (server.connections, server.closed_by_client) == (2, 2)
