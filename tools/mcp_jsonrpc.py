"""An MCP server's answers read as JSON-RPC 2.0 over Streamable HTTP, and every failure as an `McpError`: the event
stream's `message` events, the JSON-RPC messages of an answer (`application/json` or `text/event-stream`, batches one
level deep), the response to a request's id, the session id a server gives, and a JSON-RPC error with its detail
cleaned and masked. The protocol versions asked for and accepted are here too; the session that sends the requests and
the two operations are tools/mcp_client.py's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

from kagent.egress import EgressResponse
from kagent.masking import mask_secrets
from tools.shaping import clean_text

PROTOCOL_VERSION: Final = "2025-11-25"
SUPPORTED_VERSIONS: Final = frozenset({"2025-11-25", "2025-06-18", "2025-03-26"})
MAX_DETAIL_CHARS: Final = 500

MESSAGES: Final = {
    "mcp_protocol_error": "the MCP server's answer is not MCP over Streamable HTTP (JSON-RPC 2.0)",
    "mcp_error": "the MCP server answered the request with an error",
    "mcp_unsupported_version": "the MCP server speaks no protocol version K-Agent supports "
    f"({', '.join(sorted(SUPPORTED_VERSIONS))})",
    "upstream_status": "the MCP server answered with an HTTP error status",
    "upstream_rate_limited": "the MCP server is limiting requests (HTTP 429)",
    "header_not_allowed": "a header of the MCP server's configuration is set by K-Agent or not allowed",
    "invalid_arguments": "the arguments can't be sent as JSON",
    "timeout": "the MCP server did not answer in time",
}


class McpError(Exception):
    """A listing or a call that did not complete. `message` is safe to show a tenant; `detail` (the server's own
    error text, cleaned, cut and masked) is for the run steps; `may_have_reached_upstream` says whether a
    `tools/call` may have reached the server (a retry must then reuse the call's id)."""

    def __init__(
        self,
        code: str,
        message: str = "",
        *,
        status: int | None = None,
        rpc_code: int | None = None,
        detail: str = "",
        may_have_reached_upstream: bool = False,
    ) -> None:
        self.code = code
        self.message = message or MESSAGES.get(code, MESSAGES["mcp_protocol_error"])
        super().__init__(f"{code}: {self.message}")
        self.status = status
        self.rpc_code = rpc_code
        self.detail = detail
        self.may_have_reached_upstream = may_have_reached_upstream


def protocol_error(detail: str) -> McpError:
    return McpError("mcp_protocol_error", detail=detail)


# --- the event stream -------------------------------------------------------------------------------------------


def sse_event_data(body: bytes) -> Iterator[str]:
    """The data of each `message` event of an event stream, in order (WHATWG HTML, "Event stream interpretation").
    One pass over the lines: comments, `id`, `retry` and unknown fields are skipped, an event with empty data (a
    server's priming event) is not dispatched, and neither is an event the stream ends in the middle of."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise protocol_error("the event stream is not UTF-8") from exc
    text = text.removeprefix("\ufeff")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines.pop()  # what follows the last line break: an unfinished line, discarded at the end of the stream
    data: list[str] = []
    event_type = ""
    for line in lines:
        if not line:
            joined = "\n".join(data)
            if joined and event_type in ("", "message"):
                yield joined
            data, event_type = [], ""
        elif not line.startswith(":"):
            name, colon, value = line.partition(":")
            if colon and value.startswith(" "):
                value = value[1:]
            if name == "data":
                data.append(value)
            elif name == "event":
                event_type = value


# --- one answer -------------------------------------------------------------------------------------------------


def _json(text: str | bytes) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the parser goes
        raise protocol_error("a message is not JSON") from exc


def _messages(response: EgressResponse) -> Iterator[Any]:
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    parsed: Iterable[Any]
    if content_type == "application/json":
        parsed = [_json(response.body)]
    elif content_type == "text/event-stream":
        parsed = (_json(data) for data in sse_event_data(response.body))
    else:
        raise protocol_error("the answer is neither application/json nor text/event-stream")
    for message in parsed:
        # A JSON-RPC batch (2025-03-26 allowed them): its members, one level only.
        yield from (message if isinstance(message, list) else [message])


def _is_response_to(message: Any, request_id: int) -> bool:
    return (
        isinstance(message, dict)
        and "method" not in message
        and type(message.get("id")) is int
        and message["id"] == request_id
    )


def rpc_response(response: EgressResponse, request_id: int) -> dict[str, Any]:
    """The JSON-RPC response to `request_id` in the answer; anything else in it (notifications, the server's own
    requests, responses to other ids) is ignored."""
    for message in _messages(response):
        if _is_response_to(message, request_id):
            if message.get("jsonrpc") != "2.0" or ("result" in message) == ("error" in message):
                raise protocol_error("the response is not a JSON-RPC 2.0 response")
            return dict(message)
    raise protocol_error("the answer holds no response to the request")


def session_id_of(response: EgressResponse) -> str | None:
    """The server's session id: visible ASCII only (the transport's rule), else the answer is not MCP."""
    value = response.headers.get("mcp-session-id")
    if value is None:
        return None
    if not value or len(value) > 1024 or not value.isascii() or not all("\x21" <= ch <= "\x7e" for ch in value):
        raise protocol_error("the session id is not visible ASCII")
    return value


def cleaned(text: str, secret_values: Sequence[str]) -> str:
    cut = clean_text(text[: MAX_DETAIL_CHARS * 4], keep_joiners=True)
    return mask_secrets(cut, tuple(secret_values))[:MAX_DETAIL_CHARS]


def rpc_error(error: Any, secret_values: Sequence[str]) -> McpError:
    if not isinstance(error, dict) or type(error.get("code")) is not int or not isinstance(error.get("message"), str):
        return protocol_error("the JSON-RPC error is not an error object")
    code: int = error["code"]
    return McpError(
        "mcp_error",
        f"{MESSAGES['mcp_error']} (JSON-RPC error {code})" if -(2**53) < code < 2**53 else MESSAGES["mcp_error"],
        rpc_code=code,
        detail=cleaned(error["message"], secret_values),
    )
