"""A threading HTTP server that does TLS per connection, in that connection's own thread, so a client stuck in a
handshake never blocks accept(). Shared by the loopback test servers (fakes/upstream.py, fakes/llm.py)."""

from __future__ import annotations

import socket
import ssl
from http.server import ThreadingHTTPServer
from typing import Any


class TLSThreadingHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    ssl_context: ssl.SSLContext | None = None  # None: plain HTTP

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.ssl_context is None:
            super().finish_request(request, client_address)
            return
        try:
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tls = self.ssl_context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        try:
            super().finish_request(tls, client_address)
        finally:
            try:
                tls.close()
            except OSError:
                pass

    def handle_error(self, request: Any, client_address: Any) -> None:
        return
