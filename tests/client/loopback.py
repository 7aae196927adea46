"""A small HTTP server on 127.0.0.1 that answers what a test scripts, for faults the real server won't produce on
demand (a 429 then a 200, an answer that never comes, a stream cut short). It records every request."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Answer:
    status: int = 200
    body: bytes | Iterable[bytes] = b"{}"
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    delay_s: float = 0.0  # before answering: longer than the client's timeout is a read timeout


Script = Callable[[Seen], Answer]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        seen = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length))
        with self.server.lock:
            self.server.seen.append(seen)
        answer = self.server.script(seen)
        if answer.delay_s:
            time.sleep(answer.delay_s)
        try:
            self.send_response(answer.status)
            for name, value in answer.headers.items():
                self.send_header(name, value)
            if isinstance(answer.body, bytes):
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)
            else:  # streamed, then the connection closes
                self.send_header("Connection", "close")
                self.end_headers()
                for chunk in answer.body:
                    self.wfile.write(chunk)
                    self.wfile.flush()
                self.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle  # noqa: N815


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    script: Script
    seen: list[Seen]
    lock: threading.Lock


class Loopback:
    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.script = lambda seen: Answer()
        self._server.seen = []
        self._server.lock = threading.Lock()
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> Loopback:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def answer(self, script: Script) -> None:
        self._server.script = script

    def answer_in_turn(self, *answers: Answer) -> None:
        """The first request gets the first answer, and so on; the last answer repeats."""
        queue = list(answers)

        def next_answer(seen: Seen) -> Answer:
            return queue.pop(0) if len(queue) > 1 else queue[0]

        self._server.script = next_answer

    @property
    def seen(self) -> list[Seen]:
        with self._server.lock:
            return list(self._server.seen)
