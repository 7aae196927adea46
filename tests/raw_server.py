"""A server that writes raw bytes on loopback, in plain TCP or TLS, so an answer is exactly what a test says: for the
HTTP/1.1 client (kagent/http1.py) as the operator's model endpoint and as the egress guard's wire."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable

Answer = bytes | Callable[[socket.socket], None]


class RawServer:
    """Answers the n-th request on its connections with `answers[n]` (bytes, or a callable given the socket, after
    which the connection closes), the last one over and over. Counts connections, the ones the client closed, and
    keeps each request it read."""

    def __init__(
        self, answers: list[Answer], *, host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None
    ) -> None:
        self.answers = answers
        self.tls = tls
        self.connections = 0
        self.closed_by_client = 0
        self.requests: list[bytes] = []
        self._accepted: list[socket.socket] = []
        self._listener = socket.create_server((host, port))
        self.host, self.port = host, self._listener.getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://{host}:{self.port}/v1/chat/completions"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            self._accepted.append(sock)
            threading.Thread(target=self._connection, args=(sock,), daemon=True).start()

    def _connection(self, sock: socket.socket) -> None:
        try:
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_side=True)
            self._answer(sock)
        except OSError:  # a client that refused the handshake or went away
            pass
        finally:
            sock.close()

    def _answer(self, sock: socket.socket) -> None:
        buffer = b""
        while True:
            while b"\r\n\r\n" not in buffer:
                data = sock.recv(65536)
                if not data:
                    self.closed_by_client += 1
                    return
                buffer += data
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            lines = head.lower().split(b"\r\n")
            length = next((int(line.split(b":")[1]) for line in lines if line.startswith(b"content-length")), 0)
            while len(buffer) < length:
                buffer += sock.recv(65536)
            self.requests.append(head + b"\r\n\r\n" + buffer[:length])
            buffer = buffer[length:]
            answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
            if callable(answer):
                answer(sock)
                return
            sock.sendall(answer)

    def close(self) -> None:
        """Stops listening and ends every connection it accepted: a connection a client keeps must not outlive its
        server (the next test's server may be given the same port, and the client would take the old connection's
        answers for the new server's)."""
        self._listener.close()
        for sock in self._accepted:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


def closes_after(data: bytes) -> Callable[[socket.socket], None]:
    return lambda sock: sock.sendall(data)  # the handler returns: the connection closes
