"""A scripted model server on loopback: OpenAI Chat Completions and Anthropic Messages, real HTTP (or HTTPS).

It runs in a thread of the test process (or alone: `python -m fakes.llm`), so in-process tests and a real
Celery worker process (given `KAGENT_LLM_BASE_URL=http://127.0.0.1:<port>/v1`) talk to the same server.

Scripting. A test registers a script, a list of turns, under a key:

    fake.script("order-flow", [
        calls(("order_status", {"order_number": "8812"})),
        text("Order 8812 has shipped."),
    ])

and the conversation names its script, checked in this order:
  1. the request's model name is `script:<key>` (an agent's `model.name`, or `KAGENT_LLM_MODEL` for a worker), or
  2. the first `[script:<key>]` marker in the system prompt or a user message (e.g. the run's input).

Stateless per conversation: the answer is turn number N, where N is the number of assistant messages already in the
request. A run resumed after a worker crash sends the same transcript and gets the same answer; tool call ids are
stable too (`call_<key>_<N>_<i>`). The script is followed even when `tool_choice` is "none", so tests can script a
model that misbehaves.

Faults. A turn may carry `faults`: the first attempts at that turn get them, one per attempt (HTTP status with an
error body, a delay longer than the client's timeout, malformed JSON), then the turn answers normally. That attempt
counter per (key, turn) is the server's only state.

Every request is recorded (`requests()`), so tests can assert the tools offered, `tool_choice`, the system prompt
and the tool results the model was shown. `record=False` and `latency_s=0` (the defaults for `zero_latency()`) make
it a benchmark stand-in with nothing kept in memory.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import ssl
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Literal

from fakes.tls_server import TLSThreadingHTTPServer

Protocol = Literal["openai", "anthropic"]
_MARKER_RE = re.compile(r"\[script:([A-Za-z0-9_.\-]+)\]")
_MODEL_PREFIX = "script:"


# --- Scripts ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fault:
    """What one attempt at a turn gets instead of the answer."""

    status: int | None = None  # answer this HTTP status with an error body
    delay_s: float = 0.0  # wait first (longer than the client's timeout: a timeout); alone, then answer normally
    malformed: bool = False  # answer 200 with a body that is not JSON
    retry_after: float | None = None  # a Retry-After header (with status 429)
    body: str | None = None  # the error body, verbatim (default: a JSON error naming the fault)


@dataclass(frozen=True)
class ToolCall:
    name: str
    # A dict is sent as JSON text; a str verbatim (it may be invalid JSON); None leaves `arguments` out.
    arguments: dict[str, Any] | str | None = field(default_factory=dict)


@dataclass(frozen=True)
class Turn:
    text: str | None = None  # None with tool calls: `content: null`, as real servers send
    tool_calls: tuple[ToolCall, ...] = ()
    faults: tuple[Fault, ...] = ()
    raw: dict[str, Any] | None = None  # the whole answer body, verbatim, for shapes real servers send
    usage: tuple[int, int] | None = None  # (input, output) tokens; default: word counts

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Turn:
        """A turn from JSON (for `--scripts` files): {"text"}, {"tool_calls": [{"name", "arguments"}]}, "faults"."""
        return Turn(
            text=data.get("text"),
            tool_calls=tuple(ToolCall(c["name"], c.get("arguments", {})) for c in data.get("tool_calls", [])),
            faults=tuple(Fault(**f) for f in data.get("faults", [])),
            raw=data.get("raw"),
            usage=(int(data["usage"][0]), int(data["usage"][1])) if data.get("usage") else None,
        )


def text(content: str, *, faults: Sequence[Fault] = (), usage: tuple[int, int] | None = None) -> Turn:
    """A turn that answers `content` with no tool calls."""
    return Turn(text=content, faults=tuple(faults), usage=usage)


def calls(
    *tool_calls: ToolCall | tuple[str, dict[str, Any] | str | None],
    text: str | None = None,
    faults: Sequence[Fault] = (),
) -> Turn:
    """A turn that asks for tool calls: `calls(("order_status", {"order_number": "8812"}), ...)`."""
    items = tuple(c if isinstance(c, ToolCall) else ToolCall(c[0], c[1]) for c in tool_calls)
    return Turn(text=text, tool_calls=items, faults=tuple(faults))


def raw(body: dict[str, Any], *, faults: Sequence[Fault] = ()) -> Turn:
    """A turn answered with exactly `body` (e.g. a tool call without arguments, `content: null`, no usage)."""
    return Turn(raw=body, faults=tuple(faults))


# --- What was received --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    protocol: Protocol
    path: str
    headers: dict[str, str]  # lower-case names
    body: dict[str, Any]  # the parsed JSON ({} if it wasn't JSON)
    script: str | None
    turn: int  # the number of assistant messages in the request
    attempt: int  # 1 for the first request at this (script, turn)
    status: int  # what the fake answered
    raw_body: bytes = b""  # the bytes as sent (what a request signature covers)

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def messages(self) -> list[dict[str, Any]]:
        value = self.body.get("messages")
        return value if isinstance(value, list) else []

    @property
    def tool_names(self) -> list[str]:
        """The names of the tools offered, in order."""
        names: list[str] = []
        for tool in self.body.get("tools") or []:
            function = tool.get("function") if self.protocol == "openai" else tool
            names.append(str((function or {}).get("name", "")))
        return names

    @property
    def tool_choice(self) -> Any:
        return self.body.get("tool_choice")

    @property
    def system(self) -> str:
        """The system prompt (OpenAI: the system messages joined; Anthropic: the top-level `system`)."""
        if self.protocol == "anthropic":
            return _text_of(self.body.get("system"))
        return "\n".join(_text_of(m.get("content")) for m in self.messages if m.get("role") == "system")

    @property
    def user_texts(self) -> list[str]:
        return [_text_of(m.get("content"), only_text=True) for m in self.messages if m.get("role") == "user"]

    @property
    def tool_results(self) -> list[dict[str, Any]]:
        """Every tool result in the request, in order: {"tool_call_id", "content"} (content as the model saw it)."""
        out: list[dict[str, Any]] = []
        for message in self.messages:
            if self.protocol == "openai" and message.get("role") == "tool":
                out.append({"tool_call_id": message.get("tool_call_id"), "content": message.get("content")})
            elif self.protocol == "anthropic" and isinstance(message.get("content"), list):
                for block in message["content"]:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        out.append(
                            {
                                "tool_call_id": block.get("tool_use_id"),
                                "content": block.get("content"),
                                "is_error": bool(block.get("is_error")),
                            }
                        )
        return out

    @property
    def new_tool_results(self) -> list[dict[str, Any]]:
        """The tool results after the last assistant message: what the model is answering now."""
        ids: set[Any] = set()
        for message in reversed(self.messages):
            if message.get("role") != "assistant":
                continue
            if self.protocol == "openai":
                ids = {c.get("id") for c in message.get("tool_calls") or []}
            else:
                ids = {b.get("id") for b in message.get("content") or [] if isinstance(b, dict)}
            break
        return [r for r in self.tool_results if r["tool_call_id"] in ids]


def _text_of(content: Any, *, only_text: bool = False) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and (b.get("type") == "text" or not only_text)
        )
    return ""


def _words(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).split()) if value else 0


# --- The server ---------------------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a benchmark's client reuses its connection
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Without this, a small answer written in two pieces can wait ~40 ms on Nagle + delayed ACK.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        return

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True  # the client gave up (a timeout fault): nothing to answer

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, json.dumps({"object": "list", "data": [{"id": "fake", "object": "model"}]}).encode())
        else:
            self._send(404, b'{"error": {"message": "not found"}}')

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        payload = self.rfile.read(length) if length else b""
        route = self.path.split("?", 1)[0].rstrip("/")
        if route.endswith("/chat/completions"):
            protocol: Protocol = "openai"
        elif route.endswith("/messages"):
            protocol = "anthropic"
        else:
            self._send(404, b'{"error": {"message": "not found"}}')
            return
        status, body, headers = self.server.fake.answer(
            protocol=protocol,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            payload=payload,
        )
        if isinstance(body, Stream):
            self._stream(body)
        else:
            self._send(status, body, headers)

    def _stream(self, stream: Stream) -> None:
        """An event stream, chunked, each event a chunk as soon as it is made; `chunk_delay_s` between the events
        that carry the answer's text (a model writing)."""
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            for event in stream.events:
                if event.delay and self.server.fake.chunk_delay_s:
                    time.sleep(self.server.fake.chunk_delay_s)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event.data), event.data))
                self.wfile.flush()
                if self.server.fake.stream_log is not None:
                    self.server.fake.stream_log.append((time.time(), event.data))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True


class _Server(TLSThreadingHTTPServer):
    request_queue_size = 128  # a benchmark opens many connections at once
    fake: FakeLLM


class FakeLLM:
    """The scripted model server. `start()` binds and serves in a daemon thread; `port=0` picks a free port."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        server_name: str | None = None,
        record: bool = True,
        latency_s: float = 0.0,
        chunk_delay_s: float = 0.0,
    ) -> None:
        self.ssl_context = ssl_context
        self.record = record
        self.latency_s = latency_s
        self.chunk_delay_s = chunk_delay_s  # between a streamed answer's text events
        # When a list: (time.time(), the event) of every streamed event as it was written (bench/stream_latency.py).
        self.stream_log: list[tuple[float, bytes]] | None = None
        self._scripts: dict[str, tuple[Turn, ...]] = {}
        self._attempts: dict[tuple[str, int], int] = {}
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._local = threading.local()
        self._server = _Server((host, port), _Handler)
        self._server.fake = self
        self._server.ssl_context = self.ssl_context
        self.host, self.port = host, int(self._server.server_address[1])
        # The name clients use in URLs (an HTTPS fake is reached by a name on its certificate, e.g. llm.test).
        self.server_name = server_name or host
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @classmethod
    def zero_latency(cls, **kwargs: Any) -> FakeLLM:
        """For benchmarks: no simulated latency, nothing recorded (memory stays flat over many runs)."""
        return cls(record=False, latency_s=0.0, **kwargs)

    # --- lifecycle ---

    def start(self) -> FakeLLM:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def origin(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self.server_name}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (`…/v1`); Chat Completions is `base_url + /chat/completions`."""
        return f"{self.origin}/v1"

    def worker_env(self, *, model: str = "fake-model", api_key: str = "fake-operator-key") -> dict[str, str]:
        """Environment for a Celery worker process that should use this server as the operator's model."""
        return {"KAGENT_LLM_BASE_URL": self.base_url, "KAGENT_LLM_API_KEY": api_key, "KAGENT_LLM_MODEL": model}

    # --- scripting and inspection ---

    def script(self, key: str, turns: Iterable[Turn]) -> str:
        """Register (or replace) the script `key`; returns the marker to put in a message: `[script:<key>]`."""
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", key):
            raise ValueError("script keys are letters, digits, _ . -")
        with self._lock:
            self._scripts[key] = tuple(turns)
            self._attempts = {k: v for k, v in self._attempts.items() if k[0] != key}
        return f"[script:{key}]"

    def reset(self) -> None:
        with self._lock:
            self._scripts.clear()
            self._attempts.clear()
            self._requests.clear()

    def requests(self, script: str | None = None) -> list[RecordedRequest]:
        """Every request received (of one script if given), oldest first."""
        with self._lock:
            return [r for r in self._requests if script is None or r.script == script]

    def last_request(self, script: str | None = None) -> RecordedRequest:
        found = self.requests(script)
        if not found:
            raise AssertionError(f"the fake model received no request{f' for {script}' if script else ''}")
        return found[-1]

    # --- answering ---

    def answer(
        self, *, protocol: Protocol, path: str, headers: dict[str, str], payload: bytes
    ) -> tuple[int, bytes | Stream, dict[str, str]]:
        if self.latency_s:
            time.sleep(self.latency_s)
        self._local.payload = payload  # one request at a time per handler thread
        try:
            body = json.loads(payload)
            if not isinstance(body, dict):
                raise ValueError
        except ValueError:
            return self._finish(protocol, path, headers, {}, None, 0, 1, 400, _error(protocol, "body is not JSON"))
        messages: list[Any] = body["messages"] if isinstance(body.get("messages"), list) else []
        turn_index = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
        key = _script_key(protocol, body)
        with self._lock:
            turns = self._scripts.get(key) if key else None
            attempt = self._attempts.get((key or "", turn_index), 0) + 1
            self._attempts[(key or "", turn_index)] = attempt
        if turns is None:
            message = f"no script {key!r} is registered" if key else "no [script:<key>] marker and no script: model"
            return self._finish(protocol, path, headers, body, key, turn_index, attempt, 400, _error(protocol, message))
        assert key is not None
        if turn_index >= len(turns):
            message = f"script {key!r} has {len(turns)} turns; the conversation asks for turn {turn_index}"
            return self._finish(protocol, path, headers, body, key, turn_index, attempt, 400, _error(protocol, message))
        turn = turns[turn_index]
        if attempt <= len(turn.faults):
            fault = turn.faults[attempt - 1]
            if fault.delay_s:
                time.sleep(fault.delay_s)
            if fault.status is not None:
                extra = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
                error = (
                    fault.body.encode()
                    if fault.body is not None
                    else _error(protocol, f"injected fault {fault.status}")
                )
                return self._finish(protocol, path, headers, body, key, turn_index, attempt, fault.status, error, extra)
            if fault.malformed:
                return self._finish(
                    protocol, path, headers, body, key, turn_index, attempt, 200, b'{"choices": [{"message": '
                )
        if turn.raw is not None:
            answer = turn.raw
        elif protocol == "openai":
            answer = _openai_answer(key, turn_index, turn, body)
        else:
            answer = _anthropic_answer(key, turn_index, turn, body)
        if body.get("stream") is True and turn.raw is None:
            # Streamed as the real servers stream: Server-Sent Events, one event a chunk (`_Handler._stream`).
            events = _openai_events(answer) if protocol == "openai" else _anthropic_events(answer)
            self._finish(protocol, path, headers, body, key, turn_index, attempt, 200, b"")
            return 200, Stream(events), {}
        encoded = json.dumps(answer).encode()  # ASCII with \u escapes: any string survives, as from real servers
        return self._finish(protocol, path, headers, body, key, turn_index, attempt, 200, encoded)

    def _finish(
        self,
        protocol: Protocol,
        path: str,
        headers: dict[str, str],
        body: dict[str, Any],
        key: str | None,
        turn: int,
        attempt: int,
        status: int,
        answer: bytes,
        extra_headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes, dict[str, str]]:
        if self.record:
            recorded = RecordedRequest(
                protocol=protocol,
                path=path,
                headers=headers,
                body=body,
                script=key,
                turn=turn,
                attempt=attempt,
                status=status,
                raw_body=getattr(self._local, "payload", b""),
            )
            with self._lock:
                self._requests.append(recorded)
        return status, answer, dict(extra_headers or {})


def _script_key(protocol: Protocol, body: dict[str, Any]) -> str | None:
    model = body.get("model")
    if isinstance(model, str) and model.startswith(_MODEL_PREFIX):
        return model[len(_MODEL_PREFIX) :]
    texts: list[str] = []
    if protocol == "anthropic":
        texts.append(_text_of(body.get("system")))
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") in ("system", "user"):
            texts.append(_text_of(message.get("content"), only_text=True))
    for chunk in texts:
        match = _MARKER_RE.search(chunk)
        if match:
            return match.group(1)
    return None


def _error(protocol: Protocol, message: str) -> bytes:
    if protocol == "anthropic":
        return json.dumps({"type": "error", "error": {"type": "api_error", "message": message}}).encode()
    return json.dumps({"error": {"message": message, "type": "fake_error", "code": None}}).encode()


def _arguments_text(arguments: dict[str, Any] | str | None) -> str | None:
    if arguments is None or isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)


def _usage(turn: Turn, body: dict[str, Any]) -> tuple[int, int]:
    if turn.usage is not None:
        return turn.usage
    output = _words(turn.text) + sum(_words(c.arguments) + 1 for c in turn.tool_calls)
    return _words(body.get("messages")) + _words(body.get("system")), output


def _openai_answer(key: str, index: int, turn: Turn, body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text}
    if turn.tool_calls:
        tool_calls = []
        for i, call in enumerate(turn.tool_calls):
            function: dict[str, Any] = {"name": call.name}
            arguments = _arguments_text(call.arguments)
            if arguments is not None:
                function["arguments"] = arguments
            tool_calls.append({"id": f"call_{key}_{index}_{i}", "type": "function", "function": function})
        message["tool_calls"] = tool_calls
    elif message["content"] is None:
        message["content"] = ""
    prompt, completion = _usage(turn, body)
    return {
        "id": f"chatcmpl-{key}-{index}",
        "object": "chat.completion",
        "created": 0,
        "model": str(body.get("model", "")),
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if turn.tool_calls else "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


def _anthropic_answer(key: str, index: int, turn: Turn, body: dict[str, Any]) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if turn.text:
        content.append({"type": "text", "text": turn.text})
    for i, call in enumerate(turn.tool_calls):
        arguments = call.arguments
        parsed = json.loads(arguments) if isinstance(arguments, str) else (arguments or {})
        content.append({"type": "tool_use", "id": f"call_{key}_{index}_{i}", "name": call.name, "input": parsed})
    prompt, completion = _usage(turn, body)
    return {
        "id": f"msg_{key}_{index}",
        "type": "message",
        "role": "assistant",
        "model": str(body.get("model", "")),
        "content": content,
        "stop_reason": "tool_use" if turn.tool_calls else "end_turn",
        "usage": {"input_tokens": prompt, "output_tokens": completion},
    }


# --- Streamed answers -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamEvent:
    data: bytes  # the event as sent: `event:`/`data:` lines and the blank line
    delay: bool = False  # a piece of the answer's text: the fake's chunk_delay_s before it


@dataclass(frozen=True)
class Stream:
    events: list[StreamEvent]


def _sse(data: dict[str, Any] | str, event: str | None = None, *, delay: bool = False) -> StreamEvent:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return StreamEvent(f"{head}data: {payload}\n\n".encode(), delay)


def _pieces(text: str) -> list[str]:
    """The text as a model streams it: a word (with the space before it) at a time."""
    return re.findall(r"\s*\S+|\s+$", text) or ([text] if text else [])  # linear: one class per branch


def _openai_events(answer: dict[str, Any]) -> list[StreamEvent]:
    """A Chat Completions answer as `stream: true` sends it (with `stream_options.include_usage`)."""
    choice = answer["choices"][0]
    message = choice["message"]
    base = {"id": answer["id"], "object": "chat.completion.chunk", "created": 0, "model": answer["model"]}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events = [_sse(chunk({"role": "assistant", "content": ""}))]
    for piece in _pieces(message.get("content") or ""):
        events.append(_sse(chunk({"content": piece}), delay=True))
    for i, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        first: dict[str, Any] = {
            "index": i,
            "id": call["id"],
            "type": "function",
            "function": {"name": function["name"]},
        }
        arguments = function.get("arguments")
        if arguments is not None:
            first["function"]["arguments"] = ""
        events.append(_sse(chunk({"tool_calls": [first]})))
        if arguments:
            half = len(arguments) // 2
            for part in (arguments[:half], arguments[half:]):
                events.append(_sse(chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]})))
    events.append(_sse(chunk({}, choice["finish_reason"])))
    events.append(_sse({**base, "choices": [], "usage": answer["usage"]}))
    events.append(_sse("[DONE]"))
    return events


def _anthropic_events(answer: dict[str, Any]) -> list[StreamEvent]:
    """A Messages answer as `stream: true` sends it."""
    usage = answer["usage"]
    start = {
        **answer,
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 0},
    }
    events = [_sse({"type": "message_start", "message": start}, "message_start")]
    for index, block in enumerate(answer["content"]):
        if block["type"] == "text":
            opening = {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
            events.append(_sse(opening, "content_block_start"))
            for piece in _pieces(block["text"]):
                delta = {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}
                events.append(_sse(delta, "content_block_delta", delay=True))
        else:
            opening = {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}},
            }
            events.append(_sse(opening, "content_block_start"))
            partial = json.dumps(block["input"])
            half = len(partial) // 2
            for part in (partial[:half], partial[half:]):
                delta = {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": part},
                }
                events.append(_sse(delta, "content_block_delta"))
        events.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    ending = {
        "type": "message_delta",
        "delta": {"stop_reason": answer["stop_reason"]},
        "usage": {"output_tokens": usage["output_tokens"]},
    }
    events.append(_sse(ending, "message_delta"))
    events.append(_sse({"type": "message_stop"}, "message_stop"))
    return events


# --- HTTPS on loopback (Anthropic and tenant base_urls go through the hardened client: https only) ---------------


def write_tls_files(directory: Path, *names: str) -> tuple[Path, Path, Path]:
    """A trustme CA and a server certificate for `names`: (ca.pem, server.pem with chain, server.key)."""
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert(*names)
    directory.mkdir(parents=True, exist_ok=True)
    ca_path, cert_path, key_path = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    ca.cert_pem.write_to_path(str(ca_path))
    cert.private_key_pem.write_to_path(str(key_path))
    cert_path.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    return ca_path, cert_path, key_path


def tls_context(cert_path: Path, key_path: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_path, key_path)
    return context


def bind_tls(
    *, ssl_context: ssl.SSLContext, server_name: str, port: int = 8443, hosts: Sequence[str] | None = None
) -> FakeLLM:
    """An HTTPS fake on the first loopback address with `port` free (the hardened client allows only 443 and 8443;
    other test sessions on this machine may hold 8443 on some addresses)."""
    candidates = hosts or [f"127.0.0.{n}" for n in range(10, 60)]
    last: OSError | None = None
    for host in candidates:
        try:
            return FakeLLM(host=host, port=port, ssl_context=ssl_context, server_name=server_name).start()
        except OSError as exc:
            last = exc
    raise RuntimeError(f"no loopback address has port {port} free: {last}")


# --- Alone, in its own process (benchmarks) -----------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A scripted OpenAI-compatible model server on loopback")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--scripts", type=Path, help='JSON: {"key": [turn, ...]}, turns as in Turn.from_dict')
    parser.add_argument("--record", action="store_true", help="keep every request in memory (off by default)")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--chunk-delay-ms", type=float, default=0.0, help="between a streamed answer's text events")
    args = parser.parse_args(argv)
    fake = FakeLLM(
        port=args.port,
        record=args.record,
        latency_s=args.latency_ms / 1000,
        chunk_delay_s=args.chunk_delay_ms / 1000,
    )
    if args.scripts:
        for key, turns in json.loads(args.scripts.read_text()).items():
            fake.script(key, [Turn.from_dict(t) for t in turns])
    fake.start()
    print("ready", fake.base_url, flush=True)
    try:
        sys.stdin.read()  # serve until the parent closes our stdin
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
