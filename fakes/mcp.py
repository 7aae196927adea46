"""A small MCP server (Streamable HTTP) served by the loopback upstream (fakes/upstream.py) under `/mcp/NAME`.

A test registers a server with `upstream.mcp.serve(NAME, tools=[...], mode="json" | "sse", ...)` and points the client
at `https://tools.test:8443/mcp/NAME`. The upstream records every request and verifies its Standard Webhooks
signature as for any other path; this fake adds the JSON-RPC messages it read (`McpFake.messages`), with the session
id and protocol version headers each came with.

What it does, as the 2025-11-25 transport says: `initialize` answers the configured protocol version and gives a new
`Mcp-Session-Id` (when `session`); every later request must carry that id (else 400, or 404 for an unknown one) and
`MCP-Protocol-Version`; DELETE ends the session (`closed`); a notification gets 202; `tools/list` pages by
`page_size` with `nextCursor`; `tools/call` answers the registered result of the tool, or echoes its arguments.
In "sse" mode an answer is an event stream: a priming event (an id, empty data), a comment, a log notification, a
response to another id, then the response.

Hostile behaviours, per method (`hostile={"tools/list": "redirect"}`): `redirect` (302 to the internal sentinel),
`status` (500), `endless` (an event stream of keep-alives and notifications that never answers, until the client
leaves or 30 s), `huge` (an answer over 1 MiB: declared in json mode, chunked in sse mode), `garbage` (not JSON),
`wrong_id` (the response to another id only), `error` (a JSON-RPC error) and `html` (a text/html answer).
`session=False`: a server that gives no session id and needs none. `call_delays`: seconds to wait before answering
each `tools/call`, in turn.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from http.server import BaseHTTPRequestHandler

MIB = 1024 * 1024


@dataclass
class McpBehaviour:
    tools: list[dict[str, Any]] = field(default_factory=list)
    mode: str = "json"  # json | sse
    page_size: int | None = None
    session: bool = True
    protocol_version: str = "2025-11-25"
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # tool name -> the tools/call result
    hostile: dict[str, str] = field(default_factory=dict)  # method -> behaviour (see the module's docstring)
    call_delays: list[float] = field(default_factory=list)  # seconds before answering each tools/call, in turn


@dataclass
class McpMessage:
    server: str
    message: Any
    session_id: str | None
    protocol_version: str | None
    accept: str
    content_type: str


class McpFake:
    def __init__(self) -> None:
        self.servers: dict[str, McpBehaviour] = {}
        self.messages: list[McpMessage] = []
        self.sessions: set[str] = set()  # open sessions
        self.opened: list[str] = []  # every session id given, in order
        self.closed: list[str] = []  # the session id of each DELETE
        self._lock = threading.Lock()

    def serve(self, name: str, **behaviour: Any) -> str:
        self.servers[name] = McpBehaviour(**behaviour)
        return f"/mcp/{name}"

    def reset(self) -> None:
        with self._lock:
            self.servers.clear()
            self.messages.clear()
            self.sessions.clear()
            self.opened.clear()
            self.closed.clear()

    def handle(self, handler: BaseHTTPRequestHandler, route: str, body: bytes) -> None:
        name = route.split("/")[2]
        behaviour = self.servers.get(name)
        if behaviour is None:
            _send(handler, 404, b'{"error": "no such MCP server"}')
            return
        if handler.command == "DELETE":  # the client ends its session
            session_id = handler.headers.get("Mcp-Session-Id")
            with self._lock:
                known = session_id in self.sessions
                self.sessions.discard(session_id or "")
                self.closed.append(session_id or "")
            _send(handler, 200 if known else 404, b"")
            return
        if handler.command != "POST":
            _send(handler, 405, b"")
            return
        try:
            message = json.loads(body)
        except ValueError:
            _send(handler, 400, _error(None, -32700, "Parse error"))
            return
        session_id = handler.headers.get("Mcp-Session-Id")
        version = handler.headers.get("MCP-Protocol-Version")
        with self._lock:
            self.messages.append(
                McpMessage(
                    name,
                    message,
                    session_id,
                    version,
                    handler.headers.get("Accept", ""),
                    handler.headers.get("Content-Type", ""),
                )
            )
        method = message.get("method") if isinstance(message, dict) else None
        request_id = message.get("id") if isinstance(message, dict) else None
        hostile = behaviour.hostile.get(str(method), "")
        if method != "initialize":
            if behaviour.session:
                if session_id is None:
                    _send(handler, 400, _error(None, -32600, "Bad Request: missing session id"))
                    return
                if session_id not in self.sessions:
                    _send(handler, 404, _error(None, -32001, "Session not found"))
                    return
            if version != behaviour.protocol_version:
                _send(handler, 400, _error(None, -32600, "Bad Request: unsupported protocol version"))
                return
        if request_id is None:  # a notification
            _send(handler, 202, b"")
            return
        if hostile == "redirect":
            _send(handler, 302, b"", {"Location": "https://127.0.0.1:8443/echo/followed"})
        elif hostile == "status":
            _send(handler, 500, b'{"error": "internal"}')
        elif hostile == "garbage":
            _send(handler, 200, b"<<this is not json>>")
        elif hostile == "html":
            _send(handler, 200, b"<html>hello</html>", {"Content-Type": "text/html"})
        elif hostile == "endless":
            _endless(handler)
        elif hostile == "huge":
            _huge(handler, behaviour.mode, request_id)
        elif hostile == "wrong_id":
            _answer(handler, behaviour.mode, [_result(request_id + 1000 if isinstance(request_id, int) else 0, {})])
        elif hostile == "error":
            _answer(handler, behaviour.mode, [_error(request_id, -32602, "Unknown tool: invalid_tool_name")])
        else:
            self._respond(handler, behaviour, message, request_id)

    def _respond(self, handler: BaseHTTPRequestHandler, behaviour: McpBehaviour, message: Any, request_id: Any) -> None:
        method, params = message.get("method"), message.get("params") or {}
        headers: dict[str, str] = {}
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": behaviour.protocol_version,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "fake-mcp", "version": "1"},
            }
            if behaviour.session:
                session = f"sess-{uuid.uuid4().hex}"
                with self._lock:
                    self.sessions.add(session)
                    self.opened.append(session)
                headers["Mcp-Session-Id"] = session
        elif method == "tools/list":
            start = int(params.get("cursor") or 0)
            size = behaviour.page_size or len(behaviour.tools) or 1
            result = {"tools": behaviour.tools[start : start + size]}
            if start + size < len(behaviour.tools):
                result["nextCursor"] = str(start + size)
        elif method == "tools/call":
            with self._lock:
                delay = behaviour.call_delays.pop(0) if behaviour.call_delays else 0.0
            if delay:
                time.sleep(delay)  # a slow system; the client may leave (a worker killed meanwhile)
            name, arguments = params.get("name"), params.get("arguments") or {}
            if name in behaviour.results:
                result = behaviour.results[name]
            elif any(tool["name"] == name for tool in behaviour.tools):
                text = json.dumps(arguments)
                result = {"content": [{"type": "text", "text": text}], "structuredContent": {"echo": arguments}}
            else:
                _answer(handler, behaviour.mode, [_error(request_id, -32602, f"Unknown tool: {name}")], headers)
                return
        else:
            _answer(handler, behaviour.mode, [_error(request_id, -32601, "Method not found")], headers)
            return
        _answer(handler, behaviour.mode, [_result(request_id, result)], headers)


def _result(request_id: Any, result: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()


def _error(request_id: Any, code: int, message: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}).encode()


def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    handler.send_response(status)
    headers = {"Content-Type": "application/json", **(headers or {})}
    for name, value in headers.items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _answer(
    handler: BaseHTTPRequestHandler, mode: str, messages: list[bytes], headers: dict[str, str] | None = None
) -> None:
    if mode == "json":
        _send(handler, 200, messages[-1], headers)
        return
    # An event stream as servers send them: a priming event, a comment, a notification, a response to an id that is
    # not the request's, then each message; CRLF and LF line ends both.
    notification = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "working"}})
    stray = json.dumps({"jsonrpc": "2.0", "id": 987654, "result": {"tools": []}})
    events = [b"id: 0\r\ndata:\r\n\r\n", b": keep-alive\n\n", f"event: message\ndata: {notification}\n\n".encode()]
    events.append(f"data: {stray}\n\n".encode())
    events += [b"event: message\r\nid: 1\r\ndata: " + message + b"\r\n\r\n" for message in messages]
    _send(handler, 200, b"".join(events), {"Content-Type": "text/event-stream", **(headers or {})})


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _endless(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    notification = json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}})
    stop = time.monotonic() + 30
    try:
        while time.monotonic() < stop:
            handler.wfile.write(_chunk(b": keep-alive\n\n" + f"data: {notification}\n\n".encode()))
            handler.wfile.flush()
            time.sleep(0.05)
    except OSError:
        pass  # the client left
    handler.close_connection = True


def _huge(handler: BaseHTTPRequestHandler, mode: str, request_id: Any) -> None:
    padding = "x" * (MIB + MIB // 2)
    message = _result(request_id, {"tools": [], "padding": padding})
    if mode == "json":
        _send(handler, 200, message)
        return
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    data = b"data: " + message + b"\n\n"
    try:
        for start in range(0, len(data), 64 * 1024):
            handler.wfile.write(_chunk(data[start : start + 64 * 1024]))
        handler.wfile.write(b"0\r\n\r\n")
    except OSError:
        pass
    handler.close_connection = True
