"""A real HTTPS server on loopback for the outbound-client tests and the benchmark.

Certificates come from `trustme`. Every request is recorded with what arrived on the wire, and its Standard Webhooks
signature is verified with the `standardwebhooks` package against each configured secret.

Behaviours by path (any method):
  /echo/...            200, JSON of what was received (method, path, query, headers, body)
  /status/NNN          status NNN with a small JSON body
  /redirect?to=URL     302 to URL
  /respond/NAME[/...]  whatever a test registered with `Upstream.respond(NAME, ...)`
  /mcp/NAME            an MCP server (Streamable HTTP) a test registered with `Upstream.mcp.serve(NAME, ...)`
                       (fakes/mcp.py)
  /big-cl              Content-Length: 2 MiB, then the bytes
  /big-chunked         chunked, 2 MiB in 64 KiB chunks, no Content-Length
  /exact-limit         exactly 1 MiB (allowed)
  /gzip-bomb           Content-Encoding: gzip, 64 MiB of zeros in about 64 KiB on the wire
  /trickle-body        Content-Length: 100, one byte every 0.2 s
  /trickle-headers     the status line, then one header byte every 0.2 s
  /set-cookie          sets a cookie
  /bench               a fixed small JSON body (no recording), for the benchmark
  /orders              the same body, recorded: the load and fault benchmarks' business API
  /ledger              (GET, not recorded) every delivery so far by `webhook-id`: {"deliveries": {id: [[unix time,
                       path], …]}}, so a benchmark counts tool calls delivered twice

Run alone (for the benchmark, in its own process): python -m fakes.upstream --port 8443 --cert-dir DIR
"""

from __future__ import annotations

import argparse
import gzip
import json
import socket
import ssl
import sys
import threading
import time
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fakes.mcp import McpFake
from fakes.tls_server import TLSThreadingHTTPServer

MIB = 1024 * 1024
_GZIP_BOMB = gzip.compress(b"\0" * (64 * MIB), compresslevel=9)
_BENCH_BODY = json.dumps({"data": [{"status": "shipped", "eta": "2026-01-02"}]}).encode()


@dataclass
class Received:
    method: str
    path: str  # with the query, as sent on the request line
    headers: dict[str, str]  # lower-case names
    body: bytes
    peer: str
    peer_port: int
    signature_valid: list[bool]  # one per configured secret
    signature_error: str = ""


@dataclass
class Canned:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    # Seconds to wait before answering, one entry per request in order (then no wait): a slow first attempt.
    delays: list[float] = field(default_factory=list)
    # Statuses of the first requests, in order (then `status`): a receiver that fails twice, then succeeds.
    statuses: list[int] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        return

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        headers = dict(headers or {})
        headers.setdefault("Content-Type", "application/json")
        for name, value in headers.items():
            self.send_header(name, value)
        if "Content-Length" not in headers and "Transfer-Encoding" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _handle(self) -> None:
        upstream = self.server.upstream
        body = self._read_body()
        path = self.path
        route = urlsplit(path).path
        if route == "/bench":
            self._send(200, _BENCH_BODY)
            return
        if route == "/ledger":
            with upstream._lock:
                report = {"deliveries": {key: list(value) for key, value in upstream.deliveries.items()}}
            self._send(200, json.dumps(report).encode())
            return
        upstream.record(self, body)
        try:
            self._route(route, path, body)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True

    def _route(self, route: str, path: str, body: bytes) -> None:
        upstream = self.server.upstream
        if route == "/orders":
            self._send(200, _BENCH_BODY)
        elif route.startswith("/status/"):
            self._send(int(route.split("/")[2]), json.dumps({"error": "upstream said no", "detail": "x" * 50}).encode())
        elif route == "/redirect":
            target = parse_qs(urlsplit(path).query).get("to", ["https://127.0.0.1:8443/"])[0]
            self._send(302, b"", {"Location": target})
        elif route.startswith("/respond/"):
            canned = upstream.canned.get(route.split("/")[2], Canned(404, b'{"error": "not registered"}'))
            with upstream._lock:
                delay = canned.delays.pop(0) if canned.delays else 0.0
                status = canned.statuses.pop(0) if canned.statuses else canned.status
            time.sleep(delay)
            self._send(status, canned.body, canned.headers)
        elif route.startswith("/mcp/"):
            upstream.mcp.handle(self, route, body)
        elif route == "/big-cl":
            self.send_response(200)
            self.send_header("Content-Length", str(2 * MIB))
            self.end_headers()
            for _ in range(32):
                self.wfile.write(b"a" * (64 * 1024))
        elif route == "/big-chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for _ in range(32):
                chunk = b"b" * (64 * 1024)
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        elif route == "/exact-limit":
            self._send(200, b"c" * MIB, {"Content-Type": "application/octet-stream"})
        elif route == "/gzip-bomb":
            self._send(200, _GZIP_BOMB, {"Content-Encoding": "gzip"})
        elif route == "/gzip-bomb-chunked":
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for start in range(0, len(_GZIP_BOMB), 16 * 1024):
                chunk = _GZIP_BOMB[start : start + 16 * 1024]
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        elif route == "/gzip-ok":
            self._send(200, gzip.compress(b'{"data": {"status": "packed"}}'), {"Content-Encoding": "gzip"})
        elif route == "/deflate-zlib":
            self._send(200, zlib.compress(b'{"data": {"status": "zlib"}}'), {"Content-Encoding": "deflate"})
        elif route == "/deflate-raw":
            raw = zlib.compressobj(wbits=-15)
            data = raw.compress(b'{"data": {"status": "raw"}}') + raw.flush()
            self._send(200, data, {"Content-Encoding": "deflate"})
        elif route == "/brotli":
            self._send(200, b"\x0b\x02\x80hello\x03", {"Content-Encoding": "br"})
        elif route == "/trickle-body":
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.flush()
            for _ in range(100):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.2)
        elif route == "/trickle-headers":
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            self.wfile.flush()
            for byte in b"X-Slow: " + b"y" * 200:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.2)
            self.close_connection = True
        elif route == "/set-cookie":
            self._send(200, b'{"ok": true}', {"Set-Cookie": "sid=tenant-a-session; Path=/"})
        else:
            received = {
                "method": self.command,
                "path": path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body.decode("utf-8", "replace"),
            }
            self._send(200, json.dumps(received).encode())

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle  # noqa: N815


class _Server(TLSThreadingHTTPServer):
    upstream: Upstream


class Upstream:
    """One HTTPS server on `host:port`, run in a daemon thread."""

    def __init__(self, *, host: str, port: int, ssl_context: ssl.SSLContext, secrets: list[str] | None = None) -> None:
        self.ssl_context = ssl_context
        self.sni_names: list[str | None] = []
        ssl_context.sni_callback = lambda _sock, name, _ctx: self.sni_names.append(name)  # type: ignore[assignment]
        self.secrets = list(secrets or [])
        self.received: list[Received] = []
        self.deliveries: dict[str, list[tuple[float, str]]] = {}  # webhook-id -> (when, path) of each arrival
        self.canned: dict[str, Canned] = {}
        self.mcp = McpFake()
        self._lock = threading.Lock()
        self._server = _Server((host, port), _Handler)
        self._server.upstream = self
        self._server.ssl_context = ssl_context
        self.host, self.port = host, int(self._server.server_address[1])  # port 0: the one the system chose
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def start(self) -> Upstream:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reset(self) -> None:
        with self._lock:
            self.received.clear()
            self.deliveries.clear()
            self.canned.clear()
            self.sni_names.clear()
        self.mcp.reset()

    def respond(
        self,
        name: str,
        *,
        status: int = 200,
        json_body: Any = None,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        delays: list[float] | None = None,
        statuses: list[int] | None = None,
    ) -> str:
        data = body if body is not None else json.dumps(json_body).encode()
        self.canned[name] = Canned(status, data, dict(headers or {}), list(delays or []), list(statuses or []))
        return f"/respond/{name}"

    def record(self, handler: _Handler, body: bytes) -> None:
        from standardwebhooks import Webhook, WebhookVerificationError

        headers = {k.lower(): v for k, v in handler.headers.items()}
        valid: list[bool] = []
        error = ""
        for secret in self.secrets:
            try:
                Webhook(secret).verify(body, headers, json_parse=False)
                valid.append(True)
            except (WebhookVerificationError, ValueError, UnicodeDecodeError) as exc:
                valid.append(False)
                error = str(exc)
        with self._lock:
            if headers.get("webhook-id"):
                self.deliveries.setdefault(headers["webhook-id"], []).append((time.time(), handler.path))
            self.received.append(
                Received(
                    method=handler.command,
                    path=handler.path,
                    headers=headers,
                    body=body,
                    peer=handler.client_address[0],
                    peer_port=handler.client_address[1],
                    signature_valid=valid,
                    signature_error=error,
                )
            )


def bind_upstream(
    *,
    ssl_context: ssl.SSLContext,
    secrets: list[str] | None = None,
    port: int = 8443,
    hosts: tuple[str, ...] = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"),
) -> Upstream:
    """The first of `hosts` where `port` is free (127.0.0.2 unless another test run holds it)."""
    last: OSError | None = None
    for host in hosts:
        try:
            return Upstream(host=host, port=port, ssl_context=ssl_context, secrets=secrets).start()
        except OSError as exc:
            last = exc
    raise RuntimeError(f"no loopback address among {hosts} has port {port} free: {last}")


def server_context(cert_dir: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_dir / "server.pem", cert_dir / "server.key")
    return context


def write_certs(cert_dir: Path, *names: str) -> Path:
    """A trustme CA and a server certificate for `names`; returns the CA file."""
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert(*names)
    cert_dir.mkdir(parents=True, exist_ok=True)
    cert.private_key_pem.write_to_path(str(cert_dir / "server.key"))
    cert.cert_chain_pems[0].write_to_path(str(cert_dir / "server.pem"))
    for extra in cert.cert_chain_pems[1:]:
        with open(cert_dir / "server.pem", "ab") as f:
            f.write(extra.bytes())
    ca.cert_pem.write_to_path(str(cert_dir / "ca.pem"))
    return cert_dir / "ca.pem"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8443)
    parser.add_argument("--cert-dir", type=Path, required=True)
    args = parser.parse_args()
    upstream = bind_upstream(ssl_context=server_context(args.cert_dir), port=args.port)
    print("ready", upstream.host, upstream.port, flush=True)
    try:
        sys.stdin.read()  # until the parent closes our stdin
    finally:
        upstream.stop()


if __name__ == "__main__":
    socket.setdefaulttimeout(30)
    main()
