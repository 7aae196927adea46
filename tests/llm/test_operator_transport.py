"""The exchange with the operator's model endpoint (`operator_post`) against real servers on loopback that misbehave
in ways the scripted fake model doesn't: answers too large, trickled, redirected, and endpoints misconfigured."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from llm import transport
from llm.transport import operator_post
from llm.types import ModelError


class _Handler(BaseHTTPRequestHandler):
    connections: list[int] = []

    def log_message(self, *args: object) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        _Handler.connections.append(1)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/large":
            body = b"x" * 4096
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path == "/cookies":
            self.send_response(200)
            self.send_header("X-Seen-Accept-Encoding", self.headers.get("Accept-Encoding", ""))
            self.send_header("X-Repeated", "a=1")
            self.send_header("X-Repeated", "b=2")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")
        elif self.path == "/trickle":
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            for _ in range(100):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.05)
        else:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.protocol_version = "HTTP/1.1"  # keep-alive, as model servers do
    _Handler.connections = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def post(url: str) -> transport.HttpAnswer:
    return operator_post(url, headers={"Authorization": "Bearer op-key"}, body=b"{}", secrets=["op-key"])


def test_an_answer_comes_back_with_its_status_and_the_connection_is_kept(server):
    first, second = post(f"{server}/ok"), post(f"{server}/ok")
    assert (first.status, first.body, second.body) == (200, b"{}", b"{}")
    assert first.headers["content-length"] == "2"
    assert len(_Handler.connections) == 1  # one connection for both exchanges


def test_a_redirect_is_not_followed(server):
    answer = post(f"{server}/redirect")
    assert answer.status == 302 and answer.headers["location"] == "http://169.254.169.254/"


def test_an_answer_over_the_limit_is_refused(server, monkeypatch):
    monkeypatch.setattr(transport, "MAX_ANSWER_BYTES", 1000)
    with pytest.raises(ModelError, match="too large") as caught:
        post(f"{server}/large")
    assert caught.value.retryable is False


def test_a_trickled_answer_ends_at_the_deadline(server, settings):
    settings.KAGENT_LLM_TIMEOUT_S = 0.5
    started = time.monotonic()
    with pytest.raises(ModelError, match="did not answer in time") as caught:
        post(f"{server}/trickle")
    assert time.monotonic() - started < 3  # not the 5 s the whole answer takes
    assert caught.value.retryable is True


@pytest.mark.parametrize(
    "url", ["ftp://127.0.0.1/v1/chat/completions", "http://[::1/v1", "127.0.0.1:8000/v1", "http://:80/v1"]
)
def test_a_misconfigured_endpoint_says_so_and_is_not_tried_again(url):
    with pytest.raises(ModelError, match="not configured correctly") as caught:
        post(url)
    assert caught.value.retryable is False
    assert "KAGENT_LLM_BASE_URL" in caught.value.detail  # the operator's log says what to fix; the tenant doesn't


def test_an_endpoint_that_refuses_connections_is_tried_again():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ModelError, match="could not be reached") as caught:
        post(f"http://127.0.0.1:{port}/v1/chat/completions")
    assert caught.value.retryable is True
    assert "op-key" not in caught.value.detail


def test_repeated_answer_headers_are_joined_and_no_compression_is_asked_for(server):
    answer = post(f"{server}/cookies")
    assert answer.headers["x-seen-accept-encoding"] == "identity"
    assert answer.headers["x-repeated"] == "a=1, b=2"
