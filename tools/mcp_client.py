"""A business's MCP server, reached over MCP Streamable HTTP through the hardened outbound client (SPEC §6, "MCP
servers"; issue 28).

Two operations, each its own short session:
- `list_tools`: `initialize` -> `notifications/initialized` -> `tools/list`, following `nextCursor` for at most
  `MAX_PAGES` pages and `MAX_TOOLS` tools (more is cut, and the listing says so).
- `call_tool`: `initialize` -> `notifications/initialized` -> `tools/call`; the result's text parts,
  `structuredContent` and `isError`.

Every request is one POST through `kagent.egress` (purpose "mcp"): https only, the deny list after DNS, ports, no
redirects, one deadline, answers over 1 MiB refused while streaming, each attempt in the egress log. Like every call
to a tenant URL it carries Standard Webhooks headers made with the project's tool signing secret and
`User-Agent: K-Agent/1` (SPEC §6 "Signing"); each request of a session is signed under its own `webhook-id`
(`<id>.initialize`, `<id>.initialized`, `<id>.list.<page>`, `<id>.close`), and a tool call's `tools/call` under the
call's own id, so a business deduplicating by `webhook-id` sees a retried call as the same call.

Protocol: the initialize handshake era of MCP (2025-03-26 to 2025-11-25; `PROTOCOL_VERSION` is asked for, any of
`SUPPORTED_VERSIONS` accepted). The `Mcp-Session-Id` the server gives at initialization is sent on every later request
of the session, with `MCP-Protocol-Version`, and the session is ended with the transport's DELETE when the operation is
over (best effort: a server may keep a session until told). An answer is `application/json` or `text/event-stream`; from
a stream the JSON-RPC response whose id is the request's is taken, notifications and the server's own requests are
ignored. The stream is read whole within the egress client's limits (1 MiB, the deadline), so a server that never ends
it ends by the deadline (`timeout`). Not spoken: the stateless 2026-07-28 revision, resuming a broken stream, the GET
stream.

Every failure is an `McpError` with a stable `code` and a `message` a tenant may read (never an address): the egress
codes as a tenant is shown them (`shown_code`), `upstream_status` / `upstream_rate_limited` for an HTTP status,
`mcp_error` for a JSON-RPC error (its code in `rpc_code`, its message cleaned in `detail`, for the run steps),
`mcp_protocol_error` for anything that is not MCP, `mcp_unsupported_version`, `header_not_allowed`, and the signing
codes (a call is never sent unsigned). `McpError`, the protocol versions and the reading of an answer (the event
stream, the JSON-RPC response to a request) are tools/mcp_jsonrpc.py's; the session and the operations are here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kagent.egress import (
    TENANT_MESSAGES,
    USER_AGENT,
    EgressClient,
    EgressError,
    EgressResponse,
    Recorder,
    get_client,
    is_tenant_forbidden_header,
    shown_code,
    tenant_code,
)
from kagent.signing import SigningError, webhook_headers
from tools.mcp_jsonrpc import (
    MESSAGES,
    PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
    McpError,
    cleaned,
    protocol_error,
    rpc_error,
    rpc_response,
    session_id_of,
)

PURPOSE: Final = "mcp"
CLIENT_INFO: Final = {"name": "K-Agent", "version": "1"}
TIMEOUT_MS: Final = 10_000  # the whole session: every request gets what is left of it
MAX_TOOLS: Final = 500
MAX_PAGES: Final = 10
MAX_CURSOR_CHARS: Final = 4096
MAX_DESCRIPTION_CHARS: Final = 4000
CLOSE_TIMEOUT_MS: Final = 2000
# Headers the MCP transport sets itself: a server's configured headers may not set them (nor what no tenant may).
MCP_HEADERS: Final = frozenset({"accept", "content-type", "mcp-session-id", "mcp-protocol-version", "last-event-id"})

_SIGNING_MESSAGE = "the project's tool signing secret is missing or not valid, so nothing was sent"


@dataclass(frozen=True)
class McpServer:
    """Where a server is and how to reach it: `url` (https), `headers` with secrets already in them, and those
    secrets' values (masked in the egress log's path and in an error's detail)."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    secret_values: tuple[str, ...] = ()


@dataclass(frozen=True)
class McpListing:
    tools: list[dict[str, Any]]  # {"name", "description", "input_schema"}, in the server's order
    truncated: bool  # the server listed more than MAX_TOOLS tools or MAX_PAGES pages: the rest is not here
    protocol_version: str


@dataclass(frozen=True)
class McpCallResult:
    texts: list[str]  # the `text` of each text part of `content`, in order
    structured_content: Any  # `structuredContent` as sent; None when absent
    is_error: bool  # the tool itself failed (`isError`): its texts say why
    other_parts: int  # content parts that are not text (images, audio, resources): counted, not kept


# --- one session ------------------------------------------------------------------------------------------------


class _Session:
    def __init__(
        self,
        *,
        server: McpServer,
        project_id: str | None,
        signing_secrets: Sequence[str],
        message_id: str,
        client: EgressClient | None,
        clock: Callable[[], float],
        record: Recorder | None,
        timeout_ms: int,
        before_send: Callable[[], None] | None,
    ) -> None:
        self.server = server
        self.project_id = project_id
        self.signing_secrets = signing_secrets
        self.message_id = message_id
        self.client = client or get_client()
        self.clock = clock
        self.record = record
        self.deadline = time.monotonic() + timeout_ms / 1000
        self.before_send = before_send
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.last_id = 0
        self.headers = _configured_headers(server.headers)

    def open(self) -> None:
        result = self.request(
            "initialize",
            {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO},
            suffix=".initialize",
        )
        version = result.get("protocolVersion")
        if not isinstance(version, str) or version not in SUPPORTED_VERSIONS:
            raise McpError("mcp_unsupported_version", detail=cleaned(str(version)[:40], ()))
        self.protocol_version = version
        # The session id came with the InitializeResult (`request` kept it); from now on it goes with every request.
        self.notify("notifications/initialized", suffix=".initialized")

    def request(self, method: str, params: dict[str, Any], *, suffix: str, is_call: bool = False) -> dict[str, Any]:
        """One JSON-RPC request and its `result`. `is_call`: a tools/call, whose failures say whether it may have
        reached the server."""
        self.last_id += 1
        request_id = self.last_id
        payload = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        response = self._post(payload, suffix=suffix, is_call=is_call)
        try:
            message = rpc_response(response, request_id)
            if method == "initialize":
                self.session_id = session_id_of(response)
            if "error" in message:
                raise rpc_error(message["error"], self.server.secret_values)
            result = message["result"]
            if not isinstance(result, dict):
                raise protocol_error("the result is not an object")
        except McpError as exc:
            exc.may_have_reached_upstream = is_call
            exc.status = response.status
            raise
        return result

    def close(self) -> None:
        """Ends the server's session, when it gave one (the transport's HTTP DELETE: a server may keep a session until
        told), within what is left of the budget and at most CLOSE_TIMEOUT_MS. Best effort: its failure changes
        nothing of the outcome (it is in the egress log)."""
        left_ms = min(int((self.deadline - time.monotonic()) * 1000), CLOSE_TIMEOUT_MS)
        if self.session_id is None or left_ms <= 0:
            return
        try:
            headers = self._headers(self.message_id + ".close", b"")
            self.client.request(
                project_id=self.project_id,
                purpose=PURPOSE,
                method="DELETE",
                url=self.server.url,
                headers=headers,
                body=None,
                timeout_ms=left_ms,
                secret_values=self.server.secret_values,
                record=self.record,
            )
        except (McpError, EgressError):
            return

    def _headers(self, message_id: str, body: bytes) -> dict[str, str]:
        """The configured headers, the signature of `body` under `message_id`, and the session's headers."""
        try:
            signature = webhook_headers(
                secrets=self.signing_secrets, message_id=message_id, timestamp=int(self.clock()), body=body
            )
        except SigningError as exc:  # never send an unsigned request
            raise McpError(exc.code, _SIGNING_MESSAGE) from exc
        headers = {**self.headers, **signature, "User-Agent": USER_AGENT}
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version is not None:
            headers["MCP-Protocol-Version"] = self.protocol_version
        return headers

    def notify(self, method: str, *, suffix: str) -> None:
        """A notification: any 2xx is its acceptance (202 as the transport says), whatever the body."""
        self._post({"jsonrpc": "2.0", "method": method}, suffix=suffix, is_call=False)

    def _post(self, payload: dict[str, Any], *, suffix: str, is_call: bool) -> EgressResponse:
        try:
            body = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
        except (TypeError, ValueError, RecursionError) as exc:
            raise McpError("invalid_arguments") from exc
        left_ms = int((self.deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            raise McpError("timeout")
        headers = self._headers(self.message_id + suffix, body)
        headers.update({"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
        if self.before_send is not None:
            self.before_send()
            self.before_send = None
        try:
            response = self.client.request(
                project_id=self.project_id,
                purpose=PURPOSE,
                method="POST",
                url=self.server.url,
                headers=headers,
                body=body,
                timeout_ms=left_ms,
                secret_values=self.server.secret_values,
                record=self.record,
            )
        except EgressError as exc:
            code = shown_code(exc.code)
            raise McpError(
                code,
                MESSAGES["timeout"] if code == "timeout" else TENANT_MESSAGES[tenant_code(code)],
                status=exc.status,
                may_have_reached_upstream=is_call and exc.may_have_reached_upstream,
            ) from None
        if response.status == 429:
            raise McpError("upstream_rate_limited", status=429, may_have_reached_upstream=is_call)
        if not 200 <= response.status < 300:
            raise McpError("upstream_status", status=response.status, may_have_reached_upstream=is_call)
        return response


def _configured_headers(headers: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or is_tenant_forbidden_header(name) or name.lower() in MCP_HEADERS:
            raise McpError("header_not_allowed")
        out[name] = value
    return out


# --- the two operations -----------------------------------------------------------------------------------------


def _listed_tool(item: Any) -> dict[str, Any]:
    """One tool of a listing as K-Agent keeps it. Whether its name fits the tool-name rules and its schema the
    tenant-schema bounds is decided where it is granted (and shown there with the reason), not here."""
    if not isinstance(item, dict):
        raise protocol_error("a listed tool is not an object")
    name, description, schema = item.get("name"), item.get("description"), item.get("inputSchema")
    if not isinstance(name, str) or not name:
        raise protocol_error("a listed tool has no name")
    if description is not None and not isinstance(description, str):
        raise protocol_error("a listed tool's description is not text")
    if not isinstance(schema, dict):
        raise protocol_error("a listed tool's inputSchema is not an object")
    return {"name": name, "description": (description or "")[:MAX_DESCRIPTION_CHARS], "input_schema": schema}


def _listing(session: _Session) -> McpListing:
    tools: list[dict[str, Any]] = []
    names: set[str] = set()
    cursor: str | None = None
    for page in range(1, MAX_PAGES + 1):
        result = session.request("tools/list", {} if cursor is None else {"cursor": cursor}, suffix=f".list.{page}")
        listed = result.get("tools")
        if not isinstance(listed, list):
            raise protocol_error("the listing has no list of tools")
        cursor = result.get("nextCursor")
        if cursor is not None and (not isinstance(cursor, str) or not cursor or len(cursor) > MAX_CURSOR_CHARS):
            raise protocol_error("the listing's nextCursor is not a cursor")
        for position, item in enumerate(listed):
            if len(tools) == MAX_TOOLS:
                return McpListing(tools=tools, truncated=True, protocol_version=str(session.protocol_version))
            tool = _listed_tool(item)
            if tool["name"] in names:
                raise protocol_error(f"the listing names a tool twice (page {page}, position {position + 1})")
            names.add(tool["name"])
            tools.append(tool)
        if cursor is None:
            break
    return McpListing(tools=tools, truncated=cursor is not None, protocol_version=str(session.protocol_version))


def list_tools(
    *,
    server: McpServer,
    project_id: str | None,
    signing_secrets: Sequence[str],
    message_id: str,
    client: EgressClient | None = None,
    clock: Callable[[], float] = time.time,
    record: Recorder | None = None,
    timeout_ms: int = TIMEOUT_MS,
) -> McpListing:
    """The server's tools. Raises McpError. `message_id`: the base of each request's `webhook-id` (a listing's own
    id); `timeout_ms`: the whole session."""
    session = _Session(
        server=server,
        project_id=project_id,
        signing_secrets=signing_secrets,
        message_id=message_id,
        client=client,
        clock=clock,
        record=record,
        timeout_ms=timeout_ms,
        before_send=None,
    )
    try:
        session.open()
        return _listing(session)
    finally:
        session.close()


# Where a tools/call carries the verified end user (params._meta, the MCP way to add what the arguments aren't).
END_USER_META = "k-agent/end_user"


def call_tool(
    *,
    server: McpServer,
    name: str,
    arguments: Mapping[str, Any],
    project_id: str | None,
    signing_secrets: Sequence[str],
    call_id: str,
    client: EgressClient | None = None,
    clock: Callable[[], float] = time.time,
    record: Recorder | None = None,
    timeout_ms: int = TIMEOUT_MS,
    before_send: Callable[[], None] | None = None,
    end_user: Mapping[str, Any] | None = None,
) -> McpCallResult:
    """Call the tool `name` with `arguments` (already checked against its schema by the policy). Raises McpError.
    `call_id`: the tool call's id, stable across retries, the `webhook-id` of the `tools/call` request;
    `before_send`: called once, before the session's first request is sent; `end_user`: the verified end user
    (`{"external_id", "traits"}`, from the credential), sent as `params._meta["k-agent/end_user"]` inside the
    signed body, so the server knows whom the call is for without trusting the model (absent: nobody verified)."""
    session = _Session(
        server=server,
        project_id=project_id,
        signing_secrets=signing_secrets,
        message_id=call_id,
        client=client,
        clock=clock,
        record=record,
        timeout_ms=timeout_ms,
        before_send=before_send,
    )
    try:
        session.open()
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments)}
        if end_user is not None:
            params["_meta"] = {END_USER_META: dict(end_user)}
        result = session.request("tools/call", params, suffix="", is_call=True)
    finally:
        session.close()
    content, structured, is_error = result.get("content", []), result.get("structuredContent"), result.get("isError")
    try:
        if not isinstance(content, list):
            raise protocol_error("the result's content is not a list")
        if is_error is not None and not isinstance(is_error, bool):
            raise protocol_error("the result's isError is not a boolean")
        texts: list[str] = []
        other_parts = 0
        for part in content:
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise protocol_error("a content part is not a typed object")
            if part["type"] != "text":
                other_parts += 1
            elif isinstance(part.get("text"), str):
                texts.append(part["text"])
            else:
                raise protocol_error("a text part has no text")
    except McpError as exc:
        exc.may_have_reached_upstream = True
        raise
    return McpCallResult(texts=texts, structured_content=structured, is_error=bool(is_error), other_parts=other_parts)
